package object_test

import (
	"context"
	"crypto/sha256"
	"io"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// holderCounter is the grid of real nodes with the share reads in flight
// counted per node: the test sees how many holders feed a read at once.
type holderCounter struct {
	object.NodeGrid
	mu       sync.Mutex
	inflight map[string]int
	peak     int
}

func (h *holderCounter) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	rc, err := h.NodeGrid.GetShare(ctx, node, key, off, n)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.inflight[node]++
	h.peak = max(h.peak, len(h.inflight))
	h.mu.Unlock()
	return &countedBody{ReadCloser: rc, h: h, node: node}, nil
}

type countedBody struct {
	io.ReadCloser
	h    *holderCounter
	node string
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() {
		b.h.mu.Lock()
		if b.h.inflight[b.node]--; b.h.inflight[b.node] == 0 {
			delete(b.h.inflight, b.node)
		}
		b.h.mu.Unlock()
	})
	return b.ReadCloser.Close()
}

func testLease(si sharefile.SI) []byte { return append([]byte("test lease "), si[:]...) }

// emulatedObject starts a grid of ten nodes behind an emulated network
// (no limits yet) and stores an object of size bytes there (3 of 10,
// segments of 64 KiB, every share placed): the set-up of the tests of
// reads on slow links, which then set the links' limits.
func emulatedObject(t *testing.T, seed uint64, size int64) (*linkemu.Network, *testgrid.Grid, codec.Params, codec.ReadCap) {
	t.Helper()
	ln := linkemu.New(1)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln})
	c := g.ObjectsAt(clientHost, object.Options{})
	p := codec.Params{K: 3, N: 10, SegmentSize: 64 << 10}
	rc, _ := put(t, c, seed, size, p, 10)
	return ln, g, p, rc
}

// A read of many segments from holders whose uplinks are slow draws on
// more than k of them at once: the blocks of consecutive segments go to
// different holders. Reading k shares one stream each, as reads did,
// never has more than k (k+1 for a moment when it swaps a slow stream)
// holders in flight, and the test fails.
func TestGetUsesMoreThanKHolders(t *testing.T) {
	ln, g, p, rc := emulatedObject(t, 11, 2<<20)
	for i := range 10 {
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Up: 300_000})
	}
	hc := &holderCounter{NodeGrid: object.NodeGrid{Client: g.NodeClientAt(clientHost), MaxAge: time.Second}, inflight: map[string]int{}}
	rd := object.New(hc, object.Options{LeaseSecret: testLease, Stall: time.Minute})
	rep := mustGet(t, rd, rc, 11)
	hc.mu.Lock()
	peak := hc.peak
	hc.mu.Unlock()
	t.Logf("holders at once: %d (the reader's count: %d), hedges %d", peak, rep.Holders, rep.Hedges)
	if peak <= p.K+1 {
		t.Fatalf("at most %d holders fed the read at once; want more than k+1 = %d", peak, p.K+1)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems: %v", rep.Problems)
	}
}

