package object

import (
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// links keeps a running estimate of the client's link to each node: the
// throughput of the shares it uploaded there (bytes over the time from
// the share's start to the node's answer, less the time the share's
// connection waited for the upload to queue more: see newSink), of the
// blocks it read from there, and the round trip of its share lists.
// Reads start from these estimates (see fetcher). Put places the first
// happy shares of an object of several segments on the nodes that
// should take them soonest (placement.PlaceBy).
//
// For a node it has no round trip of its own to, the client predicts one
// from network coordinates: the grid's gossip gives every node a Vivaldi
// coordinate (member.Member.Coord), and the client places itself in the
// same space from the round trips it measures to nodes whose coordinate
// it knows (hashicorp/serf's coordinate client, as a Serf member would
// from its probes).
type links struct {
	mu sync.Mutex
	m  map[string]*linkEst
	// coords are the nodes' coordinates as the grid last reported them.
	coords map[string]*coordinate.Coordinate
	// self is the client's own coordinate, moved by each round trip
	// measured to a node in coords; samples counts them.
	self    *coordinate.Client
	samples int
	// in is the most the client's own downlink was seen to carry: the
	// bytes of a read from all its holders over the time they took
	// (bytes per second; 0: not measured).
	in float64
}

// linkEst is one node's estimate.
type linkEst struct {
	up   float64       // bytes per second to the node, 0: not measured
	down float64       // bytes per second from it (blocks read), 0: not measured
	rtt  time.Duration // 0: not measured
	fed  bool          // rtt has moved self (see links.place)
}

// minSamples is how many round trips the client must have measured to
// nodes with coordinates before it trusts its own coordinate to predict
// others.
const minSamples = 3

// ewma weighs a new measurement against the running estimate.
const ewma = 0.3

// minMeasured is the least a share upload must send to count in the
// throughput estimate: below, its time is mostly round trips.
const minMeasured = 64 << 10

func (l *links) est(node string) *linkEst {
	if l.m == nil {
		l.m = map[string]*linkEst{}
	}
	e := l.m[node]
	if e == nil {
		e = &linkEst{}
		l.m[node] = e
	}
	return e
}

// blend is the moving average of old (0: nothing measured yet) and a new
// measurement v.
func blend(old, v float64) float64 {
	if old == 0 {
		return v
	}
	return (1-ewma)*old + ewma*v
}

// upload records n bytes sent to node in d.
func (l *links) upload(node string, n int64, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.est(node)
	e.up = blend(e.up, float64(n)/d.Seconds())
}

// download records n bytes of blocks read from node in d. shared says
// that other nodes were sending to the client at the same time, as much
// as this one or more: the client's downlink was then split between
// them, so the rate says what the node got of it, not what its link
// carries, and is only a lower bound of the link's throughput. It may
// raise the estimate, never lower it. (Were it let to, every read that
// asks many holders at once would press the fast holders' estimates
// down toward the downlink's share, and the next read would start
// from rates that say more about how the last one was spread than
// about the links: it would give blocks to slow holders whose blocks
// then end the read late.) A rate measured while the node had the
// downlink mostly to itself is the link's, and moves the estimate
// either way.
func (l *links) download(node string, n int64, d time.Duration, shared bool) {
	if n <= 0 || d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.est(node)
	if v := float64(n) / d.Seconds(); !shared || v > e.down {
		e.down = blend(e.down, v)
	}
}

// inflow records n bytes read from all of a read's holders in d: the
// client's downlink carries that much at least.
func (l *links) inflow(n int64, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := float64(n) / d.Seconds(); v > l.in {
		l.in = blend(l.in, v)
	}
}

// downlink is the client's downlink estimate (see inflow), 0 if none.
func (l *links) downlink() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.in
}

// readRate is what a read expects of a node's link before it has
// measured it itself: what earlier reads measured, else the throughput of
// uploads to it (links are often symmetric), else 0 (nothing known).
func (l *links) readRate(node string) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[node]; e != nil {
		if e.down > 0 {
			return e.down
		}
		return e.up
	}
	return 0
}

// roundTrip records how long a node took to answer a small request.
func (l *links) roundTrip(node string, d time.Duration) {
	if d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.est(node)
	e.rtt = time.Duration(blend(float64(e.rtt), float64(d)))
	if co := l.coords[node]; co != nil {
		l.place(node, co, d)
		e.fed = true
	}
}

// place moves the client's own coordinate by a round trip d measured to
// node, whose coordinate is co. Called with mu held.
func (l *links) place(node string, co *coordinate.Coordinate, d time.Duration) {
	if l.self == nil {
		c, err := coordinate.NewClient(coordinate.DefaultConfig())
		if err != nil {
			return
		}
		l.self = c
	}
	// Update refuses a coordinate of other dimensions or not finite, and
	// a round trip of 10 s or more: such a sample teaches nothing.
	if _, err := l.self.Update(node, co, d); err == nil {
		l.samples++
	}
}

