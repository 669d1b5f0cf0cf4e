package webdav_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
	"github.com/quilt-grid/quilt/internal/webdav"
)

// fixture is a gateway on a five-node test grid, served over WebDAV on
// 127.0.0.1 with a users file in its directory.
type fixture struct {
	gw    *gateway.Gateway
	opens atomic.Int64 // reads of objects by the server's trees
	url   string       // http://127.0.0.1:PORT
	users string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, nil)
}

// newFixtureWith is newFixture with a change to the server's config.
func newFixtureWith(t *testing.T, change func(*webdav.Config)) *fixture {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	f := &fixture{gw: gw, users: filepath.Join(dir, "webdav-users")}
	cfg := webdav.Config{
		Users: func() (sftp.Users, error) { return sftp.LoadUsers(f.users) },
		Tree: func(ctx context.Context, bucket string) (*tree.Tree, error) {
			if _, err := sftp.GatewayTrees(gw)(ctx, bucket); err != nil {
				return nil, err
			}
			return tree.New(&countingStore{Store: gw.TreeStore(bucket), opens: &f.opens}), nil
		},
		Object:   webdav.GatewayObjects(gw),
		SpoolDir: t.TempDir(),
	}
	if change != nil {
		change(&cfg)
	}
	srv, err := webdav.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	f.url = "http://" + ln.Addr().String()
	return f
}

// countingStore counts the reads of objects.
type countingStore struct {
	tree.Store
	opens *atomic.Int64
}

func (s *countingStore) Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	s.opens.Add(1)
	return s.Store.Open(ctx, key, off, length)
}

