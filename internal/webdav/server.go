// Package webdav serves the file tree of gateway buckets over WebDAV
// (class 1 and 2: RFC 4918's methods and locks) at /dav/USER/, for file
// managers, cadaver, litmus, rclone and the like, and again at the URLs
// of ownCloud and Nextcloud servers (status.php, the OCS capabilities
// and user, /remote.php/dav/files/USER/, /remote.php/webdav/, their
// oc: properties, X-OC-Mtime and chunked uploads) for their sync
// clients. Each user logs in with HTTP Basic auth — against the
// gateway's accounts (Config.Authenticate), or a users file in the SFTP
// server's format — and sees one bucket's tree as their whole
// collection. The protocol is
// golang.org/x/net/webdav's Handler over a FileSystem of internal/tree:
// files written are spooled locally and committed as one new object
// version at the end of the PUT (internal/tree/openfile); MOVE is the
// tree's rename (no data moves); dead properties live in the object's
// metadata. Locks are held in memory, per process. See docs/files.md.
package webdav

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/tree"
	"golang.org/x/crypto/bcrypt"
	xwebdav "golang.org/x/net/webdav"
)

// Prefix is where the server serves user NAME's tree: Prefix+NAME+"/".
const Prefix = "/dav/"

// Config is what a Server needs.
type Config struct {
	// Users are the accounts, in the SFTP server's users file format
	// (sftp.ParseUsers); only password lines let a user in over WebDAV.
	// Users() is called at each request, so a users file may be read
	// again. Not used when Authenticate is set.
	Users func() (sftp.Users, error)
	// Authenticate, if set, checks a user's password (the gateway's
	// accounts: gateway.Authenticate, which caches what it verified) and
	// returns the bucket the user sees; an error refuses the login.
	Authenticate func(ctx context.Context, user, password string) (bucket string, err error)
	// Tree returns the tree of a bucket, or an error if there is none.
	// The server calls it once per bucket.
	Tree func(ctx context.Context, bucket string) (*tree.Tree, error)
	// Object, if not nil, gives a bucket's object's ETag and Content-Type.
	Object func(ctx context.Context, bucket, key string) (etag, contentType string, err error)
	// SpoolDir is where files being written are spooled ("": the system's
	// temporary directory).
	SpoolDir string
	// Logger gets a line per failed login and per failed request; nil: none.
	Logger *slog.Logger
	// Usage, if not nil, gives a user's bytes used and quota (0: none),
	// for the quota properties and the OCS user; nil: the bytes under
	// the tree's root, and no quota.
	Usage func(ctx context.Context, user string) (used, quota int64, err error)
	// UploadExpiry is how long a chunked upload may go without a new
	// chunk before it is dropped (0: DefaultUploadExpiry).
	UploadExpiry time.Duration
	// Product is the product name status.php and the capabilities give
	// ("": "Quilt").
	Product string
}

// Server is an http.Handler serving WebDAV at Prefix. It is safe for
// concurrent use.
type Server struct {
	cfg Config

	mu      sync.Mutex
	buckets map[string]*bucketState
	authed  map[string]authEntry // user: a password that matched, by its SHA-256

	upMu       sync.Mutex
	assembling map[string]bool // upload directories being committed
	swept      time.Time       // the last sweep of expired uploads
}

// bucketState is what the requests to one bucket share.
type bucketState struct {
	t     *tree.Tree
	locks *lockSystem
}

