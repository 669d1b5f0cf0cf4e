package webapp_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/webapp"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is the web app over a gateway on a test grid, with users alice
// (an admin, bucket alice-files) and bob (bob-files), served by httptest.
type fixture struct {
	gw    *gateway.Gateway
	clock *clock
	cfg   webapp.Config
	h     *webapp.Handler
	srv   *httptest.Server
	trees func(ctx context.Context, bucket string) (*tree.Tree, error)
}

var passwords = map[string]string{"alice": "alice-pw", "bob": "bob-pw"}

func newFixture(t *testing.T, opt func(*webapp.Config)) *fixture {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	for _, b := range []string{"alice-files", "bob-files"} {
		if err := gw.CreateBucket(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{gw: gw, clock: &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}
	var mu sync.Mutex
	trees := map[string]*tree.Tree{}
	f.trees = func(ctx context.Context, bucket string) (*tree.Tree, error) {
		mu.Lock()
		defer mu.Unlock()
		if trees[bucket] == nil {
			trees[bucket] = gw.Tree(bucket)
		}
		return trees[bucket], nil
	}
	f.cfg = webapp.Config{
		Authenticate: func(ctx context.Context, user, pw string) (webapp.Account, error) {
			if want, ok := passwords[user]; ok && pw == want {
				return webapp.Account{Name: user, Bucket: user + "-files", Admin: user == "alice"}, nil
			}
			return webapp.Account{}, webapp.ErrLogin
		},
		Tree:      f.trees,
		SpoolDir:  t.TempDir(),
		ChunkSize: 1000,
		Now:       f.clock.Now,
	}
	if opt != nil {
		opt(&f.cfg)
	}
	f.start(t)
	return f
}

// start (re)starts the handler and its server.
func (f *fixture) start(t *testing.T) {
	t.Helper()
	h, err := webapp.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	f.srv = httptest.NewServer(h)
	t.Cleanup(func() { f.srv.Close(); h.Close() })
}

func ctxT(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// browser is one user agent: a cookie jar, no redirects followed.
type browser struct {
	t    *testing.T
	f    *fixture
	hc   *http.Client
	csrf string
}

func (f *fixture) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, f: f, hc: &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request; body may be url.Values (a form), []byte or nil.
func (b *browser) do(method, path string, body any, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	var r io.Reader
	ct := ""
	switch v := body.(type) {
	case url.Values:
		r, ct = strings.NewReader(v.Encode()), "application/x-www-form-urlencoded"
	case []byte:
		r, ct = bytes.NewReader(v), "application/octet-stream"
	case string:
		r, ct = strings.NewReader(v), "application/json"
	}
	req, err := http.NewRequest(method, b.f.srv.URL+path, r)
	if err != nil {
		b.t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp, string(out)
}

// want checks a response's status.
func (b *browser) want(code int, method, path string, body any, hdr ...string) string {
	b.t.Helper()
	resp, out := b.do(method, path, body, hdr...)
	if resp.StatusCode != code {
		b.t.Fatalf("%s %s: %d, want %d: %.400s", method, path, resp.StatusCode, code, out)
	}
	return out
}

var csrfRE = regexp.MustCompile(`data-csrf="([0-9a-f]+)"`)

// login logs in and keeps the page's CSRF token.
func (b *browser) login(user string) {
	b.t.Helper()
	resp, out := b.do("POST", "/login", url.Values{"user": {user}, "password": {passwords[user]}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("login %s: %d %.300s", user, resp.StatusCode, out)
	}
	page := b.want(200, "GET", "/files/"+user+"/", nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatal("no CSRF token in the page")
	}
	b.csrf = m[1]
}

// post sends a form with the CSRF token.
func (b *browser) post(path string, v url.Values) (*http.Response, string) {
	b.t.Helper()
	v.Set("csrf", b.csrf)
	return b.do("POST", path, v)
}

// api sends JSON with the CSRF header.
func (b *browser) api(method, path string, body any) (int, map[string]any) {
	b.t.Helper()
	hdr := []string{"X-CSRF-Token", b.csrf}
	resp, out := b.do(method, path, body, hdr...)
	m := map[string]any{}
	if out != "" {
		json.Unmarshal([]byte(out), &m)
	}
	return resp.StatusCode, m
}

// upload sends data to path through the chunked API.
func (b *browser) upload(p string, data []byte) {
	b.t.Helper()
	code, m := b.api("POST", "/api/uploads", fmt.Sprintf(`{"path":%q,"size":%d,"mtime":1700000000000}`, p, len(data)))
	if code != 201 {
		b.t.Fatalf("create upload %s: %d %v", p, code, m)
	}
	id := m["id"].(string)
	for off := 0; off < len(data); off += 1000 {
		end := min(off+1000, len(data))
		if code, m := b.api("PUT", fmt.Sprintf("/api/uploads/%s?offset=%d", id, off), data[off:end]); code != 200 {
			b.t.Fatalf("chunk %d of %s: %d %v", off, p, code, m)
		}
	}
	if code, m := b.api("POST", "/api/uploads/"+id+"/finish", nil); code != 200 {
		b.t.Fatalf("finish %s: %d %v", p, code, m)
	}
}

func bytesOf(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// TestWebappLogin: pages need a session (a redirect to the login form;
// 401 for the API and for changes); a wrong password is refused with a
// clear message and counted, per user and per address, until the window
// passes; the cookie is HttpOnly and SameSite=Strict; logging out and
// expiry end the session; a login posted from another origin is refused.
func TestWebappLogin(t *testing.T) {
	f := newFixture(t, func(c *webapp.Config) { c.LoginLimitIP = 8; c.SessionTTL = time.Hour })
	b := f.browser(t)
	resp, _ := b.do("GET", "/files/alice/docs/", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next="+url.QueryEscape("/files/alice/docs/") {
		t.Fatalf("not logged in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	b.want(401, "GET", "/api/uploads/0123456789abcdef0123456789abcdef", nil)
	b.want(401, "POST", "/op/mkdir", url.Values{"dir": {"/"}, "name": {"x"}})
	b.want(401, "POST", "/logout", url.Values{})
	if out := b.want(200, "GET", "/login", nil); !strings.Contains(out, `name="password"`) {
		t.Fatal("no login form")
	}

	out := b.want(401, "POST", "/login", url.Values{"user": {"alice"}, "password": {"wrong"}})
	if !strings.Contains(out, "Wrong user name or password.") {
		t.Fatalf("failed login page: %.500s", out)
	}
	b.want(401, "POST", "/login", url.Values{"user": {"nobody"}, "password": {"x"}})
	b.want(401, "POST", "/login", url.Values{"user": {"alice"}, "password": {""}})
	b.want(403, "POST", "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}}, "Origin", "http://evil.example")

	// Five failures for alice: the right password is refused too, for
	// alice only, until the window has passed.
	for range 4 {
		b.want(401, "POST", "/login", url.Values{"user": {"alice"}, "password": {"wrong"}})
	}
	out = b.want(429, "POST", "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}})
	if !strings.Contains(out, "Too many failed logins for this user") {
		t.Fatalf("throttled page: %.500s", out)
	}
	b.want(303, "POST", "/login", url.Values{"user": {"bob"}, "password": {"bob-pw"}})
	// Two more failures from this address (8 in all): everyone is
	// refused from it.
	b.want(401, "POST", "/login", url.Values{"user": {"carol"}, "password": {"x"}})
	b.want(401, "POST", "/login", url.Values{"user": {"dave"}, "password": {"x"}})
	out = b.want(429, "POST", "/login", url.Values{"user": {"bob"}, "password": {"bob-pw"}})
	if !strings.Contains(out, "from your address") {
		t.Fatalf("throttled page: %.500s", out)
	}
	f.clock.Add(16 * time.Minute)
	f.h.Sweep()

	resp, _ = b.do("POST", "/login", url.Values{"user": {"alice"}, "password": {"alice-pw"}, "next": {"/files/alice/"}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/files/alice/" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var c *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == "quilt_session" {
			c = k
		}
	}
	if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || len(c.Value) < 64 {
		t.Fatalf("session cookie: %+v", c)
	}
	// A login's next must be a path of this site.
	b2 := f.browser(t)
	resp, _ = b2.do("POST", "/login", url.Values{"user": {"bob"}, "password": {"bob-pw"}, "next": {"//evil.example/"}})
	if resp.Header.Get("Location") != "/" {
		t.Fatalf("next //evil.example/: to %q", resp.Header.Get("Location"))
	}

	b.login("alice")
	b.want(200, "GET", "/files/alice/", nil)
	// User tells the share-link handler who a request is.
	req := httptest.NewRequest("GET", "/api/shares", nil)
	su, _ := url.Parse(f.srv.URL + "/api/shares")
	for _, k := range b.hc.Jar.Cookies(su) {
		req.AddCookie(k)
	}
	if name, bucket, ok := f.h.User(req); !ok || name != "alice" || bucket != "alice-files" {
		t.Fatalf("User: %q %q %v", name, bucket, ok)
	}
	if _, _, ok := f.h.User(httptest.NewRequest("GET", "/api/shares", nil)); ok {
		t.Fatal("User without a cookie")
	}
	// The session lasts while used, and ends after an hour idle.
	f.clock.Add(50 * time.Minute)
	b.want(200, "GET", "/files/alice/", nil)
	f.clock.Add(61 * time.Minute)
	b.want(303, "GET", "/files/alice/", nil)

	b.login("alice")
	b.want(403, "POST", "/logout", url.Values{})
	b.post("/logout", url.Values{})
	b.want(303, "GET", "/files/alice/", nil)
	// The old cookie is dead on the server, not only in this jar.
	b3 := f.browser(t)
	u, _ := url.Parse(f.srv.URL)
	b3.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "quilt_session", Value: c.Value}})
	b3.want(303, "GET", "/files/alice/", nil)
}

// TestWebappCSRF: every change without the session's token is 403 and
// changes nothing; with it, it is done.
func TestWebappCSRF(t *testing.T) {
	f := newFixture(t, nil)
	b := f.browser(t)
	b.login("alice")
	b.want(403, "POST", "/op/mkdir", url.Values{"dir": {"/"}, "name": {"x"}})
	b.want(403, "POST", "/op/mkdir", url.Values{"dir": {"/"}, "name": {"x"}, "csrf": {strings.Repeat("0", 64)}})
	b.want(403, "POST", "/api/uploads", `{"path":"/x","size":1}`)
	b.want(403, "POST", "/api/uploads", `{"path":"/x","size":1}`, "X-CSRF-Token", "nope")
	b.want(403, "POST", "/trash/empty", url.Values{})
	b.want(403, "POST", "/logout", url.Values{})
	// Another session's token does not do either.
	other := f.browser(t)
	other.login("bob")
	b.want(403, "POST", "/op/mkdir", url.Values{"dir": {"/"}, "name": {"x"}, "csrf": {other.csrf}})
	if _, err := f.gw.Tree("alice-files").Stat(ctxT(t), "x"); err == nil {
		t.Fatal("a request without the token made a folder")
	}
	if resp, out := b.post("/op/mkdir", url.Values{"dir": {"/"}, "name": {"x"}}); resp.StatusCode != 303 {
		t.Fatalf("mkdir: %d %.300s", resp.StatusCode, out)
	}
	if i, err := f.gw.Tree("alice-files").Stat(ctxT(t), "x"); err != nil || !i.IsDir() {
		t.Fatalf("mkdir: %v %v", i, err)
	}
}

// TestWebappPaths: no spelling of a path in a URL or a parameter
// reaches outside the user's drive, the trash, or another user's files.
func TestWebappPaths(t *testing.T) {
	f := newFixture(t, nil)
	alice, bob := f.browser(t), f.browser(t)
	alice.login("alice")
	bob.login("bob")
	bob.upload("/secret.txt", []byte("bob's secret"))
	alice.upload("/a/f.txt", []byte("alice's file"))

	// Another user's name in a URL.
	for _, p := range []string{"/files/bob/", "/files/bob/secret.txt", "/download/bob/secret.txt", "/preview/bob/secret.txt", "/zip/bob/"} {
		if out := alice.want(403, "GET", p, nil); strings.Contains(out, "secret") && !strings.Contains(out, "not your files") {
			t.Fatalf("%s shows bob's file", p)
		}
	}
	// Traversal in the URL path, decoded or not (the client sends these
	// as they are: no ServeMux cleans them here).
	for _, p := range []string{"/files/alice/../bob/", "/files/alice/%2e%2e/bob/secret.txt", "/download/alice/a/../../bob/secret.txt",
		"/download/alice//secret.txt", "/zip/alice/./a/", "/files/alice/.quilt-trash/", "/download/alice/%2Equilt-trash/x"} {
		alice.want(400, "GET", p, nil)
	}
	// Traversal, relative and trash paths in every parameter.
	bad := []string{"../bob/secret.txt", "/a/../../secret.txt", "/%2e%2e/x", "a/f.txt", "//etc/passwd", "/a//f.txt", "/./a", "/.quilt-trash", "/.quilt-trash/x", "/a/f.txt\x00"}
	for _, v := range bad {
		if dec, err := url.PathUnescape(v); err == nil && strings.Contains(v, "%") {
			v = dec
		}
		alice.want(400, "GET", "/rename?path="+url.QueryEscape(v), nil)
		alice.want(400, "GET", "/search?q=f&in="+url.QueryEscape(v), nil)
		if resp, out := alice.post("/op/rename", url.Values{"path": {v}, "to": {"/b"}}); resp.StatusCode != 400 {
			t.Fatalf("rename path %q: %d %.200s", v, resp.StatusCode, out)
		}
		if resp, out := alice.post("/op/rename", url.Values{"path": {"/a/f.txt"}, "to": {v}}); resp.StatusCode != 400 {
			t.Fatalf("rename to %q: %d %.200s", v, resp.StatusCode, out)
		}
		if resp, _ := alice.post("/op/delete", url.Values{"path": {v}}); resp.StatusCode != 400 {
			t.Fatalf("delete %q: %d", v, resp.StatusCode)
		}
		if resp, _ := alice.post("/op/mkdir", url.Values{"dir": {v}, "name": {"n"}}); resp.StatusCode != 400 {
			t.Fatalf("mkdir in %q: %d", v, resp.StatusCode)
		}
		js, _ := json.Marshal(map[string]any{"path": v, "size": 1})
		if code, m := alice.api("POST", "/api/uploads", string(js)); code != 400 {
			t.Fatalf("upload to %q: %d %v", v, code, m)
		}
	}
	for _, n := range []string{"..", ".", "", "a/b", ".quilt-trash"} {
		if resp, _ := alice.post("/op/mkdir", url.Values{"dir": {"/"}, "name": {n}}); resp.StatusCode != 400 {
			t.Fatalf("mkdir name %q: %d", n, resp.StatusCode)
		}
	}
	// Upload and trash IDs: not paths, and not another user's.
	for _, id := range []string{"../../etc/passwd", "..%2f..%2fx", "0123456789abcdef0123456789abcdef"} {
		if code, _ := alice.api("GET", "/api/uploads/"+id, nil); code != 404 {
			t.Fatalf("upload %q: %d", id, code)
		}
	}
	code, m := bob.api("POST", "/api/uploads", `{"path":"/x.bin","size":10}`)
	if code != 201 {
		t.Fatal(code, m)
	}
	bobUp := m["id"].(string)
	for _, method := range []string{"GET", "DELETE"} {
		if code, _ := alice.api(method, "/api/uploads/"+bobUp, nil); code != 404 {
			t.Fatalf("%s bob's upload as alice: %d", method, code)
		}
	}
	if code, _ := alice.api("PUT", "/api/uploads/"+bobUp+"?offset=0", []byte("0123456789")); code != 404 {
		t.Fatalf("PUT into bob's upload as alice: %d", code)
	}
	if code, _ := alice.api("POST", "/api/uploads/"+bobUp+"/finish", nil); code != 404 {
		t.Fatalf("finish bob's upload as alice: %d", code)
	}
	for _, id := range []string{"../secret.txt", "20300102T030405Z-000000000000/../../x"} {
		if resp, _ := alice.post("/trash/restore", url.Values{"id": {id}}); resp.StatusCode != 400 {
			t.Fatalf("restore %q: %d", id, resp.StatusCode)
		}
		if resp, _ := alice.post("/trash/purge", url.Values{"id": {id}}); resp.StatusCode != 400 {
			t.Fatalf("purge %q: %d", id, resp.StatusCode)
		}
	}
	// Bob's file is whole and only his.
	if out := bob.want(200, "GET", "/download/bob/secret.txt", nil); out != "bob's secret" {
		t.Fatalf("bob's file: %q", out)
	}
	if _, err := f.gw.Tree("alice-files").Stat(ctxT(t), "secret.txt"); err == nil {
		t.Fatal("bob's file in alice's drive")
	}
}

// TestWebappFiles: browse with breadcrumbs, previews (text escaped,
// images inline), download, zip of a folder, new folder, rename and
// move, search, and the storage page.
func TestWebappFiles(t *testing.T) {
	f := newFixture(t, nil)
	b := f.browser(t)
	b.login("alice")
	big := bytesOf(70<<10, 3)
	files := map[string][]byte{
		"/docs/notes.txt":        []byte("<script>alert(1)</script> & notes"),
		"/docs/deep/er/data.bin": bytesOf(2500, 1),
		"/docs/deep/pic.png":     {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0},
		"/docs/big.log":          append(bytes.Repeat([]byte("line of a log\n"), 5000), big...),
		"/top.md":                []byte("# top"),
		"/docs/empty.txt":        {},
	}
	for p, d := range files {
		b.upload(p, d)
	}
	out := b.want(200, "GET", "/files/alice/docs/", nil)
	for _, s := range []string{`href="/files/alice/docs/deep/"`, `href="/files/alice/docs/notes.txt"`, `href="/files/alice/"`, ">docs</a>", "33 B", `<meta name="viewport"`} {
		if !strings.Contains(out, s) {
			t.Fatalf("folder page lacks %q: %.2000s", s, out)
		}
	}
	b.want(303, "GET", "/files/alice/docs", nil)
	b.want(404, "GET", "/files/alice/nope/", nil)

	out = b.want(200, "GET", "/files/alice/docs/notes.txt", nil)
	if strings.Contains(out, "<script>alert") || !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; notes") {
		t.Fatalf("text preview not escaped: %.3000s", out)
	}
	out = b.want(200, "GET", "/files/alice/docs/big.log", nil)
	pre := regexp.MustCompile(`(?s)<pre id="text-preview">(.*?)</pre>`).FindStringSubmatch(out)
	if pre == nil || len(pre[1]) != 64<<10 || !strings.Contains(out, "The first") {
		t.Fatalf("text preview of a big file: %d bytes", len(pre))
	}
	out = b.want(200, "GET", "/files/alice/docs/deep/er/data.bin", nil)
	if !strings.Contains(out, "No preview") {
		t.Fatal("a binary file previewed as text")
	}
	out = b.want(200, "GET", "/files/alice/docs/deep/pic.png", nil)
	if !strings.Contains(out, `<img src="/preview/alice/docs/deep/pic.png"`) {
		t.Fatalf("no image preview: %.2000s", out)
	}
	resp, img := b.do("GET", "/preview/alice/docs/deep/pic.png", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") || img != string(files["/docs/deep/pic.png"]) {
		t.Fatalf("preview: %d %v", resp.StatusCode, resp.Header)
	}
	b.want(415, "GET", "/preview/alice/docs/notes.txt", nil)

	// Download: every byte, as an attachment.
	for p, d := range files {
		resp, got := b.do("GET", "/download/alice"+p, nil)
		if resp.StatusCode != 200 || got != string(d) || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
			t.Fatalf("download %s: %d, %d bytes of %d", p, resp.StatusCode, len(got), len(d))
		}
	}
	b.want(409, "GET", "/download/alice/docs/", nil)
	// Ranges: a part, an open end, a suffix; past the end 416.
	bin := files["/docs/deep/er/data.bin"]
	for _, c := range []struct {
		rng      string
		from, to int
	}{{"bytes=10-19", 10, 20}, {"bytes=2400-", 2400, 2500}, {"bytes=-7", 2493, 2500}, {"bytes=2490-9999", 2490, 2500}} {
		resp, got := b.do("GET", "/download/alice/docs/deep/er/data.bin", nil, "Range", c.rng)
		if resp.StatusCode != 206 || got != string(bin[c.from:c.to]) || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/2500", c.from, c.to-1) {
			t.Fatalf("range %s: %d %q, %d bytes", c.rng, resp.StatusCode, resp.Header.Get("Content-Range"), len(got))
		}
	}
	b.want(416, "GET", "/download/alice/docs/deep/er/data.bin", nil, "Range", "bytes=2500-")
	if got := b.want(200, "GET", "/download/alice/docs/deep/er/data.bin", nil, "Range", "bytes=0-1,5-6"); got != string(bin) {
		t.Fatal("several ranges: not the whole file")
	}

	// The zip of a folder holds its tree.
	resp, z := b.do("GET", "/zip/alice/docs/", nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("zip: %d", resp.StatusCode)
	}
	zr, err := zip.NewReader(strings.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := io.ReadAll(rc)
		rc.Close()
		got[zf.Name] = string(d)
	}
	for p, d := range files {
		if strings.HasPrefix(p, "/docs/") && got[strings.TrimPrefix(p, "/")] != string(d) {
			t.Fatalf("zip entry %s: %d bytes of %d (entries %d)", p, len(got[strings.TrimPrefix(p, "/")]), len(d), len(got))
		}
	}
	if _, ok := got["docs/deep/er/"]; !ok || len(got) != 8 {
		t.Fatalf("zip entries: %d", len(got))
	}
	b.want(400, "GET", "/zip/alice/top.md", nil)

	// New folder; rename; move; a taken name.
	if resp, out := b.post("/op/mkdir", url.Values{"dir": {"/docs"}, "name": {"new folder"}}); resp.StatusCode != 303 || resp.Header.Get("Location") != "/files/alice/docs/" {
		t.Fatalf("mkdir: %d %.300s", resp.StatusCode, out)
	}
	if resp, _ := b.post("/op/mkdir", url.Values{"dir": {"/docs"}, "name": {"new folder"}}); resp.StatusCode != 409 {
		t.Fatalf("mkdir again: %d", resp.StatusCode)
	}
	if out := b.want(200, "GET", "/rename?path=/docs/notes.txt", nil); !strings.Contains(out, `value="/docs/notes.txt"`) {
		t.Fatal("rename form")
	}
	if resp, out := b.post("/op/rename", url.Values{"path": {"/docs/notes.txt"}, "to": {"/docs/new folder/renamed.txt"}}); resp.StatusCode != 303 {
		t.Fatalf("rename: %d %.300s", resp.StatusCode, out)
	}
	if got := b.want(200, "GET", "/download/alice/docs/new%20folder/renamed.txt", nil); got != string(files["/docs/notes.txt"]) {
		t.Fatal("renamed file's bytes")
	}
	b.want(404, "GET", "/download/alice/docs/notes.txt", nil)
	if resp, _ := b.post("/op/rename", url.Values{"path": {"/top.md"}, "to": {"/docs/new folder/renamed.txt"}}); resp.StatusCode != 409 {
		t.Fatalf("rename onto a file: %d", resp.StatusCode)
	}
	if resp, _ := b.post("/op/rename", url.Values{"path": {"/docs"}, "to": {"/docs/deep/docs"}}); resp.StatusCode != 400 {
		t.Fatalf("a folder into itself: %d", resp.StatusCode)
	}
	if resp, _ := b.post("/op/rename", url.Values{"path": {"/docs/deep"}, "to": {"/deep2"}}); resp.StatusCode != 303 {
		t.Fatalf("move a folder: %d", resp.StatusCode)
	}
	if got := b.want(200, "GET", "/download/alice/deep2/er/data.bin", nil); got != string(files["/docs/deep/er/data.bin"]) {
		t.Fatal("moved folder's file")
	}

	// Search: names under a folder, case-insensitive, not the trash.
	b.upload("/docs/DATA-sheet.txt", []byte("x"))
	if resp, _ := b.post("/op/delete", url.Values{"path": {"/docs/DATA-sheet.txt"}}); resp.StatusCode != 303 {
		t.Fatal("delete")
	}
	out = b.want(200, "GET", "/search?q=data&in=/", nil)
	if !strings.Contains(out, "/deep2/er/data.bin") || strings.Contains(out, "DATA-sheet.txt</a>") || !strings.Contains(out, "1 found") {
		t.Fatalf("search: %.3000s", out)
	}
	out = b.want(200, "GET", "/search?q=REN&in=/docs", nil)
	if !strings.Contains(out, "/docs/new folder/renamed.txt") {
		t.Fatalf("search in a folder: %.3000s", out)
	}
	// The trash is in no listing, no zip.
	out = b.want(200, "GET", "/files/alice/", nil)
	if strings.Contains(out, "quilt-trash") {
		t.Fatal("the trash is listed")
	}
	_, z = b.do("GET", "/zip/alice/", nil)
	if strings.Contains(z, "quilt-trash") {
		t.Fatal("the trash is in the zip")
	}

	out = b.want(200, "GET", "/storage", nil)
	if !strings.Contains(out, "Used:") || !strings.Contains(out, "alice-files") {
		t.Fatalf("storage: %.2000s", out)
	}
}

// TestWebappTrash: a delete moves the item into the trash (no bytes
// copied), the trash page lists it with where it was, restore puts it
// back (its folders made again if gone), a taken path is a clear 409,
// purge and empty delete for ever.
func TestWebappTrash(t *testing.T) {
	f := newFixture(t, nil)
	b := f.browser(t)
	b.login("alice")
	b.upload("/photos/2029/a.jpg", bytesOf(3000, 9))
	b.upload("/photos/2029/b.jpg", bytesOf(10, 2))
	b.upload("/memo.txt", []byte("memo"))
	ctx := ctxT(t)
	tr, _ := f.trees(ctx, "alice-files")
	before, err := tr.Stat(ctx, "photos/2029/a.jpg")
	if err != nil {
		t.Fatal(err)
	}

	if resp, _ := b.post("/op/delete", url.Values{"path": {"/photos"}}); resp.StatusCode != 303 {
		t.Fatal("delete folder")
	}
	if resp, _ := b.post("/op/delete", url.Values{"path": {"/memo.txt"}}); resp.StatusCode != 303 {
		t.Fatal("delete file")
	}
	b.want(404, "GET", "/files/alice/photos/", nil)
	out := b.want(200, "GET", "/trash", nil)
	ids := regexp.MustCompile(`name="id" value="([^"]+)"`).FindAllStringSubmatch(out, -1)
	if len(ids) != 4 || !strings.Contains(out, "/photos") || !strings.Contains(out, "/memo.txt") {
		t.Fatalf("trash page: %d ids: %.3000s", len(ids), out)
	}
	// The item in the trash is the same object: moved by entries.
	is, err := tr.ReadDirAll(ctx, ".quilt-trash")
	if err != nil {
		t.Fatal(err)
	}
	var photosID, memoID string
	for _, i := range is {
		if strings.HasSuffix(i.Name(), ".json") {
			continue
		}
		if i.IsDir() {
			photosID = i.Name()
		} else {
			memoID = i.Name()
		}
	}
	moved, err := tr.Stat(ctx, ".quilt-trash/"+photosID+"/2029/a.jpg")
	if err != nil || moved.Size != before.Size || moved.Object.Meta["mtime"] != before.Object.Meta["mtime"] {
		t.Fatalf("in the trash: %+v %v", moved, err)
	}

	// Restore the folder: gone parents are made again; the bytes are there.
	if resp, out := b.post("/trash/restore", url.Values{"id": {photosID}}); resp.StatusCode != 303 || resp.Header.Get("Location") != "/files/alice/" {
		t.Fatalf("restore: %d %.300s", resp.StatusCode, out)
	}
	if got := b.want(200, "GET", "/download/alice/photos/2029/a.jpg", nil); got != string(bytesOf(3000, 9)) {
		t.Fatal("restored bytes")
	}
	// Restore onto a taken path.
	b.upload("/memo.txt", []byte("a new memo"))
	resp, out := b.post("/trash/restore", url.Values{"id": {memoID}})
	if resp.StatusCode != 409 || !strings.Contains(out, "/memo.txt is taken") {
		t.Fatalf("restore onto a taken path: %d %.1000s", resp.StatusCode, out)
	}
	if got := b.want(200, "GET", "/download/alice/memo.txt", nil); got != "a new memo" {
		t.Fatal("the taken path was overwritten")
	}
	b.post("/op/rename", url.Values{"path": {"/memo.txt"}, "to": {"/memo-2.txt"}})
	if resp, _ := b.post("/trash/restore", url.Values{"id": {memoID}}); resp.StatusCode != 303 {
		t.Fatal("restore after the path was freed")
	}
	if got := b.want(200, "GET", "/download/alice/memo.txt", nil); got != "memo" {
		t.Fatal("restored memo")
	}
	if resp, _ := b.post("/trash/restore", url.Values{"id": {memoID}}); resp.StatusCode != 404 {
		t.Fatalf("restore twice: %d", resp.StatusCode)
	}

	// Purge one, empty the rest.
	b.post("/op/delete", url.Values{"path": {"/memo.txt"}})
	b.post("/op/delete", url.Values{"path": {"/memo-2.txt"}})
	out = b.want(200, "GET", "/trash", nil)
	ids = regexp.MustCompile(`name="id" value="([^"]+)"`).FindAllStringSubmatch(out, -1)
	if len(ids) != 4 {
		t.Fatalf("trash: %d ids", len(ids))
	}
	if resp, _ := b.post("/trash/purge", url.Values{"id": {ids[0][1]}}); resp.StatusCode != 303 {
		t.Fatal("purge")
	}
	if _, err := tr.Stat(ctx, ".quilt-trash/"+ids[0][1]); err == nil {
		t.Fatal("purged item still there")
	}
	if out := b.want(200, "GET", "/trash", nil); strings.Count(out, `name="id"`) != 2 {
		t.Fatal("trash after purge")
	}
	if resp, _ := b.post("/trash/empty", url.Values{}); resp.StatusCode != 303 {
		t.Fatal("empty")
	}
	if out := b.want(200, "GET", "/trash", nil); !strings.Contains(out, "The trash is empty.") {
		t.Fatal("trash after empty")
	}
	if _, err := tr.Stat(ctx, ".quilt-trash"); err == nil {
		t.Fatal("trash folder after empty")
	}
}

// TestWebappUpload: the chunked API takes chunks only at the offset it
// has, refuses a finish before the last byte, keeps what arrived across
// a restart of the handler, commits one version that readers never see
// in part, and removes an abandoned upload after its TTL.
func TestWebappUpload(t *testing.T) {
	f := newFixture(t, func(c *webapp.Config) { c.UploadTTL = time.Hour })
	b := f.browser(t)
	b.login("alice")
	ctx := ctxT(t)
	tr, _ := f.trees(ctx, "alice-files")
	data := bytesOf(3500, 5)
	b.upload("/up/file.bin", []byte("old version"))

	code, m := b.api("POST", "/api/uploads", `{"path":"/up/file.bin","size":3500,"mtime":1700000000000}`)
	if code != 201 || m["chunk"].(float64) != 1000 {
		t.Fatal(code, m)
	}
	id := m["id"].(string)
	put := func(off int, d []byte) (int, map[string]any) {
		return b.api("PUT", fmt.Sprintf("/api/uploads/%s?offset=%d", id, off), d)
	}
	if code, m := put(0, data[:1000]); code != 200 || m["offset"].(float64) != 1000 {
		t.Fatal(code, m)
	}
	// A missing chunk (2000 before 1000) and a chunk sent twice.
	if code, m := put(2000, data[2000:3000]); code != 409 || m["offset"].(float64) != 1000 {
		t.Fatal("missing chunk:", code, m)
	}
	if code, m := put(0, data[:1000]); code != 409 || m["offset"].(float64) != 1000 {
		t.Fatal("chunk twice:", code, m)
	}
	if code, _ := put(1000, data[1000:2001]); code != 413 {
		t.Fatal("chunk over the chunk size:", code)
	}
	if code, _ := b.api("PUT", "/api/uploads/"+id, data[1000:2000]); code != 400 {
		t.Fatal("chunk without an offset:", code)
	}
	if code, m := b.api("POST", "/api/uploads/"+id+"/finish", nil); code != 409 || m["offset"].(float64) != 1000 {
		t.Fatal("finish before complete:", code, m)
	}
	// A chunk cut short keeps what arrived: the client asks and goes on.
	req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/api/uploads/%s?offset=1000", f.srv.URL, id), io.MultiReader(bytes.NewReader(data[1000:1500]), errReader{}))
	req.Header.Set("X-CSRF-Token", b.csrf)
	req.ContentLength = 1000
	if resp, err := b.hc.Do(req); err == nil {
		resp.Body.Close()
	}
	var off float64
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, m := b.api("GET", "/api/uploads/"+id, nil)
		if code != 200 {
			t.Fatal(code, m)
		}
		if off = m["offset"].(float64); off == 1500 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the server sees the cut after the client
	}
	if off != 1500 {
		t.Fatalf("offset after a cut chunk: %v", off)
	}
	// Readers still see the old version.
	if rc, _, err := tr.Open(ctx, "up/file.bin", 0, -1); err != nil {
		t.Fatal(err)
	} else if d, _ := io.ReadAll(rc); string(d) != "old version" {
		t.Fatalf("a reader sees %d bytes of a part", len(d))
	} else {
		rc.Close()
	}

	// A new handler of the same spool picks the upload up.
	f.srv.Close()
	f.h.Close()
	f.start(t)
	b.login("alice")
	code, m = b.api("GET", "/api/uploads/"+id, nil)
	if code != 200 || m["offset"].(float64) != 1500 || m["path"] != "/up/file.bin" || m["size"].(float64) != 3500 {
		t.Fatal("after a restart:", code, m)
	}
	for o := 1500; o < 3500; o += 1000 {
		if code, m := put(o, data[o:min(o+1000, 3500)]); code != 200 {
			t.Fatal(code, m)
		}
	}
	if code, m := put(3500, []byte("x")); code != 413 {
		t.Fatal("a byte past the size:", code, m)
	}
	if code, m := b.api("POST", "/api/uploads/"+id+"/finish", nil); code != 200 || m["size"].(float64) != 3500 {
		t.Fatal("finish:", code, m)
	}
	if got := b.want(200, "GET", "/download/alice/up/file.bin", nil); got != string(data) {
		t.Fatal("uploaded bytes differ")
	}
	if i, _ := tr.Stat(ctx, "up/file.bin"); i.ModTime.Unix() != 1700000000 {
		t.Fatalf("mtime %v", i.ModTime)
	}
	if code, _ := b.api("GET", "/api/uploads/"+id, nil); code != 404 {
		t.Fatal("a finished upload is still there")
	}

	// A file where a folder is needed, and an empty file.
	code, m = b.api("POST", "/api/uploads", `{"path":"/up/file.bin/x","size":1}`)
	if code != 201 {
		t.Fatal(code, m)
	}
	put2 := m["id"].(string)
	b.api("PUT", "/api/uploads/"+put2+"?offset=0", []byte("x"))
	if code, m := b.api("POST", "/api/uploads/"+put2+"/finish", nil); code != 409 {
		t.Fatal("upload under a file:", code, m)
	}
	code, m = b.api("POST", "/api/uploads", `{"path":"/up/empty","size":0}`)
	if code, m := b.api("POST", "/api/uploads/"+m["id"].(string)+"/finish", nil); code != 200 {
		t.Fatal("empty file:", code, m)
	}
	// An empty folder of a drop, and the folders above it.
	if code, m := b.api("POST", "/api/folders", `{"path":"/drop/empty/inner"}`); code != 201 {
		t.Fatal("folder:", code, m)
	}
	if i, err := tr.Stat(ctx, "drop/empty/inner"); err != nil || !i.IsDir() {
		t.Fatalf("folder: %v %v", i, err)
	}
	for _, bad := range []string{`{"path":"/../x"}`, `{"path":"/.quilt-trash/x"}`, `{"path":"/"}`, `{"path":"/up/file.bin/x"}`} {
		if code, _ := b.api("POST", "/api/folders", bad); code != 400 && code != 409 {
			t.Fatalf("folder %s: %d", bad, code)
		}
	}
	if code, _ := b.api("POST", "/api/uploads", `{"path":"/x","size":-1}`); code != 400 {
		t.Fatal("negative size:", code)
	}
	if code, _ := b.api("POST", "/api/uploads", `not json`); code != 400 {
		t.Fatal("not JSON:", code)
	}

	// Abandoned: removed after the TTL, its spool too; one in use stays.
	code, m = b.api("POST", "/api/uploads", `{"path":"/abandoned","size":5000}`)
	old := m["id"].(string)
	b.api("PUT", "/api/uploads/"+old+"?offset=0", data[:1000])
	f.clock.Add(50 * time.Minute)
	code, m = b.api("POST", "/api/uploads", `{"path":"/fresh","size":5000}`)
	fresh := m["id"].(string)
	f.clock.Add(20 * time.Minute)
	f.h.Sweep()
	if code, _ := b.api("GET", "/api/uploads/"+old, nil); code != 404 {
		t.Fatal("abandoned upload still there:", code)
	}
	if code, _ := b.api("GET", "/api/uploads/"+fresh, nil); code != 200 {
		t.Fatal("an upload in use was removed:", code)
	}
	left, _ := filepath.Glob(filepath.Join(f.cfg.SpoolDir, "uploads", old+"*"))
	if len(left) != 0 {
		t.Fatalf("spool of an abandoned upload: %v", left)
	}
	if _, err := os.Stat(filepath.Join(f.cfg.SpoolDir, "uploads", fresh+".part")); err != nil {
		t.Fatal(err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("cut") }

// TestWebappPages: the quota, the admins' grid page, and the share UI
// only when share links are on.
func TestWebappPages(t *testing.T) {
	shares := http.NotFoundHandler()
	f := newFixture(t, func(c *webapp.Config) {
		c.Usage = func(ctx context.Context, a webapp.Account) (int64, int64, error) { return 2500, 10000, nil }
		c.Grid = func(ctx context.Context) (webapp.GridStatus, error) {
			return webapp.GridStatus{Verdict: "degraded", Reason: "1 of 5 nodes dead", Nodes: []webapp.GridNode{
				{ID: "node-a", Addr: "127.0.0.1:1", State: "alive", Used: 1000, Free: 5000},
				{ID: "node-b", Addr: "127.0.0.1:2", State: "dead"}}, Missing: "objects at risk"}, nil
		}
		c.Shares = shares
	})
	alice, bob := f.browser(t), f.browser(t)
	alice.login("alice")
	bob.login("bob")
	out := alice.want(200, "GET", "/storage", nil)
	if !strings.Contains(out, "Used 2.5 kB of 10 kB") {
		t.Fatalf("storage: %.2000s", out)
	}
	if code, m := alice.api("POST", "/api/uploads", `{"path":"/big","size":8000}`); code != 507 {
		t.Fatal("over quota:", code, m)
	}
	out = alice.want(200, "GET", "/grid", nil)
	for _, s := range []string{"degraded", "node-a", "node-b", `class="state dead"`, "objects at risk", `href="/grid"`} {
		if !strings.Contains(out, s) {
			t.Fatalf("grid page lacks %q", s)
		}
	}
	bob.want(403, "GET", "/grid", nil)
	if strings.Contains(bob.want(200, "GET", "/files/bob/", nil), `href="/grid"`) {
		t.Fatal("grid link for a non-admin")
	}
	alice.upload("/f.txt", []byte("f"))
	for _, p := range []string{"/files/alice/", "/files/alice/f.txt"} {
		if out := alice.want(200, "GET", p, nil); !strings.Contains(out, `class="share-open"`) && !strings.Contains(out, `class="act share-open"`) || !strings.Contains(out, `id="share-dialog"`) {
			t.Fatalf("%s: no share UI", p)
		}
	}
	alice.want(200, "GET", "/shares", nil)

	// Without share links: no buttons, no page.
	f.cfg.Shares = nil
	f.start(t)
	alice = f.browser(t)
	alice.login("alice")
	if out := alice.want(200, "GET", "/files/alice/", nil); strings.Contains(out, "share-open") || strings.Contains(out, `href="/shares"`) {
		t.Fatal("share UI without share links")
	}
	alice.want(404, "GET", "/shares", nil)
	// The static files are served, and every page says what it may load.
	resp, js := alice.do("GET", "/static/app.js", nil)
	if resp.StatusCode != 200 || !strings.Contains(js, "webkitGetAsEntry") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("app.js: %d", resp.StatusCode)
	}
}

// TestWebappSharedPages: the share dialog's form for users and groups,
// the Shares page's table of them, and the Shared with me page (its list,
// and a share's folder by ?id=&path=, bad ones refused), only when
// sharing is on.
func TestWebappSharedPages(t *testing.T) {
	f := newFixture(t, func(c *webapp.Config) { c.Shares = http.NotFoundHandler() })
	alice := f.browser(t)
	alice.login("alice")
	out := alice.want(200, "GET", "/files/alice/", nil)
	for _, s := range []string{`href="/shared"`, `id="grant-form"`, `id="grant-kind"`, `id="grant-name"`, `name="perm" value="write"`, `id="grant-create"`} {
		if !strings.Contains(out, s) {
			t.Fatalf("folder page lacks %q", s)
		}
	}
	if out := alice.want(200, "GET", "/shares", nil); !strings.Contains(out, `id="grants"`) || !strings.Contains(out, `id="shares"`) {
		t.Fatal("the Shares page lacks the table of shares with users and groups")
	}
	out = alice.want(200, "GET", "/shared", nil)
	if !strings.Contains(out, `id="with-me"`) || strings.Contains(out, `id="shared-listing"`) || !strings.Contains(out, `data-id=""`) {
		t.Fatalf("Shared with me: %.3000s", out)
	}
	out = alice.want(200, "GET", "/shared?id=Ab-_9&path=/a/b%20c/", nil)
	for _, s := range []string{`data-id="Ab-_9"`, `data-path="a/b c"`, `id="shared-listing"`, `id="shared-upload" class="upload" aria-labelledby="shared-upload-h" hidden`} {
		if !strings.Contains(out, s) {
			t.Fatalf("a share's folder page lacks %q: %.3000s", s, out)
		}
	}
	// An element that is markup is escaped, not markup.
	if out := alice.want(200, "GET", "/shared?id=x&path=%3Cb%3E%22", nil); strings.Contains(out, "<b>") || !strings.Contains(out, `data-path="&lt;b&gt;&#34;"`) {
		t.Fatalf("path not escaped: %.3000s", out)
	}
	// The path is ignored without an ID.
	if out := alice.want(200, "GET", "/shared?path=a", nil); !strings.Contains(out, `data-path=""`) {
		t.Fatal("a path without an ID")
	}
	alice.want(404, "GET", "/shared?id=a/b", nil)
	alice.want(404, "GET", "/shared?id=%3Cscript%3E", nil)
	for _, p := range []string{"a/../b", "..", "a//b", "a/./b", "a%00b"} {
		alice.want(400, "GET", "/shared?id=x&path="+p, nil)
	}
	// Logged out: to the login form.
	anon := f.browser(t)
	if resp, _ := anon.do("GET", "/shared", nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Fatalf("logged out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Without sharing: no page and no link to it.
	f.cfg.Shares = nil
	f.start(t)
	alice = f.browser(t)
	alice.login("alice")
	if out := alice.want(200, "GET", "/files/alice/", nil); strings.Contains(out, `href="/shared"`) || strings.Contains(out, "grant-form") {
		t.Fatal("sharing UI without sharing")
	}
	alice.want(404, "GET", "/shared", nil)
}

// TestHidden: the trash, and only it, is kept from other front ends.
func TestHidden(t *testing.T) {
	for p, want := range map[string]bool{".quilt-trash": true, ".quilt-trash/20300102T030405Z-0123456789ab": true,
		".quilt-trashy": false, "a/.quilt-trash": false, "": false, "docs": false} {
		if webapp.Hidden(p) != want {
			t.Errorf("Hidden(%q) = %v", p, !want)
		}
	}
}
