package sharelink

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"golang.org/x/crypto/argon2"
)

// Argon2id parameters of a link's password hash: OWASP's minimum for
// Argon2id (19 MiB, two passes, one lane).
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

var b64 = base64.RawStdEncoding

// hashPassword returns pw's Argon2id hash as a PHC string
// ($argon2id$v=19$m=...,t=...,p=...$SALT$HASH).
func hashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(sum))
}

var errBadHash = errors.New("sharelink: unreadable password hash")

// checkPassword reports whether pw matches a hash of hashPassword.
func checkPassword(hash, pw string) (bool, error) {
	f := strings.Split(hash, "$")
	if len(f) != 6 || f[1] != "argon2id" || f[2] != "v="+strconv.Itoa(argon2.Version) {
		return false, errBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || m > 1<<20 || t == 0 || t > 16 || p == 0 {
		return false, errBadHash
	}
	salt, err1 := b64.DecodeString(f[4])
	want, err2 := b64.DecodeString(f[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// cookieName is the cookie a correct password earns; its Path is the
// link's, /s/TOKEN, and its value is signed for that token only.
const cookieName = "quilt_share"

// cookieLife is how long a correct password lets a browser in (less if
// the link expires sooner).
const cookieLife = 12 * time.Hour

// cookieValue is "EXPIRY.MAC": the Unix time it ends and an HMAC of the
// token, that time and the password hash under the link's secret, so a
// cookie fits one link, dies with it and with a change of its password.
func cookieValue(l gateway.ShareLink, until time.Time) string {
	exp := strconv.FormatInt(until.Unix(), 10)
	return exp + "." + base64.RawURLEncoding.EncodeToString(cookieMAC(l, exp))
}

func cookieMAC(l gateway.ShareLink, exp string) []byte {
	m := hmac.New(sha256.New, l.Secret)
	m.Write([]byte(l.Token + "|" + exp + "|" + l.PasswordHash))
	return m.Sum(nil)
}

// unlocked reports whether r may use link l: it has no password, or r
// carries a cookie that l's password earned and that has not run out.
func (h *Handler) unlocked(r *http.Request, l gateway.ShareLink) bool {
	if l.PasswordHash == "" {
		return true
	}
	if len(l.Secret) == 0 {
		return false
	}
	for _, c := range r.Cookies() {
		if c.Name != cookieName {
			continue
		}
		exp, mac, ok := strings.Cut(c.Value, ".")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || !h.cfg.Now().Before(time.Unix(n, 0)) {
			continue
		}
		got, err := base64.RawURLEncoding.DecodeString(mac)
		if err == nil && hmac.Equal(got, cookieMAC(l, exp)) {
			return true
		}
	}
	return false
}

// setCookie gives the browser l's cookie.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, l gateway.ShareLink) {
	until := h.cfg.Now().Add(cookieLife)
	if !l.Expires.IsZero() && l.Expires.Before(until) {
		until = l.Expires
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: cookieValue(l, until), Path: PublicPrefix + l.Token,
		Expires: until, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || strings.HasPrefix(h.cfg.BaseURL, "https:"),
	})
}

// Limits per window: wrong passwords for one link from one address, and
// for one link from everywhere (an attacker with many addresses); tokens
// that do not work from one address.
const (
	limitWindow  = time.Minute
	limitPerAddr = 5
	limitPerLink = 30
	limitMisses  = 60
)

// limiter counts failures by key in fixed windows.
type limiter struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{now: now, m: map[string]*window{}}
}

// blocked reports how long key must wait, 0 if it may try now.
func (l *limiter) blocked(key string, max int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.m[key]
	now := l.now()
	if w == nil || now.Sub(w.start) >= limitWindow || w.n < max {
		return 0
	}
	return w.start.Add(limitWindow).Sub(now)
}

// fail counts a failure of key.
func (l *limiter) fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.m) > 100000 {
		for k, w := range l.m {
			if now.Sub(w.start) >= limitWindow {
				delete(l.m, k)
			}
		}
	}
	w := l.m[key]
	if w == nil || now.Sub(w.start) >= limitWindow {
		w = &window{start: now}
		l.m[key] = w
	}
	w.n++
}

// clientAddr is the address a request came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
