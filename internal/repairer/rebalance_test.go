package repairer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// waitGossipUsage waits until every node sees every other's used bytes
// as its store reports them (rebalancing plans from gossip).
func waitGossipUsage(t *testing.T, g *testgrid.Grid) {
	t.Helper()
	want := map[string]int64{}
	for _, n := range g.Nodes {
		want[string(n.ID())] = n.Store().Usage().Used
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := true
		for _, n := range g.Nodes {
			for _, m := range n.Members() {
				if m.State == member.Alive && m.Used != want[m.ID] {
					ok = false
				}
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("gossip did not carry the nodes' used bytes")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// distinctHolders returns on how many distinct nodes, and zones, the
// object's shares are.
func distinctHolders(ctx context.Context, t *testing.T, g *testgrid.Grid, vc codec.VerifyCap, zone func(int) string) (nodes, zones int, shares int) {
	t.Helper()
	zs := map[string]bool{}
	for i, n := range g.Nodes {
		held := 0
		n.Store().Walk(ctx, func(in sharestore.Info) error {
			if in.SI == vc.SI {
				held++
			}
			return nil
		})
		if held > 0 {
			nodes++
			shares += held
			zs[zone(i)] = true
		}
	}
	return nodes, len(zs), shares
}

// A grid of four nodes in two zones, half full, is joined by a fifth, in
// a third zone: rebalancing passes move shares onto it until it holds
// near its share of the data, and then stop (a further round moves
// nothing); every object keeps its n shares on n distinct nodes, on no
// fewer zones than before, and checks clean. With rebalancing off
// (Spread negative), nothing moves.
func TestRebalanceNewNode(t *testing.T) {
	ctx := context.Background()
	zone := func(i int) string { return []string{"a", "a", "b", "b", "c"}[i] }
	const capacity = 2 << 20
	g := testgrid.New(t, testgrid.Options{Nodes: 4, Zone: zone, Capacity: func(int) int64 { return capacity }})
	obj := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 3, SegmentSize: 16 << 10}
	var vcs []codec.VerifyCap
	for range 40 {
		data := make([]byte, 64<<10) // shares of 32 KiB
		rand.Read(data)
		rc, _, err := obj.Put(ctx, bytes.NewReader(data), int64(len(data)), p, 3)
		if err != nil {
			t.Fatal(err)
		}
		vcs = append(vcs, rc.Verify())
	}
	zonesBefore := map[int]int{}
	for j, vc := range vcs {
		_, zonesBefore[j], _ = distinctHolders(ctx, t, g, vc, zone)
	}
	newcomer := g.Add()
	var reps []*repairer.Repairer
	off := make([]*repairer.Repairer, len(g.Nodes))
	for i, n := range g.Nodes {
		r, err := repairer.New(repairer.Config{Node: n, Every: -1, Budget: 64 << 20, RebalanceMinAge: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		reps = append(reps, r)
		off[i], err = repairer.New(repairer.Config{Node: n, Every: -1, Spread: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(off[i].Close)
	}
	waitGossipUsage(t, g)
	// Off: nothing moves.
	for _, r := range off {
		res, err := r.RebalancePass(ctx)
		if err != nil || res.Moved != 0 || res.Active {
			t.Fatalf("a pass with rebalancing off: %+v, %v", res, err)
		}
	}
	// Shares stored within the last ten minutes (the default) stay:
	// their upload may be under way.
	fullest := g.Nodes[0]
	for _, n := range g.Nodes {
		if n.Store().Usage().Used > fullest.Store().Usage().Used {
			fullest = n
		}
	}
	young, err := repairer.New(repairer.Config{Node: fullest, Every: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(young.Close)
	if res, err := young.RebalancePass(ctx); err != nil || !res.Active || res.Moved != 0 {
		t.Fatalf("a pass over young shares: %+v, %v; want active, nothing moved", res, err)
	}
	if u := g.Nodes[newcomer].Store().Usage().Used; u != 0 {
		t.Fatalf("the new node holds %d bytes with rebalancing off", u)
	}
	var total int64
	for _, n := range g.Nodes {
		total += n.Store().Usage().Used
	}
	fair := total / int64(len(g.Nodes)) // equal capacities
	// Rounds of passes on every node until a round moves nothing.
	var rounds int
	for rounds = 1; ; rounds++ {
		if rounds > 20 {
			t.Fatal("rebalancing did not settle in 20 rounds")
		}
		moved := 0
		for i, r := range reps {
			res, err := r.RebalancePass(ctx)
			if err != nil {
				t.Fatalf("node %d: %v", i, err)
			}
			if i == newcomer && res.Moved > 0 {
				t.Fatalf("the new node sent %d shares away", res.Moved)
			}
			moved += res.Moved
			// Passes of different nodes are far apart in a grid
			// (--repair-every): each sees the others' moves in gossip.
			waitGossipUsage(t, g)
		}
		if moved == 0 {
			break
		}
	}
	got := g.Nodes[newcomer].Store().Usage().Used
	t.Logf("the new node holds %d of a fair %d bytes after %d rounds", got, fair, rounds)
	// Each sender stops within a tenth of the spread above the grid's
	// fraction, and moves whole shares of its part of the target's room:
	// so each may stop up to that margin and two shares short.
	shareBytes := total / int64(len(vcs)*3)
	senders := int64(newcomer)
	short := senders * (2*shareBytes + capacity/200) // the default spread, 0.05, over 10
	if got < fair-short || got > fair {
		t.Fatalf("the new node holds %d bytes; its fair share is %d, and the senders may stop %d short of it", got, fair, short)
	}
	for i, n := range g.Nodes[:newcomer] {
		if u := n.Store().Usage().Used; u < fair {
			t.Fatalf("node %d went below the grid's fraction: %d of a fair %d", i, u, fair)
		}
	}
	for j, vc := range vcs {
		nodes, zones, shares := distinctHolders(ctx, t, g, vc, zone)
		if nodes != 3 || shares != 3 || zones < zonesBefore[j] {
			t.Fatalf("object %d: %d shares on %d nodes in %d zones (before: %d zones)", j, shares, nodes, zones, zonesBefore[j])
		}
		rep, err := obj.Check(ctx, vc, true)
		if err != nil || !rep.Clean() {
			t.Fatalf("object %d after rebalancing: %v %+v", j, err, rep)
		}
	}
	// Settled: a node now within the band stays put (hysteresis).
	waitGossipUsage(t, g)
	for i, r := range reps {
		if res, err := r.RebalancePass(ctx); err != nil || res.Moved != 0 {
			t.Fatalf("node %d moved shares after the grid settled: %+v, %v", i, res, err)
		}
	}
}

// A draining node does not rebalance (the drain moves its shares),
// while a node as full as it is does.
func TestRebalanceNotWhileDraining(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 3, Capacity: func(i int) int64 { return 1 << 20 }})
	obj := g.Objects(object.Options{})
	data := make([]byte, 600<<10)
	rand.Read(data)
	if _, _, err := obj.Put(ctx, bytes.NewReader(data), int64(len(data)), codec.Params{K: 2, N: 3, SegmentSize: 16 << 10}, 3); err != nil {
		t.Fatal(err)
	}
	g.Add()
	waitGossipUsage(t, g)
	var reps []*repairer.Repairer
	for _, n := range g.Nodes[:2] {
		r, err := repairer.New(repairer.Config{Node: n, Every: -1, Spread: 0.01, RebalanceMax: 1, RebalanceMinAge: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		reps = append(reps, r)
	}
	var drained *node.Node = g.Nodes[0]
	if err := drained.Drain(); err != nil {
		t.Fatal(err)
	}
	if res, err := reps[0].RebalancePass(ctx); err != nil || res.Active {
		t.Fatalf("a draining node's rebalancing pass: %+v, %v", res, err)
	}
	if res, err := reps[1].RebalancePass(ctx); err != nil || !res.Active {
		t.Fatalf("a full node's rebalancing pass: %+v, %v", res, err)
	}
}
