package volume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/volume"
)

// With n−k of six nodes down, writes (partial ones, read from the grid
// with those nodes down, and whole ones) are flushed with their happiness
// met on the nodes alive; after the nodes come back and two others go
// down, a new handle reads exactly what was flushed.
func TestVolumeWritesWithNodesDown(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 6})
	cat := &memCatalog{recs: map[string][]byte{}}
	obj := g.Objects(object.Options{})
	mk := func() *volume.Manager {
		m, err := volume.New(volume.Config{Catalog: cat, Objects: obj, Happy: 4, StateDir: t.TempDir(),
			Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ctx := ctxT(t)
	m := mk()
	if err := m.Create(ctx, "d", 12*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "d")
	model := make([]byte, 12*mib)
	write(t, v, model, 0, random(12*mib, 51))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	g.Kill(1)
	g.Kill(4) // n−k = 2 down: four nodes left, happiness 4 can be met
	g.WaitAlive(4)
	// The object client's membership is up to 2 s old (NodeGrid.MaxAge):
	// once it is past, placement no longer counts the dead nodes.
	time.Sleep(2500 * time.Millisecond)
	write(t, v, model, 3*mib+512*7, random(5000, 52)) // partial: the extent is read
	write(t, v, model, 8*mib, random(4*mib, 53))      // a whole extent
	if err := v.Flush(ctx); err != nil {
		t.Fatalf("flush with n−k nodes down: %v", err)
	}
	v.Close()
	g.Restart(1)
	g.Restart(4)
	g.Kill(0)
	g.Kill(2)
	g.WaitAlive(4)
	// As above: the object client's member view must be past its 2 s,
	// or it still has 1 and 4 down and 0 and 2 up, and asks the wrong
	// four nodes for extent 1.
	time.Sleep(2500 * time.Millisecond)
	v2 := open(t, mk(), "d")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("after writes with nodes down, a new handle reads other bytes")
	}
}

// bigRecord makes volume name of size bytes in cat whose every extent is
// one object stored with obj (extents shared, as clones share them): a
// full map of a large volume without storing its data, in a record of the
// old format (one capability per extent in the record). With m, the
// volume is then opened and flushed with m, which migrates the record to
// a base map and an empty overlay.
func bigRecord(tb testing.TB, m *volume.Manager, obj *object.Client, cat *memCatalog, name string, size int64) {
	ctx := context.Background()
	rc, _, err := obj.Put(ctx, bytes.NewReader(random(volume.ExtentSize, 61)), volume.ExtentSize,
		codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, 4)
	if err != nil {
		tb.Fatal(err)
	}
	in := volume.Info{Size: size, Extent: volume.ExtentSize, Extents: map[int64]string{}}
	for i := range (size + volume.ExtentSize - 1) / volume.ExtentSize {
		in.Extents[i] = rc.String()
	}
	body, err := json.Marshal(in)
	if err != nil {
		tb.Fatal(err)
	}
	if err := cat.Put(ctx, name, body); err != nil {
		tb.Fatal(err)
	}
	if m == nil {
		return
	}
	v, err := m.Open(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	defer v.Close()
	if err := v.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	if in := v.Info(); in.Extents != nil || in.Base == "" || len(in.Overlay) != 0 || int64(in.Stored()) != (size+volume.ExtentSize-1)/volume.ExtentSize {
		tb.Fatalf("%s not migrated to a base map: %d extents in the record, base %q, overlay %d, %d stored",
			name, len(in.Extents), in.Base, len(in.Overlay), in.Stored())
	}
}

// Cloning and snapshotting a 10 GiB volume whose 2,560 extents are all on
// the grid moves no share byte, as for a 10 MiB one; the clone reads as
// its parent. (BenchmarkVolumeClone compares their times.)
func TestVolumeCloneLargeMovesNothing(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	bigRecord(t, m, e.obj, e.cat, "big", 10<<30)
	in0, out0 := e.bytes()
	if err := m.Clone(ctx, "big", "big2", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Clone(ctx, "big", "big@s", true); err != nil {
		t.Fatal(err)
	}
	if in, out := e.bytes(); in != in0 || out != out0 {
		t.Fatalf("cloning 10 GiB moved %d share bytes in, %d out", in-in0, out-out0)
	}
	for _, n := range []string{"big2", "big@s"} {
		in, err := m.Stat(ctx, n)
		if err != nil || in.Stored() != 2560 || in.Size != 10<<30 || in.Origin != "big" {
			t.Fatalf("%s: %+v %v", n, in.Stored(), err)
		}
	}
	v := open(t, m, "big2")
	defer v.Close()
	a, b := make([]byte, 64<<10), make([]byte, 64<<10)
	if err := v.ReadAt(ctx, a, 7<<30+12345); err != nil {
		t.Fatal(err)
	}
	p := open(t, m, "big")
	defer p.Close()
	if err := p.ReadAt(ctx, b, 7<<30+12345); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) || bytes.Equal(a, make([]byte, len(a))) {
		t.Fatal("the clone of 10 GiB does not read as its parent")
	}
}

// What a clone or a snapshot writes to the catalog does not grow with
// the volume: the record copied for a 10 GiB volume of 2,560 stored
// extents is within a few bytes of the one for a 10 MiB volume of 3
// (the sizes' digits differ), both of them short.
func TestVolumeCloneRecordBounded(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	bigRecord(t, m, e.obj, e.cat, "small", 10<<20)
	bigRecord(t, m, e.obj, e.cat, "big", 10<<30)
	cloned := func(src, dst string, snap bool) int64 {
		before := e.cat.written()
		if err := m.Clone(ctx, src, dst, snap); err != nil {
			t.Fatal(err)
		}
		return e.cat.written() - before
	}
	for _, snap := range []bool{false, true} {
		small, big := cloned("small", fmt.Sprintf("small-%v", snap), snap), cloned("big", fmt.Sprintf("big-%v", snap), snap)
		if d := big - small; d < -16 || d > 16 || big > 1024 {
			t.Fatalf("snapshot %v: the clone of 10 GiB wrote %d bytes to the catalog, of 10 MiB %d", snap, big, small)
		}
	}
}
