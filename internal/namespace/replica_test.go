package namespace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// countingPeer is a replica's peer that counts the syncs started with it.
type countingPeer struct {
	Peer
	syncs atomic.Int64
}

func (p *countingPeer) Namespaces(ctx context.Context) ([]dag.NSID, error) {
	p.syncs.Add(1)
	return p.Peer.Namespaces(ctx)
}

// twoReplicas makes a namespace and two databases holding its root.
func twoReplicas(t *testing.T) (dag.NSID, *dag.Writer, *dag.Entry, *DB, *DB) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	a, b := openDB(t, t.TempDir()), openDB(t, t.TempDir())
	t.Cleanup(func() { a.Close(); b.Close() })
	for _, d := range []*DB{a, b} {
		if err := d.Open(ns, &key, dag.ConfigRules); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Ingest(ns, [][]byte{root.Encode()}); err != nil {
			t.Fatal(err)
		}
	}
	return ns, w, root, a, b
}

// TestSyncOnlyForWhatStaysMissing: an entry that arrives before its
// blocks, which follow a moment later (gossip's usual disorder), starts
// no anti-entropy; one whose blocks do not follow does, and the sync
// brings them.
func TestSyncOnlyForWhatStaysMissing(t *testing.T) {
	ns, w, root, a, b := twoReplicas(t)
	peer := &countingPeer{Peer: b.AsPeer()}
	// No timed sync during the test (30-90 s away); a kick waits 300 ms.
	rep := NewReplica(ReplicaConfig{DB: a, SyncInterval: time.Minute, KickWait: 300 * time.Millisecond})
	rep.Start(func() []Peer { return []Peer{peer} })
	defer rep.Close()

	encode := func(name string) (entry []byte, blocks [][]byte) {
		e, bl := w.File(root.Hash(), nil, name, bytes.Repeat([]byte(name+" "), 2000)) // big enough for blocks
		for _, x := range bl {
			blocks = append(blocks, x.Encode())
		}
		return e.Encode(), blocks
	}
	// The entry first, its blocks 50 ms later.
	e1, bl1 := encode("one")
	if res, err := rep.Append(ns, [][]byte{e1}, true); err != nil || len(res.Missing) == 0 {
		t.Fatalf("entry alone: %v, missing %v (want its blocks missing)", err, res.Missing)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := rep.Append(ns, bl1, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond)
	if n := peer.syncs.Load(); n != 0 {
		t.Fatalf("%d syncs for an entry whose blocks came by themselves", n)
	}
	// An entry whose blocks only the peer has.
	e2, bl2 := encode("two")
	if _, err := b.Ingest(ns, append([][]byte{e2}, bl2...)); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.Append(ns, [][]byte{e2}, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	have := func() bool { return len(a.Get(ns, blockHashes(bl2))) == len(bl2) }
	for !have() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !have() || peer.syncs.Load() == 0 {
		t.Fatalf("after 5 s: blocks here %v, %d syncs", have(), peer.syncs.Load())
	}
	if _, err := a.Stat(ns, "/two"); err != nil {
		t.Fatalf("the synced entry: %v", err)
	}
}

func blockHashes(raws [][]byte) []dag.Hash {
	var out []dag.Hash
	for _, raw := range raws {
		r, _ := dag.Decode(raw)
		out = append(out, r.Hash)
	}
	return out
}

// TestKicksDoNotStarveTimedSync: a steady stream of entries whose blocks
// follow by themselves (each a kick that needs no sync) does not hold off
// the periodic anti-entropy, which repairs what gossip lost for good.
func TestKicksDoNotStarveTimedSync(t *testing.T) {
	ns, w, root, a, b := twoReplicas(t)
	peer := &countingPeer{Peer: b.AsPeer()}
	// Timed syncs 0.3-0.9 s apart; kicks every 50 ms, each waiting 100 ms.
	rep := NewReplica(ReplicaConfig{DB: a, SyncInterval: 600 * time.Millisecond, KickWait: 100 * time.Millisecond})
	rep.Start(func() []Peer { return []Peer{peer} })
	defer rep.Close()
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		e, bl := w.File(root.Hash(), nil, fmt.Sprintf("f%d", i), bytes.Repeat([]byte{byte(i)}, 4000))
		if _, err := rep.Append(ns, [][]byte{e.Encode()}, true); err != nil {
			t.Fatal(err)
		}
		var raws [][]byte
		for _, x := range bl {
			raws = append(raws, x.Encode())
		}
		if _, err := rep.Append(ns, raws, true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := peer.syncs.Load(); n < 2 {
		t.Fatalf("%d syncs in 3 s of kicks with a 0.3-0.9 s sync interval", n)
	}
}

// replicaPeer is a replica as its peers see it: pushes go through its
// Append, as they do through the HTTP API.
type replicaPeer struct {
	Peer
	r    *Replica
	puts *atomic.Int64
}

func (p replicaPeer) Put(_ context.Context, ns dag.NSID, raws [][]byte, fromSync bool) (PutResult, error) {
	p.puts.Add(1)
	res, err := p.r.Append(ns, raws, fromSync)
	return putResult(res), err
}

// TestLargeRecordsPushed: a record too big for gossip, written at one of
// five replicas by a client, reaches the other four by one push each, long
// before the periodic sync (a minute away here) would bring it; replicas
// that got it by a push do not push it on; a record gossip carries is not
// pushed.
func TestLargeRecordsPushed(t *testing.T) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	const n = 5
	dbs := make([]*DB, n)
	reps := make([]*Replica, n)
	peers := make([]Peer, n)
	var puts, syncs atomic.Int64
	for i := range n {
		dbs[i] = openDB(t, t.TempDir())
		defer dbs[i].Close()
		dbs[i].Open(ns, &key, dag.ObjectRules)
		if _, err := dbs[i].Ingest(ns, [][]byte{root.Encode()}); err != nil {
			t.Fatal(err)
		}
		reps[i] = NewReplica(ReplicaConfig{DB: dbs[i], SyncInterval: time.Minute})
		peers[i] = replicaPeer{&countingPeer{Peer: dbs[i].AsPeer()}, reps[i], &puts}
	}
	for i := range n {
		reps[i].Start(func() []Peer {
			var out []Peer
			for j, p := range peers {
				if j != i {
					out = append(out, p)
				}
			}
			return out
		})
		defer reps[i].Close()
	}
	countSyncs := func() int64 {
		syncs.Store(0)
		for _, p := range peers {
			syncs.Add(p.(replicaPeer).Peer.(*countingPeer).syncs.Load())
		}
		return syncs.Load()
	}

	small := w.Entry(dag.Write, root.Hash(), nil, "small", []byte("x"))
	if _, err := reps[0].Append(ns, [][]byte{small.Encode()}, false); err != nil {
		t.Fatal(err)
	}
	large, blocks := w.FileInline(root.Hash(), nil, "large", bytes.Repeat([]byte("y"), 4000), dag.MaxSealed)
	if len(blocks) != 0 || !tooLarge(large.Encode()) {
		t.Fatalf("test entry: %d blocks, %d bytes", len(blocks), len(large.Encode()))
	}
	if _, err := reps[0].Append(ns, [][]byte{large.Encode()}, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	everywhere := func() bool {
		for _, d := range dbs {
			if len(d.Get(ns, []dag.Hash{large.Hash()})) == 0 {
				return false
			}
		}
		return true
	}
	for !everywhere() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !everywhere() {
		t.Fatal("after 10 s the large record is not everywhere")
	}
	time.Sleep(300 * time.Millisecond) // a push on would have happened by now
	if p := puts.Load(); p != n-1 {
		t.Errorf("%d pushes, want %d: one to each peer, none passed on", p, n-1)
	}
	if s := countSyncs(); s != 0 {
		t.Errorf("%d anti-entropy syncs", s)
	}
	if st := reps[0].Stats(); st.PushedLarge != n-1 {
		t.Errorf("PushedLarge %d, want %d", st.PushedLarge, n-1)
	}
	for i, d := range dbs[1:] {
		if len(d.Get(ns, []dag.Hash{small.Hash()})) != 0 {
			t.Errorf("replica %d got the small record, which only gossip (absent here) carries", i+1)
		}
	}
}

// Pushes are cut into requests of at most batch records and pushBytes
// bytes, each with at least one record.
func TestPushChunk(t *testing.T) {
	rec := func(n, size int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = make([]byte, size)
		}
		return out
	}
	for _, c := range []struct {
		raws [][]byte
		want int
	}{
		{rec(1, 100), 1},
		{rec(3000, 2000), batch},
		{rec(1000, 16<<10), pushBytes / (16 << 10)},
		{rec(2, pushBytes+1), 1},
	} {
		if got := pushChunk(c.raws); got != c.want {
			t.Errorf("%d records of %d bytes: %d in a push, want %d", len(c.raws), len(c.raws[0]), got, c.want)
		}
	}
}

// A request body is read whole whatever length it announced: the length
// only sizes the buffer.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("record ", 1000)
	for _, announced := range []int64{-1, 0, 10, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 5, maxBody + 1} {
		got, err := readBody(iotest.OneByteReader(strings.NewReader(body)), announced)
		if err != nil || string(got) != body {
			t.Errorf("announced %d: got %d bytes, %v", announced, len(got), err)
		}
	}
	if _, err := readBody(iotest.ErrReader(errors.New("cut")), 10); err == nil {
		t.Error("a failing body read without an error")
	}
	// Frames sent to many peers at once decode to the records framed.
	raws := [][]byte{[]byte("a"), bytes.Repeat([]byte("b"), 300), nil}
	got, err := unframe(frame(raws))
	if err != nil || len(got) != 3 || !bytes.Equal(got[1], raws[1]) || len(got[2]) != 0 {
		t.Fatalf("unframe(frame): %q, %v", got, err)
	}
}
