// Package peertest is the conformance suite for namespace.Peer, a replica
// as anti-entropy and clients see it, with its long poll (WaitPeer): every
// implementation (namespace.HTTPPeer over a real node, and a local
// database's DB.AsPeer) must pass it, which is what makes the local one
// trustworthy in unit tests.
//
// The suite checks what callers rely on: Namespaces, Root, Digests and
// Hashes agree with the records held; Get returns the records asked for,
// once each; Put admits, holds back what waits for references, refuses
// what is malformed without losing the rest, and does not gossip what
// came by sync; Wait answers at once when the root differs, waits out its
// timeout when nothing changes, and wakes when something does. A
// namespace the peer does not hold reads as empty, not as an error.
//
//	peertest.Run(t, func(t *testing.T) peertest.Target {
//		db := … // a fresh namespace.DB
//		return peertest.Target{Peer: db.AsPeer(), DB: db}
//	})
package peertest

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Target is a peer under test and the replica it answers for.
type Target struct {
	Peer namespace.WaitPeer
	// DB is the replica behind Peer: the suite writes to it directly, as
	// a local writer would, to check what the peer reports and that a
	// waiting Wait wakes.
	DB *namespace.DB
	// Gossiped, if set, returns the records the replica behind Peer has
	// queued for gossip since the last call, forgetting them. nil: the
	// replica does not gossip (a bare DB), and the check that records
	// put by sync are not gossiped is skipped.
	Gossiped func() [][]byte
}

// Factory returns a target with a replica of its own. The suite calls it
// once and keeps it for all its checks, each on namespaces of its own.
type Factory func(t *testing.T) Target

// log is a namespace and a writer of it.
type log struct {
	ns   dag.NSID
	w    *dag.Writer
	root *dag.Entry
}

func newLog(t *testing.T) log {
	t.Helper()
	ns, priv, err := dag.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	rk, err := dag.NewReadKey()
	if err != nil {
		t.Fatal(err)
	}
	w := &dag.Writer{NS: ns, Key: priv, Read: rk}
	return log{ns, w, w.Root()}
}

// mkdir returns a small entry (small enough for gossip) under parent.
func (l log) mkdir(parent dag.Hash, name string) *dag.Entry {
	return l.w.Entry(dag.Mkdir, parent, nil, name, nil)
}

func hashes(es ...*dag.Entry) []dag.Hash {
	out := make([]dag.Hash, len(es))
	for i, e := range es {
		out[i] = e.Hash()
	}
	return out
}

func raws(es ...*dag.Entry) [][]byte {
	out := make([][]byte, len(es))
	for i, e := range es {
		out[i] = e.Encode()
	}
	return out
}

func sortHashes(hs []dag.Hash) []dag.Hash {
	hs = slices.Clone(hs)
	slices.SortFunc(hs, func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) })
	return hs
}

func leaf(h dag.Hash) [2]byte { return [2]byte{h[0], h[1]} }

