package cfs

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/nsclient"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// user is one machine using the config filesystem: its own Home,
// reaching the grid through one node first.
type user struct {
	t   *testing.T
	opt Options
}

func newUser(t *testing.T, g *testgrid.Grid, via int) *user {
	id := string(g.Nodes[via].ID())
	return &user{t: t, opt: Options{
		Home: Home(t.TempDir()), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true,
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
	}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fs opens the user's default namespace and syncs it, as every command
// does; the caller closes it.
func (u *user) fs(ctx context.Context) *FS {
	u.t.Helper()
	f, err := Open(u.opt, "")
	if err != nil {
		u.t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		f.Close()
		u.t.Fatal(err)
	}
	return f
}

// do runs one command's worth of work on the user's namespace.
func (u *user) do(ctx context.Context, work func(f *FS) error) error {
	u.t.Helper()
	f := u.fs(ctx)
	defer f.Close()
	return work(f)
}

func (u *user) must(ctx context.Context, work func(f *FS) error) {
	u.t.Helper()
	if err := u.do(ctx, work); err != nil {
		u.t.Fatal(err)
	}
}

func (u *user) cat(ctx context.Context, p string) (string, error) {
	var b bytes.Buffer
	err := u.do(ctx, func(f *FS) error { return f.Cat(ctx, p, &b) })
	return b.String(), err
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setup starts a grid of three nodes; alice bootstraps a namespace
// through node 0, bob imports it through node 1, carol through node 2.
func setup(t *testing.T) (ctx context.Context, alice, bob, carol *user) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx = testCtx(t)
	alice, bob, carol = newUser(t, g, 0), newUser(t, g, 1), newUser(t, g, 2)
	c, err := Bootstrap(ctx, alice.opt, "cluster", dag.ConfigRules)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []*user{bob, carol} {
		if _, err := u.opt.Home.Import(c.String(), "cluster", ""); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, alice, bob, carol
}

func TestBootstrapImportExportGenkey(t *testing.T) {
	ctx, alice, bob, _ := setup(t)
	if _, err := Bootstrap(ctx, alice.opt, "cluster", dag.ConfigRules); err == nil {
		t.Error("a second namespace of the same name")
	}
	var exported nsclient.Cap
	alice.must(ctx, func(f *FS) error { exported = f.Cap(); return nil })
	var imported nsclient.Cap
	bob.must(ctx, func(f *FS) error { imported = f.Cap(); return nil })
	if exported != imported || exported.Rules != dag.ConfigRules {
		t.Fatalf("bob's capability %v is not alice's %v", imported, exported)
	}
	if _, err := bob.opt.Home.Import("quilt:ns:nonsense", "x", ""); err == nil {
		t.Error("a malformed capability was imported")
	}
	if st, _ := bob.opt.Home.State(); len(st.Namespaces) != 1 {
		t.Errorf("a failed import changed the state: %+v", st)
	}
	pub, err := bob.opt.Home.GenKey("default")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.opt.Home.GenKey("default"); err == nil {
		t.Error("genkey replaced a key")
	}
	if _, err := bob.opt.Home.GenKey("../x"); err == nil {
		t.Error("a key name with a slash")
	}
	if got, err := bob.opt.Home.ParsePub(EncodeKey(pub)); err != nil || !bytes.Equal(got, pub) {
		t.Errorf("ParsePub of the printed key: %v", err)
	}
	if got, err := bob.opt.Home.ParsePub("default"); err != nil || !bytes.Equal(got, pub) {
		t.Errorf("ParsePub of the key's name: %v", err)
	}
	// An object namespace's rules travel in its capability.
	oc, err := Bootstrap(ctx, alice.opt, "objs", dag.ObjectRules)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := bob.opt.Home.Import(oc.String(), "", ""); err != nil || n.Rules != "object" || n.Name != oc.NS.String()[:8] {
		t.Errorf("import of an object namespace: %+v, %v", n, err)
	}
}

// Every verb that changes the tree, and the ones that show it, through
// one user; another reads through another node.
func TestVerbs(t *testing.T) {
	ctx, alice, bob, _ := setup(t)
	alice.must(ctx, func(f *FS) error {
		if err := f.Mkdir(ctx, "/etc", false); err != nil {
			return err
		}
		if err := f.Mkdir(ctx, "/etc", false); err == nil {
			t.Error("mkdir of an existing directory")
		}
		if err := f.Mkdir(ctx, "/a/b/c", false); err == nil {
			t.Error("mkdir without -p under a missing directory")
		}
		if err := f.Mkdir(ctx, "/a/b/c", true); err != nil {
			return err
		}
		if err := f.Mkdir(ctx, "/a/b", true); err != nil {
			t.Errorf("mkdir -p of an existing directory: %v", err)
		}
		for _, v := range []string{"one\n", "two\n"} {
			if err := f.Write(ctx, "/etc/hosts", strings.NewReader(v)); err != nil {
				return err
			}
		}
		if err := f.Write(ctx, "/etc", strings.NewReader("x")); err == nil {
			t.Error("a write over a directory")
		}
		if err := f.Write(ctx, "/srv/deep/f", strings.NewReader("deep")); err != nil {
			t.Errorf("write makes the directories above: %v", err)
		}
		if err := f.Link(ctx, "/etc/hosts", "/etc/hosts.hard"); err != nil {
			return err
		}
		if err := f.Link(ctx, "/etc", "/etc/dir.hard"); err == nil {
			t.Error("a hard link to a directory")
		}
		if err := f.Slink(ctx, "hosts", "/etc/hosts.sym"); err != nil {
			return err
		}
		if err := f.Slink(ctx, "/etc/loop", "/etc/loop"); err != nil {
			return err
		}
		if err := f.Chmod(ctx, "/etc/hosts", true); err != nil {
			return err
		}
		if err := f.Chmod(ctx, "/etc/none", true); err == nil {
			t.Error("chmod of a missing file")
		}
		if err := f.Rm(ctx, "/a", false); err == nil {
			t.Error("rm of a directory that is not empty, without -r")
		}
		if err := f.Rm(ctx, "/a/b/c", false); err != nil {
			t.Errorf("rm of an empty directory: %v", err)
		}
		if err := f.Rm(ctx, "/a", true); err != nil {
			return err
		}
		if err := f.Rm(ctx, "/a", true); err == nil {
			t.Error("rm of a missing path")
		}
		return nil
	})
	// A file over the blocks limit is a grid object.
	huge := strings.Repeat("0123456789abcdef", (dag.BlocksMax/16)+100)
	alice.must(ctx, func(f *FS) error { return f.Write(ctx, "/srv/image.bin", strings.NewReader(huge)) })

	eventually(t, "bob reads through another node", func() bool {
		out, err := bob.cat(ctx, "/etc/hosts")
		return err == nil && out == "two\n"
	})
	for p, want := range map[string]string{"/etc/hosts.hard": "two\n", "/etc/hosts.sym": "two\n", "/srv/deep/f": "deep", "/srv/image.bin": huge} {
		eventually(t, "bob reads "+p, func() bool {
			out, err := bob.cat(ctx, p)
			return err == nil && out == want
		})
	}
	// Every entry alice made reaches bob's node in its own time: wait
	// for the last ones (the loop, the mode, the removal of /a) before
	// the checks below, which look at them all at once.
	eventually(t, "bob sees every entry alice made", func() bool {
		done := false
		err := bob.do(ctx, func(f *FS) error {
			items, err := f.Ls("/etc")
			if err != nil {
				return err
			}
			var names []string
			exec := false
			for _, it := range items {
				names = append(names, it.Name)
				exec = exec || (it.Name == "hosts" && it.Exec)
			}
			_, aErr := f.Stat("/a")
			done = strings.Join(names, " ") == "hosts hosts.hard hosts.sym loop" && exec && errors.Is(aErr, namespace.ErrNotFound)
			return nil
		})
		return err == nil && done
	})
	if _, err := bob.cat(ctx, "/etc/loop"); err == nil || !strings.Contains(err.Error(), "too many symbolic links") {
		t.Errorf("cat of a symlink loop: %v", err)
	}
	if _, err := bob.cat(ctx, "/etc"); err == nil {
		t.Error("cat of a directory")
	}
	bob.must(ctx, func(f *FS) error {
		items, err := f.Ls("/etc")
		if err != nil {
			return err
		}
		var names []string
		for _, it := range items {
			names = append(names, it.Name)
			if it.Name == "hosts" && !it.Exec {
				t.Error("chmod +x did not show")
			}
			if it.Name == "hosts.sym" && (it.Type != dag.Symlink || it.Target != "hosts") {
				t.Errorf("hosts.sym: %+v", it)
			}
		}
		if got := strings.Join(names, " "); got != "hosts hosts.hard hosts.sym loop" {
			t.Errorf("ls /etc: %s", got)
		}
		if _, err := f.Stat("/a"); !errors.Is(err, namespace.ErrNotFound) {
			t.Errorf("rm -r /a: %v", err)
		}
		tree, err := f.Tree("/")
		if err != nil {
			return err
		}
		var lines []string
		for _, it := range tree {
			lines = append(lines, strings.Repeat(" ", it.Depth)+it.Name)
		}
		if got := strings.Join(lines, ","); got != "etc, hosts, hosts.hard, hosts.sym, loop,srv, deep,  f, image.bin" {
			t.Errorf("show: %q", got)
		}
		return nil
	})
	// log and revert.
	var first dag.Hash
	alice.must(ctx, func(f *FS) error {
		log, err := f.Log("/etc/hosts")
		if err != nil {
			return err
		}
		if len(log) != 3 || log[0].Action != dag.Write || log[2].Action != dag.Mode || !log[2].Current || log[0].By != "root" || log[2].Detail != "+x" {
			t.Fatalf("log: %+v", log)
		}
		first = log[0].Hash
		if err := f.Revert(ctx, "/etc/hosts", "abc"); err == nil {
			t.Error("revert to a short prefix")
		}
		if _, err := f.Log("/nothing"); err == nil {
			t.Error("log of a path with no history")
		}
		return f.Revert(ctx, "/etc/hosts", first.String()[:8])
	})
	eventually(t, "bob reads the reverted file", func() bool {
		out, err := bob.cat(ctx, "/etc/hosts")
		return err == nil && out == "one\n"
	})
}

// A granted key writes under its directory only; a revoke keeps what it
// wrote that the revoker's view showed (acknowledged) and purges what it
// writes later.
func TestGrantRevoke(t *testing.T) {
	ctx, alice, bob, carol := setup(t)
	pub, err := bob.opt.Home.GenKey("default")
	if err != nil {
		t.Fatal(err)
	}
	bob.opt.GrantWait = 200 * time.Millisecond
	alice.must(ctx, func(f *FS) error { return f.Mkdir(ctx, "/etc", false) })
	eventually(t, "bob sees /etc", func() bool {
		return bob.do(ctx, func(f *FS) error { _, err := f.Stat("/etc"); return err }) == nil
	})
	err = bob.do(ctx, func(f *FS) error { return f.Write(ctx, "/etc/bob.conf", strings.NewReader("x")) })
	if !errors.Is(err, ErrNoGrant) || !errors.Is(err, dag.ErrForbidden) || !strings.Contains(err.Error(), "quilt cfs grant "+EncodeKey(pub)) {
		t.Fatalf("write without a grant: %v", err)
	}
	alice.must(ctx, func(f *FS) error {
		_, err := f.Grant(ctx, EncodeKey(pub), "/etc", "bob")
		return err
	})
	if err := alice.do(ctx, func(f *FS) error { _, err := f.Grant(ctx, "nonsense", "/etc", ""); return err }); err == nil {
		t.Error("a grant of something that is not a key")
	}
	bob.opt.GrantWait = 10 * time.Second
	bob.must(ctx, func(f *FS) error { return f.Write(ctx, "/etc/bob.conf", strings.NewReader("from bob\n")) })
	bob.opt.GrantWait = 200 * time.Millisecond
	if err := bob.do(ctx, func(f *FS) error { return f.Write(ctx, "/srv/x", strings.NewReader("x")) }); !errors.Is(err, ErrNoGrant) {
		t.Fatalf("write outside the grant: %v", err)
	}
	// carol's node learns of the grant in its own time.
	var keys []KeyInfo
	eventually(t, "carol sees bob's grant", func() bool {
		carol.must(ctx, func(f *FS) error {
			var err error
			keys, err = f.Keys()
			return err
		})
		return len(keys) == 2
	})
	if keys[0].State != "root key" || keys[1].Label != "bob" || keys[1].Dir != "/etc" || keys[1].State != "granted" {
		t.Errorf("keys: %+v", keys)
	}
	// The revoker acknowledges what it sees: wait until alice sees bob's
	// file.
	eventually(t, "alice sees bob's file", func() bool {
		out, err := alice.cat(ctx, "/etc/bob.conf")
		return err == nil && out == "from bob\n"
	})
	// bob's replica, synced now, knows nothing of the revoke to come.
	late := bob.fs(ctx)
	defer late.Close()
	if _, err := alice.opt.Home.GenKey("other"); err != nil {
		t.Fatal(err)
	}
	var n int
	alice.must(ctx, func(f *FS) error {
		if _, err := f.Revoke(ctx, "nobody"); err == nil {
			t.Error("revoke of an unknown key")
		}
		if _, err := f.Revoke(ctx, "other"); err == nil {
			t.Error("revoke of a key with no grant")
		}
		var err error
		n, err = f.Revoke(ctx, "bob")
		return err
	})
	if n != 1 {
		t.Fatalf("revoked %d grants", n)
	}
	// bob writes with the replica that has not seen the revoke: the
	// entry is not acknowledged, so every replica that has the revoke
	// purges it (or refuses it).
	late.Write(ctx, "/etc/late.conf", strings.NewReader("too late\n"))
	late.Close()
	eventually(t, "bob's later write is purged everywhere, his earlier one stays", func() bool {
		ok := true
		for _, u := range []*user{alice, bob, carol} {
			u.must(ctx, func(f *FS) error {
				_, lerr := f.Stat("/etc/late.conf")
				var b bytes.Buffer
				cerr := f.Cat(ctx, "/etc/bob.conf", &b)
				ok = ok && errors.Is(lerr, namespace.ErrNotFound) && cerr == nil && b.String() == "from bob\n"
				return nil
			})
		}
		return ok
	})
	err = bob.do(ctx, func(f *FS) error { return f.Write(ctx, "/etc/again", strings.NewReader("x")) })
	if !errors.Is(err, ErrNoGrant) || !strings.Contains(err.Error(), "revoked") || strings.Contains(err.Error(), "quilt cfs grant") {
		t.Fatalf("write after the revoke: %v", err)
	}
	carol.must(ctx, func(f *FS) error {
		keys, _ := f.Keys()
		if len(keys) != 2 || keys[1].State != "revoked" {
			t.Errorf("keys after the revoke: %+v", keys)
		}
		return nil
	})
}

// A write right after a grant, through a node the grant has not reached
// yet, waits for the grant instead of failing.
func TestWriteWaitsForGrant(t *testing.T) {
	ctx, alice, bob, _ := setup(t)
	pub, err := bob.opt.Home.GenKey("default")
	if err != nil {
		t.Fatal(err)
	}
	alice.must(ctx, func(f *FS) error { return f.Mkdir(ctx, "/etc", false) })
	eventually(t, "bob sees /etc", func() bool {
		return bob.do(ctx, func(f *FS) error { _, err := f.Stat("/etc"); return err }) == nil
	})
	// bob's write starts before the grant exists; the grant is made once
	// bob waits for it.
	waiting := make(chan struct{})
	var once sync.Once
	grantWaitHook = func() { once.Do(func() { close(waiting) }) }
	t.Cleanup(func() { grantWaitHook = nil })
	done := make(chan error, 1)
	go func() {
		done <- bob.do(ctx, func(f *FS) error { return f.Write(ctx, "/etc/bob.conf", strings.NewReader("mine\n")) })
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the write did not wait for the grant: %v", err)
	}
	alice.must(ctx, func(f *FS) error {
		_, err := f.Grant(ctx, EncodeKey(pub), "/etc", "bob")
		return err
	})
	if err := <-done; err != nil {
		t.Fatalf("the write right after the grant: %v", err)
	}
	eventually(t, "alice reads bob's file", func() bool {
		out, err := alice.cat(ctx, "/etc/bob.conf")
		return err == nil && out == "mine\n"
	})
}

func TestMembersAndWatch(t *testing.T) {
	ctx, alice, _, carol := setup(t)
	eventually(t, "every node holds the log alice holds", func() bool {
		var ms []MemberInfo
		alice.must(ctx, func(f *FS) error {
			var err error
			ms, err = f.Members(ctx)
			return err
		})
		same := 0
		for _, m := range ms {
			if m.State == member.Alive && m.Log == "same as here" && m.Records == 1 {
				same++
			}
		}
		return len(ms) == 3 && same == 3
	})

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	f, err := Open(carol.opt, "")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	events := make(chan Event, 16)
	watched := make(chan error, 1)
	go func() {
		watched <- f.Watch(wctx, Watcher{Ready: func() { close(ready) }, Event: func(e Event) { events <- e }})
	}()
	<-ready
	// carol's own home is usable while the watch waits.
	carol.must(ctx, func(f *FS) error { return nil })
	alice.must(ctx, func(f *FS) error { return f.Write(ctx, "/etc/watched", strings.NewReader("x")) })
	var got []string
	timeout := time.After(15 * time.Second)
	for len(got) < 2 {
		select {
		case e := <-events:
			got = append(got, e.Type+" "+e.Path)
		case <-timeout:
			t.Fatalf("events: %v", got)
		}
	}
	if strings.Join(got, ",") != "mkdir /etc,write /etc/watched" {
		t.Errorf("events: %v", got)
	}
	stop()
	if err := <-watched; err != nil {
		t.Errorf("watch ended with %v", err)
	}
}

// A revoke whose walk of the view fails part way revokes nothing: an
// acknowledgement of less than the view shows would let every replica
// purge entries that were visible. Once the walk succeeds, the revoke
// goes through and bob's files stay.
func TestRevokeWalkFailure(t *testing.T) {
	ctx, alice, bob, _ := setup(t)
	pub, err := bob.opt.Home.GenKey("default")
	if err != nil {
		t.Fatal(err)
	}
	alice.must(ctx, func(f *FS) error {
		if err := f.Mkdir(ctx, "/etc/deep", true); err != nil {
			return err
		}
		_, err := f.Grant(ctx, EncodeKey(pub), "/etc", "bob")
		return err
	})
	eventually(t, "bob sees /etc/deep", func() bool {
		return bob.do(ctx, func(f *FS) error { _, err := f.Stat("/etc/deep"); return err }) == nil
	})
	bob.opt.GrantWait = 10 * time.Second
	bob.must(ctx, func(f *FS) error { return f.Write(ctx, "/etc/deep/bob.conf", strings.NewReader("from bob\n")) })
	eventually(t, "alice sees bob's file", func() bool {
		out, err := alice.cat(ctx, "/etc/deep/bob.conf")
		return err == nil && out == "from bob\n"
	})

	real := revokeList
	t.Cleanup(func() { revokeList = real })
	revokeList = func(db *namespace.DB, ns dag.NSID, dir string) ([]namespace.Info, error) {
		if dir == "/etc/deep" {
			return nil, errors.New("injected: disk read error")
		}
		return real(db, ns, dir)
	}
	alice.must(ctx, func(f *FS) error {
		n, err := f.Revoke(ctx, "bob")
		if err == nil || n != 0 || !strings.Contains(err.Error(), "nothing revoked") || !strings.Contains(err.Error(), "injected") {
			t.Errorf("revoke with a failing walk: n=%d err=%v", n, err)
		}
		keys, err := f.Keys()
		if err != nil {
			return err
		}
		if len(keys) != 2 || keys[1].State != "granted" {
			t.Errorf("after a failed revoke, keys: %+v", keys)
		}
		return nil
	})

	revokeList = real
	alice.must(ctx, func(f *FS) error {
		n, err := f.Revoke(ctx, "bob")
		if err == nil && n != 1 {
			t.Errorf("revoked %d grants", n)
		}
		return err
	})
	out, err := alice.cat(ctx, "/etc/deep/bob.conf")
	if err != nil || out != "from bob\n" {
		t.Fatalf("bob's acknowledged file after the revoke: %q, %v", out, err)
	}
}
