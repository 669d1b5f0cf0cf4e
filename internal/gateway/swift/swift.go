// Package swift serves the OpenStack Swift object API over a gateway
// (layer 5), with the identity service of package keystone on the same
// port: accounts (one per project), containers (the gateway's buckets,
// the same ones S3 serves), objects with their metadata, listings in
// plain text, JSON and XML, ranges and conditions, copies, and large
// objects both dynamic (X-Object-Manifest) and static (SLO manifests).
//
// The server keeps nothing between requests: each request's token, its
// project and its access key are read from the gateway's registry, so
// gateways that share the registry can stand behind one load balancer.
// docs/swift.md lists what is supported and what is not.
package swift

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Limits the server enforces and announces in /info.
const (
	ListingLimit        = 10000 // most entries in one listing
	MaxManifestSegments = 1000  // most segments of a static large object
	MaxManifestSize     = 8 << 20
	MaxMetaName         = 128
	MaxMetaValue        = 256
	MaxMetaCount        = 90
	MaxMetaOverall      = 4096
	MaxObjectName       = 1024
	MaxFileSize         = 5 << 30 // one PUT; larger objects are segmented
)

// Options configure the Swift server.
type Options struct {
	// Region is the region of this gateway in the catalog.
	Region string
	// PublicURL is this gateway's base URL as clients reach it (e.g.
	// through a load balancer); if empty, http:// and the request's Host.
	PublicURL string
	Logger    *slog.Logger
	// IdleTimeout is how long HTTPServer keeps an idle keep-alive
	// connection open; default 120 s.
	IdleTimeout time.Duration
	// Now is the clock of expiring objects (X-Delete-At); default
	// time.Now.
	Now func() time.Time
}

// Server is the Swift API of a gateway.
type Server struct {
	gw     *gateway.Gateway
	ids    *keystone.Service
	auth   *keystone.Handler
	opt    Options
	log    *slog.Logger
	active atomic.Int64
}

// New returns the Swift server of gw, authenticating with ids.
func New(gw *gateway.Gateway, ids *keystone.Service, opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = 120 * time.Second
	}
	return &Server{gw: gw, ids: ids, opt: opt, log: opt.Logger,
		auth: &keystone.Handler{S: ids, PublicURL: opt.PublicURL}}
}

// HTTPServer returns an http.Server serving s: 30 s to send a request's
// headers, Options.IdleTimeout between requests on a connection.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: s.opt.IdleTimeout}
}

// Active is the number of requests being served.
func (s *Server) Active() int64 { return s.active.Load() }

// swiftError is an error answer: a status and a short text body.
type swiftError struct {
	status int
	msg    string
}

func (e *swiftError) Error() string { return e.msg }

func serr(status int, msg string) *swiftError { return &swiftError{status, msg} }

var (
	errUnauthorized = serr(401, "Unauthorized: a valid X-Auth-Token is required.")
	errForbidden    = serr(403, "Forbidden: access was denied to this resource.")
	errNotFound     = serr(404, "Not Found: the resource could not be found.")
	errPrecondition = serr(412, "Precondition Failed: a precondition of the request was not met.")
	errRange        = serr(416, "Requested Range Not Satisfiable: the range requested is not available.")
	errUnavailable  = serr(503, "Service Unavailable: the grid cannot take the request now (too few nodes answer).")
	errFull         = serr(507, "Insufficient Storage: the grid has no space for this object.")
	errInternal     = serr(500, "Internal Server Error: the server has either erred or is incapable of performing the requested operation.")
)

// errCustomerKey answers a read of an object stored through S3 with a
// customer key (SSE-C): only S3 requests can give the key.
var errCustomerKey = serr(403, "Forbidden: the object is encrypted with a customer-provided key (S3 SSE-C); read it through the S3 API with its key.")

func notImplemented(what string) *swiftError {
	return serr(501, "Not Implemented: "+what+" is not supported by this gateway (see /info).")
}

