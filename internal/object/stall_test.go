package object_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/object/gridtest"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// stuckGrid is an in-process grid where the node that share 0 goes to
// accepts the upload and then reads nothing of it, as a node whose link
// went quiet. Share 0 is the first an upload queues each segment to, so
// the upload's first wait on its clock is for that share: every other
// share's queue has room for what was sent to it by then.
type stuckGrid struct {
	*gridtest.Mem
}

func (g stuckGrid) PutShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) error {
	if key.Share == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	return g.Mem.PutShare(ctx, node, key, r, size, lease)
}

// An upload gives up on a node that makes no progress for Stall, as
// measured by the client's clock, and finishes on the others. The clock
// is a fake one with an hour's Stall: the upload can only finish if the
// stall is timed by it.
func TestPutGivesUpOnStalledNode(t *testing.T) {
	specs := make([]gridtest.NodeSpec, 5)
	mem := gridtest.NewMem(specs)
	g := stuckGrid{Mem: mem}
	clk := clock.NewFake()
	c := object.New(g, object.Options{
		Clock: clk, Stall: time.Hour,
		LeaseSecret: func(si sharefile.SI) []byte { return si[:] },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("stalled upload "), 8000) // many segments: the stuck share's queue fills
	type result struct {
		rc  codec.ReadCap
		rep *object.PutReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rc, rep, err := c.Put(ctx, bytes.NewReader(data), int64(len(data)), codec.Params{K: 3, N: 5, SegmentSize: 4096}, 4)
		done <- result{rc, rep, err}
	}()
	// The upload waits on the stuck share's stall timer.
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the upload never waited on a stall timer: %v", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the upload finished before the stall was timed: %v", r.err)
	default:
	}
	clk.Advance(time.Hour)
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the upload did not finish after the stall passed")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.rep.Happiness != 4 {
		t.Fatalf("happiness %d, want 4 (all but the stuck node)", r.rep.Happiness)
	}
	for _, s := range r.rep.Shares {
		if (s.Share == 0) != (s.Err != nil) {
			t.Fatalf("share %d on %s: %v", s.Share, s.Node, s.Err)
		}
		if s.Share == 0 && !strings.Contains(s.Err.Error(), "made no progress") {
			t.Fatalf("the stuck share failed with %v, not as a stall", s.Err)
		}
	}
	var got bytes.Buffer
	if _, err := c.Get(ctx, r.rc, &got, 0, -1); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("read back: %d bytes, %v", got.Len(), err)
	}
	stuck := r.rep.Shares[0].Node
	if _, err := mem.Store(stuck).Open(ctx, sharestore.Key{SI: r.rc.Key.StorageIndex(), Share: 0}); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("the stuck node holds share 0: %v", err)
	}
}

// slowReadGrid is an in-process grid where the node holding share 0
// answers lookups but, asked for the share's blocks, sends nothing; the
// other nodes' block reads are counted once their reader closes them
// (after the last block, which is in the stream's buffer by then).
type slowReadGrid struct {
	*gridtest.Mem
	layout sharefile.Layout
	closed *atomic.Int64 // block reads of the other nodes closed
}

func (g slowReadGrid) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	rc, err := g.Mem.GetShare(ctx, node, key, off, n)
	if err != nil || off < g.layout.BlockOffset(0) || off >= g.layout.TrailerOffset() {
		return rc, err // not a block read
	}
	if key.Share == 0 {
		rc.Close()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return closeCounter{rc, g.closed}, nil
}

type closeCounter struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c closeCounter) Close() error {
	c.n.Add(1)
	return c.ReadCloser.Close()
}

// A read gives up on a node that sends no block for Stall, as measured by
// the client's clock. The object has exactly k shares, so with one
// stalled it cannot be read: the read ends once the fake clock passes an
// hour's Stall, naming the stalled node, rather than hanging.
func TestGetGivesUpOnStalledNode(t *testing.T) {
	mem := gridtest.NewMem(make([]gridtest.NodeSpec, 3))
	clk := clock.NewFake()
	opt := object.Options{Clock: clk, Stall: time.Hour, LeaseSecret: func(si sharefile.SI) []byte { return si[:] }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("stalled read "), 900) // 3 segments: not a quick read
	p := codec.Params{K: 3, N: 3, SegmentSize: 4096}
	rc, _, err := object.New(mem, opt).Put(ctx, bytes.NewReader(data), int64(len(data)), p, 3)
	if err != nil {
		t.Fatal(err)
	}
	l := rc.Verify().Layout()
	var closed atomic.Int64
	c := object.New(slowReadGrid{Mem: mem, layout: l, closed: &closed}, opt)
	type result struct {
		rep *object.GetReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := c.Get(ctx, rc, io.Discard, 0, -1)
		done <- result{rep, err}
	}()
	// Once the two other shares' streams hold all their blocks (they
	// buffer up to 4, and close their request after the last), the only
	// timer the read can wait on is the stalled share's.
	for closed.Load() < 2 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the read never waited on a stall timer (%d of 2 other streams done): %v", closed.Load(), err)
	}
	select {
	case r := <-done:
		t.Fatalf("the read ended before the stall was timed: %v", r.err)
	default:
	}
	clk.Advance(time.Hour)
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the read did not end after the stall passed")
	}
	if !errors.Is(r.err, object.ErrUnavailable) {
		t.Fatalf("read with a stalled share of 3 needed: %v, want ErrUnavailable", r.err)
	}
	if !strings.Contains(r.err.Error(), "made no progress") {
		t.Fatalf("the error does not say a node stalled: %v", r.err)
	}
}
