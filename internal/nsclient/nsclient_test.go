package nsclient_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/nsclient"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// fixture is a namespace and a client of it over a test grid.
type fixture struct {
	t    *testing.T
	g    *testgrid.Grid
	ns   dag.NSID
	key  dag.ReadKey
	root ed25519.PrivateKey
}

func newFixture(t *testing.T, nodes int) *fixture {
	t.Helper()
	id, priv, err := dag.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	rk, _ := dag.NewReadKey()
	return &fixture{t: t, g: testgrid.New(t, testgrid.Options{Nodes: nodes}), ns: id, key: rk, root: priv}
}

// client opens a replica in a new directory and a client over it that
// tries the grid's nodes in the order given (node indexes), then the rest.
func (f *fixture) client(first ...int) (*nsclient.Client, *dag.Writer) {
	f.t.Helper()
	db, err := namespace.OpenDB(filepath.Join(f.t.TempDir(), "ns.db"), namespace.Options{NoSync: true})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { db.Close() })
	if err := db.Open(f.ns, &f.key, dag.ConfigRules); err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, i := range first {
		ids = append(ids, string(f.g.Nodes[i].ID()))
	}
	c := nsclient.New(nsclient.Config{DB: db, Nodes: f.g.NodeClient(), ProbeTimeout: 2 * time.Second,
		Order: func(ms []member.Member) []member.Member {
			slices.SortStableFunc(ms, func(a, b member.Member) int {
				ia, ib := slices.Index(ids, a.ID), slices.Index(ids, b.ID)
				if ia < 0 {
					ia = len(ids)
				}
				if ib < 0 {
					ib = len(ids)
				}
				return ia - ib
			})
			return ms
		}})
	return c, &dag.Writer{NS: f.ns, Key: f.root, Read: f.key, Clock: db.Clock()}
}

func (f *fixture) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	f.t.Cleanup(cancel)
	return ctx
}

// holds reports whether node i's replica holds every record.
func (f *fixture) holds(i int, hs ...dag.Hash) bool {
	return len(f.g.Replicas[i].DB().Get(f.ns, hs)) == len(hs)
}

func file(body string) nsclient.MakeFunc {
	return func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, []byte(body))
	}
}