// A node whose answers take ten minutes (a link that has all but died)
// does not hold a read up: it starts on the share lists that came, and
// finishes without that node's. A read that waits for every node's list
// first (with an hour's Stall) is still waiting at the test's deadline,
// and the test fails.
func TestGetDoesNotWaitForSlowList(t *testing.T) {
	ln, g, p, rc := emulatedObject(t, 12, 1<<20)
	// The reader learns the members first (kept for an hour), then the
	// last node's link back to it slows to ten minutes a chunk.
	nc := g.NodeClientAt(clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rd := object.New(object.NodeGrid{Client: nc, MaxAge: time.Hour}, object.Options{LeaseSecret: testLease, Stall: time.Hour})
	// A first read opens connections to every node, so the slow node's
	// list later goes on one already open (no TLS handshake to time out).
	mustGet(t, rd, rc, 12)
	ln.SetLink(testgrid.Host(9), clientHost, linkemu.Link{Delay: 10 * time.Minute})
	h := sha256.New()
	rep, err := rd.Get(ctx, rc, h, 0, -1)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var got [32]byte
	h.Sum(got[:0])
	if got != digest(randReader(12, rc.Size)) {
		t.Fatal("read returned different bytes")
	}
	if len(rep.Shares) < p.K {
		t.Fatalf("shares %v", rep.Shares)
	}
	slow := string(g.Nodes[9].ID())
	for _, pr := range rep.Problems {
		if pr.Node == slow {
			t.Errorf("the read waited for the slow node's list: %v", pr.Err)
		}
	}
}

// blockAsks is the grid of real nodes recording every block request:
// which share, and the byte range asked of it.
type blockAsks struct {
	object.NodeGrid
	mu   sync.Mutex
	asks []blockAsk
	// The nodes in late answer a list after lateList.
	late     map[string]bool
	lateList time.Duration
}

// ListTrailers answers after lateList for the nodes in late.
func (g *blockAsks) ListTrailers(ctx context.Context, node string, si sharefile.SI) (map[int][]byte, error) {
	if g.late[node] {
		select {
		case <-time.After(g.lateList):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.NodeGrid.ListTrailers(ctx, node, si)
}

type blockAsk struct {
	share    int
	off, end int64
}

func (g *blockAsks) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.asks = append(g.asks, blockAsk{key.Share, off, off + n})
	g.mu.Unlock()
	return g.NodeGrid.GetShare(ctx, node, key, off, n)
}

// mostAsked is the largest number of distinct shares whose requested
// ranges cover one byte offset (all shares have the same layout, so an
// offset is one segment's block in every share). A request may cover
// several segments and a hedge start inside it, so offsets are compared
// by range, not by where requests start.
func (g *blockAsks) mostAsked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	most := 0
	for _, at := range g.asks {
		shares := map[int]bool{}
		for _, a := range g.asks {
			if a.off <= at.off && at.off < a.end {
				shares[a.share] = true
			}
		}
		most = max(most, len(shares))
	}
	return most
}

// The holders of the three data shares answer lists first but send
// blocks at 5 kB/s (testgrid.Throttle), a block taking seconds: the read
// asks a spare holder for a late block's segment too (a hedge) well
// before, so more than k shares are asked for some segment. A read that
// waits for the blocks it asked for asks exactly k for each, and the
// test fails.
func TestGetHedgesLateBlock(t *testing.T) {
	rates := make([]*atomic.Int64, 10)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Wrap: func(i int, s sharestore.Store) sharestore.Store {
		rates[i] = new(atomic.Int64)
		return testgrid.Throttle(s, rates[i])
	}})
	c := g.Objects(object.Options{})
	p := codec.Params{K: 3, N: 10, SegmentSize: 64 << 10}
	rc, prep := put(t, c, 13, 512<<10, p, 10)
	// The other holders' lists come 300 ms late, so the read starts on
	// the data shares' holders (with every list at once it may start on
	// three others and need no hedge).
	fg := &blockAsks{NodeGrid: object.NodeGrid{Client: g.NodeClient(), MaxAge: time.Second},
		late: map[string]bool{}, lateList: 300 * time.Millisecond}
	for _, sr := range prep.Shares {
		if sr.Share >= p.K {
			fg.late[sr.Node] = true
			continue
		}
		for i, n := range g.Nodes {
			if string(n.ID()) == sr.Node {
				rates[i].Store(5_000)
			}
		}
	}
	rd := object.New(fg, object.Options{LeaseSecret: testLease, Stall: time.Minute})
	rep := mustGet(t, rd, rc, 13)
	most := fg.mostAsked()
	t.Logf("most shares asked for one segment: %d, hedges %d", most, rep.Hedges)
	if most <= p.K {
		t.Fatalf("at most %d shares asked for any segment: no hedge", most)
	}
}

// nodesAsked is the grid of real nodes recording which nodes a client
// asked for share bytes.
type nodesAsked struct {
	object.NodeGrid
	mu    sync.Mutex
	nodes map[string]bool
}

func (g *nodesAsked) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.nodes[node] = true
	g.mu.Unlock()
	return g.NodeGrid.GetShare(ctx, node, key, off, n)
}

