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
	"github.com/quilt-grid/quilt/internal/tree/posixtest"
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

func write(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fuseDifferences is where a mount differs from a local directory in
// posixtest's table, and why (docs/mounts.md, "What differs from POSIX").
var fuseDifferences = posixtest.Differences{
	"Symlink":  {Err: syscall.EPERM, Why: "the tree has no symbolic links"},
	"HardLink": {Err: syscall.EPERM, Why: "the tree has no hard links: a key is one name"},
	"Fifo":     {Err: syscall.EPERM, Why: "the tree has no special files"},
	"RenameExchange": {Err: syscall.EINVAL,
		Why: "RENAME_EXCHANGE is not offered: the tree cannot swap two keys in one step"},
	"ReadAfterUnlink": {Err: syscall.ENOENT,
		Why: "a read handle reads the object by name, one stream while reads are sequential: a new stream after the removal finds nothing"},
	"ReadAfterReplace": {Err: syscall.ENOENT,
		Why: "a read handle reads the object by name: replaced, the old file has none, and a new stream finds nothing (no inode keeps the old version)"},
}

// TestFusePOSIX runs posixtest's table of POSIX behaviours on a mount of a
// gateway bucket: the mount does as a local directory does, except in the
// cases fuseDifferences names.
func TestFusePOSIX(t *testing.T) {
	needFUSE(t)
	gw := newGateway(t)
	_, tr := newBucket(t, gw)
	mnt := mount(t, tr, fuse.Options{}, 3*time.Minute)
	posixtest.Run(t, mnt, fuseDifferences)
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