// addUser makes bucket and a user of it with password pw.
func (f *fixture) addUser(t *testing.T, name, bucket, pw string) {
	t.Helper()
	if err := f.gw.CreateBucket(context.Background(), bucket, ""); err != nil {
		t.Fatal(err)
	}
	pl, err := sftp.PasswordLine(name, bucket, pw)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(f.users)
	if err := os.WriteFile(f.users, []byte(string(old)+pl+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// client is a WebDAV client of one user.
type client struct {
	base     string // http://host/dav/USER
	user, pw string
	hc       *http.Client
}

func (f *fixture) client(user, pw string) *client {
	return &client{base: f.url + webdav.Prefix + user, user: user, pw: pw, hc: &http.Client{Timeout: 30 * time.Second}}
}

// href is the URL of name in the user's tree, each element escaped.
func (c *client) href(name string) string {
	name = strings.Trim(name, "/")
	if name == "." {
		name = ""
	}
	var es []string
	for _, e := range strings.Split(name, "/") {
		es = append(es, url.PathEscape(e)) // ".", ".." and "" too: the server must refuse them
	}
	return c.base + "/" + strings.Join(es, "/")
}

func (c *client) do(ctx context.Context, method, target string, body io.Reader, hdr ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.pw)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return c.hc.Do(req)
}

// call does a request and reads and closes the response.
func (c *client) call(ctx context.Context, method, name string, body string, hdr ...string) (int, http.Header, string, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp, err := c.do(ctx, method, c.href(name), r, hdr...)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// davErr turns a failed response into the tree's error: the
// X-Quilt-Error header's word, or the status alone.
func davErr(op, name string, status int, h http.Header) error {
	var err error
	switch h.Get("X-Quilt-Error") {
	case "not-empty":
		err = tree.ErrNotEmpty
	case "is-dir":
		err = tree.ErrIsDir
	case "not-dir":
		err = tree.ErrNotDir
	case "not-exist":
		err = fs.ErrNotExist
	case "exist":
		err = fs.ErrExist
	case "invalid":
		err = fs.ErrInvalid
	default:
		switch status {
		case http.StatusNotFound, http.StatusConflict:
			err = fs.ErrNotExist
		case http.StatusPreconditionFailed, http.StatusMethodNotAllowed:
			err = fs.ErrExist
		case http.StatusBadRequest:
			err = fs.ErrInvalid
		default:
			err = fmt.Errorf("status %d", status)
		}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

type multistatus struct {
	Responses []struct {
		Href      string `xml:"DAV: href"`
		Propstats []struct {
			Prop struct {
				ResourceType struct {
					Collection *struct{} `xml:"DAV: collection"`
				} `xml:"DAV: resourcetype"`
				Length string `xml:"DAV: getcontentlength"`
				ETag   string `xml:"DAV: getetag"`
				Mode   string `xml:"urn:quilt: mode"`
				Mtime  string `xml:"urn:quilt: mtime"`
				Color  string `xml:"urn:test: color"`
			} `xml:"DAV: prop"`
			Status string `xml:"DAV: status"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

const propfindBody = `<?xml version="1.0" encoding="utf-8"?>
<D:propfind xmlns:D="DAV:" xmlns:Q="urn:quilt:" xmlns:T="urn:test:"><D:prop>
<D:resourcetype/><D:getcontentlength/><D:getetag/><Q:mode/><Q:mtime/><T:color/>
</D:prop></D:propfind>`

// entry is one response of a PROPFIND.
type entry struct {
	info  tree.Info
	etag  string
	color string
}

// propfind returns name (depth 0) or name and its entries (depth 1).
func (c *client) propfind(ctx context.Context, name string, depth int) ([]entry, error) {
	st, h, body, err := c.call(ctx, "PROPFIND", name, propfindBody, "Depth", strconv.Itoa(depth), "Content-Type", "application/xml")
	if err != nil {
		return nil, err
	}
	if st != http.StatusMultiStatus {
		return nil, davErr("propfind", name, st, h)
	}
	var ms multistatus
	if err := xml.Unmarshal([]byte(body), &ms); err != nil {
		return nil, fmt.Errorf("propfind %s: %w: %s", name, err, body)
	}
	prefix := strings.TrimPrefix(c.base, c.base[:strings.Index(c.base, "/dav/")])
	var out []entry
	for _, r := range ms.Responses {
		p, err := url.PathUnescape(r.Href)
		if err != nil {
			return nil, err
		}
		if u, err := url.Parse(r.Href); err == nil && u.Path != "" {
			p = u.Path
		}
		p = strings.Trim(strings.TrimPrefix(p, prefix), "/")
		e := entry{info: tree.Info{Path: p}}
		var mode, mtime string
		for _, ps := range r.Propstats {
			if !strings.Contains(ps.Status, " 200 ") {
				continue
			}
			pr := ps.Prop
			if pr.ResourceType.Collection != nil {
				e.info.Mode |= fs.ModeDir
			}
			if pr.Length != "" {
				e.info.Size, _ = strconv.ParseInt(pr.Length, 10, 64)
			}
			e.etag, e.color = pr.ETag, pr.Color
			if pr.Mode != "" {
				mode = pr.Mode
			}
			if pr.Mtime != "" {
				mtime = pr.Mtime
			}
		}
		if m, err := strconv.ParseUint(mode, 8, 32); err == nil {
			e.info.Mode |= fs.FileMode(m)
		} else if e.info.IsDir() {
			e.info.Mode |= tree.DefaultDirMode
		}
		if mtime != "" {
			s, ns, _ := strings.Cut(mtime, ".")
			sec, _ := strconv.ParseInt(s, 10, 64)
			n, _ := strconv.ParseInt(ns, 10, 64)
			e.info.ModTime = time.Unix(sec, n).UTC()
		} else if e.info.IsDir() && p != "" {
			e.info.Implied = true
		}
		if e.info.IsDir() {
			e.info.Size = 0
		}
		out = append(out, e)
	}
	return out, nil
}

// davFS is treetest.FS through WebDAV requests, doing what a client that
// offers a POSIX view (a WebDAV mount) does for each call: the checks
// that WebDAV's MOVE and DELETE do not make (they replace and remove
// whole collections) are made before, with PROPFIND.
type davFS struct{ c *client }

func (d *davFS) Stat(ctx context.Context, name string) (tree.Info, error) {
	es, err := d.c.propfind(ctx, name, 0)
	if err != nil {
		return tree.Info{}, err
	}
	if len(es) != 1 {
		return tree.Info{}, fmt.Errorf("propfind %s: %d responses at depth 0", name, len(es))
	}
	return es[0].info, nil
}

func (d *davFS) ReadDir(ctx context.Context, name, after string, limit int) ([]tree.Info, string, error) {
	es, err := d.c.propfind(ctx, name, 1)
	if err != nil {
		return nil, "", err
	}
	self := strings.Trim(name, "/")
	if self == "." {
		self = ""
	}
	var infos []tree.Info
	for _, e := range es {
		if e.info.Path == self {
			if !e.info.IsDir() {
				return nil, "", &fs.PathError{Op: "readdir", Path: name, Err: tree.ErrNotDir}
			}
			continue
		}
		infos = append(infos, e.info)
	}
	key := func(i tree.Info) string {
		if i.IsDir() {
			return i.Name() + "/"
		}
		return i.Name()
	}
	sort.Slice(infos, func(i, j int) bool { return key(infos[i]) < key(infos[j]) })
	var out []tree.Info
	for _, i := range infos {
		if after != "" && key(i) <= after {
			continue
		}
		if limit > 0 && len(out) == limit {
			return out, key(out[len(out)-1]), nil
		}
		out = append(out, i)
	}
	return out, "", nil
}

func (d *davFS) proppatch(ctx context.Context, name, props string) error {
	body := `<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:" xmlns:Q="urn:quilt:"><D:set><D:prop>` +
		props + `</D:prop></D:set></D:propertyupdate>`
	st, h, resp, err := d.c.call(ctx, "PROPPATCH", name, body, "Content-Type", "application/xml")
	if err != nil {
		return err
	}
	if st != http.StatusMultiStatus {
		return davErr("proppatch", name, st, h)
	}
	if !strings.Contains(resp, " 200 ") {
		return fmt.Errorf("proppatch %s: %s", name, resp)
	}
	return nil
}

func (d *davFS) Create(ctx context.Context, name string, r io.Reader, opt tree.CreateOptions) (tree.Info, error) {
	if opt.Exclusive {
		if _, err := d.Stat(ctx, name); err == nil {
			return tree.Info{}, &fs.PathError{Op: "create", Path: name, Err: fs.ErrExist}
		}
	}
	resp, err := d.c.do(ctx, http.MethodPut, d.c.href(name), r)
	if err != nil {
		return tree.Info{}, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent {
		return tree.Info{}, davErr("create", name, resp.StatusCode, resp.Header)
	}
	var props string
	if opt.Mode != 0 {
		props += fmt.Sprintf("<Q:mode>%o</Q:mode>", opt.Mode.Perm())
	}
	if !opt.ModTime.IsZero() {
		props += fmt.Sprintf("<Q:mtime>%d.%09d</Q:mtime>", opt.ModTime.Unix(), opt.ModTime.Nanosecond())
	}
	if props != "" {
		if err := d.proppatch(ctx, name, props); err != nil {
			return tree.Info{}, err
		}
	}
	return d.Stat(ctx, name)
}

func (d *davFS) Open(ctx context.Context, name string, off, length int64) (io.ReadCloser, tree.Info, error) {
	i, err := d.Stat(ctx, name)
	if err != nil {
		return nil, i, err
	}
	if i.IsDir() {
		return nil, i, &fs.PathError{Op: "open", Path: name, Err: tree.ErrIsDir}
	}
	if off < 0 || off > i.Size {
		return nil, i, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if off == i.Size || length == 0 {
		return io.NopCloser(strings.NewReader("")), i, nil
	}
	rng := fmt.Sprintf("bytes=%d-", off)
	if length > 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+length-1)
	}
	resp, err := d.c.do(ctx, http.MethodGet, d.c.href(name), nil, "Range", rng)
	if err != nil {
		return nil, i, err
	}
	if resp.StatusCode != http.StatusPartialContent && !(off == 0 && resp.StatusCode == http.StatusOK) {
		resp.Body.Close()
		return nil, i, davErr("open", name, resp.StatusCode, resp.Header)
	}
	return resp.Body, i, nil
}

func (d *davFS) Mkdir(ctx context.Context, name string, mode fs.FileMode) error {
	st, h, _, err := d.c.call(ctx, "MKCOL", name, "")
	if err != nil {
		return err
	}
	if st != http.StatusCreated {
		return davErr("mkdir", name, st, h)
	}
	if mode != 0 {
		return d.proppatch(ctx, name, fmt.Sprintf("<Q:mode>%o</Q:mode>", mode.Perm()))
	}
	return nil
}

func (d *davFS) Rename(ctx context.Context, from, to string, opt tree.RenameOptions) error {
	fi, err := d.Stat(ctx, from)
	if err != nil {
		return err
	}
	if ti, err := d.Stat(ctx, to); err == nil && !opt.NoReplace && strings.Trim(from, "/") != strings.Trim(to, "/") {
		perr := func(e error) error { return &fs.PathError{Op: "rename", Path: from, Err: e} }
		switch {
		case ti.Path == "":
			return perr(fs.ErrInvalid)
		case !fi.IsDir() && ti.IsDir():
			return perr(tree.ErrIsDir)
		case fi.IsDir() && !ti.IsDir():
			return perr(tree.ErrNotDir)
		case ti.IsDir():
			es, _, err := d.ReadDir(ctx, to, "", 1)
			if err != nil {
				return err
			}
			if len(es) > 0 && !strings.HasPrefix(strings.Trim(to, "/")+"/", strings.Trim(from, "/")+"/") {
				return perr(tree.ErrNotEmpty)
			}
		}
	}
	if strings.Trim(from, "/") == strings.Trim(to, "/") {
		return nil
	}
	ow := "T"
	if opt.NoReplace {
		ow = "F"
	}
	st, h, _, err := d.c.call(ctx, "MOVE", from, "", "Destination", d.c.href(to), "Overwrite", ow)
	if err != nil {
		return err
	}
	if st != http.StatusCreated && st != http.StatusNoContent {
		return davErr("rename", from, st, h)
	}
	return nil
}

func (d *davFS) Remove(ctx context.Context, name string, opt tree.RemoveOptions) error {
	i, err := d.Stat(ctx, name)
	if err != nil {
		return err
	}
	if i.IsDir() && !opt.Recursive {
		es, _, err := d.ReadDir(ctx, name, "", 1)
		if err != nil {
			return err
		}
		if len(es) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: tree.ErrNotEmpty}
		}
	}
	st, h, _, err := d.c.call(ctx, http.MethodDelete, name, "")
	if err != nil {
		return err
	}
	if st != http.StatusNoContent && st != http.StatusOK {
		return davErr("remove", name, st, h)
	}
	return nil
}

func (d *davFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return d.proppatch(ctx, name, fmt.Sprintf("<Q:mode>%o</Q:mode>", mode.Perm()))
}

func (d *davFS) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	return d.proppatch(ctx, name, fmt.Sprintf("<Q:mtime>%d.%09d</Q:mtime>", mtime.Unix(), mtime.Nanosecond()))
}

// TestWebDAVTree runs the tree's conformance suite through WebDAV: an
// adapter turns each call into the requests a client sends (PROPFIND,
// PUT, GET with Range, MKCOL, MOVE, DELETE, PROPPATCH), over real HTTP,
// to a gateway bucket on a test grid.
func TestWebDAVTree(t *testing.T) {
	f := newFixture(t)
	n := 0
	treetest.Run(t, func(t *testing.T) treetest.Env {
		n++
		user, bucket := fmt.Sprintf("u%d", n), fmt.Sprintf("dav-%d", n)
		f.addUser(t, user, bucket, "pw")
		return treetest.Env{FS: &davFS{c: f.client(user, "pw")}, Store: f.gw.TreeStore(bucket)}
	})
}

func ctxT(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// raw sends a request with the path exactly as given (no cleaning, no
// escaping by the client) and returns the status.
func (f *fixture) raw(t *testing.T, method, path, user, pw string, hdr ...string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n", method, path)
	if user != "" {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(user, pw)
		req += "Authorization: " + r.Header.Get("Authorization") + "\r\n"
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req += hdr[i] + ": " + hdr[i+1] + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var code int
	if _, err := fmt.Fscanf(c, "HTTP/1.1 %d", &code); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code
}

// TestWebDAVAuth: no credentials, a wrong password and an unknown user
// get 401 with a Basic challenge; the right password gets in, and a
// user only ever reaches their own tree.
func TestWebDAVAuth(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "alice-files", "open sesame")
	f.addUser(t, "bob", "bob-files", "hunter2")
	ctx := ctxT(t)
	for _, c := range []struct {
		user, pw string
		want     int
	}{
		{"", "", http.StatusUnauthorized},
		{"alice", "wrong", http.StatusUnauthorized},
		{"alice", "", http.StatusUnauthorized},
		{"mallory", "open sesame", http.StatusUnauthorized},
		{"alice", "open sesame", http.StatusMultiStatus},
		{"alice", "open sesame", http.StatusMultiStatus}, // the remembered password
		{"alice", "open sesamE", http.StatusUnauthorized},
	} {
		cl := f.client("alice", c.pw)
		cl.user = c.user
		var resp *http.Response
		var err error
		if c.user == "" {
			req, _ := http.NewRequestWithContext(ctx, "PROPFIND", cl.href(""), nil)
			req.Header.Set("Depth", "0")
			resp, err = cl.hc.Do(req)
		} else {
			resp, err = cl.do(ctx, "PROPFIND", cl.href(""), nil, "Depth", "0")
		}
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("%q/%q: status %d, want %d", c.user, c.pw, resp.StatusCode, c.want)
		}
		if c.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
			t.Fatalf("401 without a Basic challenge: %v", resp.Header)
		}
	}
	// A users file that no longer has the password: the remembered one
	// is forgotten with it.
	f.addUser(t, "carol", "carol-files", "pw")
	if err := os.WriteFile(f.users, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st, _, _, err := f.client("alice", "open sesame").call(ctx, "PROPFIND", "", "", "Depth", "0"); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("removed user: %d, %v", st, err)
	}
}

// TestWebDAVConfinement: another user's tree, "..", "%2e%2e", "." and
// empty elements, and a Destination outside one's tree are refused, and
// nothing of the other tree is read, written or moved.
func TestWebDAVConfinement(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "alice-files", "a")
	f.addUser(t, "bob", "bob-files", "b")
	ctx := ctxT(t)
	bob := f.client("bob", "b")
	if st, _, _, err := bob.call(ctx, "PUT", "secret.txt", "bob's"); err != nil || st != http.StatusCreated {
		t.Fatalf("bob's put: %d, %v", st, err)
	}
	alice := f.client("alice", "a")
	if st, _, _, err := alice.call(ctx, "PUT", "mine.txt", "alice's"); err != nil || st != http.StatusCreated {
		t.Fatalf("alice's put: %d, %v", st, err)
	}
	for _, c := range []struct {
		method, path string
		want         int
		hdr          []string
	}{
		{"GET", "/dav/bob/secret.txt", http.StatusForbidden, nil},
		{"PUT", "/dav/bob/new.txt", http.StatusForbidden, nil},
		{"GET", "/dav/alice/../bob/secret.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/alice/%2e%2e/bob/secret.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/alice/%2E%2E/bob/secret.txt", http.StatusBadRequest, nil},
		{"DELETE", "/dav/alice/..%2fbob%2fsecret.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/alice/./mine.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/alice//mine.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/alice%2f..%2fbob/secret.txt", http.StatusBadRequest, nil},
		{"GET", "/dav/bob%2fx/secret.txt", http.StatusForbidden, nil},
		{"GET", "/secret.txt", http.StatusNotFound, nil},
		{"MOVE", "/dav/alice/mine.txt", http.StatusForbidden, []string{"Destination", f.url + "/dav/bob/mine.txt"}},
		{"COPY", "/dav/alice/mine.txt", http.StatusForbidden, []string{"Destination", f.url + "/dav/bob/mine.txt"}},
		{"COPY", "/dav/alice/mine.txt", http.StatusForbidden, []string{"Destination", f.url + "/dav/alicex/mine.txt"}},
		{"MOVE", "/dav/alice/mine.txt", http.StatusForbidden, []string{"Destination", f.url + "/dav/alice/%2e%2e/bob/secret.txt"}},
		{"COPY", "/dav/alice/", http.StatusForbidden, []string{"Destination", f.url + "/dav/alice/sub"}},
		{"GET", "/dav/alice/mine.txt", http.StatusOK, nil},
	} {
		if got := f.raw(t, c.method, c.path, "alice", "a", c.hdr...); got != c.want {
			t.Errorf("%s %s %v: %d, want %d", c.method, c.path, c.hdr, got, c.want)
		}
	}
	for _, name := range []string{"secret.txt"} {
		if rc, _, err := f.gw.Tree("bob-files").Open(ctx, name, 0, -1); err != nil {
			t.Fatalf("bob's %s: %v", name, err)
		} else {
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "bob's" {
				t.Fatalf("bob's file holds %q", b)
			}
		}
	}
	if es, err := f.gw.Tree("bob-files").ReadDirAll(ctx, ""); err != nil || len(es) != 1 {
		t.Fatalf("bob's tree: %v, %v", es, err)
	}
	if _, err := f.gw.Tree("alice-files").Stat(ctx, "mine.txt"); err != nil {
		t.Fatalf("alice's file: %v", err)
	}
}

// TestWebDAVDoors: a file written through WebDAV reads back through S3
// from the same bucket, with the same ETag and the tree's metadata; a
// file written through S3 reads through WebDAV, by ranges too; MOVE is a
// rename and COPY of a collection copies its files and dead properties.
func TestWebDAVDoors(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "photos", "pw")
	ctx := ctxT(t)
	admin, err := f.gw.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3.New(f.gw, s3.Options{}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	sc := awss3.New(awss3.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1", UsePathStyle: true,
		HTTPClient:  &http.Client{Transport: tr},
		Credentials: credentials.NewStaticCredentialsProvider(admin.ID, admin.Secret, "")})
	c := f.client("alice", "pw")
	big := strings.Repeat("a grid object, not inline. ", 40)
	if st, h, _, err := c.call(ctx, "MKCOL", "2026", ""); err != nil || st != http.StatusCreated {
		t.Fatalf("mkcol: %d %v %v", st, h, err)
	}
	st, h, _, err := c.call(ctx, "PUT", "2026/trip.txt", big)
	if err != nil || st != http.StatusCreated {
		t.Fatalf("put: %d, %v", st, err)
	}
	davETag := h.Get("ETag")
	out, err := sc.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("2026/trip.txt")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(b) != big || aws.ToString(out.ETag) != davETag || out.Metadata["mtime"] == "" || out.Metadata["mode"] != "33188" {
		t.Fatalf("through S3: %d bytes, ETag %s (WebDAV's %s), meta %v", len(b), aws.ToString(out.ETag), davETag, out.Metadata)
	}
	// Written through S3, read through WebDAV, whole and by ranges.
	body := strings.Repeat("0123456789", 30)
	if _, err := sc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("2026/s3.txt"), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		rng  string
		want string
		code int
	}{
		{"", body, http.StatusOK},
		{"bytes=5-14", body[5:15], http.StatusPartialContent},
		{"bytes=290-", body[290:], http.StatusPartialContent},
		{"bytes=-3", body[297:], http.StatusPartialContent},
		{"bytes=400-", "", http.StatusRequestedRangeNotSatisfiable},
	} {
		var hdr []string
		if r.rng != "" {
			hdr = []string{"Range", r.rng}
		}
		st, h, got, err := c.call(ctx, "GET", "2026/s3.txt", "", hdr...)
		if err != nil || st != r.code || (st < 300 && got != r.want) {
			t.Fatalf("GET %q: %d %q, %v", r.rng, st, got, err)
		}
		if st < 300 && h.Get("ETag") == "" {
			t.Fatalf("GET %q: no ETag", r.rng)
		}
	}
	// A dead property, then COPY of the collection and MOVE of the copy.
	set := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:T="urn:test:"><D:set><D:prop><T:color>blue</T:color></D:prop></D:set></D:propertyupdate>`
	if st, _, resp, err := c.call(ctx, "PROPPATCH", "2026/trip.txt", set); err != nil || st != http.StatusMultiStatus || !strings.Contains(resp, " 200 ") {
		t.Fatalf("proppatch: %d %s %v", st, resp, err)
	}
	if st, _, _, err := c.call(ctx, "COPY", "2026", "", "Destination", c.href("copy"), "Depth", "infinity"); err != nil || st != http.StatusCreated {
		t.Fatalf("copy: %d, %v", st, err)
	}
	if st, _, _, err := c.call(ctx, "MOVE", "copy", "", "Destination", c.href("moved")); err != nil || st != http.StatusCreated {
		t.Fatalf("move: %d, %v", st, err)
	}
	es, err := c.propfind(ctx, "moved/trip.txt", 0)
	if err != nil || len(es) != 1 || es[0].color != "blue" || es[0].info.Size != int64(len(big)) {
		t.Fatalf("moved copy: %+v, %v", es, err)
	}
	if _, err := c.propfind(ctx, "copy", 0); err == nil {
		t.Fatal("the copy is still there after its MOVE")
	}
	st, _, got, err := c.call(ctx, "GET", "moved/s3.txt", "")
	if err != nil || st != http.StatusOK || got != body {
		t.Fatalf("moved s3.txt: %d %d bytes, %v", st, len(got), err)
	}
}

// TestWebDAVIntoItself: MOVE or COPY of a collection onto a collection
// below it is refused before anything is removed (x/net/webdav would
// delete the destination first, then fail the rename).
func TestWebDAVIntoItself(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	for _, r := range [][]string{{"MKCOL", "d", ""}, {"MKCOL", "d/sub", ""}, {"PUT", "d/sub/f", "x"}} {
		if st, _, _, err := c.call(ctx, r[0], r[1], r[2]); err != nil || st != http.StatusCreated {
			t.Fatalf("%v: %d, %v", r, st, err)
		}
	}
	for _, m := range []string{"MOVE", "COPY"} {
		st, h, _, err := c.call(ctx, m, "d", "", "Destination", c.href("d/sub"), "Overwrite", "T")
		if err != nil || st != http.StatusForbidden || h.Get("X-Quilt-Error") != "invalid" {
			t.Fatalf("%s d onto d/sub: %d %v, %v", m, st, h, err)
		}
	}
	if _, err := f.gw.Tree("files").Stat(ctx, "d/sub/f"); err != nil {
		t.Fatalf("d/sub/f after the refused moves: %v", err)
	}
}

// TestWebDAVLocks: a locked file refuses a PUT without its token and
// takes one with it; UNLOCK frees it.
func TestWebDAVLocks(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	if st, _, _, err := c.call(ctx, "PUT", "doc.txt", "v1"); err != nil || st != http.StatusCreated {
		t.Fatalf("put: %d, %v", st, err)
	}
	lock := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>`
	st, h, _, err := c.call(ctx, "LOCK", "doc.txt", lock, "Timeout", "Second-60")
	if err != nil || st != http.StatusOK || h.Get("Lock-Token") == "" {
		t.Fatalf("lock: %d %v, %v", st, h, err)
	}
	token := h.Get("Lock-Token")
	if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v2"); st != http.StatusLocked {
		t.Fatalf("put without the token: %d, want 423", st)
	}
	if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v3", "If", "("+token+")"); st != http.StatusCreated {
		t.Fatalf("put with the token: %d", st)
	}
	if st, _, _, _ := c.call(ctx, "UNLOCK", "doc.txt", "", "Lock-Token", token); st != http.StatusNoContent {
		t.Fatalf("unlock: %d", st)
	}
	if st, _, got, _ := c.call(ctx, "GET", "doc.txt", ""); st != http.StatusOK || got != "v3" {
		t.Fatalf("get: %d %q", st, got)
	}
}

