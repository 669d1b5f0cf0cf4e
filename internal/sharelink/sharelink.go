// Package sharelink serves share links: a URL with a random token that
// lets anyone who holds it download one file or folder of a user's
// bucket (mode "read"), or upload files into one folder without seeing
// what is in it (mode "upload"), optionally behind a password and until
// an expiry time. The links are records of the gateway's registry
// (gateway.ShareLink, under /shares/TOKEN), so every gateway sharing the
// registry serves them and a revocation reaches them all.
//
// A Handler serves two things on the web app's listener:
//
//   - the JSON API its logged-in user makes, lists and revokes their
//     links with (/api/shares, /api/shares/TOKEN, /api/shares/TOKEN/qr.svg);
//     a request changing something must carry X-Requested-With: quilt
//     (a cross-site form cannot set it);
//   - the public pages a link opens (/s/TOKEN, its downloads, its upload
//     form, its password form), HTML served from the binary with a
//     little JavaScript for upload progress, no CDN.
//
// The same API shares a file or folder between users (a grant to
// "user:NAME" or "group:NAME", read or write, a gateway.Grant under
// /grants/ID): /api/shares/grants for the owner, /api/shares/with-me for
// the users it is given to.
//
// An unknown, malformed, expired or revoked token gets the same 404 page,
// so a guess learns nothing. Paths under a shared folder are checked
// element by element (no empty, "." or ".." element, however escaped) and
// symbolic links are neither listed nor followed. Paths Config.Hidden
// names (the web app's trash) are kept from links and grants alike. See
// docs/files.md.
package sharelink

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
)

// Links is where share links are kept: *gateway.Gateway.
type Links interface {
	PutShare(ctx context.Context, s gateway.ShareLink) error
	// Share returns the link of token, or an error wrapping
	// gateway.ErrNoShare.
	Share(ctx context.Context, token string) (gateway.ShareLink, error)
	// Shares returns the links owner made.
	Shares(ctx context.Context, owner string) ([]gateway.ShareLink, error)
	DeleteShare(ctx context.Context, token string) error
}

var _ Links = (*gateway.Gateway)(nil)

// Config is what a Handler needs.
type Config struct {
	// Links keeps the links (required).
	Links Links
	// User returns the logged-in user of a request and their bucket
	// (the web app's session); ok is false for nobody (required).
	User func(r *http.Request) (name, bucket string, ok bool)
	// Tree returns the file tree of a bucket (required).
	Tree func(ctx context.Context, bucket string) (*tree.Tree, error)
	// Grants keeps the shares between users and groups; nil: none (the
	// API's grants and with-me paths answer 404).
	Grants Grants
	// Groups returns the groups a user belongs to, for grants to groups;
	// nil: none.
	Groups func(ctx context.Context, user string) []string
	// Principal, if set, says whether a grant's "user:NAME" or
	// "group:NAME" exists; a grant to one it refuses is 400.
	Principal func(ctx context.Context, with string) bool
	// OwnerActive, if set, says whether a link's owner may still share:
	// a link of an owner it refuses answers as a revoked one.
	OwnerActive func(ctx context.Context, owner string) bool
	// Hidden, if set, says whether a path of a bucket's tree ("a/b") is
	// kept from links and shares: the web app's trash (webapp.Hidden).
	// Such a path is not shared, listed, zipped, read nor written through
	// a link or a grant: it answers as one that is not there.
	Hidden func(p string) bool
	// BaseURL is the public URL of the listener ("https://files.example"),
	// used in the links' URLs; "" takes the scheme and Host of the
	// request that makes or lists them.
	BaseURL string
	// MaxUpload is the largest file an upload link takes; default 4 GiB.
	MaxUpload int64
	// Now is the clock that decides expiry, cookies and rate limits;
	// default time.Now.
	Now func() time.Time
	// Logger gets a line per refused password and failed request; nil:
	// none.
	Logger *slog.Logger
}

// DefaultMaxUpload is Config.MaxUpload's default.
const DefaultMaxUpload int64 = 4 << 30

