package object

import (
	"math"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/quilt-grid/quilt/internal/placement"
)

// coordAt is a network coordinate d seconds from the origin.
func coordAt(d float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0] = d
	return c
}

// A client that measured round trips to a few nodes with coordinates
// predicts its round trip to the others from theirs: a node 100 ms away
// that it never measured comes after near ones in placement, though an
// unmeasured node without a coordinate still counts as fast.
func TestLinksPredictRoundTripsFromCoordinates(t *testing.T) {
	origin := coordinate.NewCoordinate(coordinate.DefaultConfig())
	var nodes []Node
	for i, d := range []float64{0.001, 0.002, 0.001, 0.003} {
		nodes = append(nodes, Node{ID: string(rune('a' + i)), Free: 1 << 30, Coord: coordAt(d)})
	}
	nodes = append(nodes,
		Node{ID: "far", Free: 1 << 30, Coord: coordAt(0.1)},
		Node{ID: "near", Free: 1 << 30, Coord: coordAt(0.002)},
		Node{ID: "nocoord", Free: 1 << 30},
		Node{ID: "bad", Free: 1 << 30, Coord: coordAt(math.NaN())})
	c := &Client{}
	l := &c.links
	// Nothing known: every node counts as fastest.
	eta := l.eta(nodes, 100_000)
	for _, nd := range nodes {
		if e := eta(nd.ID); e != 0 {
			t.Fatalf("nothing measured, yet eta(%s) = %v", nd.ID, e)
		}
	}
	// A round trip measured before the node's coordinate was known
	// places the client once it is (observe).
	var l2 links
	l2.roundTrip("a", origin.DistanceTo(nodes[0].Coord))
	if l2.samples != 0 {
		t.Fatal("a round trip to a node of unknown coordinate placed the client")
	}
	l2.observe(nodes)
	if l2.samples != 1 {
		t.Fatalf("observe placed the client by %d round trips, want 1", l2.samples)
	}
	// The client sits at the origin: round trips to a..d as their
	// coordinates say.
	for range 30 {
		for _, nd := range nodes[:4] {
			l.roundTrip(nd.ID, origin.DistanceTo(nd.Coord))
		}
		l.observe(nodes)
	}
	l.upload("a", 1<<20, time.Second) // 1 MB/s
	far, near := l.predictedRTT("far"), l.predictedRTT("near")
	if far < 50*time.Millisecond || far > 200*time.Millisecond || near > 20*time.Millisecond {
		t.Fatalf("predicted round trips: far %v (want about 100 ms), near %v (want a few ms)", far, near)
	}
	if p := l.predictedRTT("bad"); p != 0 {
		t.Errorf("a node whose coordinate is not finite: predicted %v", p)
	}
	eta = l.eta(nodes, 100_000)
	if ef, en := eta("far"), eta("near"); ef < 1.5*en || en <= 0 {
		t.Fatalf("eta far %v, near %v: the far node should take longer", ef, en)
	}
	if e := eta("nocoord"); e != 0 {
		t.Errorf("an unmeasured node without a coordinate: eta %v, want 0 (tried early)", e)
	}
	// Placement of 5 shares with happiness 4 over these nodes never puts
	// the far node among the first 4.
	si := make([]byte, 16)
	for i := range 200 {
		si[0], si[1] = byte(i), byte(i>>8)
		plan, err := placement.PlaceBy(si, placementNodes(nodes), 5, 4, 1<<20, eta)
		if err != nil {
			t.Fatal(err)
		}
		for sh, id := range plan.Nodes[:4] {
			if id == "far" {
				t.Fatalf("share %d of the first 4 on the far node: %v", sh, plan.Nodes)
			}
		}
	}
	// The estimates show the prediction.
	if got := c.Links()["a"]; got.Up == 0 || got.RTT == 0 || got.Predicted == 0 {
		t.Errorf("Links()[a] = %+v, want measured and predicted", got)
	}
}

// A coordinate of other dimensions does not move the client's own.
func TestLinksRefuseIncompatibleCoordinates(t *testing.T) {
	odd := coordinate.NewCoordinate(coordinate.DefaultConfig())
	odd.Vec = odd.Vec[:2]
	var l links
	l.observe([]Node{{ID: "x", Coord: odd}})
	for range 5 {
		l.roundTrip("x", 10*time.Millisecond)
	}
	if l.samples != 0 {
		t.Fatalf("%d samples taken against a coordinate of other dimensions", l.samples)
	}
	if p := l.predictedRTT("x"); p != 0 {
		t.Fatalf("predicted %v from an incompatible coordinate", p)
	}
}