// eventually waits for cond, up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A write through one client is read by another that syncs through
// another node; the write replaces the path's current version.
func TestWriteSyncRead(t *testing.T) {
	f := newFixture(t, 3)
	ctx := f.ctx()
	a, w := f.client(0)
	if err := a.Commit(ctx, f.ns, [][]byte{w.Root().Encode()}); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(ctx, w, dag.ConfigRules, "/etc", func(w *dag.Writer, an dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, an, h, n, nil), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"one", "two"} {
		if err := a.Write(ctx, w, dag.ConfigRules, "/etc/hosts", file(v)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, err := a.ReadFile(f.ns, "/etc/hosts"); err != nil || string(got) != "two" {
		t.Fatalf("own read: %q, %v", got, err)
	}
	if heads, _ := a.DB().Heads(f.ns, "/etc/hosts"); len(heads) != 1 {
		t.Errorf("the second write did not replace the first: %d heads", len(heads))
	}
	b, _ := f.client(2)
	eventually(t, "the other client reads the write", func() bool {
		if err := b.Sync(ctx, f.ns); err != nil {
			t.Fatal(err)
		}
		got, _, _ := b.ReadFile(f.ns, "/etc/hosts")
		return string(got) == "two"
	})
	if got, _, err := b.ReadFile(f.ns, "/etc/nothing"); got != nil || err != nil {
		t.Errorf("absent file: %q, %v", got, err)
	}
	if got, _, err := b.ReadFile(f.ns, "/etc"); got != nil || err != nil {
		t.Errorf("a directory read as a file: %q, %v", got, err)
	}
	for _, p := range []string{"/srv/x", "/etc/../hosts", "/etc//hosts", "etc/hosts", "/", ""} {
		if err := a.Write(ctx, w, dag.ConfigRules, p, file("x")); err == nil {
			t.Errorf("a write of %q succeeded", p)
		}
	}
}

// The node a client uses dies between two commits. The next commit's
// first attempt fails on it; the second goes to another node, which lacks
// what the new entry refers to (an entry that so far reached only the
// client's replica) and reports it missing; the client syncs that node
// from its replica and offers the entry again, and the node stores both.
func TestCommitRetriesOnAnotherNodeAndResyncs(t *testing.T) {
	f := newFixture(t, 3)
	ctx := f.ctx()
	c, w := f.client(0, 1)
	root := w.Root()
	if err := c.Commit(ctx, f.ns, [][]byte{root.Encode()}); err != nil {
		t.Fatal(err)
	}
	if p, err := c.Peer(ctx); err != nil || p.Base != "https://"+string(f.g.Nodes[0].ID()) {
		t.Fatalf("the client uses %v (%v), not node 0", p, err)
	}
	// /etc reaches the client's replica only (as if its send had failed).
	etc := w.Entry(dag.Mkdir, root.Hash(), nil, "etc", nil)
	if res, err := c.DB().Ingest(f.ns, [][]byte{etc.Encode()}); err != nil || len(res.Admitted) != 1 {
		t.Fatalf("local mkdir: %+v, %v", res, err)
	}
	f.g.Kill(0)
	hosts, _ := w.File(etc.Hash(), nil, "hosts", []byte("10.0.0.1 gw\n"))
	if err := c.Commit(ctx, f.ns, [][]byte{hosts.Encode()}); err != nil {
		t.Fatalf("commit with node 0 dead: %v", err)
	}
	if p, err := c.Peer(ctx); err != nil || p.Base != "https://"+string(f.g.Nodes[1].ID()) {
		t.Fatalf("the client moved to %v (%v), not node 1", p, err)
	}
	if !f.holds(1, root.Hash(), etc.Hash(), hosts.Hash()) {
		t.Fatal("node 1 does not hold the directory and the file")
	}
	eventually(t, "node 2 gets them by gossip or anti-entropy", func() bool { return f.holds(2, etc.Hash(), hosts.Hash()) })
}

// With every node down, a commit fails with ErrNoGrid after its attempts
// and keeps the entry locally; the next sync, once a node is back, sends
// it. A record the replica refuses is ErrRefused and reaches no node.
func TestCommitNoGridThenSyncSends(t *testing.T) {
	f := newFixture(t, 2)
	ctx := f.ctx()
	c, w := f.client()
	root := w.Root()
	if err := c.Commit(ctx, f.ns, [][]byte{root.Encode()}); err != nil {
		t.Fatal(err)
	}
	// A stranger's key may not write.
	_, stranger, _ := ed25519.GenerateKey(nil)
	bad := (&dag.Writer{NS: f.ns, Key: stranger, Read: f.key, Clock: c.DB().Clock()}).Entry(dag.Mkdir, root.Hash(), nil, "x", nil)
	if err := c.Commit(ctx, f.ns, [][]byte{bad.Encode()}); !errors.Is(err, nsclient.ErrRefused) {
		t.Fatalf("a stranger's entry: %v, want ErrRefused", err)
	}
	f.g.Kill(0)
	f.g.Kill(1)
	etc := w.Entry(dag.Mkdir, root.Hash(), nil, "etc", nil)
	err := c.Commit(ctx, f.ns, [][]byte{etc.Encode()})
	if !errors.Is(err, nsclient.ErrNoGrid) {
		t.Fatalf("commit with no node: %v, want ErrNoGrid", err)
	}
	if info, err := c.DB().Stat(f.ns, "/etc"); err != nil || info.Type != dag.Dir {
		t.Fatalf("the entry is not kept locally: %+v, %v", info, err)
	}
	f.g.Restart(1)
	if err := c.Sync(ctx, f.ns); err != nil {
		t.Fatal(err)
	}
	if !f.holds(1, etc.Hash()) {
		t.Fatal("the sync did not send what the failed commit kept")
	}
	if f.holds(1, bad.Hash()) {
		t.Fatal("a refused record reached a node")
	}
}

// Wait returns when the node's copy changes.
func TestWait(t *testing.T) {
	f := newFixture(t, 2)
	ctx := f.ctx()
	a, w := f.client(0)
	b, _ := f.client(1)
	if err := a.Commit(ctx, f.ns, [][]byte{w.Root().Encode()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's node has the root", func() bool {
		b.Sync(ctx, f.ns)
		return b.DB().Count(f.ns) == 1
	})
	seen := b.DB().Root(f.ns)
	done := make(chan error, 1)
	go func() {
		// Wait may return early with the same digest: wait again.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			d, err := b.Wait(ctx, f.ns, seen, 10*time.Second)
			if err != nil || d != seen {
				done <- err
				return
			}
		}
		done <- errors.New("Wait returned an unchanged digest for 10 s")
	}()
	if err := a.Write(ctx, w, dag.ConfigRules, "/f", file("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
