package main

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/volume"
)

// Space reclamation of block volumes through the gateway's renewal walk
// (volumeRefs), with real leases that expire: after the parent is
// deleted, the base map its clone shares and every extent it lists are
// renewed and survive their leases' expiry, and the clone reads as
// before; once the clone has stored a new base map, the old base map and
// the extents only it listed are renewed no more and are swept, and what
// the clone names is kept.
func TestVolumeRenewalKeepsSharedBaseMap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const term = time.Hour
	g := testgrid.New(t, testgrid.Options{Nodes: 4})
	objs := g.Objects(object.Options{LeaseTerm: term})
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: objs,
		NoSync: true, LeaseRenew: -1, CancelDelay: -1, References: volumeRefs(objs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	m, err := volume.New(volume.Config{Catalog: registryCatalog{gw, volumeSet}, Objects: objs, Happy: 4,
		StateDir: t.TempDir(), Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, Overlay: 1})
	if err != nil {
		t.Fatal(err)
	}
	refs := func() []string {
		t.Helper()
		r, err := volumeRefs(objs)(ctx, gw)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	shares := func(c string) int {
		t.Helper()
		rc, err := codec.ParseReadCap(c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, nd := range g.Nodes {
			infos, _ := nd.Store().List(ctx, rc.Key.StorageIndex())
			n += len(infos)
		}
		return n
	}
	// sweep renews what the walk names, then expires every lease that
	// ends before the leases given out until now would, and not those
	// the renewal has just extended.
	sweep := func() {
		t.Helper()
		until := time.Now().Add(term)
		time.Sleep(200 * time.Millisecond)
		if _, err := gw.RenewLeases(ctx); err != nil {
			t.Fatal(err)
		}
		for _, nd := range g.Nodes {
			if _, err := nd.Store().Expire(ctx, until.Add(100*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
	}
	readAll := func(name string) []byte {
		t.Helper()
		m2, err := volume.New(volume.Config{Catalog: registryCatalog{gw, volumeSet}, Objects: objs, Happy: 4,
			StateDir: t.TempDir(), Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		v, err := m2.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		b := make([]byte, v.Size())
		if err := v.ReadAt(ctx, b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(v *volume.Volume, model []byte, off int64, p []byte) {
		t.Helper()
		if err := v.WriteAt(ctx, p, off, false); err != nil {
			t.Fatal(err)
		}
		copy(model[off:], p)
		if err := v.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if err := m.Create(ctx, "parent", 12<<20); err != nil {
		t.Fatal(err)
	}
	v, err := m.Open(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	model := make([]byte, 12<<20)
	write(v, model, 0, pattern(20, 12<<20)) // three extents: a base map
	v.Close()
	if err := m.Clone(ctx, "parent", "child", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	first := refs()
	in, _ := m.Stat(ctx, "child")
	if len(first) != 4 || in.Base == "" || !slices.Contains(first, in.Base) {
		t.Fatalf("child: %d references, want its base map %q and 3 extents", len(first), in.Base)
	}
	sweep()
	for _, c := range first {
		if shares(c) == 0 {
			t.Fatalf("an object of the base map the clone shares was swept: %.60s", c)
		}
	}
	if !bytes.Equal(readAll("child"), model) {
		t.Fatal("the clone reads otherwise once its parent is deleted and leases swept")
	}

	c, err := m.Open(ctx, "child")
	if err != nil {
		t.Fatal(err)
	}
	write(c, model, 0, pattern(21, 4096))     // the overlay
	write(c, model, 4<<20, pattern(22, 4096)) // past it: a new base map
	c.Close()
	second := refs()
	var freed []string
	for _, r := range first {
		if !slices.Contains(second, r) {
			freed = append(freed, r)
		}
	}
	if len(second) != 4 || len(freed) != 3 || !slices.Contains(freed, in.Base) {
		t.Fatalf("compacted: %d references, %d freed (want 4 and 3, the old base map among them)", len(second), len(freed))
	}
	sweep()
	for _, r := range freed {
		if n := shares(r); n != 0 {
			t.Fatalf("an object no volume names keeps %d shares: %.60s", n, r)
		}
	}
	for _, r := range second {
		if shares(r) == 0 {
			t.Fatalf("an object the clone names was swept: %.60s", r)
		}
	}
	if !bytes.Equal(readAll("child"), model) {
		t.Fatal("the clone reads otherwise after the sweep")
	}
}