// A file of one segment whose data share is on a node behind a slow
// link is read the quick way from a parity share instead, once the
// client has measured that link (here by uploading to it): the slow node
// is not asked for anything. A quick read that always takes the data
// shares reads from it, and the test fails.
func TestQuickReadAvoidsSlowNode(t *testing.T) {
	quickReadAvoids(t, 0, 50_000)
}

// The same with the slow node only three times slower than the others
// (200 against 600 kB/s, a block of 200 kB taking it a second): a data
// share's block that costs tens of milliseconds is swapped for a parity
// share's from a node twice as fast or more. A quick read that swaps
// only for a node four times as fast (as for blocks of a fast network)
// reads from the slow node, and the test fails.
func TestQuickReadAvoidsModeratelySlowNode(t *testing.T) {
	quickReadAvoids(t, 600_000, 200_000)
}

// quickReadAvoids stores objects of one segment until one has a data
// share on a node whose links carry slow bytes per second (the others'
// fast, 0: no limit), then reads it and fails if the read asked that
// node.
func quickReadAvoids(t *testing.T, fast, slowRate int64) {
	skipInRaceRun(t)
	ln := linkemu.New(1)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln})
	const slow = 9
	if fast > 0 {
		for i := range slow {
			ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Up: fast, Down: fast})
		}
	}
	ln.SetHost(testgrid.Host(slow), linkemu.HostLimit{Up: slowRate, Down: slowRate})
	slowID := string(g.Nodes[slow].ID())
	ng := &nodesAsked{NodeGrid: object.NodeGrid{Client: g.NodeClientAt(clientHost), MaxAge: time.Second}, nodes: map[string]bool{}}
	c := object.New(ng, object.Options{LeaseSecret: testLease, Stall: time.Minute})
	p := codec.Params{K: 3, N: 10, SegmentSize: 1 << 20}
	// Objects until one has a data share on the slow node (each upload
	// also measures the links).
	var rc codec.ReadCap
	var seed uint64
	for seed = 300; ; seed++ {
		if seed > 340 {
			t.Fatal("no object of 40 had a data share on the slow node")
		}
		r, rep := put(t, c, seed, 600<<10, p, 10) // shares of 200 kB: measured
		onSlow := false
		for _, sr := range rep.Shares {
			onSlow = onSlow || (sr.Share < p.K && sr.Node == slowID)
		}
		if onSlow {
			rc = r
			break
		}
	}
	ng.mu.Lock()
	ng.nodes = map[string]bool{}
	ng.mu.Unlock()
	rep := mustGet(t, c, rc, seed)
	ng.mu.Lock()
	asked := ng.nodes[slowID]
	ng.mu.Unlock()
	if asked {
		t.Fatalf("the quick read asked the slow node (shares read %v, links %v)", rep.Shares, c.Links()[slowID])
	}
}

// asksCounter is the grid of real nodes counting the block requests each
// node gets.
type asksCounter struct {
	object.NodeGrid
	mu   sync.Mutex
	asks map[string]int
}

func (g *asksCounter) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	g.mu.Lock()
	g.asks[node]++
	g.mu.Unlock()
	return g.NodeGrid.GetShare(ctx, node, key, off, n)
}

