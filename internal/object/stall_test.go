package object_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
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