// mapErr turns a gateway error into a Swift answer.
func mapErr(err error) *swiftError {
	var se *swiftError
	switch {
	case errors.As(err, &se):
		return se
	case errors.Is(err, keystone.ErrUnauthorized):
		return errUnauthorized
	case errors.Is(err, gateway.ErrNoBucket), errors.Is(err, gateway.ErrNoKey):
		return errNotFound
	case errors.Is(err, gateway.ErrNotEmpty), errors.Is(err, gateway.ErrUploadsOpen):
		return serr(409, "Conflict: there was a conflict when trying to complete your request (the container is not empty).")
	case errors.Is(err, gateway.ErrBadBucket):
		return serr(400, "Bad Request: "+strings.TrimPrefix(err.Error(), "gateway: ")+"; a container is an S3 bucket and follows S3's naming rules")
	case errors.Is(err, gateway.ErrBadKey):
		return serr(400, "Bad Request: "+strings.TrimPrefix(err.Error(), "gateway: "))
	case errors.Is(err, gateway.ErrKeyRequired), errors.Is(err, gateway.ErrWrongKey):
		return errCustomerKey
	case errors.Is(err, gateway.ErrDenied):
		return errForbidden
	case errors.Is(err, gateway.ErrQuota):
		// Swift's container and account quotas answer 413.
		return serr(413, "Request Entity Too Large: "+strings.TrimPrefix(err.Error(), "gateway: "))
	case errors.Is(err, gateway.ErrBadDigest):
		return serr(422, "Unprocessable Entity: the ETag given does not match the MD5 of the body.")
	case errors.Is(err, gateway.ErrIncomplete):
		return serr(499, "Client Disconnect: the body was shorter than Content-Length.")
	case errors.Is(err, sharestore.ErrFull), errors.Is(err, placement.ErrUnhappy):
		return errFull
	case errors.Is(err, gateway.ErrNoGrid), errors.Is(err, object.ErrUnhappy), errors.Is(err, object.ErrUnavailable):
		return errUnavailable
	}
	return errInternal
}

// request is one storage request being served.
type request struct {
	w         http.ResponseWriter
	r         *http.Request
	id        string
	status    int
	bytes     int64
	account   string
	container string
	object    string
	project   keystone.Project
	key       gateway.AccessKey
	token     *keystone.Token // nil: a temporary URL or a public read
	log       *slog.Logger
}

func (q *request) fail(err error) {
	e := mapErr(err)
	if e == errInternal || e == errUnavailable {
		q.log.Warn("swift: request failed", "id", q.id, "method", q.r.Method, "path", q.r.URL.Path, "err", err)
	}
	q.status = e.status
	h := q.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	body := e.msg + "\n"
	h.Set("Content-Length", strconv.Itoa(len(body)))
	q.w.WriteHeader(e.status)
	if q.r.Method != "HEAD" {
		io.WriteString(q.w, body)
	}
}

func (q *request) empty(status int) {
	q.status = status
	q.w.Header().Set("Content-Length", "0")
	if q.w.Header().Get("Content-Type") == "" {
		q.w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	}
	q.w.WriteHeader(status)
}

// ServeHTTP serves one request: identity, /info, /healthcheck, or
// storage under /v1/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := make([]byte, 8)
	rand.Read(id)
	q := &request{w: w, r: r, id: "tx" + hex.EncodeToString(id), log: s.log}
	w.Header().Set("X-Trans-Id", q.id)
	w.Header().Set("X-Openstack-Request-Id", q.id)
	s.active.Add(1)
	defer func() {
		s.log.Info("swift", "id", q.id, "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
			"status", q.status, "project", q.project.Name, "bytes", q.bytes, "ms", time.Since(start).Milliseconds())
		s.active.Add(-1)
	}()
	p := r.URL.Path
	switch {
	case p == "/healthcheck":
		if r.Method != "GET" && r.Method != "HEAD" {
			q.fail(serr(405, "Method Not Allowed"))
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "2")
		q.status = 200
		w.WriteHeader(200)
		if r.Method == "GET" {
			io.WriteString(w, "OK")
		}
		return
	case p == "/info":
		s.info(q)
		return
	case keystone.Handles(p):
		q.status = 200
		s.auth.ServeHTTP(w, r)
		return
	case strings.HasPrefix(p, "/v1/"):
	default:
		q.fail(errNotFound)
		return
	}
	rest := strings.TrimPrefix(p, "/v1/")
	q.account, rest, _ = strings.Cut(rest, "/")
	q.container, q.object, _ = strings.Cut(rest, "/")
	if q.account == "" {
		q.fail(errNotFound)
		return
	}
	if isTempURL(r) {
		if !s.authorizeTempURL(q) {
			return
		}
	} else if !s.authorize(q) {
		return
	}
	s.route(q)
}

// authorize checks the request's token (or, without one, a container's
// public read ACL) and that it names the token's project's account, or a
// container in another's, and loads the project and its access key.
func (s *Server) authorize(q *request) bool {
	ctx := q.r.Context()
	tok := q.r.Header.Get("X-Auth-Token")
	if tok == "" {
		tok = q.r.Header.Get("X-Storage-Token")
	}
	if tok == "" {
		if s.authorizePublic(q) {
			return true
		}
		q.fail(errUnauthorized)
		return false
	}
	t, err := s.ids.Verify(ctx, tok)
	if err != nil {
		q.fail(err)
		return false
	}
	q.token = &t
	// Another account's containers are reached with the grants of the
	// token's project (container ACLs); its account itself is not.
	if q.account != "AUTH_"+t.ProjectID && q.container == "" {
		q.fail(errForbidden)
		return false
	}
	if q.project, err = s.ids.Project(ctx, t.Project); err != nil {
		if errors.Is(err, keystone.ErrNoProject) {
			err = errUnauthorized
		}
		q.fail(err)
		return false
	}
	if q.key, err = s.gw.Key(ctx, q.project.Key); err != nil {
		if errors.Is(err, gateway.ErrDenied) {
			err = serr(403, "Forbidden: the project's access key is gone.")
		}
		q.fail(err)
		return false
	}
	return true
}

