package webdav_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
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
	url   string // http://127.0.0.1:PORT
	users string
}

func newFixture(t *testing.T) *fixture {
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
	srv, err := webdav.New(webdav.Config{
		Users:    func() (sftp.Users, error) { return sftp.LoadUsers(f.users) },
		Tree:     sftp.GatewayTrees(gw),
		Object:   webdav.GatewayObjects(gw),
		SpoolDir: t.TempDir(),
	})
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

var _ = bytes.MinRead
var _ = errors.New
var _ = path.Join
