package fuse_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
)

// The tests serve the mount and use it in one process: they never exec a
// program stored on the mount (the kernel's lookup of it would wait on
// this suspended process), and a watchdog unmounts everything lazily if a
// test hangs, so a stuck mount fails the test instead of hanging.

// needFUSE fails (never skips) the test when FUSE cannot work here.
func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("FUSE tests need /dev/fuse: %v (load the fuse module, or give the container --device /dev/fuse)", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatalf("FUSE tests need fusermount3 (apt-get install fuse3): %v", err)
	}
}

func newGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

var bucketN struct {
	sync.Mutex
	n int
}

// newBucket makes a fresh bucket and returns its tree.
func newBucket(t *testing.T, gw *gateway.Gateway) (string, *tree.Tree) {
	t.Helper()
	bucketN.Lock()
	bucketN.n++
	name := fmt.Sprintf("fuse-%d", bucketN.n)
	bucketN.Unlock()
	if err := gw.CreateBucket(context.Background(), name, ""); err != nil {
		t.Fatal(err)
	}
	return name, gw.Tree(name)
}

// mount mounts tr in a temporary directory until the test ends, with a
// watchdog: after limit, the mount is unmounted lazily (every operation
// on it fails) and the test fails.
func mount(t *testing.T, tr *tree.Tree, opt fuse.Options, limit time.Duration) string {
	t.Helper()
	needFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opt.SpoolDir = t.TempDir()
	m, err := fuse.Mount(tr, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-stop:
		case <-time.After(limit):
			t.Errorf("the test still runs after %v: unmounting %s lazily", limit, dir)
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		if err := m.Unmount(); err != nil {
			t.Logf("unmount: %v; lazily", err)
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
		select {
		case <-m.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("%s still served 10 s after unmounting", dir)
		}
	})
	return dir
}

// TestFuseTree runs the tree's conformance suite through a mount: an
// adapter turns each call into plain file operations (package os) on the
// mount of a gateway bucket on a five-node test grid.
func TestFuseTree(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	treetest.Run(t, func(t *testing.T) treetest.Env {
		if strings.HasSuffix(t.Name(), "/InvalidPaths") {
			// The kernel resolves "." and ".." and drops empty
			// elements before the mount sees a path: "a/../b" is "b".
			t.Skip("paths are cleaned by the kernel")
		}
		name, tr := newBucket(t, gw)
		dir := mount(t, tr, fuse.Options{}, 60*time.Second)
		return treetest.Env{FS: osFS(dir), Store: gw.TreeStore(name)}
	})
}

// osFS is treetest.FS through plain file operations under a directory.
type osFS string

func (d osFS) p(name string) string {
	return filepath.Join(string(d), filepath.FromSlash(path.Clean("/"+name)))
}

// fsErr turns an errno back into the tree's error.
func fsErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		switch e {
		case syscall.ENOENT:
			err = fs.ErrNotExist
		case syscall.EEXIST:
			err = fs.ErrExist
		case syscall.ENOTEMPTY:
			err = tree.ErrNotEmpty
		case syscall.EISDIR:
			err = tree.ErrIsDir
		case syscall.ENOTDIR:
			err = tree.ErrNotDir
		case syscall.EINVAL,
			// The kernel refuses to remove the mount point (EBUSY) or
			// to rename onto it (EXDEV) before the mount sees it: the
			// root, which the tree refuses with ErrInvalid.
			syscall.EBUSY, syscall.EXDEV:
			err = fs.ErrInvalid
		}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func infoOf(name string, fi os.FileInfo) tree.Info {
	p := strings.Trim(path.Clean("/"+name), "/")
	i := tree.Info{Path: p, Size: fi.Size(), Mode: fi.Mode() & (fs.ModePerm | fs.ModeDir), ModTime: fi.ModTime()}
	if i.IsDir() {
		i.Size = 0
		if fi.ModTime().Unix() == 0 {
			// A directory without a time of its own: implied by keys.
			i.ModTime, i.Implied = time.Time{}, p != ""
		}
	}
	return i
}

