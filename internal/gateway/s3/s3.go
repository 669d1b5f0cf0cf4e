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
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Options configure the S3 server.
type Options struct {
	Region string // reported by GetBucketLocation; default us-east-1
	Logger *slog.Logger
	// BodyTimeout is how long a request body may make no progress (no
	// byte arrives) before the request is aborted with 400 RequestTimeout
	// and the connection closed; default 60 s.
	BodyTimeout time.Duration
	// IdleTimeout is how long HTTPServer keeps an idle keep-alive
	// connection open; default 120 s.
	IdleTimeout time.Duration
	// Domain, if set, turns on virtual-hosted-style requests: a request
	// whose Host is BUCKET.Domain (any port, any case) names BUCKET, and
	// its whole path is the key. Requests to any other host, Domain
	// itself included, are path-style (/BUCKET/KEY).
	Domain string
	// BlockPublicAccess blocks public access to every bucket, on top of
	// each bucket's own setting (PutPublicAccessBlock): a part on here
	// is on for every bucket. The zero value blocks nothing: a bucket is
	// public only where its owner grants so by ACL or policy.
	BlockPublicAccess PublicAccessBlock
	// AllowInsecureSSEC accepts customer keys (SSE-C) in requests over
	// plain HTTP. S3 refuses them (400 InvalidRequest), as the gateway
	// does by default: a key sent in the clear is a key given away. For
	// a gateway behind a proxy that terminates TLS, and for tests.
	AllowInsecureSSEC bool
	// LifecycleEvery is how often RunLifecycle applies the buckets'
	// lifecycle rules; default 1 h, negative: never.
	LifecycleEvery time.Duration
	// Clock is the time lifecycle rules are applied by (nil: the real
	// clock); tests move a fake one by days.
	Clock clock.Clock
}

// Server is the S3 API of a gateway.
type Server struct {
	gw     *gateway.Gateway
	opt    Options
	log    *slog.Logger
	clock  clock.Clock
	active atomic.Int64
}

// New returns the S3 server of gw.
func New(gw *gateway.Gateway, opt Options) *Server {
	if opt.Region == "" {
		opt.Region = "us-east-1"
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = 60 * time.Second
	}
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = 120 * time.Second
	}
	if opt.LifecycleEvery == 0 {
		opt.LifecycleEvery = time.Hour
	}
	return &Server{gw: gw, opt: opt, log: opt.Logger, clock: clock.Or(opt.Clock)}
}

// HTTPServer returns an http.Server serving s with its time limits: 30 s
// to send the request's headers, Options.IdleTimeout between requests on
// a connection (a body's progress is limited by Options.BodyTimeout).
// There is no limit on writing an answer: a large GET to a slow client
// takes as long as it takes.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: s.opt.IdleTimeout}
}

