package repairer

import (
	"math"
	"slices"
	"testing"

	"github.com/quilt-grid/quilt/internal/member"
)

const mib = 1 << 20

// gridLoads returns loads of nodes of capacity 100 MiB each, using used[i] MiB.
func gridLoads(used ...int64) []Load {
	var ls []Load
	for i, u := range used {
		ls = append(ls, Load{ID: string(rune('a' + i)), Used: u * mib, Capacity: 100 * mib})
	}
	return ls
}

// When a node starts, goes on and stops: it starts only above the grid's
// fraction by more than the spread, then goes on down to a tenth of the
// spread above it (hysteresis), and never for a node at or below the grid.
func TestPlanRebalanceWhen(t *testing.T) {
	for _, c := range []struct {
		name   string
		used   []int64 // MiB of 100 each; node "a" is self
		active bool
		want   bool
	}{
		{"balanced", []int64{50, 50, 50, 50}, false, false},
		{"above by less than the spread", []int64{54, 49, 49, 48}, false, false},
		{"above by more than the spread", []int64{60, 50, 50, 40}, false, true},
		{"a new empty node", []int64{50, 50, 50, 0}, false, true},
		{"going on inside the band", []int64{53, 50, 50, 47}, true, true},
		{"stopping near the grid", []int64{50, 50, 50, 50}, true, false},
		{"below the grid", []int64{10, 50, 50, 50}, true, false},
		{"empty grid", []int64{0, 0, 0, 0}, false, false},
	} {
		p := planRebalance("a", gridLoads(c.used...), c.active, DefaultSpread, DefaultRebalanceMax)
		if p.Active != c.want {
			t.Errorf("%s: active %v, want %v (plan %+v)", c.name, p.Active, c.want, p)
		}
		if !p.Active && (p.Excess != 0 || len(p.Allot) != 0) {
			t.Errorf("%s: an inactive plan sends %d bytes to %v", c.name, p.Excess, p.Allot)
		}
	}
	// Self unknown, or no capacity known: nothing.
	if p := planRebalance("z", gridLoads(90, 0), false, DefaultSpread, DefaultRebalanceMax); p.Active {
		t.Errorf("a node not among the loads plans %+v", p)
	}
}

// Which targets and how much: only nodes clearly below the grid receive,
// each at most up to the grid's fraction, shared among the sources in
// proportion of their excess; a source never sends more than takes it
// to a tenth of the spread above the grid, nor more than the bound.
func TestPlanRebalanceHowMuch(t *testing.T) {
	// Six nodes at 50%, one new one: the grid is at 300/700.
	ls := gridLoads(50, 50, 50, 50, 50, 50, 0)
	avg := 300.0 / 700
	stop := avg + DefaultSpread/10
	var total int64
	for i := range 6 {
		self := string(rune('a' + i))
		p := planRebalance(self, ls, false, DefaultSpread, DefaultRebalanceMax)
		if !p.Active || math.Abs(p.Avg-avg) > 1e-9 {
			t.Fatalf("%s: %+v", self, p)
		}
		wantExcess := int64(50*mib - stop*100*mib)
		if d := p.Excess - wantExcess; d < -1 || d > 1 {
			t.Fatalf("%s: excess %d, want %d", self, p.Excess, wantExcess)
		}
		if len(p.Allot) != 1 || p.Allot["g"] <= 0 {
			t.Fatalf("%s: allotments %v, want only the new node", self, p.Allot)
		}
		total += min(p.Allot["g"], p.Excess)
	}
	// Together they fill the new node no further than the grid's
	// fraction, and most of the way there.
	room := int64(avg * 100 * mib)
	if total > room || total < room*8/10 {
		t.Fatalf("the sources send %d bytes together; the new node's room is %d", total, room)
	}
	// The bound per pass.
	if p := planRebalance("a", ls, false, DefaultSpread, 3*mib); p.Excess != 3*mib {
		t.Fatalf("excess %d with a bound of 3 MiB", p.Excess)
	}
	// Of a grid at 40%, a node at it, and one above it, are no targets;
	// the emptier of two nodes below it gets more room.
	ls = gridLoads(70, 30, 50, 40, 10)
	p := planRebalance("a", ls, false, DefaultSpread, DefaultRebalanceMax)
	if _, ok := p.Allot["c"]; ok {
		t.Fatalf("a node above the grid's fraction is a target: %v", p.Allot)
	}
	if _, ok := p.Allot["d"]; ok {
		t.Fatalf("a node at the grid's fraction is a target: %v", p.Allot)
	}
	if p.Allot["b"] <= 0 || p.Allot["e"] <= p.Allot["b"] {
		t.Fatalf("allotments %v: want b and more to e", p.Allot)
	}
	// Space is spread by capacity: of nodes of 100, 1000 and 100 MiB at
	// 80%, 40% and 45%, the big one is below the grid (43.75%) and the
	// small one at 45% above it.
	ls = []Load{{ID: "a", Used: 80 * mib, Capacity: 100 * mib}, {ID: "b", Used: 400 * mib, Capacity: 1000 * mib}, {ID: "c", Used: 45 * mib, Capacity: 100 * mib}}
	p = planRebalance("a", ls, false, DefaultSpread, DefaultRebalanceMax)
	if !p.Active || p.Allot["b"] <= 0 || p.Allot["c"] != 0 {
		t.Fatalf("capacities 100, 1000, 100 MiB at 80%%, 40%%, 45%%: %+v", p)
	}
}