// Nine holders send at 200 kB/s and one at 20 kB/s, a block of a
// segment taking it a second (a fast holder's with two requests queued
// before it: half a second). Blocks go to whichever holder would
// deliver them soonest, counting what each still owes, and wait for a
// busy fast holder rather than go to the slow one: once the read has
// measured it, the slow holder is asked for nothing more, it sends fewer
// blocks than any fast holder, and the read completes. A reader that
// keeps every holder busy with requests (the fast ones being at their
// limit, the slow one gets the next block) asks the slow holder again
// and again for blocks that are hedged and thrown away, and the test
// fails.
func TestGetPullsBlocksToFreeFastHolders(t *testing.T) {
	skipInRaceRun(t) // its counts depend on the emulated links' timing, which the race detector's slowness distorts
	ln, g, _, rc := emulatedObject(t, 14, 8<<20)
	const slow = 9
	for i := range 10 {
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Up: 200_000})
	}
	ln.SetHost(testgrid.Host(slow), linkemu.HostLimit{Up: 20_000})
	slowID := string(g.Nodes[slow].ID())
	ac := &asksCounter{NodeGrid: object.NodeGrid{Client: g.NodeClientAt(clientHost), MaxAge: time.Minute}, asks: map[string]int{}}
	// A new client: nothing measured, every holder starts equal.
	rd := object.New(ac, object.Options{LeaseSecret: testLease, Stall: 2 * time.Minute})
	rep := mustGet(t, rd, rc, 14)
	ac.mu.Lock()
	asks := maps.Clone(ac.asks)
	ac.mu.Unlock()
	slowBlocks, minFast := 0, -1
	for _, h := range rep.Reads {
		t.Logf("share %d on node %.8s: %d blocks, %d bytes, %.0f B/s, %d requests", h.Share, h.Node, h.Blocks, h.Bytes, h.Rate, asks[h.Node])
		if h.Node == slowID {
			slowBlocks = h.Blocks
		} else if minFast < 0 || h.Blocks < minFast {
			minFast = h.Blocks
		}
	}
	t.Logf("hedges %d, holders at once %d, slow holder asked %d times", rep.Hedges, rep.Holders, asks[slowID])
	// Before it is measured the slow holder may be asked once or twice
	// (perHolder), and a hedge may go to it once.
	if asks[slowID] > 3 {
		t.Errorf("the slow holder was asked %d times; want at most 3", asks[slowID])
	}
	if len(rep.Reads) < 9 {
		t.Fatalf("%d holders sent blocks; want the 9 fast ones at least", len(rep.Reads))
	}
	if slowBlocks >= minFast {
		t.Errorf("the slow holder sent %d blocks, a fast one only %d", slowBlocks, minFast)
	}
}

// Ten holders whose uplinks carry 4 MB/s send to a client whose
// downlink carries 1 MB/s: each gets a part of the downlink. What a read
// measures of them so is what they got, not what their links carry, and
// it leaves the client's estimates of their links (seeded at 4 MB/s)
// as they were. A reader that takes every measurement as the link's
// presses them down toward the downlink's share (the next read would
// start from rates that say how this one was spread), and the test
// fails.
func TestGetSharedDownlinkKeepsLinkEstimates(t *testing.T) {
	skipInRaceRun(t)
	ln, g, _, rc := emulatedObject(t, 15, 1<<20)
	const link = 4_000_000
	seed := map[string]object.LinkEstimate{}
	for i := range 10 {
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Up: link})
		seed[string(g.Nodes[i].ID())] = object.LinkEstimate{Down: link}
	}
	ln.SetHost(clientHost, linkemu.HostLimit{Down: 1_000_000})
	rd := object.New(object.NodeGrid{Client: g.NodeClientAt(clientHost), MaxAge: time.Minute}, object.Options{LeaseSecret: testLease, Stall: time.Minute})
	rd.SeedLinks(seed)
	rep := mustGet(t, rd, rc, 15)
	if rep.Holders <= 1 {
		t.Fatalf("%d holders at once: the downlink was not shared", rep.Holders)
	}
	// A holder that ends the read alone measures the downlink itself
	// and may lower its estimate; most must keep theirs.
	var est []float64
	for _, h := range rep.Reads {
		e := rd.Links()[h.Node].Down
		t.Logf("share %d on node %.8s: %d blocks at %.0f B/s in the read; estimate %.0f B/s", h.Share, h.Node, h.Blocks, h.Rate, e)
		if h.Bytes > 0 {
			est = append(est, e)
		}
	}
	if len(est) < 2 {
		t.Fatalf("%d holders sent blocks", len(est))
	}
	slices.Sort(est)
	if med := est[len(est)/2]; med < link/2 {
		t.Fatalf("median estimate of the holders' links after the read: %.0f B/s; want the seeded %d kept", med, link)
	}
}
