package fuse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/cfs"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
)

// A mount of a namespace of the configuration filesystem (cfs.Store under
// the same tree and FUSE server as a bucket). As the bucket tests, the
// test never runs a program stored on the mount, and a watchdog unmounts
// it lazily if the test hangs.

// cfsUser is one machine of the config filesystem: its own Home, reaching
// the grid through node via first.
func cfsUser(t *testing.T, g *testgrid.Grid, via int) cfs.Options {
	id := string(g.Nodes[via].ID())
	return cfs.Options{
		Home: cfs.Home(t.TempDir()), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true,
		Order: func(ms []member.Member) []member.Member {
			slices.SortStableFunc(ms, func(a, b member.Member) int {
				switch {
				case a.ID == id && b.ID != id:
					return -1
				case b.ID == id && a.ID != id:
					return 1
				}
				return 0
			})
			return ms
		},
	}
}

// cfsDo runs one command's worth of work on the user's namespace, as a
// cfs command does: open, sync, work, close.
func cfsDo(t *testing.T, ctx context.Context, opt cfs.Options, work func(f *cfs.FS) error) error {
	t.Helper()
	f, err := cfs.Open(opt, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(ctx); err != nil {
		return err
	}
	return work(f)
}

// mountCFS mounts the user's namespace as quilt mount cfs: does (its own
// replica, following the grid, no wait for grants) until the test ends.
// It returns the mount's directory and its server.
func mountCFS(t *testing.T, ctx context.Context, opt cfs.Options, cache, limit time.Duration) (string, *fuse.Server) {
	t.Helper()
	needFUSE(t)
	opt.GrantWait = -1
	opt.Replica = filepath.Join(t.TempDir(), "mount.db")
	f, err := cfs.Open(opt, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := cfs.NewStore(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { defer close(followed); f.Follow(fctx, nil) }()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := fuse.Mount(tree.New(st), dir, fuse.Options{SpoolDir: t.TempDir(), CacheTimeout: cache, Symlinks: true})
	if err != nil {
		t.Fatal(err)
	}
	watchdog := make(chan struct{})
	go func() {
		select {
		case <-watchdog:
		case <-time.After(limit):
			t.Errorf("the test still runs after %v: unmounting %s lazily", limit, dir)
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
	}()
	t.Cleanup(func() {
		close(watchdog)
		if err := m.Unmount(); err != nil {
			t.Logf("unmount: %v; lazily", err)
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
		select {
		case <-m.Done():
		case <-time.After(10 * time.Second):
			t.Errorf("%s still served 10 s after unmounting", dir)
		}
		stop()
		<-followed
		f.Close()
	})
	return dir, m
}

// within waits for cond, failing the test after 60 s (a deadline for a loaded machine, not a speed bound).
func within(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cfsSetup starts a three-node grid: alice bootstraps namespace
// "cluster" (root key) through node 0 and writes /etc/hosts and an empty
// /var; bob, through
// node 1, and carol, through node 2, import it with keys of their own that
// alice grants /shared.
func cfsSetup(t *testing.T) (ctx context.Context, alice, bob, carol cfs.Options) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	alice, bob, carol = cfsUser(t, g, 0), cfsUser(t, g, 1), cfsUser(t, g, 2)
	c, err := cfs.Bootstrap(ctx, alice, "cluster", dag.ConfigRules)
	if err != nil {
		t.Fatal(err)
	}
	err = cfsDo(t, ctx, alice, func(f *cfs.FS) error {
		if err := f.Write(ctx, "/etc/hosts", strings.NewReader("127.0.0.1 localhost\n")); err != nil {
			return err
		}
		if err := f.Mkdir(ctx, "/var", false); err != nil {
			return err
		}
		return f.Mkdir(ctx, "/shared", false)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []cfs.Options{bob, carol} {
		if _, err := u.Home.Import(c.String(), "cluster", ""); err != nil {
			t.Fatal(err)
		}
		pub, err := u.Home.GenKey("default")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfsDo(t, ctx, alice, func(f *cfs.FS) error {
			_, err := f.Grant(ctx, cfs.EncodeKey(pub), "/shared", "")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, alice, bob, carol
}

// TestFuseCFS mounts bob's copy of the namespace, with a one-minute
// cache so that what shows early comes from the namespace's change
// notifications: bob writes files, directories, links and the executable
// bit under /shared, which he was granted, and alice reads them through
// the grid; carol's entries (a new file, a file replaced, a file removed)
// show in bob's mount at once; writes where bob has no
// grant fail with EACCES while reads there work; fusermount3 -u ends it.
func TestFuseCFS(t *testing.T) {
	ctx, alice, bob, carol := cfsSetup(t)
	mnt, m := mountCFS(t, ctx, bob, time.Minute, 3*time.Minute)
	sh := filepath.Join(mnt, "shared")

	// The namespace as the mount first shows it.
	// Alice's entries arrive by gossip, in any order.
	within(t, "alice's /etc/hosts and /var in bob's mount", func() error {
		b, err := os.ReadFile(filepath.Join(mnt, "etc/hosts"))
		if err == nil && string(b) != "127.0.0.1 localhost\n" {
			t.Fatalf("/etc/hosts reads %q", b)
		}
		if err == nil {
			_, err = os.Stat(filepath.Join(mnt, "var"))
		}
		return err
	})

	// Alice's grant to bob travels by gossip too: until the mount's
	// replica has it, bob's writes are refused.
	within(t, "bob's grant in bob's mount", func() error {
		return os.WriteFile(filepath.Join(sh, "probe"), nil, 0o644)
	})
	if err := os.Remove(filepath.Join(sh, "probe")); err != nil {
		t.Fatal(err)
	}

	// Files, directories, a large file (a grid object), a symbolic link,
	// the executable bit, a rename and a removal, through the mount.
	big := bytes.Repeat([]byte("0123456789abcdef"), (dag.BlocksMax+1000)/16)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(sh, "app/conf.d"), 0o755))
	must(os.WriteFile(filepath.Join(sh, "app/conf.d/a.conf"), []byte("a=1\n"), 0o644))
	must(os.WriteFile(filepath.Join(sh, "app/big"), big, 0o644))
	must(os.WriteFile(filepath.Join(sh, "app/run.sh"), []byte("echo hi\n"), 0o755))
	must(os.WriteFile(filepath.Join(sh, "app/plain.sh"), []byte("echo plain\n"), 0o644))
	must(os.Chmod(filepath.Join(sh, "app/plain.sh"), 0o700))
	must(os.Symlink("conf.d/a.conf", filepath.Join(sh, "app/current")))
	must(os.Symlink("/etc/hosts", filepath.Join(sh, "app/abs")))
	must(os.WriteFile(filepath.Join(sh, "app/old"), []byte("moved\n"), 0o644))
	must(os.Rename(filepath.Join(sh, "app/old"), filepath.Join(sh, "app/new")))
	// An overwrite (O_TRUNC of an existing file) is one entry: no empty
	// version on the way (checked at alice's below).
	must(os.WriteFile(filepath.Join(sh, "app/over"), []byte("v1\n"), 0o644))
	must(os.WriteFile(filepath.Join(sh, "app/over"), []byte("v2\n"), 0o644))
	must(os.MkdirAll(filepath.Join(sh, "tmp/x"), 0o755))
	must(os.WriteFile(filepath.Join(sh, "tmp/x/f"), []byte("f"), 0o644))
	must(os.RemoveAll(filepath.Join(sh, "tmp")))

	readIs := func(p, want string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Fatalf("%s reads %.40q, %v; want %.40q", p, b, err, want)
		}
	}
	readIs(filepath.Join(sh, "app/big"), string(big))
	readIs(filepath.Join(sh, "app/current"), "a=1\n")
	readIs(filepath.Join(sh, "app/new"), "moved\n")
	readIs(filepath.Join(sh, "app/over"), "v2\n")
	if tg, err := os.Readlink(filepath.Join(sh, "app/current")); err != nil || tg != "conf.d/a.conf" {
		t.Errorf("readlink app/current: %q, %v", tg, err)
	}
	if fi, err := os.Lstat(filepath.Join(sh, "app/current")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("lstat app/current: %v, %v", fi, err)
	}
	for name, want := range map[string]fs.FileMode{"run.sh": 0o755, "plain.sh": 0o755, "new": 0o644, "conf.d": fs.ModeDir | 0o755} {
		if fi, err := os.Stat(filepath.Join(sh, "app", name)); err != nil || fi.Mode() != want {
			t.Errorf("app/%s: mode %v (%v), want %v", name, fi.Mode(), err, want)
		}
	}
	for _, gone := range []string{"app/old", "tmp"} {
		if _, err := os.Lstat(filepath.Join(sh, gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after its rename or removal: %v", gone, err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(sh, "app"))
	must(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{"abs", "big", "conf.d", "current", "new", "over", "plain.sh", "run.sh"}; !slices.Equal(names, want) {
		t.Errorf("app lists %v, want %v", names, want)
	}

	// Alice, another machine, reads bob's entries through the grid:
	// signed with bob's key and gossiped.
	within(t, "bob's entries at alice", func() error {
		return cfsDo(t, ctx, alice, func(f *cfs.FS) error {
			var b bytes.Buffer
			if err := f.Cat(ctx, "/shared/app/current", &b); err != nil {
				return err
			}
			if b.String() != "a=1\n" {
				return errors.New("current reads " + b.String())
			}
			for p, exec := range map[string]bool{"/shared/app/run.sh": true, "/shared/app/plain.sh": true, "/shared/app/new": false} {
				info, err := f.Stat(p)
				if err != nil {
					return err
				}
				if info.Exec != exec {
					return fmt.Errorf("%s: exec %v at alice, want %v", p, info.Exec, exec)
				}
			}
			info, err := f.Stat("/shared/app/abs")
			if err != nil || info.Type != dag.Symlink || info.Target != "/etc/hosts" {
				return fmt.Errorf("/shared/app/abs at alice: %+v, %v", info, err)
			}
			log, err := f.Log("/shared/app/conf.d/a.conf")
			if err != nil || len(log) == 0 || log[0].By == "root" {
				return fmt.Errorf("a.conf's log at alice: %+v, %v (want bob's key as the signer)", log, err)
			}
			if _, err := f.Stat("/shared/tmp"); err == nil {
				return errors.New("/shared/tmp is still there at alice")
			}
			var over bytes.Buffer
			if err := f.Cat(ctx, "/shared/app/over", &over); err != nil || over.String() != "v2\n" {
				return fmt.Errorf("over reads %q, %v", over.String(), err)
			}
			// cp over a file: its O_TRUNC commits an empty version, then
			// its close the new content (docs/mounts.md).
			if log, err := f.Log("/shared/app/over"); err != nil || len(log) < 2 || !log[len(log)-1].Current {
				t.Errorf("over's log at alice: %+v, %v; want the writes, the last one current", log, err)
			}
			return nil
		})
	})

	// Carol's entries, through node 2, show in bob's mount (the cache is
	// a minute long: the namespace's changes invalidate it).
	readIs(filepath.Join(sh, "app/conf.d/a.conf"), "a=1\n") // cached now
	if _, err := os.Stat(filepath.Join(sh, "app/plain.sh")); err != nil {
		t.Fatal(err)
	}
	within(t, "bob's entries at carol", func() error {
		return cfsDo(t, ctx, carol, func(f *cfs.FS) error { _, err := f.Stat("/shared/app/plain.sh"); return err })
	})
	must(cfsDo(t, ctx, carol, func(f *cfs.FS) error {
		if err := f.Write(ctx, "/shared/from-carol", strings.NewReader("carol\n")); err != nil {
			return err
		}
		if err := f.Rm(ctx, "/shared/app/plain.sh", false); err != nil {
			return err
		}
		return f.Write(ctx, "/shared/app/conf.d/a.conf", strings.NewReader("a=2, by carol\n"))
	}))
	within(t, "carol's entries in bob's mount", func() error {
		if fi, err := os.Stat(filepath.Join(sh, "app/conf.d/a.conf")); err != nil {
			return err
		} else if fi.Size() != int64(len("a=2, by carol\n")) {
			return fmt.Errorf("a.conf's size is still %d", fi.Size())
		}
		if _, err := os.Stat(filepath.Join(sh, "app/plain.sh")); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("plain.sh, removed by carol, stats: %v", err)
		}
		b, err := os.ReadFile(filepath.Join(sh, "from-carol"))
		if err != nil {
			return err
		}
		if string(b) != "carol\n" {
			t.Fatalf("from-carol reads %q", b)
		}
		if b, err = os.ReadFile(filepath.Join(sh, "app/conf.d/a.conf")); err != nil || string(b) != "a=2, by carol\n" {
			return errors.New("a.conf reads " + string(b))
		}
		ents, err := os.ReadDir(sh)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.Name() == "from-carol" {
				return nil
			}
		}
		return errors.New("from-carol not listed")
	})

	// No grant outside /shared: every change fails with EACCES, and
	// nothing is left behind; reads there work.
	etc := filepath.Join(mnt, "etc")
	refused := map[string]error{
		"create":        os.WriteFile(filepath.Join(etc, "new"), []byte("x"), 0o644),
		"overwrite":     os.WriteFile(filepath.Join(etc, "hosts"), []byte("x"), 0o644),
		"mkdir":         os.Mkdir(filepath.Join(etc, "d"), 0o755),
		"unlink":        os.Remove(filepath.Join(etc, "hosts")),
		"symlink":       os.Symlink("hosts", filepath.Join(etc, "l")),
		"chmod":         os.Chmod(filepath.Join(etc, "hosts"), 0o755),
		"rename out":    os.Rename(filepath.Join(etc, "hosts"), filepath.Join(sh, "hosts")),
		"rename in":     os.Rename(filepath.Join(sh, "app/new"), filepath.Join(etc, "new")),
		"rmdir":         os.Remove(filepath.Join(mnt, "var")),
		"root mkdir":    os.Mkdir(filepath.Join(mnt, "top"), 0o755),
		"root create":   os.WriteFile(filepath.Join(mnt, "top-file"), nil, 0o644),
		"truncate":      os.Truncate(filepath.Join(etc, "hosts"), 0),
		"rename shared": os.Rename(sh, filepath.Join(mnt, "shared2")),
	}
	for op, err := range refused {
		if !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s without a grant: %v, want EACCES", op, err)
		}
	}
	readIs(filepath.Join(etc, "hosts"), "127.0.0.1 localhost\n")
	for _, p := range []string{"shared/hosts", "etc/new", "etc/d", "etc/l", "top", "top-file", "shared2"} {
		if _, err := os.Lstat(filepath.Join(mnt, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a refused change: %v", p, err)
		}
	}
	readIs(filepath.Join(sh, "app/new"), "moved\n")
	if fi, err := os.Stat(filepath.Join(etc, "hosts")); err != nil || fi.Mode() != 0o644 {
		t.Errorf("etc/hosts after a refused chmod: %v, %v", fi, err)
	}

	// fusermount3 -u ends the server.
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server still runs 10 s after fusermount3 -u")
	}
}