// loads keeps only live members that are not draining or leaving and
// have a known capacity, and self's own usage rather than its gossip.
func TestLoads(t *testing.T) {
	ms := []member.Member{
		{Meta: member.Meta{ID: "self", Used: 1, Free: 1}, State: member.Alive},
		{Meta: member.Meta{ID: "b", Used: 10, Free: 90}, State: member.Alive},
		{Meta: member.Meta{ID: "c", Used: 10, Free: 90}, State: member.Suspect},
		{Meta: member.Meta{ID: "d", Used: 10, Free: 90}, State: member.Dead},
		{Meta: member.Meta{ID: "e", Used: 10, Draining: true}, State: member.Alive},
		{Meta: member.Meta{ID: "f", Used: 10, Free: 90, Leaving: true}, State: member.Alive},
		{Meta: member.Meta{ID: "g"}, State: member.Alive},
	}
	ls := loads(ms, Load{ID: "self", Used: 50, Capacity: 100})
	if len(ls) != 2 || ls[0].Used != 50 || ls[1].ID != "b" || ls[1].Capacity != 100 {
		t.Fatalf("loads %+v", ls)
	}
}

// Which target a share goes to: never a node holding a share of the
// object, nor one without room in its allotment; a zone with fewer of
// the object's shares before the source's own; never a zone that would
// then hold more than the source's did.
func TestPickTarget(t *testing.T) {
	targets := map[string]string{"t1": "z1", "t2": "z2", "t3": "z3", "t4": "z1"}
	allot := map[string]int64{"t1": 10, "t2": 10, "t3": 10, "t4": 10}
	for _, c := range []struct {
		name     string
		selfZone string
		holders  map[string]string
		allot    map[string]int64
		want     []string // any of them
	}{
		{"a zone without a share first", "z1",
			map[string]string{"self": "z1", "h": "z1", "h2": "z2"}, allot, []string{"t3"}},
		{"not a holder", "z1",
			map[string]string{"self": "z1", "t3": "z3", "h2": "z2"}, allot, []string{"t1", "t4"}},
		{"the source's zone keeps spread", "z1",
			map[string]string{"self": "z1", "h2": "z2", "h3": "z3"}, allot, []string{"t1", "t4"}},
		{"no zone would hold more than the source's did", "z3",
			map[string]string{"self": "z3", "h1": "z1", "h2": "z2"}, map[string]int64{"t1": 10, "t2": 10}, nil},
		{"a zone that held fewer than the source's", "z3",
			map[string]string{"self": "z3", "h1": "z1", "h2": "z2", "t3": "z3"}, map[string]int64{"t1": 10}, []string{"t1"}},
		{"not without room", "z1",
			map[string]string{"self": "z1", "h": "z1"}, map[string]int64{"t1": 10, "t2": 4, "t3": 5, "t4": 10}, []string{"t3"}},
		{"the most room among equals", "z1",
			map[string]string{"self": "z1"}, map[string]int64{"t1": 10, "t2": 20, "t3": 30, "t4": 10}, []string{"t3"}},
	} {
		got := pickTarget(c.selfZone, c.holders, targets, c.allot, 5)
		ok := got == "" && len(c.want) == 0
		for _, w := range c.want {
			ok = ok || got == w
		}
		if !ok {
			t.Errorf("%s: picked %q, want one of %v", c.name, got, c.want)
		}
	}
}

// Whether a move's source may remove its copy: only if the object stays
// on as many nodes and zones, no zone fuller than the fullest before.
func TestSpreadKept(t *testing.T) {
	before := map[string]string{"s": "a", "a2": "a", "b1": "b", "c1": "c"}
	for _, c := range []struct {
		name string
		now  map[string]string
		ok   bool
	}{
		{"into a zone as full as the source's was", map[string]string{"a2": "a", "b1": "b", "c1": "c", "t": "c"}, true},
		{"within the zone", map[string]string{"a2": "a", "t": "a", "b1": "b", "c1": "c"}, true},
		{"another holder left the zone meanwhile", map[string]string{"b1": "b", "c1": "c", "t": "c", "t2": "b"}, false},
		{"a zone fuller than any was", map[string]string{"a2": "a", "b1": "b", "c1": "c", "t": "c", "t2": "c"}, false},
		{"on a node fewer", map[string]string{"a2": "a", "b1": "b", "c1": "c"}, false},
	} {
		if err := spreadKept(before, c.now); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// Who moves a share of an object: only a holder above the grid whose
// zone lets the share go to a target holding none of the object.
func TestMovers(t *testing.T) {
	holders := map[string]string{"a1": "a", "a2": "a", "b1": "b", "c1": "c", "low": "c"}
	targets := map[string]string{"new": "c", "low": "c"}
	active := map[string]bool{"a1": true, "a2": true, "b1": true, "c1": true}
	got := movers(holders, targets, active)
	slices.Sort(got)
	// c has 2 (c1, low): a share may go to c only from a zone with 3 or
	// more, or from c itself.
	if want := []string{"c1"}; !slices.Equal(got, want) {
		t.Fatalf("movers %v, want %v", got, want)
	}
	delete(holders, "low")
	active["a2"] = false
	got = movers(holders, targets, active)
	slices.Sort(got)
	if want := []string{"a1", "c1"}; !slices.Equal(got, want) {
		t.Fatalf("movers %v, want %v", got, want)
	}
	if got := movers(holders, map[string]string{"a1": "a"}, active); len(got) != 0 {
		t.Fatalf("movers %v with the only target a holder", got)
	}
}