// TestWebDAVBrokenPut: a PUT whose body breaks off (the connection
// half-closed before Content-Length bytes, or a chunked body gone bad
// while the connection stays up) commits nothing: the old version stays
// whole, and a new file does not appear.
func TestWebDAVBrokenPut(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	old := strings.Repeat("old version ", 20)
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth("alice", "pw")
	auth := r.Header.Get("Authorization")
	half := strings.Repeat("x", 500)
	for _, b := range []struct{ hdr, body string }{
		{"Content-Length: 1000", half},
		{"Transfer-Encoding: chunked", fmt.Sprintf("%x\r\n%s\r\nZZ\r\n", len(half), half)},
	} {
		for _, name := range []string{"f.txt", "new.txt"} {
			if st, _, _, err := c.call(ctx, "PUT", "f.txt", old); err != nil || st != http.StatusCreated {
				t.Fatalf("put: %d, %v", st, err)
			}
			conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(conn, "PUT /dav/alice/%s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n%s\r\n\r\n%s", name, auth, b.hdr, b.body)
			conn.(*net.TCPConn).CloseWrite()
			io.ReadAll(conn) // until the server is done with the request and closes
			conn.Close()
			st, _, got, err := c.call(ctx, "GET", "f.txt", "")
			if err != nil || st != http.StatusOK || got != old {
				t.Fatalf("%s: after a broken PUT of %s, f.txt: %d %q, %v", b.hdr, name, st, got, err)
			}
			if st, _, _, _ := c.call(ctx, "GET", "new.txt", ""); st != http.StatusNotFound {
				t.Fatalf("%s: a broken PUT made new.txt: %d", b.hdr, st)
			}
		}
	}
}

