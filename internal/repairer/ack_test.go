package repairer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// An upload acknowledged at happiness whose uploader goes away before
// the node behind a slow link has its share: the nodes' repairers,
// given the verify capability, place the missing share. Without the
// early acknowledgement the slow node holds its share when Put returns,
// and the test fails there.
func TestRepairCompletesUploadAckedAtHappiness(t *testing.T) {
	const slow = 9
	ln := linkemu.New(1)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln})
	ln.SetHost(testgrid.Host(slow), linkemu.HostLimit{Down: 20_000})
	c := g.ObjectsAt("127.79.200.1:7700", object.Options{AckAtHappy: true, Stall: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := codec.Params{K: 3, N: 10, SegmentSize: 64 << 10}
	const size = 512 << 10
	src := io.LimitReader(rand.NewChaCha8([32]byte{9}), size)
	rc, rep, err := c.Put(ctx, src, size, p, 7)
	if err != nil {
		t.Fatal(err)
	}
	slowID := string(g.Nodes[slow].ID())
	pending := false
	for _, sr := range rep.Shares {
		if sr.Node == slowID && errors.Is(sr.Err, object.ErrPending) {
			pending = true
		}
	}
	if !pending {
		t.Fatalf("the slow node's share was not pending when Put returned: %+v", rep.Shares)
	}
	// The uploader goes away: its background uploads are cut off.
	c.Close()
	brep, err := rep.Background.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if brep.Healthy {
		t.Fatal("the background completed although the uploader went away")
	}
	nc := g.NodeClient()
	if _, err := nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	vc := rc.Verify()
	if held, err := nc.ListShares(ctx, slowID, vc.SI, false); err != nil || len(held) != 0 {
		t.Fatalf("slow node: shares %v, %v; want none yet", held, err)
	}
	if _, err := repairer.Register(ctx, nc, vc); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(newTestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	for i, n := range g.Nodes {
		if i == slow {
			continue
		}
		r, err := repairer.New(repairer.Config{Node: n, Every: 200 * time.Millisecond, Stall: time.Minute, Logger: log.With("repairer", i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
	}
	check := g.Objects(object.Options{})
	start := time.Now()
	for next := 10 * time.Second; ; {
		crep, err := check.Check(ctx, vc, false)
		if err == nil && crep.Good == 10 && crep.Nodes == 10 {
			break
		}
		if time.Since(start) > next {
			t.Logf("after %v: %+v, %v", next, crep, err)
			next += 10 * time.Second
		}
		if ctx.Err() != nil {
			t.Fatalf("the repairers did not place the missing share: %+v, %v", crep, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// testWriter hands what is written to t.Log (shown when the test fails,
// or with -v), and drops it once the test has ended.
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func newTestWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() { // registered first, so it runs last
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(string(p))
	}
	return len(p), nil
}
