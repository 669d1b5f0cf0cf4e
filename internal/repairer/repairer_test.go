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
	for _, n := range g.Nodes {
		r, err := repairer.New(repairer.Config{Node: n, Every: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := obj.Check(ctx, vc, true)
	if err != nil || !rep.Clean() {
		t.Fatalf("after repair: %+v, %v", rep, err)
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
