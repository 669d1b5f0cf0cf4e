// Package gridtest is the conformance suite for object.Grid, what the
// object layer needs of storage nodes: every implementation (object.NodeGrid
// over real nodes, and Mem, the in-process grid of this package) must pass
// it, which is what makes Mem trustworthy in unit tests.
//
// The suite checks the contract callers rely on: the node list, a share's
// put, whole and ranged reads, listing and delete with the uploader's
// secret, and that each failure keeps its kind (sharestore.ErrNotFound,
// ErrCorrupt, ErrFull, ErrForbidden, ErrExists) to be matched with
// errors.Is, over the wire too.
//
//	gridtest.Run(t, func(t *testing.T, nodes []gridtest.NodeSpec) gridtest.Target {
//		m := gridtest.NewMem(nodes)
//		return gridtest.Target{Grid: m, Stop: m.StopZone}
//	})
package gridtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// NodeSpec is one node of the grid the suite asks for.
type NodeSpec struct {
	Zone     string // distinct for every node: the suite finds nodes by zone
	Capacity int64  // bytes the node may store; 0: no limit but the disk's
}

// Target is a grid under test.
type Target struct {
	Grid object.Grid
	// Stop stops the node of a zone, as a crash would.
	Stop func(zone string)
}

// Factory returns a running grid with one node per spec. The suite calls
// it once and keeps the grid for all its checks (each on objects of its
// own).
type Factory func(t *testing.T, nodes []NodeSpec) Target

// smallCapacity is the capacity of the node that is too small for any
// share of the suite's objects.
const smallCapacity = 2048

// nodes is the grid the suite asks for.
// The node of zone "stopped" is stopped by the last check.
var nodes = []NodeSpec{{Zone: "a"}, {Zone: "b"}, {Zone: "small", Capacity: smallCapacity}, {Zone: "stopped"}}

var (
	secret = []byte("uploader's delete secret")
	lease  = sharestore.LeaseFor(secret)
)

// encoded is an object encoded into shares.
type encoded struct {
	rc     codec.ReadCap
	shares [][]byte
}

func (e encoded) key(share int) sharestore.Key {
	return sharestore.Key{SI: e.rc.Key.StorageIndex(), Share: share}
}

// encode returns the shares of size random bytes under key (a new key if
// zero): large enough that every share is bigger than the small node.
func encode(t *testing.T, key codec.Key, size int) encoded {
	t.Helper()
	if key == (codec.Key{}) {
		key = codec.NewKey()
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 3, N: 10, SegmentSize: 4096}, key, data)
	if err != nil {
		t.Fatal(err)
	}
	return encoded{rc, shares}
}

// failingReader yields n bytes of b, then fails as a dropped connection.
type failingReader struct {
	b []byte
	n int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	m := copy(p[:min(len(p), f.n)], f.b)
	f.b, f.n = f.b[m:], f.n-m
	return m, nil
}

