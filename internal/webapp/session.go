package webapp

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cookieName is the session cookie.
const cookieName = "quilt_session"

// session is one login: a random ID (the cookie) and a random CSRF token
// that every state-changing request must carry (form field "csrf" or
// header X-CSRF-Token).
type session struct {
	id    string
	csrf  string
	acct  Account
	until time.Time // expiry; pushed on at each request
	flash string    // a message for the next page (sessions.mu)
}

// checkCSRF reports whether r carries the session's CSRF token.
func (s *session) checkCSRF(r *http.Request) bool {
	tok := r.Header.Get("X-CSRF-Token")
	if tok == "" {
		// Only a URL-encoded form: a multipart body is not parsed here.
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			tok = r.PostFormValue("csrf")
		}
	}
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) == 1
}

// sessions is the server-side session store, in memory.
type sessions struct {
	now func() time.Time
	ttl time.Duration

	mu sync.Mutex
	m  map[string]*session
}

func newSessions(now func() time.Time, ttl time.Duration) *sessions {
	return &sessions{now: now, ttl: ttl, m: map[string]*session{}}
}

// randomID returns n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (ss *sessions) create(a Account) *session {
	s := &session{id: randomID(32), csrf: randomID(32), acct: a, until: ss.now().Add(ss.ttl)}
	ss.mu.Lock()
	ss.m[s.id] = s
	ss.mu.Unlock()
	return s
}

// get returns the live session of r's cookie, its expiry pushed on, or
// nil.
func (ss *sessions) get(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[c.Value]
	if s == nil {
		return nil
	}
	now := ss.now()
	if now.After(s.until) {
		delete(ss.m, s.id)
		return nil
	}
	s.until = now.Add(ss.ttl)
	return s
}

func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// dropUser ends the sessions of user name (removed, or their password
// changed).
func (ss *sessions) dropUser(name string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, s := range ss.m {
		if s.acct.Name == name {
			delete(ss.m, id)
		}
	}
}

func (ss *sessions) sweep() {
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, s := range ss.m {
		if now.After(s.until) {
			delete(ss.m, id)
		}
	}
}

// throttle counts failed logins per user name and per address within a
// window.
type throttle struct {
	now    func() time.Time
	window time.Duration

	mu   sync.Mutex
	fail map[string][]time.Time // "u:NAME" or "ip:ADDR": failures in the window
}

func newThrottle(now func() time.Time, window time.Duration) *throttle {
	return &throttle{now: now, window: window, fail: map[string][]time.Time{}}
}

// recent returns key's failures within the window.
func (t *throttle) recent(key string) []time.Time {
	cut := t.now().Add(-t.window)
	fs := t.fail[key]
	i := 0
	for i < len(fs) && !fs[i].After(cut) {
		i++
	}
	fs = fs[i:]
	if len(fs) == 0 {
		delete(t.fail, key)
	} else {
		t.fail[key] = fs
	}
	return fs
}

// blocked returns how long until key may try again, if it has limit
// failures in the window.
func (t *throttle) blocked(key string, limit int) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fs := t.recent(key)
	if len(fs) < limit {
		return 0, false
	}
	return fs[len(fs)-limit].Add(t.window).Sub(t.now()), true
}

func (t *throttle) failed(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		t.fail[k] = append(t.recent(k), t.now())
	}
}

func (t *throttle) sweep() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.fail {
		t.recent(k)
	}
}

// clientIP is the address a request came from (the peer: the app does not
// trust forwarding headers).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// safeNext returns where to go after logging in: a path of this app, or
// the drive.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/login") {
		return "/"
	}
	return next
}

// loginPage is the login form's data.
type loginPage struct {
	Next, User, Error string
}

// login shows the form (GET) or checks a name and password (POST). A
// login POST needs no session and so no CSRF token; it must come from a
// page of this origin (Origin or Referer, when the browser sends one),
// and the cookie is SameSite=Strict.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.FormValue("next"))
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.render(w, r, nil, http.StatusOK, "login", "Log in", loginPage{Next: next})
		return
	case http.MethodPost:
	default:
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, r, nil, http.StatusMethodNotAllowed, "Log in with the form.")
		return
	}
	if !sameOrigin(r) {
		h.fail(w, r, nil, http.StatusForbidden, "This login did not come from this site's login page.")
		return
	}
	user, pw := strings.TrimSpace(r.PostFormValue("user")), r.PostFormValue("password")
	page := loginPage{Next: next, User: user}
	ip := clientIP(r)
	if d, ok := h.throttle.blocked("u:"+user, h.cfg.LoginLimit); ok {
		page.Error = fmt.Sprintf("Too many failed logins for this user: try again in %s.", roundUp(d))
		h.render(w, r, nil, http.StatusTooManyRequests, "login", "Log in", page)
		return
	}
	if d, ok := h.throttle.blocked("ip:"+ip, h.cfg.LoginLimitIP); ok {
		page.Error = fmt.Sprintf("Too many failed logins from your address: try again in %s.", roundUp(d))
		h.render(w, r, nil, http.StatusTooManyRequests, "login", "Log in", page)
		return
	}
	if user == "" || pw == "" {
		page.Error = "Enter your user name and password."
		h.render(w, r, nil, http.StatusUnauthorized, "login", "Log in", page)
		return
	}
	a, err := h.cfg.Authenticate(r.Context(), user, pw)
	if err != nil {
		h.throttle.failed("u:"+user, "ip:"+ip)
		if errors.Is(err, ErrLogin) {
			h.cfg.Logger.Warn("webapp: failed login", "user", user, "from", ip)
		} else {
			h.cfg.Logger.Warn("webapp: failed login", "user", user, "from", ip, "err", err)
		}
		page.Error = "Wrong user name or password."
		h.render(w, r, nil, http.StatusUnauthorized, "login", "Log in", page)
		return
	}
	if old := h.sessions.get(r); old != nil {
		h.sessions.drop(old.id) // a new ID at each login: no session fixation
	}
	s := h.sessions.create(a)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// sameOrigin reports whether a POST's Origin (or, without one, Referer)
// names this host; a request with neither passes (old clients, curl).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func roundUp(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", int(d.Seconds())+1)
	}
	return fmt.Sprintf("%d minutes", int(d.Minutes())+1)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		h.fail(w, r, s, http.StatusMethodNotAllowed, "Log out with the button.")
		return
	}
	h.sessions.drop(s.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