// Active is the number of requests being served.
func (s *Server) Active() int64 { return s.active.Load() }

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
	errNoVersion     = s3err("NoSuchVersion", 404, "The specified version does not exist.")
	errBadVersion    = s3err("InvalidArgument", 400, "Invalid version id specified")
	errUnavailable   = s3err("ServiceUnavailable", 503, "The grid cannot take the request now: too few nodes answer.")
	// errFull is 507, which clients do not retry (they retry 500 and
	// 503): a full grid stays full until space is freed or added.
	errFull        = s3err("InsufficientStorage", 507, "The grid has no space for this object: too few nodes have room for its shares.")
	errTimeout     = s3err("RequestTimeout", 400, "Your socket connection to the server was not read from or written to within the timeout period.")
	errBadEncoding = s3err("InvalidRequest", 400, "The request body's chunked transfer encoding is malformed.")
	errIncomplete  = s3err("IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
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
	case errors.As(err, new(*gateway.DeleteMarkerError)) && !errors.Is(err, gateway.ErrNoKey):
		return s3err("MethodNotAllowed", 405, "The specified method is not allowed against this resource.")
	case errors.Is(err, gateway.ErrNoKey):
		return errNoKey
	case errors.Is(err, gateway.ErrNoVersion):
		return errNoVersion
	case errors.Is(err, gateway.ErrBadVersion):
		return errBadVersion
	case errors.Is(err, gateway.ErrBadVersioning):
		return errMalformedXML
	case errors.Is(err, gateway.ErrBucketExists):
		return errBucketExists
	case errors.Is(err, gateway.ErrNotEmpty):
		return errNotEmpty
	case errors.Is(err, gateway.ErrUploadsOpen):
		return s3err("BucketNotEmpty", 409, "The bucket you tried to delete has multipart uploads in progress: abort or complete them first.")
	case errors.Is(err, gateway.ErrBadBucket):
		return errBadBucketName
	case errors.Is(err, gateway.ErrKeyTooLong):
		return errBadKey
	case errors.Is(err, gateway.ErrBadKey):
		return s3err("InvalidArgument", 400, "Object keys must be UTF-8 without NUL characters.")
	case errors.Is(err, gateway.ErrDenied):
		return errDenied
	case errors.Is(err, gateway.ErrQuota):
		// 403, as Ceph's RGW answers: clients do not retry it.
		return s3err("QuotaExceeded", 403, "The bucket's quota is exceeded: "+strings.TrimPrefix(err.Error(), "gateway: "))
	case errors.Is(err, sharestore.ErrFull), errors.Is(err, placement.ErrUnhappy):
		return errFull
	case errors.Is(err, gateway.ErrNoGrid), errors.Is(err, object.ErrUnhappy), errors.Is(err, object.ErrUnavailable):
		return errUnavailable
	case errors.Is(err, gateway.ErrBadDigest):
		return errBadDigest
	case errors.Is(err, gateway.ErrIncomplete):
		return errIncomplete
	case errors.Is(err, gateway.ErrNoUpload):
		return s3err("NoSuchUpload", 404, "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	case errors.Is(err, gateway.ErrChecksum):
		return s3err("BadDigest", 400, "The x-amz-checksum you specified did not match the calculated checksum of the object.")
	case errors.Is(err, gateway.ErrChecksumType):
		return s3err("InvalidRequest", 400, "The checksum you specified is not of the upload's checksum algorithm and type.")
	case errors.Is(err, gateway.ErrPrecondition):
		return errPrecondition
	case errors.Is(err, gateway.ErrPartTooSmall):
		return s3err("EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed size: "+strings.TrimPrefix(err.Error(), "gateway: part too small: "))
	case errors.Is(err, gateway.ErrBadPart):
		return s3err("InvalidPart", 400, err.Error())
	case keyErr(err, false) != nil:
		return keyErr(err, false)
	case lockErr(err) != nil: // objectlock.go
		return lockErr(err)
	}
	return errInternal
}

type errorXML struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   xmlText
	Resource  string
	RequestID string `xml:"RequestId"`
}

// xmlText is character data with quotes left as they are, as S3 writes
// its messages (a POST policy's failed condition, ["eq", "$key", "a"],
// reads the same in the raw body); &, < and > are escaped.
type xmlText struct {
	Inner string `xml:",innerxml"`
}

func newXMLText(s string) xmlText {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return xmlText{strings.NewReplacer("&#34;", `"`, "&#39;", "'").Replace(b.String())}
}

// request is one request being served.
type request struct {
	w      http.ResponseWriter
	r      *http.Request
	log    *slog.Logger
	id     string
	key    gateway.AccessKey
	anon   bool        // the request carries no signature (key is zero)
	sigAlg string      // the signature's algorithm, as policies' s3:signatureversion: "AWS" (V2) or "AWS4-HMAC-SHA256"
	perKey bool        // DeleteObjects: each key is authorized on its own (access.go)
	raw    *rawBody    // the body as it comes off the connection
	body   io.Reader   // the body decoded and checked (signature, checksums)
	dec    *bodyErrors // errors body returned
	sums   *sumReader  // the body's checksums
	length int64
	bucket string
	object string
	op     string // the operation, once routed
	status int    // as logged: 499 for a client that went away
	bytes  int64
}