// Run runs the suite against a grid made by newGrid.
func Run(t *testing.T, newGrid Factory) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := newGrid(t, nodes)
	g := tg.Grid
	byZone := map[string]string{}

	t.Run("Nodes", func(t *testing.T) {
		ns, err := g.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != len(nodes) {
			t.Fatalf("%d nodes listed, want %d: %+v", len(ns), len(nodes), ns)
		}
		for _, n := range ns {
			if n.ID == "" || byZone[n.Zone] != "" {
				t.Fatalf("node %+v: empty ID or a second node in its zone", n)
			}
			byZone[n.Zone] = n.ID
			if n.Free <= 0 || n.Zone == "small" && n.Free > smallCapacity {
				t.Fatalf("node %+v: free space not within its capacity", n)
			}
		}
		for _, s := range nodes {
			if byZone[s.Zone] == "" {
				t.Fatalf("no node in zone %q: %+v", s.Zone, ns)
			}
		}
	})
	if t.Failed() {
		return
	}
	a, b, small, stopped := byZone["a"], byZone["b"], byZone["small"], byZone["stopped"]

	mustPut := func(t *testing.T, node string, o encoded, share int) {
		t.Helper()
		sh := o.shares[share]
		if err := g.PutShare(ctx, node, o.key(share), bytes.NewReader(sh), int64(len(sh)), lease); err != nil {
			t.Fatalf("put share %d on %.8s: %v", share, node, err)
		}
	}
	read := func(node string, key sharestore.Key, off, n int64) ([]byte, error) {
		rc, err := g.GetShare(ctx, node, key, off, n)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
	list := func(t *testing.T, node string, si sharefile.SI) []int {
		t.Helper()
		l, err := g.ListShares(ctx, node, si)
		if err != nil {
			t.Fatalf("list on %.8s: %v", node, err)
		}
		return l
	}
	// absent checks that a share can be neither read nor listed.
	absent := func(t *testing.T, node string, key sharestore.Key) {
		t.Helper()
		if _, err := read(node, key, 0, -1); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("share %s on %.8s: read gives %v, want ErrNotFound", key, node, err)
		}
		if l := list(t, node, key.SI); slices.Contains(l, key.Share) {
			t.Fatalf("share %s on %.8s: listed (%v)", key, node, l)
		}
	}

	t.Run("PutReadRanges", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		mustPut(t, a, o, 4)
		sh := o.shares[4]
		size := int64(len(sh))
		for _, rg := range [][2]int64{{0, -1}, {0, 1}, {0, size}, {100, 1000}, {size - 7, 7}, {size - 7, 100}, {5, -1}} {
			got, err := read(a, o.key(4), rg[0], rg[1])
			if err != nil {
				t.Fatalf("range %v: %v", rg, err)
			}
			end := size
			if rg[1] >= 0 {
				end = min(rg[0]+rg[1], size)
			}
			if !bytes.Equal(got, sh[rg[0]:end]) {
				t.Fatalf("range %v: %d bytes, not the share's %d from %d", rg, len(got), end-rg[0], rg[0])
			}
		}
		for _, off := range []int64{size, size + 1000} {
			if got, err := read(a, o.key(4), off, 10); err == nil {
				t.Fatalf("range from %d of a %d-byte share: %d bytes and no error", off, size, len(got))
			}
		}
		// The share is on its node only.
		absent(t, b, o.key(4))
	})

	t.Run("PutUnknownSize", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		if err := g.PutShare(ctx, b, o.key(2), bytes.NewReader(o.shares[2]), -1, lease); err != nil {
			t.Fatal(err)
		}
		if got, err := read(b, o.key(2), 0, -1); err != nil || !bytes.Equal(got, o.shares[2]) {
			t.Fatalf("read back: %d bytes, %v", len(got), err)
		}
	})

	t.Run("List", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		for _, i := range []int{7, 0, 5} {
			mustPut(t, a, o, i)
		}
		mustPut(t, b, o, 1)
		if l := list(t, a, o.rc.Key.StorageIndex()); !slices.Equal(l, []int{0, 5, 7}) {
			t.Fatalf("node a lists %v, want [0 5 7]", l)
		}
		if l := list(t, b, o.rc.Key.StorageIndex()); !slices.Equal(l, []int{1}) {
			t.Fatalf("node b lists %v, want [1]", l)
		}
		if l := list(t, a, encode(t, codec.Key{}, 100).rc.Key.StorageIndex()); len(l) != 0 {
			t.Fatalf("an unknown object lists %v", l)
		}
	})

	t.Run("PutAgain", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		mustPut(t, a, o, 3)
		mustPut(t, a, o, 3) // the same share again: kept, no error
		// Another object under the same key (same storage index,
		// another root): refused, the first kept.
		other := encode(t, o.rc.Key, 20_000)
		err := g.PutShare(ctx, a, o.key(3), bytes.NewReader(other.shares[3]), int64(len(other.shares[3])), lease)
		if !errors.Is(err, sharestore.ErrExists) {
			t.Fatalf("a different share under a stored key: %v, want ErrExists", err)
		}
		if got, err := read(a, o.key(3), 0, -1); err != nil || !bytes.Equal(got, o.shares[3]) {
			t.Fatalf("the first share after the refused one: %d bytes, %v", len(got), err)
		}
	})

	t.Run("Corrupt", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		// Share 3 sent as share 4: its header names another share.
		err := g.PutShare(ctx, a, o.key(4), bytes.NewReader(o.shares[3]), int64(len(o.shares[3])), lease)
		if !errors.Is(err, sharestore.ErrCorrupt) {
			t.Fatalf("share 3 sent as 4: %v, want ErrCorrupt", err)
		}
		absent(t, a, o.key(4))
		// A damaged trailer: its block hashes do not make the root.
		bad := bytes.Clone(o.shares[5])
		bad[o.rc.Verify().Layout().TrailerOffset()+1] ^= 1
		err = g.PutShare(ctx, a, o.key(5), bytes.NewReader(bad), int64(len(bad)), lease)
		if !errors.Is(err, sharestore.ErrCorrupt) {
			t.Fatalf("damaged trailer: %v, want ErrCorrupt", err)
		}
		absent(t, a, o.key(5))
	})

	t.Run("Full", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		if len(o.shares[0]) <= smallCapacity {
			t.Fatalf("a share of %d bytes fits the small node", len(o.shares[0]))
		}
		for _, size := range []int64{int64(len(o.shares[0])), -1} {
			err := g.PutShare(ctx, small, o.key(0), bytes.NewReader(o.shares[0]), size, lease)
			if !errors.Is(err, sharestore.ErrFull) {
				t.Fatalf("a %d-byte share (size given %d) on a %d-byte node: %v, want ErrFull", len(o.shares[0]), size, smallCapacity, err)
			}
			absent(t, small, o.key(0))
		}
	})

	t.Run("Delete", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		mustPut(t, b, o, 6)
		err := g.DeleteShare(ctx, b, o.key(6), []byte("someone else's secret"))
		if !errors.Is(err, sharestore.ErrForbidden) {
			t.Fatalf("delete with a wrong secret: %v, want ErrForbidden", err)
		}
		if got, err := read(b, o.key(6), 0, -1); err != nil || !bytes.Equal(got, o.shares[6]) {
			t.Fatalf("the share after a refused delete: %d bytes, %v", len(got), err)
		}
		if err := g.DeleteShare(ctx, b, o.key(6), secret); err != nil {
			t.Fatalf("delete with the uploader's secret: %v", err)
		}
		absent(t, b, o.key(6))
		if err := g.DeleteShare(ctx, b, o.key(6), secret); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("delete of a deleted share: %v, want ErrNotFound", err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		o := encode(t, codec.Key{}, 100)
		for _, n := range []string{a, b} {
			if _, err := read(n, o.key(0), 0, -1); !errors.Is(err, sharestore.ErrNotFound) {
				t.Fatalf("read of a share never stored: %v, want ErrNotFound", err)
			}
			if _, err := read(n, o.key(0), 10, 5); !errors.Is(err, sharestore.ErrNotFound) {
				t.Fatalf("ranged read of a share never stored: %v, want ErrNotFound", err)
			}
		}
	})

	t.Run("FailedBodyStoresNothing", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		sh := o.shares[8]
		for _, size := range []int64{int64(len(sh)), -1} {
			err := g.PutShare(ctx, a, o.key(8), &failingReader{b: sh, n: len(sh) / 2}, size, lease)
			if err == nil {
				t.Fatalf("a body that failed half-way (size given %d) was accepted", size)
			}
			absent(t, a, o.key(8))
		}
		mustPut(t, a, o, 8) // and the whole share is still welcome
	})

	t.Run("UnknownNode", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		const nobody = "0000000000000000000000000000000000000000000000000000"
		if err := g.PutShare(cctx, nobody, o.key(0), bytes.NewReader(o.shares[0]), int64(len(o.shares[0])), lease); err == nil {
			t.Fatal("put to a node not in the grid succeeded")
		}
		if _, err := g.GetShare(cctx, nobody, o.key(0), 0, -1); err == nil {
			t.Fatal("read from a node not in the grid succeeded")
		}
		if _, err := g.ListShares(cctx, nobody, o.rc.Key.StorageIndex()); err == nil {
			t.Fatal("list on a node not in the grid succeeded")
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		mustPut(t, a, o, 0)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := g.GetShare(cctx, a, o.key(0), 0, -1); err == nil {
			t.Fatal("read with a cancelled context succeeded")
		}
		if err := g.PutShare(cctx, a, o.key(1), bytes.NewReader(o.shares[1]), int64(len(o.shares[1])), lease); err == nil {
			t.Fatal("put with a cancelled context succeeded")
		}
		absent(t, a, o.key(1))
	})

	t.Run("Concurrent", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		var wg sync.WaitGroup
		errs := make(chan error, 2*len(o.shares))
		for i := range o.shares {
			wg.Add(1)
			go func() {
				defer wg.Done()
				node := []string{a, b}[i%2]
				if err := g.PutShare(ctx, node, o.key(i), bytes.NewReader(o.shares[i]), int64(len(o.shares[i])), lease); err != nil {
					errs <- err
					return
				}
				if got, err := read(node, o.key(i), 0, -1); err != nil || !bytes.Equal(got, o.shares[i]) {
					errs <- errors.Join(errors.New("read back differs"), err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		la, lb := list(t, a, o.rc.Key.StorageIndex()), list(t, b, o.rc.Key.StorageIndex())
		if !slices.Equal(la, []int{0, 2, 4, 6, 8}) || !slices.Equal(lb, []int{1, 3, 5, 7, 9}) {
			t.Fatalf("after concurrent puts: a lists %v, b lists %v", la, lb)
		}
	})

	// Last: a node that stops leaves the list, and calls to it fail.
	t.Run("StoppedNode", func(t *testing.T) {
		o := encode(t, codec.Key{}, 20_000)
		mustPut(t, stopped, o, 0)
		tg.Stop("stopped")
		deadline := time.Now().Add(20 * time.Second)
		for {
			ns, err := g.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(ns, func(n object.Node) bool { return n.ID == stopped }) {
				if len(ns) != len(nodes)-1 {
					t.Fatalf("%d nodes listed after one of %d stopped", len(ns), len(nodes))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a stopped node is still listed after 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := g.GetShare(cctx, stopped, o.key(0), 0, -1); err == nil {
			t.Fatal("read from a stopped node succeeded")
		}
		if err := g.PutShare(cctx, stopped, o.key(1), bytes.NewReader(o.shares[1]), int64(len(o.shares[1])), lease); err == nil {
			t.Fatal("put to a stopped node succeeded")
		}
		if cctx.Err() != nil {
			t.Fatal("calls to a stopped node hung until the deadline")
		}
	})
}