// route dispatches a storage request by its path and method.
func (s *Server) route(q *request) {
	m := q.r.Method
	if q.r.URL.Query().Has("extract-archive") {
		s.extractArchive(q)
		return
	}
	switch {
	case q.container == "":
		switch m {
		case "GET":
			s.listAccount(q)
		case "HEAD":
			s.headAccount(q)
		case "POST":
			if q.r.URL.Query().Has("bulk-delete") {
				s.bulkDelete(q)
				return
			}
			s.postAccount(q)
		case "DELETE":
			if q.r.URL.Query().Has("bulk-delete") {
				s.bulkDelete(q)
				return
			}
			fallthrough
		case "PUT":
			q.fail(serr(405, "Method Not Allowed: accounts are made with projects (quilt swift project add)."))
		default:
			q.fail(serr(405, "Method Not Allowed"))
		}
	case q.object == "":
		switch m {
		case "GET":
			s.listContainer(q)
		case "HEAD":
			s.headContainer(q)
		case "PUT":
			s.putContainer(q)
		case "POST":
			s.postContainer(q)
		case "DELETE":
			s.deleteContainer(q)
		default:
			q.fail(serr(405, "Method Not Allowed"))
		}
	default:
		if len(q.object) > MaxObjectName {
			q.fail(serr(400, fmt.Sprintf("Bad Request: object name longer than %d bytes", MaxObjectName)))
			return
		}
		switch m {
		case "GET", "HEAD":
			s.getObject(q)
		case "PUT":
			s.putObject(q)
		case "POST":
			s.postObject(q)
		case "DELETE":
			s.deleteObject(q)
		case "COPY":
			s.copyMethod(q)
		default:
			q.fail(serr(405, "Method Not Allowed"))
		}
	}
}

// allowed checks the project's access key's permission on a container:
// 404 if the container does not exist, 403 if the key may not.
func (s *Server) allowed(q *request, container string, p gateway.Perm) bool {
	if s.may(q, container, p) {
		return true
	}
	if _, err := s.gw.Owner(q.r.Context(), container); err != nil {
		q.fail(errNotFound)
		return false
	}
	q.fail(errForbidden)
	return false
}

// info answers GET /info: what this gateway supports. Features it does
// not have are absent, so clients do not use them.
func (s *Server) info(q *request) {
	if q.r.Method != "GET" && q.r.Method != "HEAD" {
		q.fail(serr(405, "Method Not Allowed"))
		return
	}
	doc := map[string]any{
		"swift": map[string]any{
			"version":                   "2.33.0-quilt",
			"max_file_size":             MaxFileSize,
			"container_listing_limit":   ListingLimit,
			"account_listing_limit":     ListingLimit,
			"max_object_name_length":    MaxObjectName,
			"max_container_name_length": 63,
			"max_account_name_length":   256,
			"max_meta_name_length":      MaxMetaName,
			"max_meta_value_length":     MaxMetaValue,
			"max_meta_count":            MaxMetaCount,
			"max_meta_overall_size":     MaxMetaOverall,
			"max_header_size":           8192,
			"extra_header_count":        0,
			"strict_cors_mode":          true,
			"allow_account_management":  false,
			"account_autocreate":        true,
			"valid_api_versions":        []string{"v1", "v1.0"},
			"policies":                  []map[string]any{{"name": "grid", "default": true}},
		},
		"slo": map[string]any{
			"max_manifest_segments": MaxManifestSegments,
			"max_manifest_size":     MaxManifestSize,
			"min_segment_size":      1,
			"yield_frequency":       10,
			"allow_async_delete":    false,
		},
		"dlo":         map[string]any{"max_segments": ListingLimit},
		"bulk_delete": map[string]any{"max_deletes_per_request": MaxBulkDeletes, "max_failed_deletes": MaxBulkFailures},
		"bulk_upload": map[string]any{"max_containers_per_extraction": MaxBulkContainers, "max_failed_extractions": MaxBulkFailures},
		"tempurl": map[string]any{
			"methods":                 tempURLMethods,
			"allowed_digests":         []string{"sha1", "sha256", "sha512"},
			"incoming_remove_headers": []string{"x-timestamp"},
			"incoming_allow_headers":  []string{},
			"outgoing_remove_headers": []string{"x-object-meta-*"},
			"outgoing_allow_headers":  []string{"x-object-meta-public-*"},
		},
		"tempauth":     map[string]any{"account_acls": false},
		"keystoneauth": map[string]any{},
		"healthcheck":  map[string]any{},
	}
	b, _ := json.Marshal(doc)
	h := q.w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	q.status = 200
	q.w.WriteHeader(200)
	if q.r.Method == "GET" {
		q.w.Write(b)
	}
}