// TestWebDAVCopyByReference: COPY of a file, or of a collection of files,
// reads no object (copies by reference, as a MOVE); the copies read back
// whole, and a copy over an existing file replaces it.
func TestWebDAVCopyByReference(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	big := strings.Repeat("grid object bytes ", 50)
	for _, r := range [][]string{{"MKCOL", "d", ""}, {"PUT", "d/a", big}, {"PUT", "d/b", big + "b"}, {"PUT", "other", "short"}} {
		if st, _, _, err := c.call(ctx, r[0], r[1], r[2]); err != nil || st != http.StatusCreated {
			t.Fatalf("%v: %d, %v", r[:2], st, err)
		}
	}
	before := f.opens.Load()
	if st, _, _, err := c.call(ctx, "COPY", "d/a", "", "Destination", c.href("a-copy")); err != nil || st != http.StatusCreated {
		t.Fatalf("copy: %d, %v", st, err)
	}
	if st, _, _, err := c.call(ctx, "COPY", "d/b", "", "Destination", c.href("other"), "Overwrite", "T"); err != nil || st != http.StatusNoContent {
		t.Fatalf("copy over a file: %d, %v", st, err)
	}
	if st, _, _, err := c.call(ctx, "COPY", "d", "", "Destination", c.href("d2")); err != nil || st != http.StatusCreated {
		t.Fatalf("copy of a collection: %d, %v", st, err)
	}
	if n := f.opens.Load() - before; n != 0 {
		t.Fatalf("%d object reads for copies", n)
	}
	for name, want := range map[string]string{"a-copy": big, "other": big + "b", "d2/a": big, "d2/b": big + "b", "d/a": big} {
		if st, _, got, err := c.call(ctx, "GET", name, ""); err != nil || st != http.StatusOK || got != want {
			t.Fatalf("GET %s: %d %d bytes, %v", name, st, len(got), err)
		}
	}
}

