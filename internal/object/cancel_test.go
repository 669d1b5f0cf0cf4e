package object_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// cancelAfterFirst cancels a read's context once the first bytes arrive.
type cancelAfterFirst struct {
	cancel context.CancelFunc
	n      int64
}

func (w *cancelAfterFirst) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.cancel()
	return len(p), nil
}

// A read whose context ends part-way must fail: Get returning nil after
// writing only the first segments would let a caller keep a truncated
// copy as if it were whole.
func TestGetCancelledIsAnError(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	c := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 5, SegmentSize: 16 << 10}
	rc, _ := put(t, c, 3, 64*(16<<10), p, 5) // 64 segments
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelAfterFirst{cancel: cancel}
	_, err := c.Get(ctx, rc, w, 0, -1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Get cancelled after %d of %d bytes returned %v, want context.Canceled", w.n, rc.Size, err)
	}
}
