package placement

import (
	"slices"
	"strings"
	"testing"
)

// Of 13 nodes, 6 slow: PlaceBy gives the first happy shares to the 7
// fast ones (all of them, every time), the other 3 to slow nodes, and
// over many objects every slow node gets shares.
func TestPlaceByPrefersFastNodes(t *testing.T) {
	nodes := equalNodes(13, GiB)
	slow := func(id string) bool { return id < "n06" }
	eta := func(id string) float64 {
		if slow(id) {
			return 10
		}
		return 1
	}
	r := newRand()
	got := map[string]int{}
	for range 200 {
		si := randSI(r)
		plan, err := PlaceBy(si, nodes, 10, 7, MiB, eta)
		if err != nil {
			t.Fatal(err)
		}
		for sh, id := range plan.Nodes {
			if sh < 7 && slow(id) {
				t.Fatalf("share %d (of the first 7) on slow node %s: %v", sh, id, plan.Nodes)
			}
			got[id]++
		}
		if h := plan.Happiness(); h != 10 {
			t.Fatalf("happiness %d", h)
		}
	}
	for _, nd := range nodes {
		if got[nd.ID] == 0 {
			t.Errorf("node %s (slow %v) never got a share", nd.ID, slow(nd.ID))
		}
	}
}

// The speed never beats zone spread: fast nodes all in one zone, slow in
// another, the plan still splits 5 and 5, as Place's.
func TestPlaceByKeepsZoneSpread(t *testing.T) {
	nodes := zonedNodes(map[string]int{"a": 7, "b": 6})
	eta := func(id string) float64 {
		if strings.HasPrefix(id, "b") {
			return 10
		}
		return 1
	}
	r := newRand()
	for range 50 {
		si := randSI(r)
		plan, err := PlaceBy(si, nodes, 10, 7, MiB, eta)
		if err != nil {
			t.Fatal(err)
		}
		inA := 0
		for _, id := range plan.Nodes {
			if strings.HasPrefix(id, "a") {
				inA++
			}
		}
		if inA != 5 {
			t.Fatalf("zone a holds %d of 10 shares: %v", inA, plan.Nodes)
		}
	}
}

// With no difference in speed, or less than a factor of two, PlaceBy is
// Place; nodes without room are
// skipped whatever their speed; bad parameters are refused.
func TestPlaceByEqualIsPlace(t *testing.T) {
	nodes := equalNodes(15, GiB)
	r := newRand()
	for range 50 {
		si := randSI(r)
		a, err1 := Place(si, nodes, 10, 7, MiB)
		b, err2 := PlaceBy(si, nodes, 10, 7, MiB, func(string) float64 { return 0 })
		if err1 != nil || err2 != nil || !slices.Equal(a.Nodes, b.Nodes) {
			t.Fatalf("Place %v (%v), PlaceBy %v (%v)", a.Nodes, err1, b.Nodes, err2)
		}
		// Measurements within a factor of two of each other (noise on a
		// uniform network) change nothing either.
		noisy := map[string]float64{}
		for _, nd := range nodes {
			noisy[nd.ID] = 1 + r.Float64()*0.99
		}
		c, err3 := PlaceBy(si, nodes, 10, 7, MiB, func(id string) float64 { return noisy[id] })
		if err3 != nil || !slices.Equal(a.Nodes, c.Nodes) {
			t.Fatalf("noise moved shares: Place %v, PlaceBy %v (%v)", a.Nodes, c.Nodes, err3)
		}
	}
	full := equalNodes(12, GiB)
	full[0].Free = 0 // fastest, but full
	plan, err := PlaceBy(randSI(r), full, 10, 7, MiB, func(id string) float64 {
		if id == "n00" {
			return 0
		}
		return 1
	})
	if err != nil || slices.Contains(plan.Nodes, "n00") {
		t.Fatalf("a full node was given a share: %v %v", plan.Nodes, err)
	}
	if _, err := PlaceBy(randSI(r), full, 10, 11, MiB, func(string) float64 { return 0 }); err == nil {
		t.Fatal("happy > n accepted")
	}
}