// TestWebDAVXMLBodies: a PROPFIND body that binds a prefix to no
// namespace is refused (400, as XML Namespaces and litmus's
// propfind_invalid2 want), and so is an XML body over 1 MiB (413).
func TestWebDAVXMLBodies(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	bad := `<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop><bar:foo xmlns:bar=""/></prop></propfind>`
	if st, _, _, err := c.call(ctx, "PROPFIND", "", bad, "Depth", "0"); err != nil || st != http.StatusBadRequest {
		t.Fatalf("xmlns:bar=\"\": %d, %v", st, err)
	}
	big := `<?xml version="1.0"?><propfind xmlns="DAV:"><prop>` + strings.Repeat("<getetag/>", 110000) + `</prop></propfind>`
	if st, _, _, err := c.call(ctx, "PROPFIND", "", big, "Depth", "0"); err != nil || st != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of %d bytes: %d, %v", len(big), st, err)
	}
	if st, _, _, err := c.call(ctx, "PROPFIND", "", propfindBody, "Depth", "0"); err != nil || st != http.StatusMultiStatus {
		t.Fatalf("a good body: %d, %v", st, err)
	}
}

// TestWebDAVIfETag: an If header's entity tags are evaluated beside its
// lock token: a PUT with the lock's token and a wrong ETag fails (412),
// with the right one it succeeds.
func TestWebDAVIfETag(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	st, h, _, err := c.call(ctx, "PUT", "doc.txt", "v1")
	if err != nil || st != http.StatusCreated {
		t.Fatalf("put: %d, %v", st, err)
	}
	etag := h.Get("ETag")
	lock := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, h, _, err = c.call(ctx, "LOCK", "doc.txt", lock)
	if err != nil || st != http.StatusOK {
		t.Fatalf("lock: %d, %v", st, err)
	}
	token := h.Get("Lock-Token")
	for _, bad := range []string{
		"(" + token + ` ["wrong"])`,
		"(" + token + ` ["wrong"]) (Not <DAV:no-lock> ["wrong"])`,
		"(" + token + " Not [" + etag + "])",
	} {
		if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v2", "If", bad); st != http.StatusPreconditionFailed {
			t.Fatalf("If: %s: %d, want 412", bad, st)
		}
	}
	if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v3", "If", "("+token+" ["+etag+"])"); st != http.StatusCreated {
		t.Fatalf("the right ETag: %d", st)
	}
	if st, _, got, _ := c.call(ctx, "GET", "doc.txt", ""); st != http.StatusOK || got != "v3" {
		t.Fatalf("get: %d %q", st, got)
	}
}