// Run runs the suite against the target newTarget makes.
func Run(t *testing.T, newTarget Factory) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := newTarget(t)
	p, db := tg.Peer, tg.DB
	// written makes a namespace of a root and n entries, written to the
	// replica behind the peer.
	written := func(t *testing.T, n int) (log, []*dag.Entry) {
		t.Helper()
		l := newLog(t)
		es := []*dag.Entry{l.root}
		for i := range n {
			es = append(es, l.mkdir(l.root.Hash(), string(rune('a'+i))))
		}
		if res, err := db.Ingest(l.ns, raws(es...)); err != nil || len(res.Admitted) != len(es) {
			t.Fatalf("writing %d entries behind the peer: %d admitted, %v", len(es), len(res.Admitted), err)
		}
		return l, es
	}

	t.Run("NamespacesAndRoot", func(t *testing.T) {
		l, es := written(t, 3)
		got, err := p.Namespaces(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got, l.ns) {
			t.Fatalf("namespace %v not among the %d listed", l.ns, len(got))
		}
		root, err := p.Root(ctx, l.ns)
		if err != nil {
			t.Fatal(err)
		}
		if root != db.Root(l.ns) || root.Count != uint64(len(es)) {
			t.Fatalf("root %+v; the replica's is %+v (%d records)", root, db.Root(l.ns), len(es))
		}
	})

	t.Run("Digests", func(t *testing.T) {
		l, es := written(t, 5)
		pre := es[2].Hash()[0]
		ds, err := p.Digests(ctx, l.ns, [][]byte{nil, {pre}})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 {
			t.Fatalf("%d digest sets for 2 prefixes", len(ds))
		}
		var total uint64
		for i, d := range ds[0] {
			total += d.Count
			want, _ := db.Digests(l.ns, nil)
			if d != want[i] {
				t.Fatalf("top range %d: %+v, the replica's %+v", i, d, want[i])
			}
		}
		if total != uint64(len(es)) {
			t.Fatalf("top ranges count %d records, want %d", total, len(es))
		}
		want, _ := db.Digests(l.ns, []byte{pre})
		if ds[1] != want {
			t.Fatal("the ranges under one prefix differ from the replica's")
		}
		if d := ds[1][es[2].Hash()[1]]; d.Count == 0 {
			t.Fatal("the leaf of a record counts nothing")
		}
		// A prefix of two bytes is malformed: an error, not an answer.
		if _, err := p.Digests(ctx, l.ns, [][]byte{{1, 2}}); err == nil {
			t.Fatal("a two-byte digest prefix was answered")
		}
	})

	t.Run("Hashes", func(t *testing.T) {
		l, es := written(t, 5)
		var leaves [][2]byte
		for _, e := range es {
			leaves = append(leaves, leaf(e.Hash()))
		}
		leaves = append(leaves, leaves[0], leaves[3]) // asked twice: answered once
		got, err := p.Hashes(ctx, l.ns, leaves)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sortHashes(got), sortHashes(hashes(es...))) {
			t.Fatalf("hashes of the records' leaves: %d, want the %d records once each", len(got), len(es))
		}
		// A leaf that holds nothing answers nothing.
		var empty [2]byte
		for i := range 65536 {
			empty = [2]byte{byte(i >> 8), byte(i)}
			if !slices.Contains(leaves, empty) {
				break
			}
		}
		if got, err := p.Hashes(ctx, l.ns, [][2]byte{empty}); err != nil || len(got) != 0 {
			t.Fatalf("an empty leaf: %d hashes, %v", len(got), err)
		}
	})

	t.Run("Get", func(t *testing.T) {
		l, es := written(t, 3)
		stranger := l.mkdir(l.root.Hash(), "never written")
		got, err := p.Get(ctx, l.ns, append(hashes(es[1], es[3], stranger), es[1].Hash()))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !bytes.Equal(got[0], es[1].Encode()) || !bytes.Equal(got[1], es[3].Encode()) {
			t.Fatalf("get of 2 held records (one asked twice) and 1 unknown: %d records, want the 2 held, in order", len(got))
		}
	})

	t.Run("UnknownNamespace", func(t *testing.T) {
		l := newLog(t)
		root, err := p.Root(ctx, l.ns)
		if err != nil || root != (namespace.Digest{}) {
			t.Fatalf("root of a namespace never seen: %+v, %v", root, err)
		}
		ds, err := p.Digests(ctx, l.ns, [][]byte{nil})
		if err != nil || len(ds) != 1 || ds[0] != ([256]namespace.Digest{}) {
			t.Fatalf("digests of a namespace never seen: %v", err)
		}
		if hs, err := p.Hashes(ctx, l.ns, [][2]byte{leaf(l.root.Hash())}); err != nil || len(hs) != 0 {
			t.Fatalf("hashes of a namespace never seen: %d, %v", len(hs), err)
		}
		if rs, err := p.Get(ctx, l.ns, hashes(l.root)); err != nil || len(rs) != 0 {
			t.Fatalf("get from a namespace never seen: %d, %v", len(rs), err)
		}
		// Records put to it are welcome: the peer starts holding it.
		res, err := p.Put(ctx, l.ns, raws(l.root), false)
		if err != nil || res.Admitted != 1 {
			t.Fatalf("put of a new namespace's root: %+v, %v", res, err)
		}
		if db.Root(l.ns).Count != 1 {
			t.Fatal("the replica does not hold the put root")
		}
	})

	t.Run("Put", func(t *testing.T) {
		l, _ := written(t, 0)
		a := l.mkdir(l.root.Hash(), "a")
		b := l.mkdir(a.Hash(), "b")
		c := l.mkdir(l.root.Hash(), "c")
		// A record whose reference is missing is held back and named.
		res, err := p.Put(ctx, l.ns, raws(b), false)
		if err != nil || res.Admitted != 0 || res.Missing == 0 || len(res.Rejected) != 0 {
			t.Fatalf("an entry whose parent is missing: %+v, %v", res, err)
		}
		// Malformed and foreign records are refused, each with a reason,
		// and the good ones beside them admitted (with what waited).
		foreign := newLog(t).root.Encode()
		batch := append(raws(a), []byte("not a record"), foreign)
		batch = append(batch, raws(c)...)
		res, err = p.Put(ctx, l.ns, batch, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Admitted < 2 || len(res.Rejected) != 2 {
			t.Fatalf("2 good records, 2 bad, 1 waiting: %+v", res)
		}
		if got := db.Get(l.ns, hashes(a, b, c)); len(got) != 3 {
			t.Fatalf("the replica holds %d of the 3 good records (one of them held back)", len(got))
		}
		if got := db.Root(l.ns).Count; got != 4 {
			t.Fatalf("the replica counts %d records, want 4", got)
		}
		// Again: nothing new.
		if res, err := p.Put(ctx, l.ns, raws(a, c), false); err != nil || res.Admitted != 0 || len(res.Rejected) != 0 {
			t.Fatalf("records put again: %+v, %v", res, err)
		}
	})

	t.Run("PutFromSyncIsNotGossiped", func(t *testing.T) {
		if tg.Gossiped == nil {
			t.Skip("the replica behind this peer does not gossip")
		}
		l, _ := written(t, 0)
		tg.Gossiped() // forget the writes so far
		synced := l.mkdir(l.root.Hash(), "synced")
		if res, err := p.Put(ctx, l.ns, raws(synced), true); err != nil || res.Admitted != 1 {
			t.Fatalf("put from sync: %+v, %v", res, err)
		}
		for _, g := range tg.Gossiped() {
			if bytes.Equal(g, synced.Encode()) {
				t.Fatal("a record put by sync was gossiped")
			}
		}
		fresh := l.mkdir(l.root.Hash(), "fresh")
		if res, err := p.Put(ctx, l.ns, raws(fresh), false); err != nil || res.Admitted != 1 {
			t.Fatalf("put: %+v, %v", res, err)
		}
		if g := tg.Gossiped(); !slices.ContainsFunc(g, func(b []byte) bool { return bytes.Equal(b, fresh.Encode()) }) {
			t.Fatalf("a record put by a writer was not gossiped (%d gossiped)", len(g))
		}
	})

	t.Run("WaitAnswersAtOnceWhenBehind", func(t *testing.T) {
		l, _ := written(t, 2)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d, err := p.Wait(wctx, l.ns, namespace.Digest{}, 5*time.Minute)
		if err != nil || wctx.Err() != nil {
			t.Fatalf("wait from an old root: %v (context %v)", err, wctx.Err())
		}
		if d != db.Root(l.ns) {
			t.Fatalf("wait answered %+v, the root is %+v", d, db.Root(l.ns))
		}
	})

	t.Run("WaitTimesOut", func(t *testing.T) {
		l, _ := written(t, 1)
		seen := db.Root(l.ns)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d, err := p.Wait(wctx, l.ns, seen, 100*time.Millisecond)
		if err != nil || wctx.Err() != nil {
			t.Fatalf("wait with nothing changing: %v (context %v): it should end with its timeout", err, wctx.Err())
		}
		if d != seen {
			t.Fatalf("wait with nothing changing answered %+v, want the root seen %+v", d, seen)
		}
	})

	t.Run("WaitWakesOnChange", func(t *testing.T) {
		l, _ := written(t, 1)
		seen := db.Root(l.ns)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		type answer struct {
			d   namespace.Digest
			err error
		}
		got := make(chan answer, 1)
		go func() {
			d, err := p.Wait(wctx, l.ns, seen, 5*time.Minute)
			got <- answer{d, err}
		}()
		// Give the poll a moment to start waiting; the write must wake
		// it whether or not it has.
		select {
		case a := <-got:
			t.Fatalf("wait answered before any change: %+v, %v", a.d, a.err)
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := db.Ingest(l.ns, raws(l.mkdir(l.root.Hash(), "wake"))); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if wctx.Err() != nil {
			t.Fatal("wait was not woken by the change: it ran until the test's deadline")
		}
		if a.err != nil || a.d != db.Root(l.ns) || a.d == seen {
			t.Fatalf("wait woke with %+v, %v; the root is %+v", a.d, a.err, db.Root(l.ns))
		}
	})
}