func (q *request) fail(err error) {
	e, aborted := q.classify(err)
	if e == errInternal {
		q.log.Error("s3: internal error", "id", q.id, "method", q.r.Method, "path", q.r.URL.Path, "err", err)
	}
	if q.raw != nil && q.raw.err == nil && !q.raw.eof && !aborted && q.r.ContentLength >= 0 && q.r.ContentLength <= maxDrain {
		// A request refused before its body was read (a header the
		// gateway refuses, a missing bucket): the body is read and
		// dropped first, so that a client that sends it whole without
		// Expect: 100-continue (urllib3, minio-py) sees the answer
		// rather than a connection reset mid-upload. Larger bodies get
		// the answer and a closed connection.
		io.Copy(io.Discard, io.LimitReader(q.raw, maxDrain))
	}
	if q.raw != nil && q.raw.err != nil {
		// The body was not read to its end: the connection cannot carry
		// another request.
		q.w.Header().Set("Connection", "close")
	}
	q.w.Header().Set("Content-Type", "application/xml")
	deleteMarkerHeaders(q.w.Header(), err)
	q.status = e.Status
	if aborted {
		q.status = statusClientGone
	}
	q.w.WriteHeader(e.Status)
	if q.r.Method != http.MethodHead {
		xml.NewEncoder(q.w).Encode(errorXML{Code: e.Code, Message: newXMLText(e.Message), Resource: q.r.URL.Path, RequestID: q.id})
	}
}

// maxDrain is the largest request body an error answer reads and drops
// before it is sent.
const maxDrain = 16 << 20

// statusClientGone is the status logged for a request whose client went
// away before the answer (nginx's 499): not a server error.
const statusClientGone = 499

// classify finds what to tell the client of err. What went wrong with
// the body comes first: the layers below may have wrapped or replaced
// the error the body returned (an object upload that ends early says
// only that its input was short). aborted reports a client that closed
// the connection.
func (q *request) classify(err error) (e *Error, aborted bool) {
	if q.raw != nil && q.raw.err != nil {
		re := q.raw.err
		var ne net.Error
		switch {
		case q.raw.timedOut:
			return errTimeout, false
		case errors.As(re, &ne) && ne.Timeout():
			return errTimeout, false
		case errors.Is(re, io.ErrUnexpectedEOF), errors.Is(re, net.ErrClosed), errors.Is(re, syscall.ECONNRESET), errors.Is(re, syscall.EPIPE):
			return errIncomplete, true
		case len(q.r.TransferEncoding) > 0:
			// net/http's chunked reader: a malformed chunk size or line.
			return errBadEncoding, false
		default:
			q.log.Warn("s3: request body failed", "id", q.id, "err", re)
			return errIncomplete, false
		}
	}
	if q.dec != nil && q.dec.err != nil {
		err = q.dec.err
	}
	e = mapErr(err)
	if e == errInternal && q.r.Context().Err() != nil {
		return e, true
	}
	return e, false
}

// rawBody is a request body as read off the connection: each Read must
// bring a byte within timeout (the connection's read deadline moves on
// with every Read), and its first error other than io.EOF is kept.
type rawBody struct {
	rc       io.ReadCloser
	ctl      *http.ResponseController
	timeout  time.Duration
	err      error
	timedOut bool
	eof      bool
}

func (b *rawBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	deadline := b.timeout > 0 && !b.eof
	if deadline {
		b.ctl.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		if deadline {
			// The server reads on in the background to see the client
			// go away: no deadline for that.
			b.ctl.SetReadDeadline(time.Time{})
		}
		b.eof = true
	case err != nil:
		var ne net.Error
		b.err, b.timedOut = err, errors.As(err, &ne) && ne.Timeout()
	}
	return n, err
}

func (b *rawBody) Close() error { return b.rc.Close() }

// bodyErrors keeps the first error other than io.EOF that a decoded body
// returned: a signature, checksum or encoding failure.
type bodyErrors struct {
	r   io.Reader
	err error
}

func (b *bodyErrors) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (q *request) xml(status int, v any) {
	q.w.Header().Set("Content-Type", "application/xml")
	q.status = status
	q.w.WriteHeader(status)
	io.WriteString(q.w, xml.Header)
	xml.NewEncoder(q.w).Encode(v)
}

