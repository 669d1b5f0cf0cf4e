package object_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// clientHost is the emulated host of the uploading client in the tests
// on linkemu: no node's, so its links are the default ones.
const clientHost = "127.79.200.1:7700"

// slowGrid starts 10 nodes on emulated links, node slow taking in at
// most rate bytes per second (a node behind a slow radio link).
func slowGrid(t *testing.T, slow int, rate int64) (*testgrid.Grid, *linkemu.Network) {
	t.Helper()
	ln := linkemu.New(1)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln})
	ln.SetHost(testgrid.Host(slow), linkemu.HostLimit{Down: rate})
	return g, ln
}

// An upload with AckAtHappy returns once 7 nodes hold their shares,
// before the node behind a slow link has its own; the uploader, still
// there, completes that share in the background, and the object ends
// with all 10. Without the early acknowledgement the upload waits for
// the slow node, which holds its share when Put returns, and the test
// fails.
func TestPutAcksAtHappiness(t *testing.T) {
	const slow = 9
	// 512 KiB at 3-of-10 is a share of about 180 kB: 9 s at 20 kB/s.
	g, _ := slowGrid(t, slow, 20_000)
	c := g.ObjectsAt(clientHost, object.Options{AckAtHappy: true, Stall: time.Minute})
	defer c.Close()
	p := codec.Params{K: 3, N: 10, SegmentSize: 64 << 10}
	const size = 512 << 10
	rc, rep := put(t, c, 7, size, p, 7)
	slowID := string(g.Nodes[slow].ID())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc := g.NodeClient()
	if _, err := nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	held, err := nc.ListShares(ctx, slowID, rc.Key.StorageIndex(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 0 {
		t.Fatalf("the slow node held its share when Put returned: the upload was not acknowledged early (report %+v)", rep)
	}
	if rep.Happiness < 7 || rep.Pending < 1 || rep.Background == nil {
		t.Fatalf("report: happiness %d, pending %d, background %v; want ≥7, ≥1, a completion", rep.Happiness, rep.Pending, rep.Background)
	}
	for _, sr := range rep.Shares {
		if sr.Node == slowID && !errors.Is(sr.Err, object.ErrPending) {
			t.Errorf("the slow node's share %d: %v, want ErrPending", sr.Share, sr.Err)
		}
	}
	// Readable at once, from the nodes that have their shares.
	mustGet(t, c, rc, 7)

	brep, err := rep.Background.Wait(ctx)
	if err != nil {
		t.Fatalf("background completion did not end: %v", err)
	}
	if !brep.Healthy || brep.Err != nil {
		t.Fatalf("background completion: healthy %v, err %v, uploads %+v", brep.Healthy, brep.Err, brep.Uploaded)
	}
	uploaded := false
	for _, sr := range brep.Uploaded {
		if sr.Node == slowID && sr.Err == nil {
			uploaded = true
		}
	}
	if !uploaded || brep.Repaired != 0 {
		t.Errorf("the slow node's share should have been uploaded by the uploader, not repaired: %+v, repaired %d", brep.Uploaded, brep.Repaired)
	}
	crep, err := c.Check(ctx, rc.Verify(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !crep.Clean() || crep.Nodes != 10 {
		t.Fatalf("after the background: %d good shares on %d nodes, want 10 on 10", crep.Good, crep.Nodes)
	}
	// The metrics count it.
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bgUploaded, observed float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "quilt_object_background_shares_total":
				if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "uploaded" {
					bgUploaded = m.GetCounter().GetValue()
				}
			case "quilt_object_background_seconds":
				observed = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if bgUploaded < 1 || observed != 1 {
		t.Errorf("metrics: %v shares uploaded in the background, %v completions observed; want ≥1 and 1", bgUploaded, observed)
	}
}

// A share that falls further behind than LagBytes allows is cut off
// during the upload (so a slow node does not hold the upload's memory)
// and placed by the uploader's background repair once the upload ends.
func TestPutLaggingShareRepairedInBackground(t *testing.T) {
	const slow = 4
	g, ln := slowGrid(t, slow, 5_000)
	c := g.ObjectsAt(clientHost, object.Options{AckAtHappy: true, Stall: time.Minute, LagBytes: 1})
	defer c.Close()
	p := codec.Params{K: 3, N: 10, SegmentSize: 16 << 10}
	rc, rep := put(t, c, 8, 1<<20, p, 7)
	slowID := string(g.Nodes[slow].ID())
	var cut error
	for _, sr := range rep.Shares {
		if sr.Node == slowID {
			cut = sr.Err
		}
	}
	if cut == nil || errors.Is(cut, object.ErrPending) || rep.Background == nil {
		t.Fatalf("the slow node's share was not cut off: %v (report %+v)", cut, rep)
	}
	// The link recovers; the background places the share.
	ln.SetHost(testgrid.Host(slow), linkemu.HostLimit{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	brep, err := rep.Background.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !brep.Healthy || brep.Repaired < 1 {
		t.Fatalf("background: healthy %v, repaired %d, err %v", brep.Healthy, brep.Repaired, brep.Err)
	}
	crep, err := c.Check(ctx, rc.Verify(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !crep.Clean() {
		t.Fatalf("after the background repair: %d good shares", crep.Good)
	}
	mustGet(t, c, rc, 8)
}

// A caller's context that ends before the acknowledgement still cuts
// an upload with AckAtHappy off, as it does any upload: nothing is
// stored.
func TestPutAckAtHappyCancelled(t *testing.T) {
	g, _ := slowGrid(t, 0, 0)
	c := g.ObjectsAt(clientHost, object.Options{AckAtHappy: true})
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := c.Put(ctx, randReader(1, 1<<20), 1<<20, codec.Params{K: 3, N: 10, SegmentSize: 64 << 10}, 7)
	if err == nil {
		t.Fatal("a cancelled upload succeeded")
	}
}

// On 13 nodes of which 6 take shares slowly, a client that has measured
// its links places the first happy shares of an object on the 7 fast
// nodes, every time, and the other 3 on slow ones, which still receive
// shares. By rendezvous hashing alone, a plan of 10 of the 13 nodes
// holds all 7 fast ones only 7% of the time, and the test fails.
func TestPutPlacesByMeasuredLinks(t *testing.T) {
	skipInRaceRun(t)
	ln := linkemu.New(1)
	g := testgrid.New(t, testgrid.Options{Nodes: 13, Net: ln})
	slow := map[string]bool{}
	for i := range 6 {
		// 10 kB/s: a slow share (87 kB) takes 9 s. A fast node's time
		// includes its fsync and, on a machine loaded by other work, the
		// scheduling of every piece: measured as low as 34 kB/s on a
		// load of 16 on 2 cores, against 17 kB/s at 20 kB/s, within the
		// 2× that placement counts as equal.
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Down: 10_000})
		slow[string(g.Nodes[i].ID())] = true
	}
	c := g.ObjectsAt(clientHost, object.Options{AckAtHappy: true, Stall: time.Minute})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	p := codec.Params{K: 3, N: 10, SegmentSize: 32 << 10}
	const size = 256 << 10
	putWait := func(seed uint64) *object.PutReport {
		t.Helper()
		_, rep := put(t, c, seed, size, p, 7)
		if rep.Background != nil {
			if b, err := rep.Background.Wait(ctx); err != nil || !b.Healthy {
				t.Fatalf("background: %v %+v", err, b)
			}
		}
		return rep
	}
	// Until every node is measured, unmeasured nodes are tried first.
	for seed := uint64(100); len(c.Links()) < 13; seed++ {
		if seed > 106 {
			t.Fatalf("after 6 uploads only %d of 13 links measured", len(c.Links()))
		}
		putWait(seed)
	}
	// The estimates it places by: the slowest fast node against the
	// fastest slow one.
	minFast, maxSlow := 0.0, 0.0
	for id, e := range c.Links() {
		if slow[id] {
			maxSlow = max(maxSlow, e.Up)
		} else if minFast == 0 || e.Up < minFast {
			minFast = e.Up
		}
	}
	t.Logf("measured upload speeds: fast nodes ≥ %.0f B/s, slow nodes ≤ %.0f B/s", minFast, maxSlow)
	slowUsed := 0
	for seed := uint64(200); seed < 204; seed++ {
		rep := putWait(seed)
		fast := 0
		for _, sr := range rep.Shares {
			if slow[sr.Node] {
				slowUsed++
			} else {
				fast++
			}
		}
		if fast != 7 {
			t.Fatalf("upload %d: %d of the 7 fast nodes hold shares: %+v (links %v)", seed, fast, rep.Shares, c.Links())
		}
	}
	if slowUsed != 4*3 {
		t.Errorf("slow nodes got %d shares of 4 objects, want 3 each", slowUsed)
	}
}

// The grid's network coordinates reach an object client: the nodes
// report them with the member list, a put records them, and the round
// trips a read measures place the client among them, so it predicts
// its round trip to every node, also to those it never read from.
func TestClientPredictsRoundTripsFromCoordinates(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 6})
	ng := object.NodeGrid{Client: g.NodeClient(), MaxAge: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		nodes, err := ng.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		with := 0
		for _, nd := range nodes {
			if nd.Coord != nil {
				with++
			}
		}
		if len(nodes) == 6 && with == 6 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d nodes report a network coordinate", with, len(nodes))
		case <-time.After(100 * time.Millisecond):
		}
	}
	c := g.Objects(object.Options{AckAtHappy: true})
	defer c.Close()
	p := codec.Params{K: 2, N: 4, SegmentSize: 16 << 10}
	rc, _ := put(t, c, 1, 64<<10, p, 3)
	mustGet(t, c, rc, 1)
	// Another put records coordinates again (the first may have come
	// before the read's round trips); then every node has a prediction.
	// The member list a put reads comes from one node, whose view of
	// another's coordinate may lag its gossip: up to ten puts.
	var links map[string]object.LinkEstimate
	for try := 0; ; try++ {
		put(t, c, uint64(2+try), 64<<10, p, 3)
		links = c.Links()
		var bad []string
		for _, nd := range g.Nodes {
			id := string(nd.ID())
			if d := c.PredictedRTT(id); d <= 0 || d > 10*time.Second {
				bad = append(bad, fmt.Sprintf("node %.8s: predicted round trip %v (measured %v)", id, d, links[id].RTT))
			}
		}
		if len(bad) == 0 {
			break
		}
		if try == 9 {
			t.Fatalf("after %d puts: %s", try+2, strings.Join(bad, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	measured := 0
	for _, e := range links {
		if e.RTT > 0 {
			measured++
		}
	}
	if measured < 2 {
		t.Fatalf("the read measured round trips to %d nodes: %v", measured, links)
	}
}
