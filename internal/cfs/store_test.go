package cfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
)

// storeOf bootstraps a fresh namespace for u and opens its store view,
// following the grid, until the test ends.
func storeOf(t *testing.T, ctx context.Context, u *user, name string) (*FS, *Store) {
	t.Helper()
	if _, err := Bootstrap(ctx, u.opt, name, dag.ConfigRules); err != nil {
		t.Fatal(err)
	}
	opt := u.opt
	opt.GrantWait = -1
	opt.Replica = filepath.Join(t.TempDir(), "store.db") // the Home's ns.db stays free
	f, err := Open(opt, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Follow(fctx, nil) }()
	t.Cleanup(func() { stop(); <-done; f.Close() })
	return f, s
}

// TestStoreTree runs the file tree's conformance suite on a namespace
// through Store, on a three-node grid, the store itself as the other
// door. Four of its tests set modes other than 0644/0755 or times and
// expect them back, which a namespace does not keep (it keeps the
// executable bit, and entries have their own times): they are not run
// here, and TestStoreModes checks what is kept instead. Nor is the test
// of keys written through S3 (implied directories, a key both a file and
// a directory, user metadata), which a namespace cannot hold.
func TestStoreTree(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	var n atomic.Int32
	treetest.Run(t, func(t *testing.T) treetest.Env {
		switch t.Name()[strings.LastIndex(t.Name(), "/")+1:] {
		case "CreateRead", "Mkdir", "RenameFile", "Attrs":
			t.Skip("sets a mode other than 0644/0755, or a time: not kept by a namespace (TestStoreModes)")
		case "OtherDoor":
			t.Skip("S3's keys: implied directories, a file and a directory of one name, user metadata; a namespace has none of them")
		}
		u := newUser(t, g, int(n.Load())%3)
		_, s := storeOf(t, testCtx(t), u, fmt.Sprint("ns", n.Add(1)))
		return treetest.Env{FS: tree.New(s), Store: s}
	})
}