// fill places objects of 10 shares (happiness 7) on nodes, taking each
// share's room from its node, until placement fails; it returns how many
// shares each node got and, per object, the plan.
func fill(t *testing.T, nodes []Node, eta func(string) float64, maxObjects int) (map[string]int, [][]string) {
	t.Helper()
	nodes = slices.Clone(nodes)
	r := newRand()
	got := map[string]int{}
	var plans [][]string
	for range maxObjects {
		plan, err := PlaceBy(randSI(r), nodes, 10, 7, MiB, eta)
		if err != nil {
			break
		}
		plans = append(plans, plan.Nodes)
		for _, id := range plan.Nodes {
			got[id]++
			for i := range nodes {
				if nodes[i].ID == id {
					nodes[i].Free -= MiB
					nodes[i].Used += MiB
				}
			}
		}
	}
	return got, plans
}

// Over many uploads on 7 fast and 6 slow nodes of equal room, slow nodes
// receive shares from the start, the first 7 shares go to the fast
// nodes while they have room to spare, and the grid fills: the fast
// nodes are not filled up first (which would leave the 6 slow nodes,
// too few for happiness 7, a quarter empty for ever), but lose their
// preference once they have less than half the average free space.
func TestPlaceByFairOverManyUploads(t *testing.T) {
	const room = 400 // shares per node
	nodes := equalNodes(13, room*MiB)
	slow := func(id string) bool { return id < "n06" }
	eta := func(id string) float64 {
		if slow(id) {
			return 50
		}
		return 1
	}
	got, plans := fill(t, nodes, eta, 13*room)
	early := map[string]int{}
	for o, plan := range plans[:100] {
		for sh, id := range plan {
			early[id]++
			if sh < 7 && slow(id) {
				t.Fatalf("object %d (of the first 100): share %d on slow node %s: %v", o, sh, id, plan)
			}
		}
	}
	for _, nd := range nodes {
		if slow(nd.ID) && early[nd.ID] == 0 {
			t.Errorf("slow node %s got no share of the first 100 objects", nd.ID)
		}
	}
	total := 0
	for _, nd := range nodes {
		total += got[nd.ID]
		if got[nd.ID] < room*9/10 {
			t.Errorf("node %s (slow %v) ended %d%% full", nd.ID, slow(nd.ID), 100*got[nd.ID]/room)
		}
	}
	if total < 13*room*95/100 {
		t.Errorf("the grid took %d shares of %d before placement failed", total, 13*room)
	}
}

// Capacity weighting holds among the nodes that are not preferred for
// speed: of the slow nodes, those with 4 times the room get at least
// twice the shares; and fast nodes with a quarter of the big ones' room
// keep their preference.
func TestPlaceBySlowNodesWeightedByRoom(t *testing.T) {
	nodes := equalNodes(13, 2000*MiB)
	slow := func(id string) bool { return id < "n06" }
	big := func(id string) bool { return id < "n03" }
	for i := range nodes {
		if big(nodes[i].ID) {
			nodes[i].Free *= 4
		}
	}
	eta := func(id string) float64 {
		if slow(id) {
			return 50
		}
		return 1
	}
	got, plans := fill(t, nodes, eta, 300)
	// Nodes of less room are still preferred for speed while the part
	// of it they have free is not short.
	for o, plan := range plans[:100] {
		for sh, id := range plan[:7] {
			if slow(id) {
				t.Fatalf("object %d: share %d on slow node %s: %v", o, sh, id, plan)
			}
		}
	}
	bigN, smallN := 0, 0
	for _, nd := range nodes {
		switch {
		case big(nd.ID):
			bigN += got[nd.ID]
		case slow(nd.ID):
			smallN += got[nd.ID]
		}
	}
	if smallN == 0 || bigN < 2*smallN {
		t.Fatalf("slow nodes with 4x the room got %d shares, the others %d: want at least twice", bigN, smallN)
	}
}