// requestTarget is the bucket and the key a request names: from its Host and
// path if the Host is a bucket under domain (virtual-hosted style), else
// from its path alone.
func requestTarget(r *http.Request, domain string) (bucket, object string) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if b, ok := virtualBucket(r.Host, domain); ok {
		return b, path
	}
	bucket, object, _ = strings.Cut(path, "/")
	return bucket, object
}

// virtualBucket is the bucket a Host header names under domain:
// "photos.s3.example.org:9000" under "s3.example.org" is "photos".
func virtualBucket(host, domain string) (string, bool) {
	if domain == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	b, ok := strings.CutSuffix(host, "."+strings.ToLower(strings.TrimSuffix(domain, ".")))
	if !ok || b == "" {
		return "", false
	}
	return b, true
}

// ServeHTTP serves one S3 request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := make([]byte, 8)
	rand.Read(id)
	q := &request{w: w, r: r, log: s.log, id: strings.ToUpper(hex.EncodeToString(id))}
	w.Header().Set("x-amz-request-id", q.id)
	w.Header().Set("Server", "Quilt")
	s.active.Add(1)
	defer func() {
		if r.Context().Err() != nil && q.status != statusClientGone {
			q.status = statusClientGone // the client went away meanwhile
		}
		s.log.Info("s3", "id", q.id, "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
			"status", q.status, "key", q.key.ID, "op", q.op, "bytes", q.bytes, "ms", time.Since(start).Milliseconds())
		s.active.Add(-1)
	}()
	if r.Body != nil && r.Body != http.NoBody {
		q.raw = &rawBody{rc: r.Body, ctl: http.NewResponseController(w), timeout: s.opt.BodyTimeout}
		r.Body = q.raw
	}
	q.bucket, q.object = requestTarget(r, s.opt.Domain)
	// CORS needs no signature: a browser sends the preflight without
	// one, and an actual request's answer must carry the headers even
	// when it is an error.
	if r.Method == http.MethodOptions {
		s.preflight(q)
		return
	}
	s.corsActual(q)
	// A browser's form upload carries its signature in the form.
	if isPostObject(r, q.bucket, q.object) {
		s.postObject(q)
		return
	}
	// Signature V2 signs a virtual-hosted–style request's resource with
	// the bucket from Host in front.
	host, _ := virtualBucket(r.Host, s.opt.Domain)
	// The key the signature names is looked up once, for its secret and
	// for its permissions.
	v := sigv4.Verifier{Secret: func(id string) (string, bool) {
		k, err := s.gw.Key(r.Context(), id)
		q.key = k
		return k.Secret, err == nil
	}, HostBucket: host}
	res, err := v.Verify(r)
	switch {
	case errors.Is(err, sigv4.ErrAnonymous):
		// Anonymous: allowed where an ACL or a policy says so (route).
		// An aws-chunked body is framed for a signature or a trailer
		// this request does not carry: it would be stored as framed.
		if strings.HasPrefix(r.Header.Get("x-amz-content-sha256"), "STREAMING-") || strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
			q.fail(s3err("InvalidRequest", 400, "An anonymous request cannot send an aws-chunked body."))
			return
		}
		q.anon, q.key = true, gateway.AccessKey{}
		var body io.Reader = http.NoBody
		if q.raw != nil {
			body = q.raw
		}
		q.sums = newSums(r.Header, body)
		q.dec = &bodyErrors{r: q.sums}
		q.body, q.length = q.dec, r.ContentLength
	case err != nil:
		q.fail(err)
		return
	default:
		q.sigAlg = sigAlg(res.Version)
		q.sums = newSums(r.Header, res.Body)
		q.dec = &bodyErrors{r: q.sums}
		q.body, q.length = q.dec, res.Length
	}
	s.route(q)
}

// sigAlg names a signature version as S3's s3:signatureversion condition
// key does.
func sigAlg(version int) string {
	if version == 2 {
		return "AWS"
	}
	return "AWS4-HMAC-SHA256"
}
