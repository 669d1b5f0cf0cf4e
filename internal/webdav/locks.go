package webdav

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	xwebdav "golang.org/x/net/webdav"
)

// lockSystem is the locks of one bucket, held in memory: x/net/webdav's
// LockSystem (exclusive write locks, with the semantics of its memLS)
// and shared write locks beside them, which x/net/webdav's LOCK handler
// refuses and the server takes itself (serveSharedLock). Two locks
// conflict when one covers the other's root (the same resource, or a
// resource under a lock of infinite depth), unless both are shared. It
// is safe for concurrent use.
type lockSystem struct {
	mu    sync.Mutex
	locks map[string]*heldLock // by token
}

// heldLock is one lock.
type heldLock struct {
	token  string
	d      xwebdav.LockDetails
	shared bool
	expiry time.Time // zero: no timeout
	held   bool      // confirmed by a request in progress
}

var _ xwebdav.LockSystem = (*lockSystem)(nil)

func newLockSystem() *lockSystem { return &lockSystem{locks: map[string]*heldLock{}} }

// lockName is a path as the locks keep it: with a leading slash, clean.
func lockName(p string) string { return path.Clean("/" + p) }

// covers says whether lock l applies to resource name.
func (l *heldLock) covers(name string) bool {
	if name == l.d.Root {
		return true
	}
	return !l.d.ZeroDepth && (l.d.Root == "/" || strings.HasPrefix(name, l.d.Root+"/"))
}

// expire drops the locks whose timeout has passed.
func (s *lockSystem) expire(now time.Time) {
	for t, l := range s.locks {
		if !l.held && !l.expiry.IsZero() && !now.Before(l.expiry) {
			delete(s.locks, t)
		}
	}
}

func (s *lockSystem) create(now time.Time, d xwebdav.LockDetails, shared bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	d.Root = lockName(d.Root)
	nl := &heldLock{d: d, shared: shared}
	for _, l := range s.locks {
		if (l.covers(d.Root) || nl.covers(l.d.Root)) && !(l.shared && shared) {
			return "", xwebdav.ErrLocked
		}
	}
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	nl.token = "urn:uuid:" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	if d.Duration >= 0 {
		nl.expiry = now.Add(d.Duration)
	}
	s.locks[nl.token] = nl
	return nl.token, nil
}

// Create makes an exclusive lock.
func (s *lockSystem) Create(now time.Time, d xwebdav.LockDetails) (string, error) {
	return s.create(now, d, false)
}

// lookup returns a lock named by one of the conditions that covers name
// and is not held.
func (s *lockSystem) lookup(name string, conditions []xwebdav.Condition) *heldLock {
	for _, c := range conditions {
		if l := s.locks[c.Token]; l != nil && !l.held && l.covers(name) {
			return l
		}
	}
	return nil
}

// Confirm holds the locks the conditions name for name0 and name1 (as
// x/net/webdav's memLS: each name needs one).
func (s *lockSystem) Confirm(now time.Time, name0, name1 string, conditions ...xwebdav.Condition) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	var l0, l1 *heldLock
	if name0 != "" {
		if l0 = s.lookup(lockName(name0), conditions); l0 == nil {
			return nil, xwebdav.ErrConfirmationFailed
		}
	}
	if name1 != "" {
		if l1 = s.lookup(lockName(name1), conditions); l1 == nil {
			return nil, xwebdav.ErrConfirmationFailed
		}
	}
	if l1 == l0 {
		l1 = nil
	}
	for _, l := range []*heldLock{l0, l1} {
		if l != nil {
			l.held = true
		}
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, l := range []*heldLock{l0, l1} {
			if l != nil {
				l.held = false
			}
		}
	}, nil
}

// Refresh gives lock token a new timeout.
func (s *lockSystem) Refresh(now time.Time, token string, d time.Duration) (xwebdav.LockDetails, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	l := s.locks[token]
	if l == nil {
		return xwebdav.LockDetails{}, xwebdav.ErrNoSuchLock
	}
	if l.held {
		return xwebdav.LockDetails{}, xwebdav.ErrLocked
	}
	l.d.Duration, l.expiry = d, time.Time{}
	if d >= 0 {
		l.expiry = now.Add(d)
	}
	return l.d, nil
}

// Unlock removes lock token.
func (s *lockSystem) Unlock(now time.Time, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	l := s.locks[token]
	if l == nil {
		return xwebdav.ErrNoSuchLock
	}
	if l.held {
		return xwebdav.ErrLocked
	}
	delete(s.locks, token)
	return nil
}

// sharedLockInfo is a LOCK request's body, as far as telling a shared
// lock goes.
type sharedLockInfo struct {
	XMLName   xml.Name  `xml:"DAV: lockinfo"`
	Shared    *struct{} `xml:"DAV: lockscope>shared"`
	Exclusive *struct{} `xml:"DAV: lockscope>exclusive"`
	Write     *struct{} `xml:"DAV: locktype>write"`
	Owner     struct {
		Inner string `xml:",innerxml"`
	} `xml:"DAV: owner"`
}

// maxLockTimeout bounds a lock's timeout, as x/net/webdav does.
const maxLockTimeout = 1<<32 - 1