func (d osFS) Stat(ctx context.Context, name string) (tree.Info, error) {
	fi, err := os.Stat(d.p(name))
	if err != nil {
		return tree.Info{}, fsErr("stat", name, err)
	}
	return infoOf(name, fi), nil
}

// ReadDir reads the whole directory and pages it in the tree's order.
func (d osFS) ReadDir(ctx context.Context, name, after string, limit int) ([]tree.Info, string, error) {
	des, err := os.ReadDir(d.p(name))
	if err != nil {
		return nil, "", fsErr("readdir", name, err)
	}
	key := func(de os.DirEntry) string {
		if de.IsDir() {
			return de.Name() + "/"
		}
		return de.Name()
	}
	sort.Slice(des, func(i, j int) bool { return key(des[i]) < key(des[j]) })
	var out []tree.Info
	for _, de := range des {
		if after != "" && key(de) <= after {
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
		fi, err := de.Info()
		if err != nil {
			return nil, "", fsErr("readdir", name, err)
		}
		out = append(out, infoOf(path.Join(name, de.Name()), fi))
	}
	return out, "", nil
}

func (d osFS) Create(ctx context.Context, name string, r io.Reader, opt tree.CreateOptions) (tree.Info, error) {
	fl := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if opt.Exclusive {
		fl |= os.O_EXCL
	}
	mode := opt.Mode
	if mode == 0 {
		mode = 0o644
	}
	f, err := os.OpenFile(d.p(name), fl, mode)
	if err != nil {
		return tree.Info{}, fsErr("create", name, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return tree.Info{}, fsErr("create", name, err)
	}
	if opt.Mode != 0 {
		if err := f.Chmod(opt.Mode); err != nil {
			f.Close()
			return tree.Info{}, fsErr("create", name, err)
		}
	}
	if !opt.ModTime.IsZero() {
		if err := os.Chtimes(d.p(name), time.Time{}, opt.ModTime); err != nil {
			f.Close()
			return tree.Info{}, fsErr("create", name, err)
		}
	}
	if err := f.Close(); err != nil {
		return tree.Info{}, fsErr("create", name, err)
	}
	return d.Stat(ctx, name)
}

func (d osFS) Open(ctx context.Context, name string, off, length int64) (io.ReadCloser, tree.Info, error) {
	f, err := os.Open(d.p(name))
	if err != nil {
		return nil, tree.Info{}, fsErr("open", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, tree.Info{}, fsErr("open", name, err)
	}
	i := infoOf(name, fi)
	if i.IsDir() {
		f.Close()
		return nil, i, fsErr("open", name, syscall.EISDIR)
	}
	if off < 0 || off > i.Size {
		f.Close()
		return nil, i, fsErr("open", name, fs.ErrInvalid)
	}
	if length < 0 {
		length = i.Size - off
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, off, length), f}, i, nil
}

func (d osFS) Mkdir(ctx context.Context, name string, mode fs.FileMode) error {
	if mode == 0 {
		mode = 0o755
	}
	return fsErr("mkdir", name, os.Mkdir(d.p(name), mode))
}

func (d osFS) Rename(ctx context.Context, from, to string, opt tree.RenameOptions) error {
	if opt.NoReplace {
		return fsErr("rename", from, unix.Renameat2(unix.AT_FDCWD, d.p(from), unix.AT_FDCWD, d.p(to), unix.RENAME_NOREPLACE))
	}
	return fsErr("rename", from, syscall.Rename(d.p(from), d.p(to)))
}

func (d osFS) Remove(ctx context.Context, name string, opt tree.RemoveOptions) error {
	fi, err := os.Stat(d.p(name))
	if err != nil {
		return fsErr("remove", name, err)
	}
	if !fi.IsDir() {
		return fsErr("remove", name, syscall.Unlink(d.p(name)))
	}
	if opt.Recursive {
		des, err := os.ReadDir(d.p(name))
		if err != nil {
			return fsErr("remove", name, err)
		}
		for _, de := range des {
			if err := d.Remove(ctx, path.Join(name, de.Name()), opt); err != nil {
				return err
			}
		}
	}
	return fsErr("remove", name, syscall.Rmdir(d.p(name)))
}

func (d osFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return fsErr("chmod", name, syscall.Chmod(d.p(name), uint32(mode.Perm())))
}

func (d osFS) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	return fsErr("chtimes", name, os.Chtimes(d.p(name), time.Time{}, mtime))
}

// posixCase is one behaviour checked on a plain directory and on the
// mount. quilt, if set, is the errno the mount gives instead of
// succeeding, where Quilt differs from POSIX (docs/mounts.md).
type posixCase struct {
	name  string
	f     func(t *testing.T, dir string) error
	quilt syscall.Errno
}

func write(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, name, want string) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil || string(b) != want {
		t.Fatalf("read %s: %q, %v; want %q", name, b, err, want)
	}
}

