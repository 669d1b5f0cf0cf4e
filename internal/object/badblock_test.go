package object_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// delayStore answers every Open after a delay that can change.
type delayStore struct {
	sharestore.Store
	d *atomic.Int64
}

func (s delayStore) Open(ctx context.Context, key sharestore.Key) (sharestore.Share, error) {
	time.Sleep(time.Duration(s.d.Load()))
	return s.Store.Open(ctx, key)
}

// Eight of ten shares each have one bad block, all in different
// segments: every segment still has nine good blocks of the three it
// needs, so the read succeeds. The damaged shares answer fastest, in
// share order, so the reader starts with three of them and meets every
// bad block: a share with a bad block must go on serving the other
// segments (dropping it whole, the reader would run out of shares at
// the eighth).
func TestGridBadBlocksInManyShares(t *testing.T) {
	skipInRaceRun(t)
	disks := make([]*sharestore.Disk, 10)
	delays := make([]atomic.Int64, 10)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Wrap: func(i int, s sharestore.Store) sharestore.Store {
		disks[i] = s.(*sharestore.Disk)
		return delayStore{s, &delays[i]}
	}})
	c := g.Objects(object.Options{})
	p := codec.Params{K: 3, N: 10, SegmentSize: 16 << 10}
	rc, _ := put(t, c, 9, 24*(16<<10)-100, p, 10) // 24 segments
	l := rc.Verify().Layout()
	si := rc.Key.StorageIndex()
	holder := map[int]int{} // share → node index
	for i, d := range disks {
		infos, err := d.List(context.Background(), si)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			holder[in.Share] = i
		}
	}
	for share := range 10 {
		i, ok := holder[share]
		if !ok {
			t.Fatalf("share %d is on no node", share)
		}
		if share >= 8 {
			delays[i].Store(int64(400 * time.Millisecond))
			continue
		}
		delays[i].Store(int64(time.Duration(share+1) * 20 * time.Millisecond))
		if err := disks[i].Corrupt(sharestore.Key{SI: si, Share: share}, l.BlockOffset(int64(2+2*share))+17); err != nil {
			t.Fatal(err)
		}
	}
	rep := mustGet(t, c, rc, 9)
	for share := range 3 {
		if id := string(g.Nodes[holder[share]].ID()); !problemNodes(rep.Problems)[id] {
			t.Errorf("share %d's bad block not reported; problems %v", share, rep.Problems)
		}
	}
	// A range inside a damaged segment reads too.
	var buf countingWriter
	if _, err := c.Get(context.Background(), rc, &buf, int64(p.SegmentSize)*4+5, 1000); err != nil || buf.n != 1000 {
		t.Fatalf("range in a damaged segment: %v (%d bytes)", err, buf.n)
	}
	// Reads cut short while streams are sending bad blocks give every
	// buffer back once: one given back twice would later be handed to
	// two readers, which overwrite each other's verified blocks.
	for i := range 12 {
		// The writer holds the first segment while the streams read
		// ahead until they block, each with a block in hand, then the
		// read is cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		c.Get(ctx, rc, &stallingWriter{d: time.Duration(50+25*i) * time.Millisecond, cancel: cancel}, 0, -1)
		cancel()
	}
	deadline := time.Now().Add(5 * time.Second)
	for object.DuplicateFreeBuffers() > 0 || time.Now().Before(deadline) {
		if n := object.DuplicateFreeBuffers(); n > 0 {
			t.Fatalf("%d buffers are in a free list twice", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stallingWriter takes its first write after d, then cancels the read.
type stallingWriter struct {
	d      time.Duration
	cancel context.CancelFunc
}

func (w *stallingWriter) Write(p []byte) (int, error) {
	time.Sleep(w.d)
	w.cancel()
	return len(p), nil
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
