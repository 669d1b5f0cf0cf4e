// Package webapp is the browser app of the file trees: people log in,
// browse their drive (a bucket's internal/tree), upload files and whole
// folders by drag and drop with resumable chunked uploads, download files
// and folders (a streamed zip), rename, move and delete into a trash they
// can restore from, preview images and text, search by name, see their
// storage and, for admins, the grid and the accounts (users and groups).
// Pages are rendered on the server (html/template) with a little vanilla JavaScript and CSS, all embedded
// in the binary; every action is a real link or a form button, so the app
// works by keyboard and, but for uploads and share links, without
// JavaScript.
//
// The Handler is served on the WebDAV listener beside /dav/ (cmd/quilt
// builds the mux). It knows nothing of accounts or the grid: Config's
// functions give it those. Sessions, uploads in progress and login
// throttles are kept by the Handler (uploads on disk in Config.SpoolDir,
// the rest in memory). See docs/files.md, "The web app".
package webapp

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// Account is a user who logged in.
type Account struct {
	Name   string   // the login name, shown in URLs (/files/NAME/)
	Bucket string   // the bucket of the user's drive
	Admin  bool     // may see the grid page
	Groups []string // the user's groups (shown on the storage page)
}

// GridStatus is what the admins' grid page shows.
type GridStatus struct {
	Verdict string // healthy, degraded or critical
	Reason  string // the verdict in a sentence
	Nodes   []GridNode
	// Used, Free and Capacity sum the nodes alive or suspect (Capacity
	// 0: no limit but the disks').
	Used, Free, Capacity int64
	// Missing says what the page cannot show yet, and why ("" if
	// nothing).
	Missing string
}

// GridNode is one member of the grid as a node sees it.
type GridNode struct {
	ID, Addr, Zone string
	State          string // alive, suspect, dead or left
	Used, Free     int64
	Capacity       int64 // 0: no limit but the disk's
	Since          time.Time
}

// ErrLogin is what Config.Authenticate returns for a wrong name or
// password (any error refuses the login; this one is not logged as a
// fault).
var ErrLogin = errors.New("webapp: wrong user name or password")

// Config is what a Handler needs. Authenticate and Tree are required.
type Config struct {
	// Authenticate checks a user name and password.
	Authenticate func(ctx context.Context, user, password string) (Account, error)
	// Tree returns the tree of a bucket. The handler calls it at each
	// request that needs it: keep trees per bucket, as the other front
	// ends share them.
	Tree func(ctx context.Context, bucket string) (*tree.Tree, error)
	// Usage returns the bytes an account's drive holds and its quota (0:
	// none). Nil: the storage page counts the drive's files itself and
	// shows no quota.
	Usage func(ctx context.Context, a Account) (used, quota int64, err error)
	// Grid returns the grid's state for the admins' grid page. Nil: no
	// grid page.
	Grid func(ctx context.Context) (GridStatus, error)
	// Users manages the accounts on the admins' Users page (/users):
	// list, add, change and remove users and groups. Nil: no Users page.
	Users UserAdmin
	// Shares serves /api/shares (the share links' JSON API, and the
	// shares between users and groups under /api/shares/grants and
	// /api/shares/with-me). Nil: no share UI. The handler does not route to it: the mux in front does;
	// the handler only shows the buttons and pages that call it.
	Shares http.Handler
	// SpoolDir holds uploads in progress ("": a directory of its own
	// under the system's temporary directory).
	SpoolDir string
	// SessionTTL is how long a session lasts without a request (0: 12
	// hours). UploadTTL is how long an upload may go without a chunk
	// before it is removed (0: 24 hours).
	SessionTTL, UploadTTL time.Duration
	// ChunkSize is the largest chunk of an upload the server takes and
	// the size the page sends (0: 8 MiB).
	ChunkSize int64
	// LoginLimit is how many failed logins a user name, and LoginLimitIP
	// how many an address, may have within LoginWindow before further
	// attempts are refused until the window passes (0: 5, 20 and 15
	// minutes).
	LoginLimit, LoginLimitIP int
	LoginWindow              time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger gets failed logins and failed requests (nil: none).
	Logger *slog.Logger
}

//go:embed assets
var assets embed.FS

// Handler is the web app, an http.Handler. It is safe for concurrent use.
// Close it to stop its cleaner.
type Handler struct {
	cfg    Config
	tmpl   *template.Template
	static http.Handler

	sessions *sessions
	throttle *throttle
	uploads  *uploads

	stop     chan struct{}
	stopOnce sync.Once
}