// errno checks that err is the errno want.
func errno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

var posixCases = []posixCase{
	{name: "CreateReadStat", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "hello")
		readAll(t, d+"/a", "hello")
		fi, err := os.Stat(d + "/a")
		if err != nil || fi.Size() != 5 || !fi.Mode().IsRegular() {
			t.Fatalf("stat: %v, %v", fi, err)
		}
		return nil
	}},
	{name: "Exclusive", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "x")
		_, err := os.OpenFile(d+"/a", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		errno(t, "O_EXCL on a file", err, syscall.EEXIST)
		return nil
	}},
	{name: "Truncate", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "hello world")
		if err := os.Truncate(d+"/a", 5); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/a", "hello")
		if err := os.Truncate(d+"/a", 7); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/a", "hello\x00\x00")
		f, err := os.OpenFile(d+"/a", os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("new")
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/a", "new")
		return nil
	}},
	{name: "WriteInPlaceAndAppend", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "0123456789")
		f, err := os.OpenFile(d+"/a", os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("XY"), 4)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/a", "0123XY6789")
		f, err = os.OpenFile(d+"/a", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("end")
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/a", "0123XY6789end")
		return nil
	}},
	{name: "ReadWhileAnotherHandleWrites", f: func(t *testing.T, d string) error {
		w, err := os.Create(d + "/a")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		w.WriteString("first")
		readAll(t, d+"/a", "first")
		des, _ := os.ReadDir(d)
		if len(des) != 1 || des[0].Name() != "a" {
			t.Fatalf("listing while open: %v", des)
		}
		w.WriteString(" second")
		r, err := os.Open(d + "/a")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		if string(b) != "first second" {
			t.Fatalf("read %q", b)
		}
		return w.Close()
	}},
	{name: "RenameOverFile", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "new")
		write(t, d+"/b", "old")
		if err := os.Rename(d+"/a", d+"/b"); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/b", "new")
		_, err := os.Stat(d + "/a")
		errno(t, "stat renamed", err, syscall.ENOENT)
		return nil
	}},
	{name: "RenameDirs", f: func(t *testing.T, d string) error {
		// syscall.Rename: os.Rename refuses a directory target itself.
		os.MkdirAll(d+"/x/sub", 0o755)
		write(t, d+"/x/sub/f", "f")
		os.Mkdir(d+"/empty", 0o755)
		os.Mkdir(d+"/full", 0o755)
		write(t, d+"/full/g", "g")
		write(t, d+"/file", "file")
		// rename(2) allows EEXIST or ENOTEMPTY here; Quilt gives ENOTEMPTY.
		if err := syscall.Rename(d+"/x", d+"/full"); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("dir over non-empty dir: %v", err)
		}
		errno(t, "file over dir", syscall.Rename(d+"/file", d+"/empty"), syscall.EISDIR)
		errno(t, "dir over file", syscall.Rename(d+"/x", d+"/file"), syscall.ENOTDIR)
		errno(t, "dir into itself", syscall.Rename(d+"/x", d+"/x/sub/in"), syscall.EINVAL)
		if err := syscall.Rename(d+"/x", d+"/empty"); err != nil {
			t.Fatal(err)
		}
		readAll(t, d+"/empty/sub/f", "f")
		return nil
	}},
	{name: "Errors", f: func(t *testing.T, d string) error {
		os.Mkdir(d+"/dir", 0o755)
		write(t, d+"/dir/f", "f")
		_, err := os.Stat(d + "/missing")
		errno(t, "stat missing", err, syscall.ENOENT)
		errno(t, "unlink missing", syscall.Unlink(d+"/missing"), syscall.ENOENT)
		errno(t, "unlink dir", syscall.Unlink(d+"/dir"), syscall.EISDIR)
		errno(t, "rmdir non-empty", syscall.Rmdir(d+"/dir"), syscall.ENOTEMPTY)
		errno(t, "rmdir file", syscall.Rmdir(d+"/dir/f"), syscall.ENOTDIR)
		errno(t, "mkdir existing", os.Mkdir(d+"/dir", 0o755), syscall.EEXIST)
		_, err = os.OpenFile(d+"/dir", os.O_WRONLY, 0)
		errno(t, "open dir for writing", err, syscall.EISDIR)
		_, err = os.Create(d + "/nodir/f")
		errno(t, "create in missing dir", err, syscall.ENOENT)
		_, err = os.Create(d + "/dir/f/g")
		errno(t, "create under a file", err, syscall.ENOTDIR)
		if err := syscall.Unlink(d + "/dir/f"); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Rmdir(d + "/dir"); err != nil {
			t.Fatal(err)
		}
		return nil
	}},
	{name: "ChmodUtimens", f: func(t *testing.T, d string) error {
		write(t, d+"/a", "a")
		os.Mkdir(d+"/dir", 0o755)
		mt := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
		for _, p := range []string{d + "/a", d + "/dir"} {
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mt, mt); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p)
			if err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mt) {
				t.Fatalf("%s: %v %v, %v", p, fi.Mode(), fi.ModTime(), err)
			}
		}
		return nil
	}},
	{name: "UnlinkOpenFile", f: func(t *testing.T, d string) error {
		f, err := os.Create(d + "/a")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.WriteString("data")
		if err := os.Remove(d + "/a"); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4)
		if _, err := f.ReadAt(b, 0); err != nil || string(b) != "data" {
			t.Fatalf("read of the unlinked file: %q, %v", b, err)
		}
		if err := f.Truncate(2); err != nil {
			t.Fatalf("ftruncate of the unlinked file: %v", err)
		}
		if err := f.Chmod(0o600); err != nil {
			t.Fatalf("fchmod of the unlinked file: %v", err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 2 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("fstat of the unlinked file: %v, %v", fi, err)
		}
		f.Close()
		_, err = os.Stat(d + "/a")
		errno(t, "stat unlinked", err, syscall.ENOENT)
		return nil
	}},
	{name: "Symlink", quilt: syscall.EPERM, f: func(t *testing.T, d string) error {
		write(t, d+"/a", "a")
		return os.Symlink("a", d+"/l")
	}},
	{name: "HardLink", quilt: syscall.EPERM, f: func(t *testing.T, d string) error {
		write(t, d+"/a", "a")
		return os.Link(d+"/a", d+"/l")
	}},
	{name: "Fifo", quilt: syscall.EPERM, f: func(t *testing.T, d string) error {
		return syscall.Mkfifo(d+"/p", 0o644)
	}},
	{name: "RenameExchange", quilt: syscall.EINVAL, f: func(t *testing.T, d string) error {
		write(t, d+"/a", "a")
		write(t, d+"/b", "b")
		return unix.Renameat2(unix.AT_FDCWD, d+"/a", unix.AT_FDCWD, d+"/b", unix.RENAME_EXCHANGE)
	}},
}

