// Package s3 serves the S3 API over a gateway (layer 5): path-style
// requests signed with AWS Signature V4 (headers, presigned URLs,
// aws-chunked uploads), errors as S3's XML, one access-log line per
// request. What is S3-specific — signatures, XML, ETag rules, headers —
// is here; buckets, keys and streaming objects are package gateway's.
package s3

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
	"github.com/quilt-grid/quilt/internal/object"
)

// Options configure the S3 server.
type Options struct {
	Region string // reported by GetBucketLocation; default us-east-1
	Logger *slog.Logger
}

// Server is the S3 API of a gateway.
type Server struct {
	gw  *gateway.Gateway
	opt Options
	log *slog.Logger
}

// New returns the S3 server of gw.
func New(gw *gateway.Gateway, opt Options) *Server {
	if opt.Region == "" {
		opt.Region = "us-east-1"
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{gw: gw, opt: opt, log: opt.Logger}
}

// Error is an S3 error answer.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func s3err(code string, status int, msg string) *Error { return &Error{code, status, msg} }

// Errors clients match on.
var (
	errNoBucket      = s3err("NoSuchBucket", 404, "The specified bucket does not exist")
	errNoKey         = s3err("NoSuchKey", 404, "The specified key does not exist.")
	errBucketExists  = s3err("BucketAlreadyOwnedByYou", 409, "Your previous request to create the named bucket succeeded and you already own it.")
	errNotEmpty      = s3err("BucketNotEmpty", 409, "The bucket you tried to delete is not empty")
	errBadBucketName = s3err("InvalidBucketName", 400, "The specified bucket is not valid.")
	errDenied        = s3err("AccessDenied", 403, "Access Denied")
	errRange         = s3err("InvalidRange", 416, "The requested range is not satisfiable")
	errNotImpl       = s3err("NotImplemented", 501, "A header or parameter you provided implies functionality that is not implemented")
	errBadDigest     = s3err("BadDigest", 400, "The Content-MD5 you specified did not match what we received.")
	errPrecondition  = s3err("PreconditionFailed", 412, "At least one of the pre-conditions you specified did not hold")
	errMalformedXML  = s3err("MalformedXML", 400, "The XML you provided was not well-formed or did not validate against our published schema.")
	errBadKey        = s3err("KeyTooLongError", 400, "Your key is too long")
	errInternal      = s3err("InternalError", 500, "We encountered an internal error. Please try again.")
	errNoVersion     = s3err("NoSuchVersion", 404, "The specified version does not exist: buckets are not versioned, and the current object is version \"null\".")
	errUnavailable   = s3err("ServiceUnavailable", 503, "The grid cannot take the request now: too few nodes answer.")
)

// mapErr turns a gateway or signature error into an S3 one.
func mapErr(err error) *Error {
	var se *Error
	var ve *sigv4.Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &ve):
		return &Error{ve.Code, ve.Status, ve.Message}
	case errors.Is(err, gateway.ErrNoBucket):
		return errNoBucket
	case errors.Is(err, gateway.ErrNoKey):
		return errNoKey
	case errors.Is(err, gateway.ErrBucketExists):
		return errBucketExists
	case errors.Is(err, gateway.ErrNotEmpty):
		return errNotEmpty
	case errors.Is(err, gateway.ErrUploadsOpen):
		return s3err("BucketNotEmpty", 409, "The bucket you tried to delete has multipart uploads in progress: abort or complete them first.")
	case errors.Is(err, gateway.ErrBadBucket):
		return errBadBucketName
	case errors.Is(err, gateway.ErrBadKey):
		return errBadKey
	case errors.Is(err, gateway.ErrDenied):
		return errDenied
	case errors.Is(err, gateway.ErrNoGrid), errors.Is(err, object.ErrUnhappy), errors.Is(err, object.ErrUnavailable):
		return errUnavailable
	case errors.Is(err, gateway.ErrBadDigest):
		return errBadDigest
	case errors.Is(err, gateway.ErrIncomplete):
		return s3err("IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	case errors.Is(err, gateway.ErrNoUpload):
		return s3err("NoSuchUpload", 404, "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	case errors.Is(err, gateway.ErrBadPart):
		return s3err("InvalidPart", 400, err.Error())
	}
	return &Error{errInternal.Code, errInternal.Status, err.Error()}
}

type errorXML struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

// request is one request being served.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	id     string
	key    gateway.AccessKey
	body   io.Reader
	length int64
	bucket string
	object string
	op     string // the operation, once routed
	status int
	bytes  int64
}

func (q *request) fail(err error) {
	e := mapErr(err)
	q.w.Header().Set("Content-Type", "application/xml")
	q.status = e.Status
	q.w.WriteHeader(e.Status)
	if q.r.Method != http.MethodHead {
		xml.NewEncoder(q.w).Encode(errorXML{Code: e.Code, Message: e.Message, Resource: q.r.URL.Path, RequestID: q.id})
	}
}

func (q *request) xml(status int, v any) {
	q.w.Header().Set("Content-Type", "application/xml")
	q.status = status
	q.w.WriteHeader(status)
	io.WriteString(q.w, xml.Header)
	xml.NewEncoder(q.w).Encode(v)
}

// ServeHTTP serves one S3 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := make([]byte, 8)
	rand.Read(id)
	q := &request{w: w, r: r, id: strings.ToUpper(hex.EncodeToString(id))}
	w.Header().Set("x-amz-request-id", q.id)
	w.Header().Set("Server", "Quilt")
	defer func() {
		s.log.Info("s3", "id", q.id, "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
			"status", q.status, "key", q.key.ID, "bytes", q.bytes, "ms", time.Since(start).Milliseconds())
	}()
	path := strings.TrimPrefix(r.URL.Path, "/")
	q.bucket, q.object, _ = strings.Cut(path, "/")
	// The key the signature names is looked up once, for its secret and
	// for its permissions.
	v := sigv4.Verifier{Secret: func(id string) (string, bool) {
		k, err := s.gw.Key(r.Context(), id)
		q.key = k
		return k.Secret, err == nil
	}}
	res, err := v.Verify(r)
	if err != nil {
		if errors.Is(err, sigv4.ErrAnonymous) {
			err = errDenied
		}
		q.fail(err)
		return
	}
	q.body, q.length = headerChecks(r.Header, res.Body), res.Length
	s.route(q)
}
