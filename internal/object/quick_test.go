package object_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// listCounter is the node grid, counting the requests that ask a node
// which shares it holds.
type listCounter struct {
	object.NodeGrid
	lists *atomic.Int64
}

func (g listCounter) ListShares(ctx context.Context, n string, si sharefile.SI) ([]int, error) {
	g.lists.Add(1)
	return g.NodeGrid.ListShares(ctx, n, si)
}

func (g listCounter) ListTrailers(ctx context.Context, n string, si sharefile.SI) (map[int][]byte, error) {
	g.lists.Add(1)
	return g.NodeGrid.ListTrailers(ctx, n, si)
}

func countingClient(g *testgrid.Grid) (*object.Client, *atomic.Int64) {
	var lists atomic.Int64
	grid := listCounter{object.NodeGrid{Client: g.NodeClient(), MaxAge: 100 * time.Millisecond}, &lists}
	return object.New(grid, object.Options{Stall: 5 * time.Second,
		LeaseSecret: func(si sharefile.SI) []byte { return append([]byte("test lease "), si[:]...) }}), &lists
}

func readAll(t *testing.T, c *object.Client, rc codec.ReadCap, off, n int64) ([]byte, *object.GetReport) {
	t.Helper()
	var b bytes.Buffer
	rep, err := c.Get(context.Background(), rc, &b, off, n)
	if err != nil {
		t.Fatalf("get %d+%d: %v", off, n, err)
	}
	return b.Bytes(), rep
}

// A one-segment object is read from its k data shares where placement
// puts them, without asking every node first; a bigger one the usual
// way. Both give the bytes asked.
func TestQuickRead(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	w, _ := countingClient(g)
	for _, size := range []int64{1, 700 << 10, 1 << 20, 3 << 20} {
		want, _ := io.ReadAll(randReader(7, size))
		rc, _ := put(t, w, 7, size, codec.DefaultParams(), 7)
		// A reader of its own, with no link estimates: one that measured
		// a node slow (the writer, on a loaded machine) takes a parity
		// share instead, as TestQuickReadAvoidsSlowNode tests.
		c, lists := countingClient(g)
		got, rep := readAll(t, c, rc, 0, -1)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read back %d bytes, different", size, len(got))
		}
		oneSegment := size <= int64(codec.DefaultParams().SegmentSize)
		if n := lists.Load(); oneSegment && n != 0 {
			t.Errorf("%d bytes: %d share lists asked, want none", size, n)
		} else if !oneSegment && n == 0 {
			t.Errorf("%d bytes: no share lists asked: the quick way read %d segments?", size, rc.Verify().Layout().Segments)
		}
		if oneSegment && !slices.Equal(rep.Shares, []int{0, 1, 2}) {
			t.Errorf("%d bytes: read from shares %v, want the data shares", size, rep.Shares)
		}
		if size > 5000 {
			got, _ := readAll(t, c, rc, 1000, 4000)
			if !bytes.Equal(got, want[1000:5000]) {
				t.Fatalf("%d bytes: range 1000+4000 wrong", size)
			}
		}
	}
}

// When a data share is not where placement says (its node down) or its
// node lies, the read goes the usual way: it succeeds, and reports the
// liar.
func TestQuickReadFallsBack(t *testing.T) {
	skipInRaceRun(t)
	for _, blocksOnly := range []bool{false, true} {
		g := testgrid.New(t, testgrid.Options{Nodes: 10, Wrap: func(i int, s sharestore.Store) sharestore.Store {
			if i == 0 {
				return testgrid.Liar(s, blocksOnly)
			}
			return s
		}})
		w, _ := countingClient(g)
		liar := string(g.Nodes[0].ID())
		// Objects until one has a data share on the liar.
		var rc codec.ReadCap
		var rep *object.PutReport
		seed := uint64(100)
		for ; seed < 200; seed++ {
			rc, rep = put(t, w, seed, 200<<10, codec.DefaultParams(), 7)
			if slices.ContainsFunc(rep.Shares[:3], func(s object.ShareResult) bool { return s.Node == liar }) {
				break
			}
		}
		if seed == 200 {
			t.Fatal("no object of 100 had a data share on node 0")
		}
		// A reader of its own, with no link estimates: the writer's may
		// have measured the liar slow on a loaded machine, and its quick
		// read would then take a parity share instead and never touch it.
		c, lists := countingClient(g)
		grep := mustGet(t, c, rc, seed)
		if !problemNodes(grep.Problems)[liar] {
			t.Fatalf("blocksOnly=%v: liar %.8s not reported; problems %v", blocksOnly, liar, grep.Problems)
		}
		if lists.Load() == 0 {
			t.Fatalf("blocksOnly=%v: read did not go the usual way", blocksOnly)
		}

		// A node holding a data share down: read all the same.
		down := -1
		for i, n := range g.Nodes {
			if string(n.ID()) == rep.Shares[1].Node {
				down = i
			}
		}
		g.Kill(down)
		mustGet(t, c, rc, seed)
		g.Stop()
	}
}

// A read of many segments reuses its block buffers: once a first read
// has filled the free lists, a second makes few buffers (a stream that is
// swapped for a faster one drops the blocks it read ahead), where it
// used to make one for every block it read (and for every block it
// rebuilt). Counted, not measured from the heap: the grid's nodes run in
// this process, and their gossip allocates with time, not with bytes.
func TestReadReusesBlocks(t *testing.T) {
	skipInRaceRun(t)
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	c, _ := countingClient(g)
	const size = 48 << 20
	rc, _ := put(t, c, 11, size, codec.DefaultParams(), 7)
	mustGet(t, c, rc, 11) // connections made, free lists filled
	before := object.BufsMade()
	mustGet(t, c, rc, 11)
	blocks := 3 * rc.Verify().Layout().Segments
	if made := object.BufsMade() - before; made > int64(blocks/2) {
		t.Errorf("a read of %d blocks made %d new buffers", blocks, made)
	} else {
		t.Logf("a read of %d blocks made %d new buffers", blocks, made)
	}
}