// TestFusePOSIX runs each case on a plain directory and on a mount: the
// mount does as the plain directory does, except where a case names the
// error Quilt gives instead.
func TestFusePOSIX(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	_, tr := newBucket(t, gw)
	mnt := mount(t, tr, fuse.Options{}, 60*time.Second)
	plain := t.TempDir()
	for _, c := range posixCases {
		t.Run(c.name, func(t *testing.T) {
			for _, side := range []struct{ name, root string }{{"plain", plain}, {"mount", mnt}} {
				d := filepath.Join(side.root, c.name)
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				err := c.f(t, d)
				switch {
				case side.name == "mount" && c.quilt != 0:
					errno(t, side.name, err, c.quilt)
				case err != nil:
					t.Fatalf("%s: %v", side.name, err)
				}
			}
		})
	}
}

// TestFuseInvalidation: with the kernel's caches kept a minute, a file
// written, replaced and removed through another tree of the bucket (as S3
// or another gateway would) shows on the mount at once: the tree's change
// events invalidate the cached entries and attributes.
func TestFuseInvalidation(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	name, tr := newBucket(t, gw)
	mnt := mount(t, tr, fuse.Options{CacheTimeout: time.Minute}, 60*time.Second)
	other := gw.Tree(name) // another door: its changes arrive as KindChanged
	ctx := context.Background()
	put := func(p, body string) {
		t.Helper()
		if _, err := other.Create(ctx, p, strings.NewReader(body), tree.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Cache a negative entry, then a file.
	if _, err := os.Stat(mnt + "/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat before: %v", err)
	}
	put("f", "one")
	waitFor(t, "the new file", func() bool { b, err := os.ReadFile(mnt + "/f"); return err == nil && string(b) == "one" })
	put("f", "three!!")
	waitFor(t, "the new size and bytes", func() bool {
		fi, err := os.Stat(mnt + "/f")
		b, _ := os.ReadFile(mnt + "/f")
		return err == nil && fi.Size() == 7 && string(b) == "three!!"
	})
	if err := other.Remove(ctx, "f", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file gone", func() bool { _, err := os.Stat(mnt + "/f"); return errors.Is(err, fs.ErrNotExist) })
	if err := other.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new directory listed", func() bool {
		des, err := os.ReadDir(mnt)
		return err == nil && len(des) == 1 && des[0].Name() == "d"
	})
}