// New returns the web app of cfg, and starts a goroutine that removes
// expired sessions and abandoned uploads (Close stops it).
func New(cfg Config) (*Handler, error) {
	if cfg.Authenticate == nil || cfg.Tree == nil {
		return nil, errors.New("webapp: config needs Authenticate and Tree")
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.UploadTTL <= 0 {
		cfg.UploadTTL = 24 * time.Hour
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = 8 << 20
	}
	if cfg.LoginLimit <= 0 {
		cfg.LoginLimit = 5
	}
	if cfg.LoginLimitIP <= 0 {
		cfg.LoginLimitIP = 20
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SpoolDir == "" {
		d, err := os.MkdirTemp("", "quilt-webapp-")
		if err != nil {
			return nil, err
		}
		cfg.SpoolDir = d
	}
	updir := filepath.Join(cfg.SpoolDir, "uploads")
	if err := os.MkdirAll(updir, 0o700); err != nil {
		return nil, err
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	h := &Handler{
		cfg:      cfg,
		tmpl:     t,
		static:   http.StripPrefix("/static/", http.FileServerFS(static)),
		sessions: newSessions(cfg.Now, cfg.SessionTTL),
		throttle: newThrottle(cfg.Now, cfg.LoginWindow),
		stop:     make(chan struct{}),
	}
	h.uploads, err = openUploads(updir, cfg.Now, cfg.UploadTTL)
	if err != nil {
		return nil, err
	}
	go h.clean()
	return h, nil
}

// Close stops the cleaner. Uploads in progress stay on disk for the next
// Handler of the same SpoolDir.
func (h *Handler) Close() error {
	h.stopOnce.Do(func() { close(h.stop) })
	return nil
}

// clean removes expired sessions and abandoned uploads once a minute.
func (h *Handler) clean() {
	tk := time.NewTicker(time.Minute)
	defer tk.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tk.C:
			h.Sweep()
		}
	}
}

// Sweep removes expired sessions, login throttles that have passed and
// uploads idle for longer than Config.UploadTTL now (the cleaner calls it
// every minute).
func (h *Handler) Sweep() {
	h.sessions.sweep()
	h.throttle.sweep()
	h.uploads.sweep(h.cfg.Logger)
}

// User returns the user a request is logged in as (by its session
// cookie): name and bucket, or ok false. For the share-link handler.
func (h *Handler) User(r *http.Request) (name, bucket string, ok bool) {
	s := h.sessions.get(r)
	if s == nil {
		return "", "", false
	}
	return s.acct.Name, s.acct.Bucket, true
}

// ServeHTTP routes a request of the app.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/static/"):
		hdr.Set("Cache-Control", "no-cache")
		h.static.ServeHTTP(w, r)
		return
	case p == "/login":
		h.login(w, r)
		return
	case p == "/favicon.ico":
		http.NotFound(w, r)
		return
	}
	s := h.sessions.get(r)
	if s == nil {
		if strings.HasPrefix(p, "/api/") || r.Method != http.MethodGet {
			h.fail(w, r, nil, http.StatusUnauthorized, "Log in first.")
			return
		}
		http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.checkCSRF(r) {
		h.cfg.Logger.Warn("webapp: request without its CSRF token", "user", s.acct.Name, "method", r.Method, "path", p)
		h.fail(w, r, s, http.StatusForbidden, "This request did not carry the page's security token: reload the page and try again.")
		return
	}
	req := &request{h: h, w: w, r: r, s: s}
	switch {
	case p == "/":
		http.Redirect(w, r, "/files/"+s.acct.Name+"/", http.StatusSeeOther)
	case p == "/logout":
		h.logout(w, r, s)
	case strings.HasPrefix(p, "/files/"):
		req.userPath("/files/", req.browse)
	case strings.HasPrefix(p, "/download/"):
		req.userPath("/download/", req.download)
	case strings.HasPrefix(p, "/preview/"):
		req.userPath("/preview/", req.preview)
	case strings.HasPrefix(p, "/zip/"):
		req.userPath("/zip/", req.zip)
	case p == "/search":
		req.search()
	case p == "/rename":
		req.renamePage()
	case strings.HasPrefix(p, "/op/"):
		req.op(strings.TrimPrefix(p, "/op/"))
	case p == "/trash":
		req.trashPage()
	case strings.HasPrefix(p, "/trash/"):
		req.trashOp(strings.TrimPrefix(p, "/trash/"))
	case p == "/storage":
		req.storage()
	case p == "/grid":
		req.grid()
	case p == "/users":
		req.usersRoute("")
	case strings.HasPrefix(p, "/users/"):
		req.usersRoute(strings.TrimPrefix(p, "/users/"))
	case p == "/shares":
		req.sharesPage()
	case p == "/shared":
		req.sharedPage()
	case p == "/api/folders":
		req.folderAPI()
	case p == "/api/uploads" || strings.HasPrefix(p, "/api/uploads/"):
		req.uploadAPI(strings.TrimPrefix(strings.TrimPrefix(p, "/api/uploads"), "/"))
	default:
		h.fail(w, r, s, http.StatusNotFound, "There is no such page.")
	}
}