// authEntry remembers a password that matched a hash, so bcrypt runs once
// per user and password, not at every request.
type authEntry struct {
	sum  [32]byte
	hash string
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if (cfg.Users == nil && cfg.Authenticate == nil) || cfg.Tree == nil {
		return nil, errors.New("webdav: config needs Users or Authenticate, and Tree")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UploadExpiry <= 0 {
		cfg.UploadExpiry = DefaultUploadExpiry
	}
	if cfg.Product == "" {
		cfg.Product = "Quilt"
	}
	return &Server{cfg: cfg, buckets: map[string]*bucketState{}, authed: map[string]authEntry{}, assembling: map[string]bool{}}, nil
}

// ServeHTTP serves one request: status.php without a login; otherwise
// Basic auth, the user's own paths only, then the OCS API, the chunked
// uploads, or x/net/webdav over their bucket's tree.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == StatusPath {
		s.serveStatus(w, r)
		return
	}
	rt, ok := parseRoute(p)
	if !ok {
		http.Error(w, "quilt: WebDAV is served at "+Prefix+"USER/, "+FilesPrefix+"USER/ and "+LegacyPrefix+"/", http.StatusNotFound)
		return
	}
	if badPath(rt.rest) {
		http.Error(w, "quilt: path with an empty, . or .. element", http.StatusBadRequest)
		return
	}
	u := s.authenticate(r)
	if u == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="quilt", charset="UTF-8"`)
		http.Error(w, "quilt: log in with your user name and password", http.StatusUnauthorized)
		return
	}
	name := u.Name
	if rt.kind == routeOCS {
		s.serveOCS(w, r, name, rt.rest)
		return
	}
	if rt.user == "" { // LegacyPrefix: the logged-in user's tree
		rt.user = name
	}
	if rt.user != name {
		s.cfg.Logger.Warn("webdav: another user's path", "user", name, "path", p)
		http.Error(w, "quilt: not your tree", http.StatusForbidden)
		return
	}
	var dst string // the Destination's path in the user's tree
	if d := r.Header.Get("Destination"); d != "" {
		du, err := url.Parse(d)
		var drt route
		ok := err == nil
		if ok {
			drt, ok = parseRoute(du.Path)
		}
		if ok && drt.kind == routeFiles && drt.user == "" {
			drt.user = name
		}
		if !ok || drt.kind != routeFiles || drt.user != name || badPath(drt.rest) {
			http.Error(w, "quilt: Destination outside your tree", http.StatusForbidden)
			return
		}
		dst = drt.rest
		if rt.kind == routeFiles {
			// x/net/webdav strips its own prefix from the Destination:
			// give it the request's spelling of the same user's tree.
			du.Path, du.RawPath = rt.prefix+drt.rest, ""
			r.Header.Set("Destination", du.String())
		}
	}
	b, err := s.bucket(r.Context(), u.Bucket)
	if err != nil {
		s.cfg.Logger.Error("webdav: bucket", "user", name, "bucket", u.Bucket, "err", err)
		http.Error(w, "quilt: your bucket is not available", http.StatusServiceUnavailable)
		return
	}
	fsys := &fileSystem{t: b.t, spool: s.cfg.SpoolDir, user: name, hdr: w.Header(),
		get: r.Method == http.MethodGet}
	if s.cfg.Object != nil {
		bucket := u.Bucket
		fsys.obj = func(ctx context.Context, key string) (string, string, error) {
			return s.cfg.Object(ctx, bucket, key)
		}
	}
	if s.cfg.Usage != nil {
		fsys.usage = func(ctx context.Context) (int64, int64, error) { return s.cfg.Usage(ctx, name) }
	}
	if rt.kind == routeUploads {
		s.serveUploads(w, r, name, b, fsys, rt.rest, dst)
		return
	}
	switch r.Method {
	case "PROPFIND", "PROPPATCH", "LOCK":
		if !s.checkXML(w, r) {
			return
		}
		if r.Method == "LOCK" && s.serveSharedLock(w, r, b, fsys, rt.rest) {
			return
		}
		if r.Method == "PROPFIND" && r.Body != nil {
			body, _ := io.ReadAll(r.Body) // checkXML's copy, in memory
			r.Body = io.NopCloser(bytes.NewReader(body))
			fsys.want = propfindNames(body)
		}
	case http.MethodPut:
		if v := r.Header.Get("X-OC-Mtime"); v != "" {
			t, ok := parseMtime(v)
			if !ok {
				http.Error(w, "quilt: X-OC-Mtime is not seconds since 1970", http.StatusBadRequest)
				return
			}
			fsys.mtime = t
		}
		h, want, err := checksum(r.Header.Get("OC-Checksum"))
		if err != nil {
			http.Error(w, "quilt: "+err.Error(), http.StatusBadRequest)
			return
		}
		fsys.sum, fsys.sumWant = h, want
		if code := fsys.preconditions(r.Context(), strings.TrimPrefix(rt.rest, "/"), r.Header); code != 0 {
			http.Error(w, "quilt: "+http.StatusText(code), code)
			return
		}
		if r.Body != nil {
			// x/net/webdav closes (commits) the file even when the body
			// broke off: the file sees the body's error and drops it.
			br := &bodyReader{ReadCloser: r.Body}
			r.Body, fsys.body = br, br
		}
	}
	if r.Method == "COPY" || r.Method == "MOVE" {
		// x/net/webdav removes an existing destination before it finds
		// that it is the source or under it: refuse that first.
		src := strings.Trim(rt.rest, "/")
		if dst := strings.Trim(dst, "/"); dst == src || strings.HasPrefix(dst+"/", src+"/") || src == "" {
			w.Header().Set("X-Quilt-Error", "invalid")
			http.Error(w, "quilt: a collection cannot go into itself", http.StatusForbidden)
			return
		}
	}
	h := &xwebdav.Handler{
		Prefix:     rt.prefix,
		FileSystem: fsys,
		LockSystem: &etagLocks{LockSystem: b.locks, fs: fsys, ctx: r.Context()},
		Logger: func(r *http.Request, err error) {
			if err != nil {
				s.cfg.Logger.Debug("webdav: request", "user", name, "method", r.Method, "path", r.URL.Path, "err", err)
			}
		},
	}
	h.ServeHTTP(&errWriter{ResponseWriter: w, fs: fsys}, r)
}

// etagLocks evaluates the entity tags of an If header's conditions
// ("[ETAG]", "Not [ETAG]"), which x/net/webdav's in-memory lock system
// ignores, before the lock tokens: a list whose tags do not hold fails,
// as RFC 4918 section 10.4 wants.
type etagLocks struct {
	xwebdav.LockSystem
	fs  *fileSystem
	ctx context.Context
}

func (l *etagLocks) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	name := name0
	if name == "" {
		name = name1
	}
	cur := ""
	if fi, err := l.fs.Stat(l.ctx, name); err == nil {
		cur = fmt.Sprintf(`"%x%x"`, fi.ModTime().UnixNano(), fi.Size()) // x/net/webdav's default
		if fi, ok := fi.(*fileInfo); ok {
			if e, err := fi.ETag(l.ctx); err == nil {
				cur = e
			}
		}
	}
	for _, c := range conditions {
		if c.ETag != "" && (cur != "" && c.ETag == cur) == c.Not {
			return nil, xwebdav.ErrConfirmationFailed
		}
	}
	return l.LockSystem.Confirm(now, name0, name1, conditions...)
}

// maxXMLBody bounds the XML body of a PROPFIND, PROPPATCH or LOCK.
const maxXMLBody = 1 << 20

// checkXML reads the XML body of r (up to maxXMLBody) and refuses, with
// 400, one that is not well-formed as XML Namespaces require where Go's
// encoding/xml does not check: a prefix bound to "" (xmlns:p=""). It
// leaves the body for x/net/webdav to read again.
func (s *Server) checkXML(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil {
		return true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxXMLBody+1))
	r.Body.Close()
	if err != nil {
		http.Error(w, "quilt: reading the body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if len(b) > maxXMLBody {
		http.Error(w, "quilt: XML body over 1 MiB", http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	d := xml.NewDecoder(bytes.NewReader(b))
	for n := 0; n <= maxXMLBody; n++ { // a token takes at least a byte
		tok, err := d.Token()
		if err != nil {
			return true // the end, or an error x/net/webdav will answer
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Space == "xmlns" && a.Value == "" {
					http.Error(w, "quilt: xmlns:"+a.Name.Local+`="" binds a prefix to no namespace`, http.StatusBadRequest)
					return false
				}
			}
		}
	}
	return true
}

// bodyReader remembers the first error of a request body other than its
// end.
type bodyReader struct {
	io.ReadCloser
	mu  sync.Mutex
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *bodyReader) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// errWriter adds the X-Quilt-Error header, the tree's error in a word
// (ErrorCode), to a failed request's response: HTTP's statuses do not
// tell "not a directory" from "not found". A write refused for the
// user's quota is 507 Insufficient Storage (RFC 4918), with the quota's
// message as the body.
type errWriter struct {
	http.ResponseWriter
	fs    *fileSystem
	quota bool // the body is the quota error's, not x/net/webdav's
}

func (w *errWriter) WriteHeader(code int) {
	if code == http.StatusMultiStatus {
		// ownCloud's and Nextcloud's clients take a multistatus only
		// with this type (x/net/webdav says text/xml).
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	}
	if code >= 400 {
		w.fs.mu.Lock()
		err := w.fs.last
		w.fs.mu.Unlock()
		if c := ErrorCode(err); c != "" {
			w.Header().Set("X-Quilt-Error", c)
		}
		if errors.Is(err, gateway.ErrQuota) {
			code, w.quota = http.StatusInsufficientStorage, true
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.ResponseWriter.WriteHeader(code)
			fmt.Fprintln(w.ResponseWriter, "quilt: "+strings.TrimPrefix(err.Error(), "gateway: "))
			return
		}
		if errors.Is(err, ErrChecksum) {
			code = http.StatusBadRequest // x/net/webdav says 405 for any failed close
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *errWriter) Write(p []byte) (int, error) {
	if w.quota {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// authenticate returns the user whose name and password the request
// carries (only Name and Bucket set when Authenticate is), or nil.
func (s *Server) authenticate(r *http.Request) *sftp.User {
	name, pw, ok := r.BasicAuth()
	if !ok {
		return nil
	}
	if s.cfg.Authenticate != nil {
		bucket, err := s.cfg.Authenticate(r.Context(), name, pw)
		if err != nil {
			s.cfg.Logger.Warn("webdav: login refused", "user", name, "from", r.RemoteAddr, "err", err)
			return nil
		}
		return &sftp.User{Name: name, Bucket: bucket}
	}
	us, err := s.cfg.Users()
	if err != nil {
		s.cfg.Logger.Error("webdav: users", "err", err)
		return nil
	}
	u := us[name]
	if u == nil {
		s.cfg.Logger.Warn("webdav: unknown user", "user", name, "from", r.RemoteAddr)
		return nil
	}
	sum := sha256.Sum256([]byte(pw))
	s.mu.Lock()
	e, cached := s.authed[name]
	s.mu.Unlock()
	if cached && subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 {
		for _, h := range u.PasswordHashes {
			if h == e.hash {
				return u
			}
		}
	}
	for _, h := range u.PasswordHashes {
		if bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)) == nil {
			s.mu.Lock()
			s.authed[name] = authEntry{sum: sum, hash: h}
			s.mu.Unlock()
			return u
		}
	}
	s.cfg.Logger.Warn("webdav: wrong password", "user", name, "from", r.RemoteAddr)
	return nil
}

func (s *Server) bucket(ctx context.Context, name string) (*bucketState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[name]; b != nil {
		return b, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	t, err := s.cfg.Tree(ctx, name)
	if err != nil {
		return nil, err
	}
	b := &bucketState{t: t, locks: newLockSystem()}
	s.buckets[name] = b
	return b, nil
}

// GatewayObjects returns Config.Object for a gateway's buckets.
func GatewayObjects(gw *gateway.Gateway) func(ctx context.Context, bucket, key string) (string, string, error) {
	return func(ctx context.Context, bucket, key string) (string, string, error) {
		info, err := gw.Head(ctx, bucket, key)
		if err != nil {
			return "", "", fmt.Errorf("webdav: %s/%s: %w", bucket, key, err)
		}
		return info.ETag, info.ContentType, nil
	}
}
