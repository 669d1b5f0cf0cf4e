package sftp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pkgsftp "github.com/pkg/sftp"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
	"golang.org/x/crypto/ssh"
)

// fixture is a gateway on a five-node test grid, served over SFTP on
// 127.0.0.1 with a users file in its directory.
type fixture struct {
	gw    *gateway.Gateway
	opens atomic.Int64 // reads of objects by the server's trees
	logs  chan string  // the server's log messages
	addr  string
	users string // the users file
	dir   string
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
	f := &fixture{gw: gw, dir: dir, users: filepath.Join(dir, "sftp-users"), logs: make(chan string, 1000)}
	hk, err := sftp.LoadOrCreateKey(filepath.Join(dir, "sftp-host-key"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sftp.New(sftp.Config{
		HostKey: hk,
		Users:   func() (sftp.Users, error) { return sftp.LoadUsers(f.users) },
		Tree: func(ctx context.Context, bucket string) (*tree.Tree, error) {
			if _, err := sftp.GatewayTrees(gw)(ctx, bucket); err != nil {
				return nil, err
			}
			return tree.New(&countingStore{Store: gw.TreeStore(bucket), opens: &f.opens}), nil
		},
		SpoolDir: t.TempDir(),
		Logger:   slog.New(chanHandler{f.logs}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.addr = ln.Addr().String()
	return f
}

// chanHandler sends log messages to a channel, dropping them if it is full.
type chanHandler struct{ ch chan string }

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h chanHandler) WithGroup(string) slog.Handler            { return h }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}

// awaitLog waits for a log message that contains s.
func (f *fixture) awaitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-f.logs:
			if strings.Contains(m, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no log %q", s)
		}
	}
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

// addUser makes bucket and a user chrooted to it with a new key and
// password pw, and returns the key.
func (f *fixture) addUser(t *testing.T, name, bucket, pw string) ssh.Signer {
	t.Helper()
	if err := f.gw.CreateBucket(context.Background(), bucket, ""); err != nil {
		t.Fatal(err)
	}
	k, err := sftp.LoadOrCreateKey(filepath.Join(t.TempDir(), "key"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := sftp.PasswordLine(name, bucket, pw)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(f.users)
	b := string(old) + sftp.KeyLine(name, bucket, k.PublicKey()) + "\n" + pl + "\n"
	if err := os.WriteFile(f.users, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fixture) dial(t *testing.T, user string, auth ...ssh.AuthMethod) (*pkgsftp.Client, error) {
	t.Helper()
	c, err := ssh.Dial("tcp", f.addr, &ssh.ClientConfig{User: user, Auth: auth,
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	sc, err := pkgsftp.NewClient(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	t.Cleanup(func() { sc.Close(); c.Close() })
	return sc, nil
}

// TestSFTPTree runs the tree's conformance suite through SFTP: an adapter
// turns each call into the SFTP requests a client sends, over a real SSH
// connection, to a gateway bucket on a test grid.
func TestSFTPTree(t *testing.T) {
	f := newFixture(t)
	n := 0
	treetest.Run(t, func(t *testing.T) treetest.Env {
		if strings.HasSuffix(t.Name(), "/InvalidPaths") {
			// SFTP servers resolve "." and ".." in paths before anything
			// sees them (pkg/sftp cleans every path): "a/../b" is "/b".
			// TestSFTPChroot checks that they cannot leave the bucket.
			t.Skip("paths are cleaned by the protocol")
		}
		n++
		user, bucket := fmt.Sprintf("u%d", n), fmt.Sprintf("sftp-%d", n)
		k := f.addUser(t, user, bucket, "pw")
		c, err := f.dial(t, user, ssh.PublicKeys(k))
		if err != nil {
			t.Fatal(err)
		}
		return treetest.Env{FS: &clientFS{c: c}, Store: f.gw.TreeStore(bucket)}
	})
}

// TestSFTPAuth: wrong passwords, unknown keys and unknown users are
// refused; the right ones get in.
func TestSFTPAuth(t *testing.T) {
	f := newFixture(t)
	k := f.addUser(t, "alice", "alice-files", "open sesame")
	other, err := sftp.LoadOrCreateKey(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user string
		auth ssh.AuthMethod
		ok   bool
	}{
		{"alice", ssh.Password("open sesame"), true},
		{"alice", ssh.PublicKeys(k), true},
		{"alice", ssh.Password("open sesame!"), false},
		{"alice", ssh.Password(""), false},
		{"alice", ssh.PublicKeys(other), false},
		{"bob", ssh.PublicKeys(k), false},
		{"bob", ssh.Password("open sesame"), false},
	} {
		_, err := f.dial(t, c.user, c.auth)
		if (err == nil) != c.ok {
			t.Errorf("user %s: %v, want ok %v", c.user, err, c.ok)
		}
	}
	// A user whose bucket does not exist logs in but gets no subsystem.
	if err := os.WriteFile(f.users, []byte(sftp.KeyLine("carol", "no-such-bucket", k.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dial(t, "carol", ssh.PublicKeys(k)); err == nil {
		t.Error("a user of a missing bucket got a session")
	}
	// A broken users file lets nobody in.
	if err := os.WriteFile(f.users, []byte("alice alice-files key not-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.dial(t, "alice", ssh.Password("open sesame")); err == nil {
		t.Error("logged in with a broken users file")
	}
}

// TestSFTPChroot: "..", absolute paths and links cannot reach another
// bucket or the server's files.
func TestSFTPChroot(t *testing.T) {
	f := newFixture(t)
	ka := f.addUser(t, "alice", "alice-files", "a")
	kb := f.addUser(t, "bob", "bob-files", "b")
	a, err := f.dial(t, "alice", ssh.PublicKeys(ka))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.dial(t, "bob", ssh.PublicKeys(kb))
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Create("/secret")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("bob's"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../bob-files/secret", "/../../bob-files/secret", "../../../../etc/passwd", "/etc/passwd",
		f.users, "../" + filepath.Base(f.dir) + "/sftp-users", "/secret"} {
		if _, err := a.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("alice stats %q: %v", p, err)
		}
		if _, err := a.Open(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("alice opens %q: %v", p, err)
		}
	}
	// ".." at the root is the root: alice writes into her own bucket.
	w, err = a.Create("../../x")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("alice's"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.gw.TreeStore("alice-files").Stat(context.Background(), "x"); err != nil {
		t.Fatalf("alice's ../../x is not her bucket's x: %v", err)
	}
	if _, err := b.Stat("/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("bob sees alice's file: %v", err)
	}
	if rp, err := a.RealPath("../../.."); err != nil || rp != "/" {
		t.Fatalf("realpath of ../../..: %q, %v", rp, err)
	}
	// Links are refused with SSH_FX_OP_UNSUPPORTED.
	for what, err := range map[string]error{
		"symlink":  a.Symlink("/etc/passwd", "/link"),
		"hardlink": a.Link("/x", "/hard"),
	} {
		var se *pkgsftp.StatusError
		if !errors.As(err, &se) || se.FxCode() != pkgsftp.ErrSSHFxOpUnsupported {
			t.Errorf("%s: %v, want SSH_FX_OP_UNSUPPORTED", what, err)
		}
	}
	if _, err := a.ReadLink("/x"); err == nil {
		t.Error("readlink of a file: no error")
	}
	if _, err := a.Stat("/link"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused link exists: %v", err)
	}
}

// TestSFTPWrites: what sshfs does — random-offset writes through two
// handles of one file, a read before the close, truncation, posix-rename
// and statvfs — and what another door sees meanwhile (the old version).
func TestSFTPWrites(t *testing.T) {
	f := newFixture(t)
	k := f.addUser(t, "u", "files", "pw")
	c, err := f.dial(t, "u", ssh.PublicKeys(k))
	if err != nil {
		t.Fatal(err)
	}
	store := f.gw.TreeStore("files")
	ctx := context.Background()
	old := strings.Repeat("o", 300) // a grid object
	if _, err := store.Put(ctx, "f", strings.NewReader(old), int64(len(old)), nil); err != nil {
		t.Fatal(err)
	}
	h1, err := c.OpenFile("/f", os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := c.OpenFile("/f", os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h1.WriteAt([]byte("AAAA"), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := h2.WriteAt([]byte("BB"), 310); err != nil {
		t.Fatal(err)
	}
	want := old[:100] + "AAAA" + old[104:] + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00BB"
	buf := make([]byte, 400)
	n, err := h1.ReadAt(buf, 0)
	if string(buf[:n]) != want || (err != nil && err != io.EOF) {
		t.Fatalf("session reads %d bytes %q, %v", n, buf[:n], err)
	}
	if st, err := c.Stat("/f"); err != nil || st.Size() != int64(len(want)) {
		t.Fatalf("session stats %v, %v", st, err)
	}
	// Another door sees the old version until the last close.
	readStore := func() string {
		rc, err := store.Open(ctx, "f", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	if got := readStore(); got != old {
		t.Fatalf("store reads %d bytes before the close", len(got))
	}
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readStore(); got != old {
		t.Fatalf("store reads %d bytes before the last close", len(got))
	}
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readStore(); got != want {
		t.Fatalf("store reads %q after the close", got)
	}
	// Truncate through setstat, and a posix-rename onto an existing file.
	if err := c.Truncate("/f", 5); err != nil {
		t.Fatal(err)
	}
	g, err := c.Create("/g")
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("g"))
	g.Close()
	if err := c.Rename("/f", "/g"); err == nil {
		t.Fatal("SFTP rename replaced a file")
	}
	if err := c.PosixRename("/f", "/g"); err != nil {
		t.Fatal(err)
	}
	r, err := c.Open("/g")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r)
	r.Close()
	if string(b) != "ooooo" {
		t.Fatalf("g reads %q", b)
	}
	// O_APPEND (sshfs's >>) writes at the end, whatever the offset.
	ap, err := c.OpenFile("/g", os.O_WRONLY|os.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.WriteAt([]byte("++"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ap.Close(); err != nil {
		t.Fatal(err)
	}
	r, err = c.Open("/g")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r)
	r.Close()
	if string(b) != "ooooo++" {
		t.Fatalf("g after an append reads %q", b)
	}
	// A reader opened while the file is open for writing reads on after
	// the writer closed: the committed version.
	w2, err := c.Create("/h")
	if err != nil {
		t.Fatal(err)
	}
	w2.Write([]byte("written"))
	r2, err := c.Open("/h")
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(r2)
	r2.Close()
	if err != nil || string(b) != "written" {
		t.Fatalf("reader after the writer closed: %q, %v", b, err)
	}
	vfs, err := c.StatVFS("/")
	if err != nil || vfs.Namemax != 255 || vfs.FreeSpace() == 0 {
		t.Fatalf("statvfs: %+v, %v", vfs, err)
	}
}

// TestSFTPReaderSeesWrites: a handle open for reading, opened before
// another handle of the session writes the file, reads the writes (sshfs
// serves the processes of one mount from one session, and a local file
// system shows them), and after the writer's close the committed version,
// longer than the one it opened; another session reads the old version
// until the commit.
func TestSFTPReaderSeesWrites(t *testing.T) {
	f := newFixture(t)
	k := f.addUser(t, "u", "files", "pw")
	c, err := f.dial(t, "u", ssh.PublicKeys(k))
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.dial(t, "u", ssh.PublicKeys(k))
	if err != nil {
		t.Fatal(err)
	}
	put := func(c *pkgsftp.Client, name, body string) {
		t.Helper()
		w, err := c.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	readAt := func(r *pkgsftp.File, n int, off int64) string {
		t.Helper()
		b := make([]byte, n)
		k, err := r.ReadAt(b, off)
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		return string(b[:k])
	}
	put(c, "/f", "old text")
	r, err := c.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ro, err := other.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := readAt(r, 3, 0); got != "old" {
		t.Fatalf("first read: %q", got)
	}
	w, err := c.OpenFile("/f", os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("NEW"), 0); err != nil {
		t.Fatal(err)
	}
	if got := readAt(r, 8, 0); got != "NEW text" {
		t.Fatalf("the reader reads %q while the session writes, want the writes", got)
	}
	if got := readAt(ro, 8, 0); got != "old text" {
		t.Fatalf("another session reads %q before the commit", got)
	}
	if _, err := w.WriteAt([]byte(" and more"), 8); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readAt(r, 100, 0); got != "NEW text and more" {
		t.Fatalf("the reader reads %q after the writer's close", got)
	}
}

// TestSFTPDroppedSession: a client that goes away in mid-write leaves no
// version of its file, not even a part.
func TestSFTPDroppedSession(t *testing.T) {
	f := newFixture(t)
	k := f.addUser(t, "u", "files", "pw")
	conn, err := ssh.Dial("tcp", f.addr, &ssh.ClientConfig{User: "u", Auth: []ssh.AuthMethod{ssh.PublicKeys(k)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pkgsftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Create("/partial")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half of it")); err != nil {
		t.Fatal(err)
	}
	conn.Close() // no close of the file
	f.awaitLog(t, "not committed")
	if _, err := f.gw.TreeStore("files").Stat(context.Background(), "partial"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dropped session's file: %v", err)
	}
}

// TestSFTPReadStreams: a client's reads of a large file, many in flight
// and answered out of order, are served from one stream of the object,
// not one per read.
func TestSFTPReadStreams(t *testing.T) {
	f := newFixture(t)
	k := f.addUser(t, "u", "files", "pw")
	c, err := f.dial(t, "u", ssh.PublicKeys(k))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 3<<20)
	for i := range want {
		want[i] = byte(i * 7 / 5)
	}
	w, err := c.Create("/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := f.opens.Load()
		r, err := c.Open("/big")
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r) // pkg/sftp reads with up to 64 requests in flight
		r.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %d bytes, %v", len(got), err)
		}
		if n := f.opens.Load() - before; n > 2 {
			t.Fatalf("%d object reads for one sequential read of the file", n)
		}
	}
}

// clientFS is treetest.FS through an SFTP client, doing what a client
// program does for each call.
type clientFS struct{ c *pkgsftp.Client }

// fsErr turns an SFTP status back into the tree's error, from its code
// and the server's message.
func fsErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var se *pkgsftp.StatusError
	if errors.As(err, &se) {
		msg := se.Error()
		switch {
		case se.FxCode() == pkgsftp.ErrSSHFxNoSuchFile:
			err = fs.ErrNotExist
		case strings.Contains(msg, "file already exists"):
			err = fs.ErrExist
		case strings.Contains(msg, "directory not empty"):
			err = tree.ErrNotEmpty
		case strings.Contains(msg, "is a directory"):
			err = tree.ErrIsDir
		case strings.Contains(msg, "not a directory"):
			err = tree.ErrNotDir
		case strings.Contains(msg, "invalid argument"):
			err = fs.ErrInvalid
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		err = fs.ErrNotExist
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func abs(name string) string { return path.Join("/", name) }

func infoFrom(name string, fi os.FileInfo) tree.Info {
	p := strings.Trim(path.Clean(abs(name)), "/")
	i := tree.Info{Path: p, Size: fi.Size(), Mode: fi.Mode() & (fs.ModePerm | fs.ModeDir), ModTime: fi.ModTime()}
	exact := false
	if st, ok := fi.Sys().(*pkgsftp.FileStat); ok {
		for _, e := range st.Extended {
			if e.ExtType == sftp.ExtMtime {
				var s, ns int64
				if _, err := fmt.Sscanf(e.ExtData, "%d.%d", &s, &ns); err == nil {
					i.ModTime, exact = time.Unix(s, ns).UTC(), true
				}
			}
		}
	}
	if i.IsDir() {
		i.Size = 0
		if !exact {
			// A directory without a time of its own: implied by keys.
			i.ModTime, i.Implied = time.Time{}, p != ""
		}
	}
	return i
}

func (f *clientFS) Stat(ctx context.Context, name string) (tree.Info, error) {
	fi, err := f.c.Stat(abs(name))
	if err != nil {
		return tree.Info{}, fsErr("stat", name, err)
	}
	return infoFrom(name, fi), nil
}

// ReadDir reads the whole directory (SFTP has no cursor) and pages it.
func (f *clientFS) ReadDir(ctx context.Context, name, after string, limit int) ([]tree.Info, string, error) {
	fis, err := f.c.ReadDir(abs(name))
	if err != nil {
		return nil, "", fsErr("readdir", name, err)
	}
	key := func(fi os.FileInfo) string {
		if fi.IsDir() {
			return fi.Name() + "/"
		}
		return fi.Name()
	}
	sort.Slice(fis, func(i, j int) bool { return key(fis[i]) < key(fis[j]) })
	var out []tree.Info
	for _, fi := range fis {
		if after != "" && key(fi) <= after {
			continue
		}
		if limit > 0 && len(out) == limit {
			last := out[len(out)-1]
			k := last.Name()
			if last.IsDir() {
				k += "/"
			}
			return out, k, nil
		}
		out = append(out, infoFrom(path.Join(name, fi.Name()), fi))
	}
	return out, "", nil
}

func (f *clientFS) Create(ctx context.Context, name string, r io.Reader, opt tree.CreateOptions) (tree.Info, error) {
	fl := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if opt.Exclusive {
		fl |= os.O_EXCL
	}
	w, err := f.c.OpenFile(abs(name), fl)
	if err != nil {
		return tree.Info{}, fsErr("create", name, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return tree.Info{}, fsErr("create", name, err)
	}
	if opt.Mode != 0 {
		if err := w.Chmod(opt.Mode); err != nil {
			w.Close()
			return tree.Info{}, fsErr("create", name, err)
		}
	}
	if !opt.ModTime.IsZero() {
		if err := f.chtimes(name, opt.ModTime); err != nil {
			w.Close()
			return tree.Info{}, err
		}
	}
	if err := w.Close(); err != nil {
		return tree.Info{}, fsErr("create", name, err)
	}
	return f.Stat(ctx, name)
}

func (f *clientFS) Open(ctx context.Context, name string, off, length int64) (io.ReadCloser, tree.Info, error) {
	r, err := f.c.Open(abs(name))
	if err != nil {
		return nil, tree.Info{}, fsErr("open", name, err)
	}
	fi, err := r.Stat()
	if err != nil {
		r.Close()
		return nil, tree.Info{}, fsErr("open", name, err)
	}
	i := infoFrom(name, fi)
	if off < 0 || off > i.Size {
		r.Close()
		return nil, i, fsErr("open", name, fs.ErrInvalid)
	}
	if _, err := r.Seek(off, io.SeekStart); err != nil {
		r.Close()
		return nil, i, fsErr("open", name, err)
	}
	if length < 0 {
		length = i.Size - off
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(r, length), r}, i, nil
}

func (f *clientFS) Mkdir(ctx context.Context, name string, mode fs.FileMode) error {
	if err := f.c.Mkdir(abs(name)); err != nil {
		return fsErr("mkdir", name, err)
	}
	if mode != 0 {
		return fsErr("mkdir", name, f.c.Chmod(abs(name), mode))
	}
	return nil
}

func (f *clientFS) Rename(ctx context.Context, from, to string, opt tree.RenameOptions) error {
	if opt.NoReplace {
		return fsErr("rename", from, f.c.Rename(abs(from), abs(to)))
	}
	return fsErr("rename", from, f.c.PosixRename(abs(from), abs(to)))
}

func (f *clientFS) Remove(ctx context.Context, name string, opt tree.RemoveOptions) error {
	fi, err := f.c.Stat(abs(name))
	if err != nil {
		return fsErr("remove", name, err)
	}
	if !fi.IsDir() {
		return fsErr("remove", name, f.c.Remove(abs(name)))
	}
	if opt.Recursive {
		fis, err := f.c.ReadDir(abs(name))
		if err != nil {
			return fsErr("remove", name, err)
		}
		for _, fi := range fis {
			if err := f.Remove(ctx, path.Join(abs(name), fi.Name()), opt); err != nil {
				return err
			}
		}
	}
	return fsErr("remove", name, f.c.RemoveDirectory(abs(name)))
}

func (f *clientFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return fsErr("chmod", name, f.c.Chmod(abs(name), mode))
}

func (f *clientFS) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	return f.chtimes(name, mtime)
}

// chtimes sends the time to the nanosecond in the server's extension.
func (f *clientFS) chtimes(name string, mtime time.Time) error {
	v := fmt.Sprintf("%d.%09d", mtime.Unix(), mtime.Nanosecond())
	return fsErr("chtimes", name, f.c.SetExtendedData(abs(name), []pkgsftp.StatExtended{{ExtType: sftp.ExtMtime, ExtData: v}}))
}

// TestParseUsers: a users file parses, and each kind of bad line is an
// error that names it.
func TestParseUsers(t *testing.T) {
	k, err := sftp.LoadOrCreateKey(filepath.Join(t.TempDir(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := sftp.PasswordLine("alice", "photos", "pw")
	if err != nil {
		t.Fatal(err)
	}
	good := "# accounts\n\n" + sftp.KeyLine("alice", "photos", k.PublicKey()) + " alice@laptop\n" + pl + "\n" +
		sftp.KeyLine("key", "key", k.PublicKey()) + "\n"
	us, err := sftp.ParseUsers(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if a := us["alice"]; a == nil || a.Bucket != "photos" || len(a.Keys) != 1 || len(a.PasswordHashes) != 1 {
		t.Fatalf("parsed %+v", us["alice"])
	}
	if u := us["key"]; u == nil || u.Bucket != "key" || len(u.Keys) != 1 {
		t.Fatalf("user key of bucket key: %+v", u)
	}
	for _, bad := range []string{
		"alice photos key",
		"alice photos key ssh-ed25519 not-base64!",
		"alice photos password notahash",
		"alice photos password $2a$10$x y",
		"alice photos token abc",
		sftp.KeyLine("alice", "photos", k.PublicKey()) + "\n" + sftp.KeyLine("alice", "other", k.PublicKey()),
	} {
		_, err := sftp.ParseUsers(strings.NewReader("# c\n" + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestLoadOrCreateKey: a key is made once and read back after; a damaged
// key file is an error and stays as it was.
func TestLoadOrCreateKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "host-key")
	a, err := sftp.LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", st, err)
	}
	b, err := sftp.LoadOrCreateKey(p)
	if err != nil || !bytes.Equal(a.PublicKey().Marshal(), b.PublicKey().Marshal()) {
		t.Fatalf("second load: another key, or %v", err)
	}
	if err := os.WriteFile(p, []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sftp.LoadOrCreateKey(p); err == nil {
		t.Fatal("damaged key: no error")
	}
	if got, _ := os.ReadFile(p); string(got) != "damaged" {
		t.Fatal("damaged key file replaced")
	}
}