// waitFor polls cond for up to 10 s (events arrive within the gateway's
// scan, at most ten a second).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not seen on the mount after 10 s", what)
}

// TestFuseUnmount: fusermount3 -u ends the mount's server; files still
// open drop their changes, and nothing half-written reaches the tree.
func TestFuseUnmount(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	_, tr := newBucket(t, gw)
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	m, err := fuse.Mount(tr, dir, fuse.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("fusermount3", "-u", "-z", dir).Run() })
	write(t, dir+"/kept", "kept")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "fusermount3", "-u", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	select {
	case <-m.Done():
	case <-ctx.Done():
		t.Fatal("the server still runs after fusermount3 -u")
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("Unmount after fusermount3 -u: %v", err)
	}
	if _, err := tr.Stat(context.Background(), "kept"); err != nil {
		t.Fatalf("a file closed before the unmount: %v", err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type == 0x65735546 {
		t.Fatalf("%s is still a FUSE mount (%v)", dir, err)
	}
}

// TestFuseWorkingDirectory: a directory made through the mount stays a
// working directory once the tree's events about it (the mount's own
// mkdir, then the store's change) have come back: an entry that still
// exists is not invalidated (the kernel would unhash the directory, and
// getcwd(3) would fail, as git's did).
func TestFuseWorkingDirectory(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	_, tr := newBucket(t, gw)
	events, cancel := tr.Subscribe(100)
	defer cancel()
	mnt := mount(t, tr, fuse.Options{}, 60*time.Second)
	if err := os.Mkdir(mnt+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(mnt + "/d")
	getwd := func() {
		t.Helper()
		if wd, err := syscall.Getwd(); err != nil || wd != mnt+"/d" {
			t.Fatalf("getcwd in the mount: %q, %v", wd, err)
		}
	}
	getwd()
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case e := <-events:
			seen = e.Kind == tree.KindChanged && strings.Trim(e.Path, "/") == "d"
		case <-deadline:
			t.Fatal("no change event for d")
		}
		getwd()
	}
	for i := 0; i < 10; i++ { // the mount's subscriber gets it too
		time.Sleep(50 * time.Millisecond)
		getwd()
	}
}
