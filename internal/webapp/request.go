package webapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// request is one request of a logged-in user.
type request struct {
	h *Handler
	w http.ResponseWriter
	r *http.Request
	s *session
}

// errBadPath is a path parameter that is not a clean drive path.
var errBadPath = errors.New("webapp: not a clean path of your drive")

// drivePath turns a path of the user's drive as the app spells it ("/",
// "/a/b", "/a/b/") into the tree's form ("", "a/b"). It refuses, rather
// than cleans, a path that does not start with "/" or has an empty, "."
// or ".." element or a NUL, and any path in the trash's folder: no
// spelling reaches outside what the app shows.
func drivePath(v string) (string, error) {
	if !strings.HasPrefix(v, "/") || strings.ContainsRune(v, 0) {
		return "", errBadPath
	}
	p := strings.TrimSuffix(v[1:], "/")
	if p == "" {
		return "", nil
	}
	for i, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." || (i == 0 && e == trashDir) {
			return "", errBadPath
		}
	}
	return p, nil
}

// param returns a form or query parameter as a tree path.
func (q *request) param(name string) (string, bool) {
	p, err := drivePath(q.r.FormValue(name))
	if err != nil {
		q.fail(http.StatusBadRequest, fmt.Sprintf("The %s %q is not a path of your drive: it must start with / and have no empty, . or .. parts.", name, q.r.FormValue(name)))
		return "", false
	}
	return p, true
}

// userPath serves a URL PREFIX/NAME/PATH of the logged-in user NAME with
// fn and PATH in the tree's form; another user's NAME is 403.
func (q *request) userPath(prefix string, fn func(p string)) {
	rest := strings.TrimPrefix(q.r.URL.Path, prefix)
	name, sub, slash := strings.Cut(rest, "/")
	if name != q.s.acct.Name {
		q.h.cfg.Logger.Warn("webapp: another user's path", "user", q.s.acct.Name, "path", q.r.URL.Path)
		q.fail(http.StatusForbidden, "These are not your files.")
		return
	}
	if !slash {
		http.Redirect(q.w, q.r, prefix+name+"/", http.StatusSeeOther)
		return
	}
	p, err := drivePath("/" + sub)
	if err != nil {
		q.fail(http.StatusBadRequest, "That is not a path of your drive: it has an empty, . or .. part.")
		return
	}
	fn(p)
}

// tree returns the user's tree, or answers 503.
func (q *request) tree() (*tree.Tree, bool) {
	t, err := q.h.cfg.Tree(q.r.Context(), q.s.acct.Bucket)
	if err != nil {
		q.h.cfg.Logger.Error("webapp: tree", "user", q.s.acct.Name, "bucket", q.s.acct.Bucket, "err", err)
		q.fail(http.StatusServiceUnavailable, "Your drive is not available right now.")
		return nil, false
	}
	return t, true
}

// treeError answers a tree's error with its status and a sentence.
func (q *request) treeError(what string, err error) {
	code, msg := http.StatusInternalServerError, "something went wrong"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code, msg = http.StatusNotFound, "it does not exist"
	case errors.Is(err, fs.ErrExist):
		code, msg = http.StatusConflict, "something of that name is already there"
	case errors.Is(err, tree.ErrNotEmpty):
		code, msg = http.StatusConflict, "the folder there is not empty"
	case errors.Is(err, tree.ErrIsDir):
		code, msg = http.StatusConflict, "a folder is in the way"
	case errors.Is(err, tree.ErrNotDir):
		code, msg = http.StatusConflict, "a file is in the way where a folder should be"
	case errors.Is(err, fs.ErrInvalid):
		code, msg = http.StatusBadRequest, "that cannot be done (a folder cannot go into itself; names cannot be empty, . or ..)"
	case errors.Is(err, fs.ErrPermission):
		code, msg = http.StatusForbidden, "you may not change that"
	}
	if code == http.StatusInternalServerError {
		q.h.cfg.Logger.Error("webapp: request", "user", q.s.acct.Name, "what", what, "err", err)
	}
	q.fail(code, fmt.Sprintf("Could not %s: %s.", what, msg))
}

// fail answers with an error page, or JSON for the API.
func (q *request) fail(code int, msg string) { q.h.fail(q.w, q.r, q.s, code, msg) }

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") || r.Header.Get("X-Requested-With") != "" {
		writeJSON(w, code, map[string]any{"error": msg})
		return
	}
	h.render(w, r, s, code, "error", "Error", msg)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// page is what every template gets.
type page struct {
	Title  string
	User   *Account
	CSRF   string
	Shares bool // the share UI is on
	Grid   bool // the grid page is there for this user
	Users  bool // the users page is there for this user
	Flash  string
	Data   any
}

// render writes template name with data.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, s *session, code int, name, title string, data any) {
	pg := page{Title: title, Data: data}
	if s != nil {
		a := s.acct
		pg.User, pg.CSRF = &a, s.csrf
		pg.Shares = h.cfg.Shares != nil
		pg.Grid = h.cfg.Grid != nil && a.Admin
		pg.Users = h.cfg.Users != nil && a.Admin
		pg.Flash = h.sessions.takeFlash(s)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method == http.MethodHead {
		return
	}
	if err := h.tmpl.ExecuteTemplate(w, name, pg); err != nil {
		h.cfg.Logger.Error("webapp: template", "name", name, "err", err)
	}
}

// setFlash keeps a message for the next page the session sees.
func (ss *sessions) setFlash(s *session, msg string) {
	ss.mu.Lock()
	s.flash = msg
	ss.mu.Unlock()
}

func (ss *sessions) takeFlash(s *session) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	f := s.flash
	s.flash = ""
	return f
}

// done redirects to to with a message.
func (q *request) done(to, msg string) {
	if msg != "" {
		q.h.sessions.setFlash(q.s, msg)
	}
	http.Redirect(q.w, q.r, to, http.StatusSeeOther)
}

// escapePath escapes each element of a tree path for a URL.
func escapePath(p string) string {
	if p == "" {
		return ""
	}
	es := strings.Split(p, "/")
	for i, e := range es {
		es[i] = url.PathEscape(e)
	}
	return strings.Join(es, "/")
}

// folderURL is the page of folder p of user name.
func folderURL(name, p string) string {
	u := "/files/" + url.PathEscape(name) + "/" + escapePath(p)
	if p != "" {
		u += "/"
	}
	return u
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"size": humanSize,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"drive": func(p string) string { return "/" + p },
	"base":  path.Base,
	"pct": func(a, b int64) int64 {
		if b <= 0 {
			return 0
		}
		return a * 100 / b
	},
}

// humanSize formats a byte count for people (1000-based units, as file
// managers show them).
func humanSize(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB"} {
		f /= 1000
		if f < 1000 || u == "PB" {
			if f < 10 {
				return fmt.Sprintf("%.1f %s", f, u)
			}
			return fmt.Sprintf("%.0f %s", f, u)
		}
	}
	return ""
}