// Handler serves the share-link API and pages. It is safe for concurrent
// use.
type Handler struct {
	cfg      Config
	limiter  *limiter
	verifies chan struct{} // bounds concurrent password hash checks

	mu      sync.Mutex
	trees   map[string]*tree.Tree
	writing map[string]bool // upload names being written, bucket+"\x00"+path
}

// New returns a handler for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Links == nil || cfg.User == nil || cfg.Tree == nil {
		return nil, errors.New("sharelink: config needs Links, User and Tree")
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = DefaultMaxUpload
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BaseURL != "" {
		u, err := url.Parse(cfg.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("sharelink: BaseURL must be an http or https URL")
		}
		cfg.BaseURL = strings.TrimSuffix(cfg.BaseURL, "/")
	}
	return &Handler{cfg: cfg, limiter: newLimiter(cfg.Now), verifies: make(chan struct{}, 2),
		trees: map[string]*tree.Tree{}, writing: map[string]bool{}}, nil
}

// Prefixes the handler serves: PublicPrefix+TOKEN... and APIPath,
// APIPath+"/"....
const (
	PublicPrefix = "/s/"
	APIPath      = "/api/shares"
)

// Owns reports whether the handler serves path p: a front end that
// shares a listener sends it these requests.
func Owns(p string) bool {
	return strings.HasPrefix(p, PublicPrefix) || p == APIPath || strings.HasPrefix(p, APIPath+"/")
}

// ServeHTTP serves the API and the public pages.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs, ok := segments(r.URL)
	if !ok {
		h.notFound(w, r)
		return
	}
	switch {
	case len(segs) >= 2 && segs[0] == "api" && segs[1] == "shares":
		h.serveAPI(w, r, segs[2:])
	case len(segs) >= 1 && segs[0] == "s":
		h.servePublic(w, r, segs[1:])
	default:
		h.notFound(w, r)
	}
}

// segments splits a URL's path into its unescaped elements, refusing an
// empty (but a trailing), "." or ".." element, or one holding a slash
// (%2F) or a NUL, however it was spelled.
func segments(u *url.URL) ([]string, bool) {
	raw := strings.TrimPrefix(u.EscapedPath(), "/")
	raw = strings.TrimSuffix(raw, "/")
	if raw == "" {
		return nil, true
	}
	parts := strings.Split(raw, "/")
	out := make([]string, len(parts))
	for i, p := range parts {
		s, err := url.PathUnescape(p)
		if err != nil || !goodName(s) {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// goodName reports whether s may be one element of a path.
func goodName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// tree returns (and keeps) the tree of a bucket.
func (h *Handler) tree(ctx context.Context, bucket string) (*tree.Tree, error) {
	h.mu.Lock()
	t := h.trees[bucket]
	h.mu.Unlock()
	if t != nil {
		return t, nil
	}
	t, err := h.cfg.Tree(ctx, bucket)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if old := h.trees[bucket]; old != nil {
		t = old
	} else {
		h.trees[bucket] = t
	}
	h.mu.Unlock()
	return t, nil
}

// hidden reports whether tree path p is kept from links and shares
// (Config.Hidden).
func (h *Handler) hidden(p string) bool {
	return h.cfg.Hidden != nil && h.cfg.Hidden(p)
}

// linkURL is the public URL of a token.
func (h *Handler) linkURL(r *http.Request, token string) string {
	base := h.cfg.BaseURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	return base + PublicPrefix + token
}

// live returns the link of token if it may be used now: not unknown,
// expired or revoked, and its owner still active. found is false for all
// of those alike; err is another failure (the registry unreachable).
func (h *Handler) live(ctx context.Context, token string) (l gateway.ShareLink, found bool, err error) {
	if gateway.CheckShareToken(token) != nil {
		return l, false, nil
	}
	l, err = h.cfg.Links.Share(ctx, token)
	if errors.Is(err, gateway.ErrNoShare) {
		return l, false, nil
	}
	if err != nil {
		return l, false, err
	}
	if expired(l, h.cfg.Now()) {
		return l, false, nil
	}
	if h.cfg.OwnerActive != nil && !h.cfg.OwnerActive(ctx, l.Owner) {
		return l, false, nil
	}
	return l, true, nil
}

func expired(l gateway.ShareLink, now time.Time) bool {
	return !l.Expires.IsZero() && !now.Before(l.Expires)
}