// observe records the coordinates the grid reports of its nodes, and
// places the client by the round trips it measured to nodes whose
// coordinate it did not know then.
func (l *links) observe(nodes []Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, nd := range nodes {
		if nd.Coord == nil || !nd.Coord.IsValid() {
			continue
		}
		if l.coords == nil {
			l.coords = map[string]*coordinate.Coordinate{}
		}
		l.coords[nd.ID] = nd.Coord
		if e := l.m[nd.ID]; e != nil && e.rtt > 0 && !e.fed {
			l.place(nd.ID, nd.Coord, e.rtt)
			e.fed = true
		}
	}
}

// rttLocked is the round trip to node: measured, else predicted from
// coordinates once the client has placed itself, else 0 (not known).
func (l *links) rttLocked(node string) time.Duration {
	if e := l.m[node]; e != nil && e.rtt > 0 {
		return e.rtt
	}
	if co := l.coords[node]; co != nil && l.self != nil && l.samples >= minSamples {
		return l.self.DistanceTo(co)
	}
	return 0
}

// eta returns a function estimating the seconds a share of size bytes
// takes to reach each of nodes (whose coordinates it records first):
// the round trip (measured or predicted) plus size over the throughput
// measured. A node never uploaded to is taken to be as fast as the
// fastest measured, so it is tried, and measured, early; only its round
// trip, if known, sets it apart (a node known to be far away comes after
// near ones). With nothing known, 0.
func (l *links) eta(nodes []Node, size int64) func(string) float64 {
	l.observe(nodes)
	l.mu.Lock()
	type est struct {
		up  float64
		rtt float64
	}
	snap := make(map[string]est, len(nodes))
	best := 0.0
	for _, nd := range nodes {
		var up float64
		if e := l.m[nd.ID]; e != nil {
			up = e.up
		}
		best = max(best, up)
		snap[nd.ID] = est{up, l.rttLocked(nd.ID).Seconds()}
	}
	l.mu.Unlock()
	return func(id string) float64 {
		e := snap[id]
		switch {
		case e.up > 0:
			return e.rtt + float64(size)/e.up
		case best > 0 && e.rtt > 0:
			return e.rtt + float64(size)/best
		}
		return 0
	}
}

// predictedRTT is the round trip to node the client predicts from
// network coordinates (0: it cannot yet).
func (l *links) predictedRTT(node string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if co := l.coords[node]; co != nil && l.self != nil && l.samples >= minSamples {
		return l.self.DistanceTo(co)
	}
	return 0
}

// LinkEstimate is the client's running estimate of its link to a node.
type LinkEstimate struct {
	Up   float64       // bytes per second of shares uploaded; 0: not measured
	Down float64       // bytes per second of blocks read; 0: not measured
	RTT  time.Duration // round trip of its share lists; 0: not measured
	// Predicted is the round trip predicted from network coordinates
	// (the node's, and the client's own placed by the round trips it
	// measured); 0 until the client knows both.
	Predicted time.Duration
}

// Links returns the client's running estimates of its links to the
// nodes it has measured.
func (c *Client) Links() map[string]LinkEstimate {
	out := map[string]LinkEstimate{}
	c.links.mu.Lock()
	for id, e := range c.links.m {
		out[id] = LinkEstimate{Up: e.up, Down: e.down, RTT: e.rtt}
	}
	c.links.mu.Unlock()
	for id, e := range out {
		e.Predicted = c.links.predictedRTT(id)
		out[id] = e
	}
	return out
}

// SeedLinks gives the client estimates of its links measured earlier, by
// an earlier process on the same machine (quilt put and get keep them in
// $QUILT_HOME/links.json): a node the client has not measured itself
// starts from them, and its own measurements blend in as they come. A
// process that has just started knows nothing else of its links, so
// without them its first upload places by rendezvous alone, its first
// read starts from no estimate, and an automatic choice of an upload
// helper has nothing to compare. Values that are not positive and finite
// are left out.
func (c *Client) SeedLinks(m map[string]LinkEstimate) {
	ok := func(v float64) bool { return v > 0 && v < 1e13 } // NaN fails both
	c.links.mu.Lock()
	defer c.links.mu.Unlock()
	for id, s := range m {
		rttOK := s.RTT > 0 && s.RTT < time.Minute
		if id == "" || !ok(s.Up) && !ok(s.Down) && !rttOK {
			continue
		}
		e := c.links.est(id)
		if e.up == 0 && ok(s.Up) {
			e.up = s.Up
		}
		if e.down == 0 && ok(s.Down) {
			e.down = s.Down
		}
		if e.rtt == 0 && rttOK {
			e.rtt = s.RTT
		}
	}
}

// Downlink returns the most the client's own downlink was seen to carry
// in a read (bytes per second; 0: not measured): reads pass over a
// holder whose link would take longer over a block than the downlink
// needs for the rest of the read (see fetcher.pick).
func (c *Client) Downlink() float64 { return c.links.downlink() }

// SeedDownlink gives the client the downlink estimate of an earlier
// process (as SeedLinks does its links'), used until the client has
// measured its own. A value that is not positive and finite is left
// out.
func (c *Client) SeedDownlink(v float64) {
	c.links.mu.Lock()
	defer c.links.mu.Unlock()
	if c.links.in == 0 && v > 0 && v < 1e13 {
		c.links.in = v
	}
}
