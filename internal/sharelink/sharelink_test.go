package sharelink_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	gzqr "github.com/makiuchi-d/gozxing/qrcode"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharelink"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
)

// clock is a time a test moves by hand.
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

// fixture is a share-link handler over a gateway on a three-node test
// grid, served on 127.0.0.1. Users alice and bob own buckets
// alice-files and bob-files; a request names its user in the X-Test-User
// header (the web app's session in production).
type fixture struct {
	t     *testing.T
	gw    *gateway.Gateway
	srv   *httptest.Server
	clock *clock
	trees map[string]*tree.Tree
	gone  sync.Map // users whose links are dead (OwnerActive)
}

const maxUpload = 64 << 10

func newFixture(t *testing.T) *fixture {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	f := &fixture{t: t, gw: gw, clock: &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}, trees: map[string]*tree.Tree{}}
	users := map[string]string{"alice": "alice-files", "bob": "bob-files", "carol": "carol-files"}
	groups := map[string][]string{"bob": {"staff"}, "carol": {"staff", "band"}}
	for _, b := range users {
		if err := gw.CreateBucket(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
		f.trees[b] = gw.Tree(b)
	}
	h, err := sharelink.New(sharelink.Config{
		Links: gw,
		User: func(r *http.Request) (string, string, bool) {
			u := r.Header.Get("X-Test-User")
			b, ok := users[u]
			return u, b, ok
		},
		Tree: func(ctx context.Context, bucket string) (*tree.Tree, error) {
			if t := f.trees[bucket]; t != nil {
				return t, nil
			}
			return nil, gateway.ErrNoBucket
		},
		Grants: gw,
		Groups: func(ctx context.Context, user string) []string { return groups[user] },
		Principal: func(ctx context.Context, with string) bool {
			kind, name, _ := strings.Cut(with, ":")
			if kind == "user" {
				return users[name] != ""
			}
			return name == "staff" || name == "band"
		},
		OwnerActive: func(ctx context.Context, owner string) bool { _, gone := f.gone.Load(owner); return !gone },
		Hidden:      func(p string) bool { return p == ".trash" || strings.HasPrefix(p, ".trash/") },
		MaxUpload:   maxUpload,
		Now:         f.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// put writes a file into a user's bucket.
func (f *fixture) put(bucket, p, body string) {
	f.t.Helper()
	ctx := context.Background()
	t := f.trees[bucket]
	if dir := p[:max(strings.LastIndex(p, "/"), 0)]; dir != "" {
		if err := t.MkdirAll(ctx, dir, 0); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := t.Create(ctx, p, strings.NewReader(body), tree.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// response is what a request got.
type response struct {
	code int
	hdr  http.Header
	body string
}

// do sends a request as user ("" for nobody); hdr are extra headers.
func (f *fixture) do(method, path, user string, body io.Reader, hdr map[string]string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-Test-User", user)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

var csrf = map[string]string{"X-Requested-With": "quilt", "Content-Type": "application/json"}

// create makes a link as user and returns it.
func (f *fixture) create(user string, req map[string]string) sharelink.Link {
	f.t.Helper()
	b, _ := json.Marshal(req)
	r := f.do("POST", "/api/shares", user, bytes.NewReader(b), csrf)
	if r.code != http.StatusCreated {
		f.t.Fatalf("create %v: %d %s", req, r.code, r.body)
	}
	var l sharelink.Link
	if err := json.Unmarshal([]byte(r.body), &l); err != nil {
		f.t.Fatal(err)
	}
	return l
}

func (f *fixture) list(user string) []sharelink.Link {
	f.t.Helper()
	r := f.do("GET", "/api/shares", user, nil, nil)
	if r.code != http.StatusOK {
		f.t.Fatalf("list: %d %s", r.code, r.body)
	}
	var ls []sharelink.Link
	if err := json.Unmarshal([]byte(r.body), &ls); err != nil {
		f.t.Fatal(err)
	}
	return ls
}

func want(t *testing.T, what string, r response, code int, contains ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: status %d, want %d: %s", what, r.code, code, r.body)
	}
	for _, c := range contains {
		if !strings.Contains(r.body, c) {
			t.Fatalf("%s: body lacks %q:\n%s", what, c, r.body)
		}
	}
}

const notFoundText = "This link does not work"

func TestShareLinks(t *testing.T) {
	f := newFixture(t)
	f.put("alice-files", "docs/report.txt", "the quarterly report\n")
	f.put("alice-files", "docs/page.html", "<script>alert(1)</script>")
	f.put("alice-files", "photos/a.jpg", strings.Repeat("jpeg", 300))
	f.put("alice-files", "photos/trip/b.txt", "bee")
	f.put("alice-files", "photos/trip/deep/c.txt", "sea")
	f.put("alice-files", "secret/keys.txt", "do not share")
	f.put("alice-files", "inbox/existing.txt", "first")
	f.put("bob-files", "mine.txt", "bob's")
	if err := f.trees["alice-files"].Symlink(context.Background(), "../secret/keys.txt", "photos/escape"); err != nil {
		t.Fatal(err)
	}
	unknown := f.do("GET", "/s/AAAAAAAAAAAAAAAAAAAAAAAA", "", nil, nil)
	want(t, "unknown token", unknown, http.StatusNotFound, notFoundText)

	t.Run("CreateListRevoke", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/docs/report.txt"})
		if len(l.Token) < 22 || l.Mode != "read" || l.Path != "/docs/report.txt" || l.HasPassword || l.Expires != "" ||
			l.URL != f.srv.URL+"/s/"+l.Token {
			t.Fatalf("created %+v", l)
		}
		found := false
		for _, x := range f.list("alice") {
			found = found || x.Token == l.Token
		}
		if !found {
			t.Fatalf("alice's list lacks %s", l.Token)
		}
		want(t, "page", f.do("GET", "/s/"+l.Token, "", nil, nil), http.StatusOK, "report.txt")
		want(t, "revoke without header", f.do("DELETE", "/api/shares/"+l.Token, "alice", nil, nil), http.StatusForbidden)
		want(t, "revoke", f.do("DELETE", "/api/shares/"+l.Token, "alice", nil, csrf), http.StatusNoContent)
		for _, x := range f.list("alice") {
			if x.Token == l.Token {
				t.Fatalf("revoked link still listed")
			}
		}
		r := f.do("GET", "/s/"+l.Token, "", nil, nil)
		want(t, "revoked page", r, http.StatusNotFound)
		if r.body != unknown.body {
			t.Fatalf("a revoked link answers otherwise than an unknown one:\n%s\n%s", r.body, unknown.body)
		}
		want(t, "revoked download", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusNotFound, notFoundText)
		want(t, "revoke again", f.do("DELETE", "/api/shares/"+l.Token, "alice", nil, csrf), http.StatusNotFound)
	})

	t.Run("DownloadFile", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "docs/report.txt"})
		want(t, "page", f.do("GET", "/s/"+l.Token, "", nil, nil), http.StatusOK, "report.txt", "21 bytes", "/s/"+l.Token+"/download")
		r := f.do("GET", "/s/"+l.Token+"/download", "", nil, nil)
		want(t, "download", r, http.StatusOK)
		if r.body != "the quarterly report\n" || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") ||
			r.hdr.Get("Content-Disposition") != "attachment; filename=report.txt" {
			t.Fatalf("download: %q %v", r.body, r.hdr)
		}
		r = f.do("GET", "/s/"+l.Token+"/download", "", nil, map[string]string{"Range": "bytes=4-12"})
		if r.code != http.StatusPartialContent || r.body != "quarterly" || r.hdr.Get("Content-Range") != "bytes 4-12/21" {
			t.Fatalf("range: %d %q %v", r.code, r.body, r.hdr)
		}
		// A file of several segments of the grid: a range across them,
		// two ranges at once, a conditional GET.
		big := make([]byte, 3<<20+11)
		rand.Read(big)
		f.put("alice-files", "docs/big.bin", string(big))
		bl := f.create("alice", map[string]string{"path": "/docs/big.bin"})
		r = f.do("GET", "/s/"+bl.Token+"/download", "", nil, nil)
		if r.code != 200 || r.body != string(big) || r.hdr.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("big file: %d, %d bytes, %v", r.code, len(r.body), r.hdr)
		}
		lo, hi := 1<<20-5, 2<<20+5
		r = f.do("GET", "/s/"+bl.Token+"/download", "", nil, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", lo, hi)})
		if r.code != http.StatusPartialContent || r.body != string(big[lo:hi+1]) {
			t.Fatalf("range across segments: %d, %d bytes", r.code, len(r.body))
		}
		r = f.do("GET", "/s/"+bl.Token+"/download", "", nil, map[string]string{"Range": "bytes=0-3,-4"})
		mt, params, _ := mime.ParseMediaType(r.hdr.Get("Content-Type"))
		if r.code != http.StatusPartialContent || mt != "multipart/byteranges" {
			t.Fatalf("two ranges: %d %v", r.code, r.hdr)
		}
		mr := multipart.NewReader(strings.NewReader(r.body), params["boundary"])
		for _, w := range [][]byte{big[:4], big[len(big)-4:]} {
			part, err := mr.NextPart()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(part); !bytes.Equal(b, w) {
				t.Fatalf("a part of two ranges: %x, want %x", b, w)
			}
		}
		lm := f.do("HEAD", "/s/"+bl.Token+"/download", "", nil, nil).hdr.Get("Last-Modified")
		if lm == "" {
			t.Fatal("no Last-Modified")
		}
		want(t, "conditional GET", f.do("GET", "/s/"+bl.Token+"/download", "", nil, map[string]string{"If-Modified-Since": lm}), http.StatusNotModified)

		f.put("alice-files", "docs/résumé 1.txt", "cv")
		u := f.create("alice", map[string]string{"path": "/docs/résumé 1.txt"})
		r = f.do("GET", "/s/"+u.Token+"/download", "", nil, nil)
		if r.body != "cv" || r.hdr.Get("Content-Disposition") != "attachment; filename*=utf-8''r%C3%A9sum%C3%A9%201.txt" {
			t.Fatalf("a name beyond ASCII: %q %v", r.body, r.hdr)
		}
		h := f.create("alice", map[string]string{"path": "docs/page.html"})
		r = f.do("GET", "/s/"+h.Token+"/download", "", nil, nil)
		if !strings.HasPrefix(r.hdr.Get("Content-Disposition"), "attachment") || !strings.Contains(r.hdr.Get("Content-Security-Policy"), "sandbox") ||
			r.hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("an HTML file is not sent as a sandboxed attachment: %v", r.hdr)
		}
		want(t, "sub-path of a file link", f.do("GET", "/s/"+l.Token+"/download/x", "", nil, nil), http.StatusNotFound)
		want(t, "upload to a read link", f.do("POST", "/s/"+l.Token+"/upload", "", strings.NewReader(""), nil), http.StatusForbidden)
	})

	t.Run("FolderListingAndZip", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/photos/"})
		base := "/s/" + l.Token
		r := f.do("GET", base, "", nil, nil)
		want(t, "folder page", r, http.StatusOK, "a.jpg", "trip/", base+"/download/a.jpg", base+"/view/trip", base+"/download\"")
		if strings.Contains(r.body, "escape") || strings.Contains(r.body, "secret") || strings.Contains(r.body, "docs") {
			t.Fatalf("the listing shows a link or the parent:\n%s", r.body)
		}
		want(t, "subfolder", f.do("GET", base+"/view/trip", "", nil, nil), http.StatusOK, "b.txt", "deep/", base+"/download/trip/b.txt")
		r = f.do("GET", base+"/download/trip/deep/c.txt", "", nil, nil)
		if r.code != 200 || r.body != "sea" {
			t.Fatalf("file in a subfolder: %d %q", r.code, r.body)
		}
		r = f.do("GET", base+"/download", "", nil, nil)
		want(t, "zip", r, http.StatusOK)
		if r.hdr.Get("Content-Type") != "application/zip" || r.hdr.Get("Content-Disposition") != "attachment; filename=photos.zip" {
			t.Fatalf("zip headers %v", r.hdr)
		}
		zr, err := zip.NewReader(strings.NewReader(r.body), int64(len(r.body)))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, zf := range zr.File {
			rc, err := zf.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			got[zf.Name] = string(b)
		}
		wantZip := map[string]string{"a.jpg": strings.Repeat("jpeg", 300), "trip/": "", "trip/b.txt": "bee", "trip/deep/": "", "trip/deep/c.txt": "sea"}
		if len(got) != len(wantZip) {
			t.Fatalf("zip holds %v, want %v", keys(got), keys(wantZip))
		}
		for k, v := range wantZip {
			if got[k] != v {
				t.Fatalf("zip %s: %q, want %q", k, got[k], v)
			}
		}
		r = f.do("GET", base+"/download/trip", "", nil, nil)
		if zr, err := zip.NewReader(strings.NewReader(r.body), int64(len(r.body))); err != nil || len(zr.File) != 3 {
			t.Fatalf("zip of a subfolder: %d %v", r.code, err)
		}
		// Nothing outside the folder, however spelled; no link followed.
		for _, p := range []string{"/download/..%2Fsecret%2Fkeys.txt", "/download/%2e%2e/secret/keys.txt", "/view/..",
			"/download/trip/%2E%2E/%2E%2E/secret/keys.txt", "/download//secret/keys.txt", "/download/escape", "/view/escape",
			"/download/trip%2F..%2F..%2Fsecret%2Fkeys.txt", "/download/%00", "/download/.", "/download/secret/keys.txt"} {
			r := f.do("GET", base+p, "", nil, nil)
			if r.code != http.StatusNotFound || strings.Contains(r.body, "do not share") {
				t.Errorf("%s: %d %q", p, r.code, r.body)
			}
		}
		want(t, "listing the parent", f.do("GET", "/s/"+l.Token+"/..", "", nil, nil), http.StatusNotFound)
		want(t, "sharing with ..", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/photos/../secret"}`), csrf), http.StatusBadRequest)
		want(t, "sharing a link", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/photos/escape"}`), csrf), http.StatusBadRequest)
	})

	t.Run("UploadOnly", func(t *testing.T) {
		want(t, "upload link to a file", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/docs/report.txt","mode":"upload"}`), csrf), http.StatusBadRequest)
		l := f.create("alice", map[string]string{"path": "/inbox", "mode": "upload"})
		base := "/s/" + l.Token
		r := f.do("GET", base, "", nil, nil)
		want(t, "upload page", r, http.StatusOK, `action="`+base+`/upload"`, `type="file"`, "multiple", "/s/_/share.js")
		if strings.Contains(r.body, "existing.txt") {
			t.Fatalf("the upload page shows the folder:\n%s", r.body)
		}
		body, ctype := form(t, map[string]string{"existing.txt": "second", "new.txt": "hello"}, []string{"existing.txt", "new.txt", "existing.txt"})
		r = f.do("POST", base+"/upload", "", body, map[string]string{"Content-Type": ctype, "Accept": "application/json"})
		want(t, "upload", r, http.StatusCreated)
		var res struct {
			Files []struct {
				Name string
				Size int64
			}
		}
		json.Unmarshal([]byte(r.body), &res)
		names := []string{}
		for _, x := range res.Files {
			names = append(names, x.Name)
		}
		if strings.Join(names, ",") != "existing (1).txt,new.txt,existing (2).txt" {
			t.Fatalf("uploaded as %v", names)
		}
		ctx := context.Background()
		for p, w := range map[string]string{"inbox/existing.txt": "first", "inbox/existing (1).txt": "second", "inbox/new.txt": "hello", "inbox/existing (2).txt": "second"} {
			rc, _, err := f.trees["alice-files"].Open(ctx, p, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != w {
				t.Fatalf("%s holds %q, want %q", p, b, w)
			}
		}
		// The uploader sees nothing.
		for _, p := range []string{"/download", "/download/existing.txt", "/view", "/view/x"} {
			want(t, "upload link "+p, f.do("GET", base+p, "", nil, nil), http.StatusForbidden, "upload files, not see")
		}
		// A file over the limit is refused and not stored.
		body, ctype = form(t, map[string]string{"big.bin": strings.Repeat("x", maxUpload+1)}, []string{"big.bin"})
		want(t, "too large", f.do("POST", base+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusRequestEntityTooLarge, "larger than")
		if _, err := f.trees["alice-files"].Stat(ctx, "inbox/big.bin"); err == nil {
			t.Fatal("a file over the limit was stored")
		}
		// Names that would leave the folder.
		for _, n := range []string{"..", "."} {
			body, ctype = form(t, map[string]string{n: "x"}, []string{n})
			want(t, "upload "+n, f.do("POST", base+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusBadRequest)
		}
		body, ctype = form(t, map[string]string{"../../secret/keys.txt": "overwritten"}, []string{"../../secret/keys.txt"})
		want(t, "upload with a path", f.do("POST", base+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusCreated, "keys.txt")
		rc, _, err := f.trees["alice-files"].Open(ctx, "secret/keys.txt", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "do not share" {
			t.Fatalf("an upload reached outside its folder: %q", b)
		}
		if _, err := f.trees["alice-files"].Stat(ctx, "inbox/keys.txt"); err != nil {
			t.Fatalf("the upload named with a path did not land in the folder: %v", err)
		}
		want(t, "not multipart", f.do("POST", base+"/upload", "", strings.NewReader("x"), map[string]string{"Content-Type": "text/plain"}), http.StatusBadRequest)
		body, ctype = form(t, nil, nil)
		want(t, "no file", f.do("POST", base+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusBadRequest)
	})

	t.Run("Password", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/docs/report.txt", "password": "correct horse"})
		other := f.create("alice", map[string]string{"path": "/secret/keys.txt", "password": "another"})
		if !l.HasPassword {
			t.Fatal("has_password false")
		}
		base := "/s/" + l.Token
		want(t, "page", f.do("GET", base, "", nil, nil), http.StatusForbidden, "needs a password", `type="password"`)
		r := f.do("GET", base+"/download", "", nil, nil)
		want(t, "download without the password", r, http.StatusForbidden)
		if strings.Contains(r.body, "quarterly") {
			t.Fatal("served without the password")
		}
		formHdr := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		r = f.do("POST", base+"/unlock", "", strings.NewReader("password=wrong"), formHdr)
		want(t, "wrong password", r, http.StatusForbidden, "Wrong password")
		if r.hdr.Get("Set-Cookie") != "" {
			t.Fatal("a wrong password earned a cookie")
		}
		r = f.do("POST", base+"/unlock", "", strings.NewReader("password=correct+horse"), formHdr)
		if r.code != http.StatusSeeOther || r.hdr.Get("Location") != base {
			t.Fatalf("right password: %d %v", r.code, r.hdr)
		}
		ck := cookie(t, r, base)
		r = f.do("GET", base+"/download", "", nil, map[string]string{"Cookie": ck})
		if r.code != 200 || r.body != "the quarterly report\n" {
			t.Fatalf("with the cookie: %d %q", r.code, r.body)
		}
		// The cookie opens its own link only.
		r = f.do("GET", "/s/"+other.Token+"/download", "", nil, map[string]string{"Cookie": ck})
		if r.code != http.StatusForbidden || strings.Contains(r.body, "do not share") {
			t.Fatalf("a cookie of another link: %d %q", r.code, r.body)
		}
		// A forged or stale cookie does not.
		exp, mac, _ := strings.Cut(strings.TrimPrefix(ck, "quilt_share="), ".")
		n, _ := strconv.ParseInt(exp, 10, 64)
		forged := "quilt_share=" + strconv.FormatInt(n+86400, 10) + "." + mac
		want(t, "forged cookie", f.do("GET", base+"/download", "", nil, map[string]string{"Cookie": forged}), http.StatusForbidden)
		f.clock.Add(13 * time.Hour)
		want(t, "stale cookie", f.do("GET", base+"/download", "", nil, map[string]string{"Cookie": ck}), http.StatusForbidden)
		// Wrong passwords are limited per address and link.
		for i := 0; i < 5; i++ {
			want(t, "wrong", f.do("POST", base+"/unlock", "", strings.NewReader("password=guess"+strconv.Itoa(i)), formHdr), http.StatusForbidden)
		}
		r = f.do("POST", base+"/unlock", "", strings.NewReader("password=correct+horse"), formHdr)
		want(t, "limited", r, http.StatusTooManyRequests, "Too many wrong passwords")
		if r.hdr.Get("Retry-After") == "" || r.hdr.Get("Set-Cookie") != "" {
			t.Fatalf("limited: %v", r.hdr)
		}
		f.clock.Add(61 * time.Second)
		r = f.do("POST", base+"/unlock", "", strings.NewReader("password=correct+horse"), formHdr)
		if r.code != http.StatusSeeOther {
			t.Fatalf("after the window: %d %s", r.code, r.body)
		}
		// Revoking voids the cookie.
		ck = cookie(t, r, base)
		want(t, "revoke", f.do("DELETE", "/api/shares/"+l.Token, "alice", nil, csrf), http.StatusNoContent)
		want(t, "cookie of a revoked link", f.do("GET", base+"/download", "", nil, map[string]string{"Cookie": ck}), http.StatusNotFound, notFoundText)
	})

	t.Run("Expiry", func(t *testing.T) {
		exp := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
		l := f.create("alice", map[string]string{"path": "/docs/report.txt", "expires": exp})
		if l.Expires != exp || l.Expired {
			t.Fatalf("created %+v", l)
		}
		want(t, "before expiry", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusOK, "quarterly")
		f.clock.Add(time.Hour)
		r := f.do("GET", "/s/"+l.Token, "", nil, nil)
		if r.code != http.StatusNotFound || r.body != unknown.body {
			t.Fatalf("expired: %d %s", r.code, r.body)
		}
		want(t, "expired download", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusNotFound)
		for _, x := range f.list("alice") {
			if x.Token == l.Token && !x.Expired {
				t.Fatalf("listed as not expired: %+v", x)
			}
		}
		past := f.clock.Now().Add(-time.Minute).Format(time.RFC3339)
		want(t, "expiry in the past", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/docs","expires":"`+past+`"}`), csrf), http.StatusBadRequest, "passed")
	})

	t.Run("OtherUsers", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/docs/report.txt"})
		for _, x := range f.list("bob") {
			if x.Token == l.Token {
				t.Fatal("bob lists alice's link")
			}
		}
		want(t, "bob revokes", f.do("DELETE", "/api/shares/"+l.Token, "bob", nil, csrf), http.StatusNotFound)
		want(t, "bob reads", f.do("GET", "/api/shares/"+l.Token, "bob", nil, nil), http.StatusNotFound)
		want(t, "bob's QR", f.do("GET", "/api/shares/"+l.Token+"/qr.svg", "bob", nil, nil), http.StatusNotFound)
		want(t, "still works", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusOK, "quarterly")
		want(t, "alice reads", f.do("GET", "/api/shares/"+l.Token, "alice", nil, nil), http.StatusOK, l.Token)
		// bob shares his own bucket, not alice's, whatever the path.
		b := f.create("bob", map[string]string{"path": "/mine.txt"})
		want(t, "bob's link", f.do("GET", "/s/"+b.Token+"/download", "", nil, nil), http.StatusOK, "bob's")
		want(t, "bob shares alice's path", f.do("POST", "/api/shares", "bob", strings.NewReader(`{"path":"/docs/report.txt"}`), csrf), http.StatusNotFound)
		want(t, "nobody lists", f.do("GET", "/api/shares", "", nil, nil), http.StatusUnauthorized)
		want(t, "nobody creates", f.do("POST", "/api/shares", "", strings.NewReader(`{"path":"/docs"}`), csrf), http.StatusUnauthorized)
	})

	t.Run("OwnerGone", func(t *testing.T) {
		f.put("carol-files", "song.ogg", "la la la")
		l := f.create("carol", map[string]string{"path": "/song.ogg"})
		want(t, "before", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusOK, "la la la")
		f.gone.Store("carol", true)
		r := f.do("GET", "/s/"+l.Token+"/download", "", nil, nil)
		if r.code != http.StatusNotFound || r.body != unknown.body {
			t.Fatalf("a link of a removed user: %d %s", r.code, r.body)
		}
		f.gone.Delete("carol")
		want(t, "back", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusOK, "la la la")
	})

	t.Run("BadRequests", func(t *testing.T) {
		for _, body := range []string{"", "{", "[]", `"x"`, `{"path":1}`, `{"path":"/docs","extra":true}`, `{"path":"/docs"}{"path":"/docs"}`,
			`{"path":"/docs","mode":"write"}`, `{"path":"/docs","expires":"tomorrow"}`, `{"path":"/a//b"}`, `{"path":"/docs","password":"` + strings.Repeat("p", 1025) + `"}`} {
			r := f.do("POST", "/api/shares", "alice", strings.NewReader(body), csrf)
			if r.code != http.StatusBadRequest || !strings.Contains(r.body, `"error"`) {
				t.Errorf("body %.40q: %d %s", body, r.code, r.body)
			}
		}
		want(t, "missing path", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/nothing/here"}`), csrf), http.StatusNotFound)
		want(t, "no CSRF header", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/docs"}`), map[string]string{"Content-Type": "application/json"}), http.StatusForbidden, "X-Requested-With")
		want(t, "wrong CSRF header", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/docs"}`), map[string]string{"X-Requested-With": "XMLHttpRequest"}), http.StatusForbidden)
		want(t, "PUT", f.do("PUT", "/api/shares", "alice", strings.NewReader(`{}`), csrf), http.StatusMethodNotAllowed)
		for _, tok := range []string{"short", "AAAAAAAAAAAAAAAAAAAAAAA!", "%2e%2e", "_"} {
			r := f.do("GET", "/s/"+tok, "", nil, nil)
			if r.code != http.StatusNotFound || r.body != unknown.body {
				t.Errorf("token %q: %d", tok, r.code)
			}
		}
	})

	t.Run("Grants", func(t *testing.T) {
		grant := func(user, body string, code int) sharelink.GrantInfo {
			t.Helper()
			r := f.do("POST", "/api/shares/grants", user, strings.NewReader(body), csrf)
			want(t, "grant "+body, r, code)
			var g sharelink.GrantInfo
			json.Unmarshal([]byte(r.body), &g)
			return g
		}
		withMe := func(user string) []sharelink.GrantInfo {
			t.Helper()
			r := f.do("GET", "/api/shares/with-me", user, nil, nil)
			want(t, "with-me", r, http.StatusOK)
			var gs []sharelink.GrantInfo
			if err := json.Unmarshal([]byte(r.body), &gs); err != nil {
				t.Fatal(err)
			}
			return gs
		}
		has := func(gs []sharelink.GrantInfo, id string) bool {
			for _, g := range gs {
				if g.ID == id {
					return true
				}
			}
			return false
		}
		docs := grant("alice", `{"path":"/docs","with":"user:bob"}`, http.StatusCreated)
		if docs.Mode != "read" || docs.Owner != "alice" || docs.Name != "docs" || docs.With != "user:bob" {
			t.Fatalf("grant %+v", docs)
		}
		grant("alice", `{"path":"/docs","with":"user:alice"}`, http.StatusBadRequest)
		grant("alice", `{"path":"/docs","with":"user:nobody"}`, http.StatusBadRequest)
		grant("alice", `{"path":"/docs","with":"bob"}`, http.StatusBadRequest)
		grant("alice", `{"path":"/docs","with":"user:bob","mode":"owner"}`, http.StatusBadRequest)
		grant("alice", `{"path":"/nothing","with":"user:bob"}`, http.StatusNotFound)
		grant("alice", `{"path":"/photos/escape","with":"user:bob"}`, http.StatusBadRequest)
		grant("alice", `{"path":"/docs","with":"user:bob",}`, http.StatusBadRequest)
		want(t, "grant without the header", f.do("POST", "/api/shares/grants", "alice", strings.NewReader(`{"path":"/docs","with":"user:bob"}`), nil), http.StatusForbidden)
		if !has(withMe("bob"), docs.ID) || has(withMe("carol"), docs.ID) || has(withMe("alice"), docs.ID) {
			t.Fatal("with-me lists the grant to the wrong users")
		}
		for _, g := range withMe("bob") {
			if g.ID == docs.ID && (!g.Dir || g.Gone) {
				t.Fatalf("with-me: a folder's grant says dir %v, gone %v", g.Dir, g.Gone)
			}
		}
		report := grant("alice", `{"path":"/docs/report.txt","with":"user:bob"}`, http.StatusCreated)
		for _, g := range withMe("bob") {
			if g.ID == report.ID && (g.Dir || g.Gone) {
				t.Fatalf("with-me: a file's grant says dir %v, gone %v", g.Dir, g.Gone)
			}
		}
		want(t, "bob reads the shared file", f.do("GET", "/api/shares/with-me/"+report.ID+"/files", "bob", nil, nil), http.StatusOK, "the quarterly report")
		want(t, "alice removes the file's grant", f.do("DELETE", "/api/shares/grants/"+report.ID, "alice", nil, csrf), http.StatusNoContent)
		r := f.do("GET", "/api/shares/grants", "alice", nil, nil)
		want(t, "alice's grants", r, http.StatusOK, docs.ID)
		want(t, "bob's grants", f.do("GET", "/api/shares/grants", "bob", nil, nil), http.StatusOK)
		if strings.Contains(f.do("GET", "/api/shares/grants", "bob", nil, nil).body, docs.ID) {
			t.Fatal("bob lists alice's grant as his")
		}
		files := "/api/shares/with-me/" + docs.ID + "/files"
		want(t, "bob lists", f.do("GET", files, "bob", nil, nil), http.StatusOK, `"name":"report.txt"`)
		r = f.do("GET", files+"/report.txt", "bob", nil, nil)
		if r.code != 200 || r.body != "the quarterly report\n" || !strings.HasPrefix(r.hdr.Get("Content-Disposition"), "attachment") {
			t.Fatalf("bob reads: %d %q", r.code, r.body)
		}
		want(t, "bob writes a read share", f.do("PUT", files+"/x.txt", "bob", strings.NewReader("x"), csrf), http.StatusForbidden)
		// Shared again with bob: the same share, its mode changed; no
		// second one.
		again := grant("alice", `{"path":"/docs/","with":"user:bob","mode":"write"}`, http.StatusOK)
		if again.ID != docs.ID || again.Mode != "write" {
			t.Fatalf("shared again: %+v", again)
		}
		n := 0
		for _, g := range withMe("bob") {
			if g.Path == "/docs" {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("shared twice: bob has %d shares of /docs", n)
		}
		want(t, "bob writes the share made write", f.do("PUT", files+"/x.txt", "bob", strings.NewReader("x"), csrf), http.StatusCreated)
		want(t, "bob deletes it", f.do("DELETE", files+"/x.txt", "bob", nil, csrf), http.StatusNoContent)
		if g := grant("alice", `{"path":"/docs","with":"user:bob","mode":"read"}`, http.StatusOK); g.ID != docs.ID || g.Mode != "read" {
			t.Fatalf("made read again: %+v", g)
		}
		want(t, "bob writes the share made read again", f.do("PUT", files+"/x.txt", "bob", strings.NewReader("x"), csrf), http.StatusForbidden)
		want(t, "carol reads bob's", f.do("GET", files, "carol", nil, nil), http.StatusNotFound)
		want(t, "nobody reads", f.do("GET", files, "", nil, nil), http.StatusUnauthorized)
		for _, p := range []string{"/..", "/%2e%2e/secret/keys.txt", "/..%2Fsecret%2Fkeys.txt"} {
			r := f.do("GET", files+p, "bob", nil, nil)
			if r.code != http.StatusNotFound || strings.Contains(r.body, "do not share") {
				t.Errorf("bob at %s: %d", p, r.code)
			}
		}
		want(t, "bob revokes alice's", f.do("DELETE", "/api/shares/grants/"+docs.ID, "bob", nil, csrf), http.StatusNotFound)

		inbox := grant("alice", `{"path":"/inbox","with":"group:staff","mode":"write"}`, http.StatusCreated)
		if !has(withMe("carol"), inbox.ID) || !has(withMe("bob"), inbox.ID) {
			t.Fatal("a group grant is not listed for its members")
		}
		files = "/api/shares/with-me/" + inbox.ID + "/files"
		want(t, "carol writes", f.do("PUT", files+"/from-carol.txt", "carol", strings.NewReader("carol was here"), csrf), http.StatusCreated)
		rc, _, err := f.trees["alice-files"].Open(context.Background(), "inbox/from-carol.txt", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != "carol was here" {
			t.Fatalf("written through the grant: %q", b)
		}
		want(t, "carol writes without the header", f.do("PUT", files+"/y.txt", "carol", strings.NewReader("y"), nil), http.StatusForbidden)
		want(t, "carol writes into a missing folder", f.do("PUT", files+"/no/y.txt", "carol", strings.NewReader("y"), csrf), http.StatusConflict)
		want(t, "carol deletes the share's folder", f.do("DELETE", files, "carol", nil, csrf), http.StatusBadRequest)
		want(t, "carol deletes", f.do("DELETE", files+"/from-carol.txt", "carol", nil, csrf), http.StatusNoContent)
		if _, err := f.trees["alice-files"].Stat(context.Background(), "inbox/from-carol.txt"); err == nil {
			t.Fatal("deleted through the grant, still there")
		}
		want(t, "alice revokes", f.do("DELETE", "/api/shares/grants/"+inbox.ID, "alice", nil, csrf), http.StatusNoContent)
		want(t, "revoked grant", f.do("GET", files, "carol", nil, nil), http.StatusNotFound)
		if has(withMe("carol"), inbox.ID) {
			t.Fatal("a revoked grant is still listed")
		}
	})

	t.Run("QR", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/docs"})
		r := f.do("GET", "/api/shares/"+l.Token+"/qr.svg", "alice", nil, nil)
		want(t, "qr", r, http.StatusOK, "<svg")
		if r.hdr.Get("Content-Type") != "image/svg+xml" {
			t.Fatalf("type %s", r.hdr.Get("Content-Type"))
		}
		if got := decodeQR(t, r.body); got != l.URL {
			t.Fatalf("the QR code says %q, want %q", got, l.URL)
		}
	})

	// A path Config.Hidden reports (the web app's trash) is kept from
	// links and grants to the whole bucket: not listed, zipped, read,
	// written nor shared itself.
	t.Run("Hidden", func(t *testing.T) {
		f.put("alice-files", ".trash/deleted.txt", "deleted, not shared")
		l := f.create("alice", map[string]string{"path": "/"})
		base := "/s/" + l.Token
		r := f.do("GET", base, "", nil, nil)
		want(t, "the bucket's link", r, http.StatusOK, "docs")
		if strings.Contains(r.body, ".trash") {
			t.Fatal("a link's listing shows the hidden folder")
		}
		for _, p := range []string{"/view/.trash", "/view/.trash/", "/download/.trash/deleted.txt", "/download/.trash", "/view/%2etrash"} {
			if r := f.do("GET", base+p, "", nil, nil); r.code != http.StatusNotFound || strings.Contains(r.body, "deleted") {
				t.Errorf("a link's %s: %d", p, r.code)
			}
		}
		r = f.do("GET", base+"/download", "", nil, nil)
		zr, err := zip.NewReader(strings.NewReader(r.body), int64(len(r.body)))
		if err != nil {
			t.Fatal(err)
		}
		for _, zf := range zr.File {
			if strings.HasPrefix(zf.Name, ".trash") {
				t.Fatalf("the bucket's zip holds %s", zf.Name)
			}
		}
		want(t, "a link to the hidden folder", f.do("POST", "/api/shares", "alice", strings.NewReader(`{"path":"/.trash/deleted.txt"}`), csrf), http.StatusNotFound)
		want(t, "a grant of the hidden folder", f.do("POST", "/api/shares/grants", "alice", strings.NewReader(`{"path":"/.trash","with":"user:bob"}`), csrf), http.StatusNotFound)

		r = f.do("POST", "/api/shares/grants", "alice", strings.NewReader(`{"path":"/","with":"user:bob","mode":"write"}`), csrf)
		want(t, "a grant of the bucket", r, http.StatusCreated)
		var g sharelink.GrantInfo
		json.Unmarshal([]byte(r.body), &g)
		files := "/api/shares/with-me/" + g.ID + "/files"
		r = f.do("GET", files, "bob", nil, nil)
		want(t, "bob lists alice's bucket", r, http.StatusOK, `"name":"docs"`)
		if strings.Contains(r.body, ".trash") {
			t.Fatal("a grant's listing shows the hidden folder")
		}
		want(t, "bob lists the hidden folder", f.do("GET", files+"/.trash", "bob", nil, nil), http.StatusNotFound)
		want(t, "bob reads in the hidden folder", f.do("GET", files+"/.trash/deleted.txt", "bob", nil, nil), http.StatusNotFound)
		want(t, "bob writes in the hidden folder", f.do("PUT", files+"/.trash/new.txt", "bob", strings.NewReader("x"), csrf), http.StatusNotFound)
		want(t, "bob deletes in the hidden folder", f.do("DELETE", files+"/.trash/deleted.txt", "bob", nil, csrf), http.StatusNotFound)
		if _, err := f.trees["alice-files"].Stat(context.Background(), ".trash/deleted.txt"); err != nil {
			t.Fatal("the hidden file went:", err)
		}
		want(t, "alice removes the grant", f.do("DELETE", "/api/shares/grants/"+g.ID, "alice", nil, csrf), http.StatusNoContent)

		up := f.create("alice", map[string]string{"path": "/", "mode": "upload"})
		body, ctype := form(t, map[string]string{".trash": "x"}, []string{".trash"})
		want(t, "an upload link's file named as the hidden folder", f.do("POST", "/s/"+up.Token+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusBadRequest)
	})

	// A write into a drive that is full, through a share with a user or
	// an upload link, is 507 with the reason, not 503 as if the server
	// were down; one that fits is stored.
	t.Run("Quota", func(t *testing.T) {
		ctx := context.Background()
		if err := f.gw.CreateBucket(ctx, "dave-files", ""); err != nil {
			t.Fatal(err)
		}
		f.trees["dave-files"] = f.gw.Tree("dave-files")
		if _, _, err := f.gw.CreateUser(ctx, gateway.NewUser{Name: "dave", Password: "dave's long password", Quota: 1000, Home: "dave-files"}); err != nil {
			t.Fatal(err)
		}
		f.put("dave-files", "drop/first.txt", "x")
		const id = "daveDrop0000000000000000"
		if err := f.gw.PutGrant(ctx, gateway.Grant{ID: id, Owner: "dave", Bucket: "dave-files", Path: "drop", With: "user:bob", Perm: "write", Created: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		files := "/api/shares/with-me/" + id + "/files"
		want(t, "bob writes past dave's quota", f.do("PUT", files+"/big.bin", "bob", strings.NewReader(strings.Repeat("b", 2000)), csrf), http.StatusInsufficientStorage, "full")
		if _, err := f.trees["dave-files"].Stat(ctx, "drop/big.bin"); err == nil {
			t.Fatal("a file over the quota was stored")
		}
		want(t, "bob writes within dave's quota", f.do("PUT", files+"/small.bin", "bob", strings.NewReader("small"), csrf), http.StatusCreated)

		const token = "daveLink0000000000000000"
		if err := f.gw.PutShare(ctx, gateway.ShareLink{Token: token, Owner: "dave", Bucket: "dave-files", Path: "drop", Mode: sharelink.ModeUpload, Created: f.clock.Now()}); err != nil {
			t.Fatal(err)
		}
		body, ctype := form(t, map[string]string{"big.bin": strings.Repeat("u", 2000)}, []string{"big.bin"})
		want(t, "an upload link past dave's quota", f.do("POST", "/s/"+token+"/upload", "", body, map[string]string{"Content-Type": ctype}), http.StatusInsufficientStorage, "full")
	})

	// Last: it leaves 127.0.0.1 limited for a minute of the clock.
	t.Run("TokenGuessing", func(t *testing.T) {
		l := f.create("alice", map[string]string{"path": "/docs/report.txt"})
		f.clock.Add(time.Minute) // a window without the misses of the tests before
		misses := 0
		for ; misses < 200; misses++ {
			r := f.do("GET", "/s/BBBBBBBBBBBBBBBBBBBBBB"+strconv.Itoa(misses%10)+"x", "", nil, nil)
			if r.code == http.StatusTooManyRequests {
				break
			}
			want(t, "guess", r, http.StatusNotFound, notFoundText)
		}
		if misses != 60 {
			t.Fatalf("limited after %d misses, want 60", misses)
		}
		r := f.do("GET", "/s/"+l.Token+"/download", "", nil, nil)
		if r.code != http.StatusTooManyRequests || r.hdr.Get("Retry-After") == "" || strings.Contains(r.body, "quarterly") {
			t.Fatalf("a good token from a limited address: %d %v", r.code, r.hdr)
		}
		f.clock.Add(time.Minute)
		want(t, "after the window", f.do("GET", "/s/"+l.Token+"/download", "", nil, nil), http.StatusOK, "quarterly")
	})

	t.Run("Assets", func(t *testing.T) {
		r := f.do("GET", "/s/_/share.js", "", nil, nil)
		want(t, "script", r, http.StatusOK, "XMLHttpRequest")
		want(t, "stylesheet", f.do("GET", "/s/_/share.css", "", nil, nil), http.StatusOK, "prefers-color-scheme")
		want(t, "no other asset", f.do("GET", "/s/_/pages.html", "", nil, nil), http.StatusNotFound)
	})
}

// form is a multipart body with a "file" part per name of order, holding
// files[name].
func form(t *testing.T, files map[string]string, order []string) (io.Reader, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	mw.WriteField("note", "ignored")
	for _, n := range order {
		w, err := mw.CreateFormFile("file", n)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, files[n])
	}
	mw.Close()
	return &b, mw.FormDataContentType()
}

// cookie returns the "name=value" of the share cookie r set, checking
// its scope.
func cookie(t *testing.T, r response, path string) string {
	t.Helper()
	c, err := http.ParseSetCookie(r.hdr.Get("Set-Cookie"))
	if err != nil {
		t.Fatalf("no cookie: %v", r.hdr)
	}
	if c.Path != path || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
		t.Fatalf("cookie %+v", c)
	}
	return c.Name + "=" + c.Value
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

var rectRE = regexp.MustCompile(`<rect x="(\d+)" y="(\d+)" width="(\d+)" height="1"/>`)
var viewBoxRE = regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`)

// decodeQR draws the dark rectangles of an SVG of QRSVG on a white
// image, four pixels a module, and reads it with ZXing's QR decoder.
func decodeQR(t *testing.T, svg string) string {
	t.Helper()
	vb := viewBoxRE.FindStringSubmatch(svg)
	if vb == nil {
		t.Fatalf("no viewBox: %s", svg)
	}
	n, _ := strconv.Atoi(vb[1])
	const scale = 4
	img := image.NewGray(image.Rect(0, 0, n*scale, n*scale))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	rects := rectRE.FindAllStringSubmatch(svg, -1)
	if len(rects) < 20 {
		t.Fatalf("only %d modules drawn", len(rects))
	}
	for _, m := range rects {
		x, _ := strconv.Atoi(m[1])
		y, _ := strconv.Atoi(m[2])
		w, _ := strconv.Atoi(m[3])
		for py := y * scale; py < (y+1)*scale; py++ {
			for px := x * scale; px < (x+w)*scale; px++ {
				img.SetGray(px, py, color.Gray{0})
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gzqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("decoding the QR code: %v", err)
	}
	return res.GetText()
}

// TestQRSVGDecodes checks QRSVG on its own for texts of several lengths,
// and that a text too long for any QR code is an error.
func TestQRSVGDecodes(t *testing.T) {
	for _, s := range []string{"http://127.0.0.1:7790/s/abc", "https://files.example.org/s/" + strings.Repeat("Zz9_-", 6), "HELLO 123",
		"https://x.example/s/" + strings.Repeat("q", 200)} {
		svg, err := sharelink.QRSVG(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeQR(t, string(svg)); got != s {
			t.Errorf("decoded %q, want %q", got, s)
		}
	}
	if _, err := sharelink.QRSVG(strings.Repeat("x", 5000)); err == nil {
		t.Error("a text too long for a QR code was drawn")
	}
}
