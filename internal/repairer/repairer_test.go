package repairer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// A node stops for good: the repairers of the others, holding only the
// verify capabilities of their registries, bring every registered object
// back to n shares on the remaining nodes, and the bytes of shares moved
// in any sampled window stay within 10% of the budget.
func TestRepairAfterNodeLoss(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 6})
	g.WaitAlive(6)
	obj := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 4, SegmentSize: 16 << 10}
	var vcs []codec.VerifyCap
	nc := g.NodeClient()
	for i := range 4 {
		data := make([]byte, 64<<10+i)
		rand.Read(data)
		rc, _, err := obj.Put(ctx, bytes.NewReader(data), int64(len(data)), p, 4)
		if err != nil {
			t.Fatal(err)
		}
		vc := rc.Verify()
		if k, err := repairer.Register(ctx, nc, vc); err != nil || k != 6 {
			t.Fatalf("registered on %d nodes: %v", k, err)
		}
		vcs = append(vcs, vc)
	}
	// The node that holds most shares goes.
	victim := 0
	g.Kill(victim)
	g.WaitAlive(5)
	const budget = 128 << 10
	var reps []*repairer.Repairer
	for i, n := range g.Nodes {
		if n == nil || i == victim {
			continue
		}
		r, err := repairer.New(repairer.Config{Node: n, Every: 100 * time.Millisecond, Budget: budget, Stall: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		reps = append(reps, r)
	}
	moved := func() int64 {
		var s int64
		for _, r := range reps {
			s += r.Moved()
		}
		return s
	}
	check := g.Objects(object.Options{})
	whole := func() error {
		for _, vc := range vcs {
			rep, err := check.Check(ctx, vc, true)
			if err != nil {
				return err
			}
			if !rep.Clean() {
				return fmt.Errorf("object %x: %d of %d shares good", vc.SI[:4], rep.Good, rep.Total)
			}
		}
		return nil
	}
	// Each repairer meters itself; sample one node's at a time.
	deadline := time.Now().Add(40 * time.Second)
	last, lastAt := make([]int64, len(reps)), time.Now()
	var err error
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		now := time.Now()
		for i, r := range reps {
			m := r.Moved()
			rate := float64(m-last[i]) / now.Sub(lastAt).Seconds()
			if rate > budget*1.1 {
				t.Fatalf("repairer %d moved %.0f bytes/s, budget %d", i, rate, budget)
			}
			last[i] = m
		}
		lastAt = now
		if err = whole(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("objects not whole after the bounded wait: %v", err)
	}
	t.Logf("%d bytes of shares moved", moved())
	if moved() == 0 {
		t.Fatal("nothing was moved, yet the objects are whole: was the victim holding no share?")
	}
}

// Bits flipped in shares on three nodes: each node's scrub finds its
// damaged share and quarantines it, and the repairers rebuild every one
// in place, so the objects check clean and nothing stays quarantined.
func TestScrubThenRepairInPlace(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	g.WaitAlive(5)
	obj := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 5, SegmentSize: 16 << 10}
	data := make([]byte, 40<<10)
	rand.Read(data)
	rc, _, err := obj.Put(ctx, bytes.NewReader(data), int64(len(data)), p, 5)
	if err != nil {
		t.Fatal(err)
	}
	vc := rc.Verify()
	if _, err := repairer.Register(ctx, g.NodeClient(), vc); err != nil {
		t.Fatal(err)
	}
	damaged := 0
	for _, n := range g.Nodes[:3] {
		infos, err := n.Store().List(ctx, vc.SI)
		if err != nil || len(infos) == 0 {
			t.Fatalf("node holds %d shares: %v", len(infos), err)
		}
		if err := n.Store().(*sharestore.Disk).Corrupt(infos[0].Key, sharefile.HeaderSize+100); err != nil {
			t.Fatal(err)
		}
		res, err := n.ScrubAll(ctx)
		if err != nil || len(res.Damaged) != 1 {
			t.Fatalf("scrub found %v: %v", res.Damaged, err)
		}
		damaged++
	}
	var reps []*repairer.Repairer
	for _, n := range g.Nodes {
		r, err := repairer.New(repairer.Config{Node: n, Every: -1})
		if err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	// A pass may defer the object while gossip briefly suspects a node;
	// a few rounds at most.
	for round := 0; ; round++ {
		for _, r := range reps {
			if _, err := r.Pass(ctx); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := obj.Check(ctx, vc, true)
		if err == nil && rep.Clean() {
			break
		}
		if round == 20 {
			t.Fatalf("after repair: %+v, %v", rep, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, n := range g.Nodes {
		if q := n.Quarantined(); len(q) != 0 {
			t.Errorf("node %d still quarantines %v", i, q)
		}
	}
	var buf bytes.Buffer
	if _, err := obj.Get(ctx, rc, &buf, 0, -1); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("read after repair: %v", err)
	}
}

// A node that missed an object's registration (down at the time, or
// joined since) learns the entry from a peer's registry in its passes,
// and keeps only what parses as a verify capability.
func TestRegistryCatchUp(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	g.WaitAlive(3)
	obj := g.Objects(object.Options{})
	rc, _, err := obj.Put(ctx, bytes.NewReader(make([]byte, 1000)), 1000, codec.Params{K: 1, N: 3, SegmentSize: 4096}, 3)
	if err != nil {
		t.Fatal(err)
	}
	vc := rc.Verify()
	nc := g.NodeClient()
	if _, err := nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := nc.Register(ctx, string(g.Nodes[0].ID()), vc.SI, vc.String()); err != nil {
		t.Fatal(err)
	}
	var junk sharefile.SI
	junk[0] = 9
	if err := nc.Register(ctx, string(g.Nodes[0].ID()), junk, "not a capability"); err != nil {
		t.Fatal(err)
	}
	r, err := repairer.New(repairer.Config{Node: g.Nodes[1], Every: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		reg, err := g.Nodes[1].Registered()
		if err != nil {
			t.Fatal(err)
		}
		if reg[vc.SI] == vc.String() {
			if len(reg) != 1 {
				t.Fatalf("registry after catching up: %v", reg)
			}
			break
		}
		if i == 50 {
			t.Fatal("node 1 never learnt node 0's entry")
		}
	}
}