// Seeded estimates fill in what the client has not measured itself and
// never replace what it has; values that are not positive and finite are
// left out.
func TestSeedLinks(t *testing.T) {
	c := &Client{}
	c.links.upload("a", 1_000_000, time.Second) // 1 MB/s measured here
	c.SeedLinks(map[string]LinkEstimate{
		"a":   {Up: 5e6, Down: 2e6, RTT: 30 * time.Millisecond},
		"b":   {Up: 3e5, RTT: 80 * time.Millisecond},
		"bad": {Up: math.NaN(), Down: -1, RTT: -time.Second},
		"":    {Up: 1e6},
	})
	got := c.Links()
	if e := got["a"]; e.Up != 1e6 || e.Down != 2e6 || e.RTT != 30*time.Millisecond {
		t.Errorf("a: %+v, want its measured 1 MB/s up and the seeded down and round trip", e)
	}
	if e := got["b"]; e.Up != 3e5 || e.RTT != 80*time.Millisecond {
		t.Errorf("b: %+v, want the seeded estimates", e)
	}
	if e, ok := got["bad"]; ok {
		t.Errorf("bad: %+v, want nothing kept", e)
	}
	if _, ok := got[""]; ok {
		t.Error("an estimate without a node was kept")
	}
	// Placement goes by them: b, seeded slow, comes after a.
	eta := c.links.eta([]Node{{ID: "a"}, {ID: "b"}}, 1<<20)
	if eta("b") <= eta("a") {
		t.Errorf("eta(b) = %v, not after eta(a) = %v", eta("b"), eta("a"))
	}
}

// A download measured while other nodes sent to the client as well says
// how much of the client's downlink the node got, a lower bound of its
// link: it raises the estimate and never lowers it. One measured while
// the node had the downlink to itself moves the estimate either way.
func TestLinksSharedDownloadOnlyRaises(t *testing.T) {
	var l links
	l.download("a", 4_000_000, time.Second, false) // 4 MB/s alone
	l.download("a", 1_000_000, time.Second, true)  // 1 MB/s beside others
	if got := l.readRate("a"); got != 4e6 {
		t.Fatalf("after a shared 1 MB/s: %.0f B/s, want the 4 MB/s measured alone", got)
	}
	l.download("a", 8_000_000, time.Second, true) // more than thought, though shared
	if got := l.readRate("a"); got <= 4e6 {
		t.Fatalf("after a shared 8 MB/s: %.0f B/s, want more than 4 MB/s", got)
	}
	before := l.readRate("a")
	l.download("a", 1_000_000, time.Second, false) // slower, alone: the link is
	if got := l.readRate("a"); got >= before {
		t.Fatalf("after 1 MB/s alone: %.0f B/s, want less than %.0f", got, before)
	}
	l.download("b", 500_000, time.Second, true) // nothing known yet: a start
	if got := l.readRate("b"); got != 5e5 {
		t.Fatalf("b after its first shared download: %.0f B/s, want 500000", got)
	}
}

// The downlink estimate is the most a read was seen to bring in: a
// slower read does not lower it, a seeded one counts until the client
// has measured its own, and a value that is not positive and finite is
// not taken.
func TestDownlinkEstimate(t *testing.T) {
	c := &Client{}
	c.SeedDownlink(math.NaN())
	c.SeedDownlink(-1)
	if got := c.Downlink(); got != 0 {
		t.Fatalf("after bad seeds: %.0f, want 0", got)
	}
	c.SeedDownlink(5e6)
	if got := c.Downlink(); got != 5e6 {
		t.Fatalf("seeded 5 MB/s: %.0f", got)
	}
	c.links.inflow(2_000_000, time.Second) // a slow read: says nothing
	if got := c.Downlink(); got != 5e6 {
		t.Fatalf("after a read at 2 MB/s: %.0f, want the 5 MB/s kept", got)
	}
	c.links.inflow(9_000_000, time.Second)
	if got := c.Downlink(); got <= 5e6 || got > 9e6 {
		t.Fatalf("after a read at 9 MB/s: %.0f, want between 5 and 9 MB/s", got)
	}
	before := c.Downlink()
	c.SeedDownlink(1e6) // measured here: a seed does not replace it
	if got := c.Downlink(); got != before {
		t.Fatalf("a seed replaced the measured %.0f with %.0f", before, got)
	}
}