// lockTimeout reads a Timeout header's first choice: "Infinite" or
// "Second-N" (-1: none).
func lockTimeout(h string) (time.Duration, bool) {
	first, _, _ := strings.Cut(h, ",")
	first = strings.TrimSpace(first)
	switch {
	case first == "" || first == "Infinite":
		return -1, true
	case strings.HasPrefix(first, "Second-"):
		n, err := strconv.ParseUint(strings.TrimPrefix(first, "Second-"), 10, 32)
		if err != nil || n > maxLockTimeout {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// serveSharedLock answers a LOCK that asks for a shared write lock
// (x/net/webdav answers 501); it reports false, leaving the request to
// x/net/webdav, for any other LOCK. name is the resource's path in the
// tree. A resource that does not exist is made empty, as a LOCK of an
// exclusive lock makes it.
func (s *Server) serveSharedLock(w http.ResponseWriter, r *http.Request, b *bucketState, fsys *fileSystem, name string) bool {
	if r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false // an error x/net/webdav answers
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return s.refreshSharedLock(w, r, b)
	}
	var li sharedLockInfo
	if xml.Unmarshal(body, &li) != nil || li.Shared == nil || li.Exclusive != nil || li.Write == nil {
		return false
	}
	d, ok := lockTimeout(r.Header.Get("Timeout"))
	if !ok {
		http.Error(w, "quilt: Timeout is Infinite or Second-N", http.StatusBadRequest)
		return true
	}
	zero := false
	switch r.Header.Get("Depth") {
	case "", "infinity":
	case "0":
		zero = true
	default:
		http.Error(w, "quilt: a LOCK's Depth is 0 or infinity", http.StatusBadRequest)
		return true
	}
	now := time.Now()
	root := lockName(name)
	token, err := b.locks.create(now, xwebdav.LockDetails{Root: root, Duration: d, OwnerXML: li.Owner.Inner, ZeroDepth: zero}, true)
	if err != nil {
		http.Error(w, "quilt: locked", http.StatusLocked)
		return true
	}
	ctx := r.Context()
	created := false
	if _, err := fsys.Stat(ctx, root); err != nil {
		f, err := fsys.OpenFile(ctx, root, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			b.locks.Unlock(now, token)
			if c := ErrorCode(err); c != "" {
				w.Header().Set("X-Quilt-Error", c)
			}
			http.Error(w, "quilt: "+err.Error(), http.StatusConflict)
			return true
		}
		created = true
	}
	w.Header().Set("Lock-Token", "<"+token+">")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	if created {
		w.WriteHeader(http.StatusCreated)
	}
	writeSharedLock(w, token, xwebdav.LockDetails{Duration: d, OwnerXML: li.Owner.Inner, ZeroDepth: zero}, r.URL.EscapedPath())
	return true
}

// ifToken is the one lock token of a refresh's If header.
var ifToken = regexp.MustCompile(`\(\s*<([^>]+)>\s*\)`)

// refreshSharedLock answers a LOCK without a body (a refresh) of a shared
// lock, with its shared scope (x/net/webdav would say exclusive); it
// reports false for any other refresh.
func (s *Server) refreshSharedLock(w http.ResponseWriter, r *http.Request, b *bucketState) bool {
	m := ifToken.FindAllStringSubmatch(r.Header.Get("If"), -1)
	if len(m) != 1 {
		return false
	}
	b.locks.mu.Lock()
	l := b.locks.locks[m[0][1]]
	shared := l != nil && l.shared
	b.locks.mu.Unlock()
	if !shared {
		return false
	}
	d, ok := lockTimeout(r.Header.Get("Timeout"))
	if !ok {
		http.Error(w, "quilt: Timeout is Infinite or Second-N", http.StatusBadRequest)
		return true
	}
	ld, err := b.locks.Refresh(time.Now(), m[0][1], d)
	if err != nil {
		http.Error(w, "quilt: "+err.Error(), http.StatusPreconditionFailed)
		return true
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	writeSharedLock(w, m[0][1], ld, r.URL.EscapedPath())
	return true
}

// writeSharedLock writes a LOCK's answer for a shared lock: its
// lockdiscovery.
func writeSharedLock(w io.Writer, token string, ld xwebdav.LockDetails, href string) {
	depth, timeout := "infinity", "Infinite"
	if ld.ZeroDepth {
		depth = "0"
	}
	if ld.Duration >= 0 {
		timeout = fmt.Sprintf("Second-%d", ld.Duration/time.Second)
	}
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"+
		"<D:prop xmlns:D=\"DAV:\"><D:lockdiscovery><D:activelock>\n"+
		"	<D:locktype><D:write/></D:locktype>\n"+
		"	<D:lockscope><D:shared/></D:lockscope>\n"+
		"	<D:depth>%s</D:depth>\n"+
		"	<D:owner>%s</D:owner>\n"+
		"	<D:timeout>%s</D:timeout>\n"+
		"	<D:locktoken><D:href>%s</D:href></D:locktoken>\n"+
		"	<D:lockroot><D:href>%s</D:href></D:lockroot>\n"+
		"</D:activelock></D:lockdiscovery></D:prop>",
		depth, ld.OwnerXML, timeout, xmlText(token), xmlText(href))
}