// TestWebDAVSharedLocks: shared write locks (which x/net/webdav refuses)
// go beside each other and refuse an exclusive lock and a write without
// one of their tokens; an exclusive lock of infinite depth refuses a
// shared lock below it; a shared lock of a missing file makes it; a bad
// Timeout or Depth is 400; an unlocked resource takes an exclusive lock
// again.
func TestWebDAVSharedLocks(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "files", "pw")
	ctx := ctxT(t)
	c := f.client("alice", "pw")
	if st, _, _, err := c.call(ctx, "PUT", "doc.txt", "v1"); err != nil || st != http.StatusCreated {
		t.Fatalf("put: %d, %v", st, err)
	}
	info := func(scope string) string {
		return `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:` + scope + `/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>`
	}
	lock := func(name, scope string, want int, hdr ...string) string {
		t.Helper()
		st, h, body, err := c.call(ctx, "LOCK", name, info(scope), append([]string{"Timeout", "Second-60"}, hdr...)...)
		if err != nil || st != want {
			t.Fatalf("%s lock of %s: %d, want %d (%v): %s", scope, name, st, want, err, body)
		}
		if want < 300 && (h.Get("Lock-Token") == "" || !strings.Contains(body, "<D:"+scope+"/>")) {
			t.Fatalf("%s lock of %s: %v %s", scope, name, h, body)
		}
		return h.Get("Lock-Token")
	}
	t1 := lock("doc.txt", "shared", http.StatusOK)
	t2 := lock("doc.txt", "shared", http.StatusOK)
	if t1 == t2 {
		t.Fatal("two shared locks with one token")
	}
	lock("doc.txt", "exclusive", http.StatusLocked)
	if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v2"); st != http.StatusLocked {
		t.Fatalf("put without a token: %d, want 423", st)
	}
	if st, _, _, _ := c.call(ctx, "PUT", "doc.txt", "v3", "If", "("+t2+")"); st != http.StatusCreated {
		t.Fatalf("put with a shared lock's token: %d", st)
	}
	// A refresh keeps it shared.
	if st, _, body, _ := c.call(ctx, "LOCK", "doc.txt", "", "If", "("+t1+")", "Timeout", "Second-120"); st != http.StatusOK || !strings.Contains(body, "<D:shared/>") || !strings.Contains(body, "Second-120") {
		t.Fatalf("refresh: %d %s", st, body)
	}
	for _, tok := range []string{t1, t2} {
		if st, _, _, _ := c.call(ctx, "UNLOCK", "doc.txt", "", "Lock-Token", tok); st != http.StatusNoContent {
			t.Fatalf("unlock: %d", st)
		}
	}
	if st, _, _, _ := c.call(ctx, "UNLOCK", "doc.txt", "", "Lock-Token", t1); st == http.StatusNoContent {
		t.Fatal("a lock unlocked twice")
	}
	ex := lock("doc.txt", "exclusive", http.StatusOK)
	c.call(ctx, "UNLOCK", "doc.txt", "", "Lock-Token", ex)

	// A directory locked exclusively with infinite depth: no shared lock
	// below it.
	if st, _, _, _ := c.call(ctx, "MKCOL", "dir", ""); st != http.StatusCreated {
		t.Fatalf("mkcol: %d", st)
	}
	dl := lock("dir", "exclusive", http.StatusOK)
	lock("dir/new.txt", "shared", http.StatusLocked)
	c.call(ctx, "UNLOCK", "dir", "", "Lock-Token", dl)
	// A shared lock of a missing file makes it, empty.
	lock("dir/new.txt", "shared", http.StatusCreated, "Depth", "0")
	if st, _, got, _ := c.call(ctx, "GET", "dir/new.txt", ""); st != http.StatusOK || got != "" {
		t.Fatalf("locked new file: %d %q", st, got)
	}
	lock("nodir/x.txt", "shared", http.StatusConflict)
	lock("doc.txt", "shared", http.StatusBadRequest, "Timeout", "Tomorrow")
	lock("doc.txt", "shared", http.StatusBadRequest, "Depth", "1")
}
