package repairer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// A drain pass moves every sound share of the drained node to other
// nodes and leaves a damaged one where it is (repair's to rebuild, not
// the drain's to copy), reporting it not moved; a node not draining is
// not drained.
func TestDrainPassLeavesDamagedShare(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	g.WaitAlive(5)
	obj := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 3, SegmentSize: 16 << 10}
	var vcs []codec.VerifyCap
	for range 6 {
		data := make([]byte, 30<<10)
		rand.Read(data)
		rc, _, err := obj.Put(ctx, bytes.NewReader(data), int64(len(data)), p, 3)
		if err != nil {
			t.Fatal(err)
		}
		vcs = append(vcs, rc.Verify())
	}
	// The victim is the node placement gave the most shares (18 over 5
	// nodes: at least 4).
	victim, held := g.Nodes[0], []sharestore.Info(nil)
	for _, n := range g.Nodes {
		var h []sharestore.Info
		n.Store().Walk(ctx, func(i sharestore.Info) error { h = append(h, i); return nil })
		if len(h) > len(held) {
			victim, held = n, h
		}
	}
	if len(held) < 2 {
		t.Fatalf("the node holds %d shares; the test needs two", len(held))
	}
	bad := held[0].Key
	if err := victim.Store().(*sharestore.Disk).Corrupt(bad, sharefile.HeaderSize+100); err != nil {
		t.Fatal(err)
	}
	r, err := repairer.New(repairer.Config{Node: victim, Every: -1, Budget: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if _, err := r.DrainPass(ctx); err == nil {
		t.Fatal("a drain pass of a node not draining did something")
	}
	if err := victim.Drain(); err != nil {
		t.Fatal(err)
	}
	// The repairer's own loop drains too; our pass and its passes share
	// the work. Wait for the node to hold only the damaged share.
	for range 50 {
		if _, err := r.DrainPass(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := victim.DrainStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Shares == 1 {
			break
		}
	}
	var left []sharestore.Info
	victim.Store().Walk(ctx, func(i sharestore.Info) error { left = append(left, i); return nil })
	if len(left) != 1 || left[0].Key != bad {
		t.Fatalf("the drained node holds %v, want only the damaged share %v", left, bad)
	}
	res, err := r.DrainPass(ctx)
	if err != nil || res.Failed != 1 || res.Moved != 0 {
		t.Fatalf("a pass over the damaged share: %+v, %v; want it not moved", res, err)
	}
	// Every object still has all its shares: the moved ones elsewhere.
	for _, vc := range vcs {
		rep, err := obj.Check(ctx, vc, true)
		if err != nil {
			t.Fatal(err)
		}
		if vc.SI != bad.SI && !rep.Clean() {
			t.Fatalf("object %x: %d of %d shares good after the drain", vc.SI[:4], rep.Good, rep.Total)
		}
	}
}
