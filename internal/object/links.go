package object

import (
	"sync"
	"time"
)

// links keeps a running estimate of the client's link to each node: the
// throughput of the shares it uploaded there (bytes over the time from
// the share's first byte queued to the node's answer), of the blocks it
// read from there, and the round trip of its share lists. Reads start
// from these estimates (see fetcher). Put places the first happy shares of an object of
// several segments on the nodes that should take them soonest
// (placement.PlaceBy).
type links struct {
	mu sync.Mutex
	m  map[string]*linkEst
}

// linkEst is one node's estimate.
type linkEst struct {
	up   float64       // bytes per second to the node, 0: not measured
	down float64       // bytes per second from it (blocks read), 0: not measured
	rtt  time.Duration // 0: not measured
}

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

// upload records n bytes sent to node in d.
func (l *links) upload(node string, n int64, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	rate := float64(n) / d.Seconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.est(node)
	if e.up == 0 {
		e.up = rate
	} else {
		e.up = (1-ewma)*e.up + ewma*rate
	}
}

// download records n bytes of blocks read from node in d.
func (l *links) download(node string, n int64, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	rate := float64(n) / d.Seconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.est(node)
	if e.down == 0 {
		e.down = rate
	} else {
		e.down = (1-ewma)*e.down + ewma*rate
	}
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
	if e.rtt == 0 {
		e.rtt = d
	} else {
		e.rtt = time.Duration((1-ewma)*float64(e.rtt) + ewma*float64(d))
	}
}

// eta returns a function estimating the seconds a share of size bytes
// takes to reach a node: 0 for a node never uploaded to (so it is tried,
// and measured).
func (l *links) eta(size int64) func(string) float64 {
	l.mu.Lock()
	snap := make(map[string]linkEst, len(l.m))
	for id, e := range l.m {
		snap[id] = *e
	}
	l.mu.Unlock()
	return func(id string) float64 {
		e, ok := snap[id]
		if !ok || e.up == 0 {
			return 0
		}
		return e.rtt.Seconds() + float64(size)/e.up
	}
}

// LinkEstimate is the client's running estimate of its link to a node.
type LinkEstimate struct {
	Up   float64       // bytes per second of shares uploaded; 0: not measured
	Down float64       // bytes per second of blocks read; 0: not measured
	RTT  time.Duration // round trip of its share lists; 0: not measured
}

// Links returns the client's running estimates of its links to the
// nodes it has measured.
func (c *Client) Links() map[string]LinkEstimate {
	c.links.mu.Lock()
	defer c.links.mu.Unlock()
	out := make(map[string]LinkEstimate, len(c.links.m))
	for id, e := range c.links.m {
		out[id] = LinkEstimate{Up: e.up, Down: e.down, RTT: e.rtt}
	}
	return out
}