// TestStoreModes: what the namespace keeps of modes and times through
// the tree: the executable bit (any x bit sets it), directories 0755,
// entries' own times (a time set is accepted and not kept); links and
// the bit survive renames; a key without a grant is refused with
// fs.ErrPermission before anything is written.
func TestStoreModes(t *testing.T) {
	ctx, alice, bob, _ := setup(t)
	af, s := storeOf(t, ctx, alice, "modes")
	tr := tree.New(s)
	for name, c := range map[string]struct{ create, want fs.FileMode }{
		"plain": {0o600, 0o644}, "exec": {0o700, 0o755}, "group-x": {0o610, 0o755}, "default": {0, 0o644},
	} {
		before := time.Now().Add(-time.Second)
		if _, err := tr.Create(ctx, name, strings.NewReader(name), tree.CreateOptions{Mode: c.create, ModTime: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
		i, err := tr.Stat(ctx, name)
		if err != nil || i.Mode != c.want || i.ModTime.Before(before) {
			t.Errorf("%s created %v: %+v, %v; want mode %v and the entry's time", name, c.create, i, err, c.want)
		}
	}
	if err := tr.Chmod(ctx, "exec", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.Chmod(ctx, "plain", 0o711); err != nil {
		t.Fatal(err)
	}
	if err := tr.Chtimes(ctx, "plain", time.Unix(1, 0)); err != nil {
		t.Errorf("chtimes is accepted: %v", err)
	}
	for name, want := range map[string]bool{"exec": false, "plain": true} {
		info, err := af.Stat("/" + name)
		if err != nil || info.Exec != want {
			t.Errorf("%s: exec %v, %v; want %v", name, info.Exec, err, want)
		}
		if i, _ := tr.Stat(ctx, name); i.ModTime.Before(time.Unix(100, 0)) {
			t.Errorf("%s: the time set was kept: %v", name, i.ModTime)
		}
	}
	if err := tr.Mkdir(ctx, "d", 0o700); err != nil {
		t.Fatal(err)
	}
	if i, err := tr.Stat(ctx, "d"); err != nil || i.Mode != fs.ModeDir|0o755 {
		t.Errorf("d: %+v, %v", i, err)
	}
	if err := tr.Symlink(ctx, "../exec", "d/l"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Rename(ctx, "plain", "d/plain", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Rename(ctx, "d", "e", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Readlink(ctx, "e/l"); err != nil || got != "../exec" {
		t.Errorf("e/l: %q, %v", got, err)
	}
	if info, err := af.Stat("/e/plain"); err != nil || !info.Exec {
		t.Errorf("e/plain after two renames: %+v, %v", info, err)
	}
	if _, err := af.Stat("/d"); err == nil {
		t.Error("/d is still there after its rename")
	}

	// Bob's key has no grant at all.
	if _, err := bob.opt.Home.Import(af.Cap().String(), "modes", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.opt.Home.GenKey("default"); err != nil {
		t.Fatal(err)
	}
	_, bs := openStore(t, ctx, bob, "modes")
	bt := tree.New(bs)
	eventually(t, "the namespace at bob", func() bool { // entries arrive in any order
		for _, p := range []string{"exec", "e/plain", "e/l"} {
			if _, err := bt.Stat(ctx, p); err != nil {
				return false
			}
		}
		return true
	})
	for what, err := range map[string]error{
		"create":  func() error { _, err := bt.Create(ctx, "x", strings.NewReader("x"), tree.CreateOptions{}); return err }(),
		"mkdir":   bt.Mkdir(ctx, "y", 0),
		"remove":  bt.Remove(ctx, "exec", tree.RemoveOptions{}),
		"rename":  bt.Rename(ctx, "exec", "e/exec2", tree.RenameOptions{}),
		"chmod":   bt.Chmod(ctx, "exec", 0o755),
		"symlink": bt.Symlink(ctx, "exec", "z"),
		"check":   bt.CheckWrite(ctx, "e/new"),
	} {
		if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, ErrNoGrant) {
			t.Errorf("%s without a grant: %v", what, err)
		}
	}
	for _, p := range []string{"x", "y", "z", "e/exec2"} {
		if _, err := bt.Stat(ctx, p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a refused change: %v", p, err)
		}
	}
	if _, err := bt.Stat(ctx, "exec"); err != nil {
		t.Errorf("exec after a refused rename: %v", err)
	}
}

// openStore opens the store view of u's namespace name (made elsewhere),
// following the grid, until the test ends.
func openStore(t *testing.T, ctx context.Context, u *user, name string) (*FS, *Store) {
	t.Helper()
	opt := u.opt
	opt.GrantWait = -1
	opt.Replica = filepath.Join(t.TempDir(), "store.db") // the Home's ns.db stays free
	f, err := Open(opt, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Follow(fctx, nil) }()
	t.Cleanup(func() { stop(); <-done; f.Close() })
	return f, s
}

// TestStoreList: listings as S3 gives them, with and without the
// delimiter, in pages; an object namespace has no store view.
func TestStoreList(t *testing.T) {
	ctx, alice, _, _ := setup(t)
	_, s := storeOf(t, ctx, alice, "list")
	for _, k := range []string{"a/x", "a/b/y", "a!", "c"} {
		if _, err := s.Put(ctx, k, strings.NewReader(k), -1, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := func(l tree.Listing) string {
		var out []string
		for _, o := range l.Objects {
			out = append(out, o.Key)
		}
		for _, p := range l.Prefixes {
			out = append(out, "P:"+p)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		prefix, delim, after string
		limit                int
		want                 string
		more                 bool
	}{
		{"", "/", "", 0, "a! c P:a/", false},
		{"", "", "", 0, "a! a/ a/b/ a/b/y a/x c", false},
		{"a/", "/", "", 0, "a/ a/x P:a/b/", false},
		{"a/", "", "", 0, "a/ a/b/ a/b/y a/x", false},
		{"", "", "", 2, "a! a/", true},
		{"", "", "a/", 2, "a/b/ a/b/y", true},
		{"", "/", "a/", 0, "c", false},
		{"a", "/", "", 0, "a! P:a/", false},
		{"nosuch/", "/", "", 0, "", false},
	} {
		l, err := s.List(ctx, c.prefix, c.delim, c.after, c.limit)
		if err != nil || keys(l) != c.want || l.More != c.more {
			t.Errorf("List(%q, %q, %q, %d) = %q more %v, %v; want %q more %v", c.prefix, c.delim, c.after, c.limit, keys(l), l.More, err, c.want, c.more)
		}
	}
	if _, err := s.List(ctx, "", ",", "", 0); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("another delimiter: %v", err)
	}
	if _, err := Bootstrap(ctx, alice.opt, "objects", dag.ObjectRules); err != nil {
		t.Fatal(err)
	}
	f, err := Open(alice.opt, "objects")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := NewStore(f, nil); !errors.Is(err, ErrNotConfig) {
		t.Errorf("the store of an object namespace: %v", err)
	}
}
