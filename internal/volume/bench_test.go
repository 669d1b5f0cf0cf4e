package volume_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/volume"
)

// benchVolume stores a volume of size bytes of random data on a 4-node
// grid (2-of-4, 1 MiB segments, as newEnv) and opens it afresh, its
// journal empty, so that every read goes to the grid or the read cache
// (of readCache bytes, as Config.ReadCache).
func benchVolume(b *testing.B, size, readCache int64) *volume.Volume {
	g := testgrid.New(b, testgrid.Options{Nodes: 4})
	cat := &memCatalog{recs: map[string][]byte{}}
	mk := func() *volume.Manager {
		m, err := volume.New(volume.Config{Catalog: cat, Objects: g.Objects(object.Options{}), Happy: 4,
			StateDir: b.TempDir(), Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, ReadCache: readCache})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	ctx := context.Background()
	m := mk()
	if err := m.Create(ctx, "bench", size); err != nil {
		b.Fatal(err)
	}
	v, err := m.Open(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, volume.ExtentSize)
	r := rand.New(rand.NewSource(1))
	for off := int64(0); off < size; off += int64(len(buf)) {
		r.Read(buf)
		if err := v.WriteAt(ctx, buf, off, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := v.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	v.Close()
	v, err = mk().Open(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { v.Close() })
	return v
}

// caches are the read caches the benchmarks compare: none (every read a
// grid request of its own range) and the default.
var caches = []struct {
	name string
	size int64
}{{"cache=none", -1}, {"cache=default", 0}}

// BenchmarkVolumeSeqRead reads a 64 MiB volume front to back in 256 KiB
// requests, as nbdcopy does; the volume is larger than the read cache, so
// every pass starts cold.
func BenchmarkVolumeSeqRead(b *testing.B) {
	for _, c := range caches {
		b.Run(c.name, func(b *testing.B) { benchSeqRead(b, c.size) })
	}
}

func benchSeqRead(b *testing.B, cache int64) {
	const size = 64 << 20
	v := benchVolume(b, size, cache)
	ctx := context.Background()
	p := make([]byte, 256<<10)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		for off := int64(0); off < size; off += int64(len(p)) {
			if err := v.ReadAt(ctx, p, off); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkVolumeRandRead reads 4 KiB at random offsets of a 64 MiB
// volume, twice the read cache: about half the reads hit it once warm.
func BenchmarkVolumeRandRead(b *testing.B) {
	for _, c := range caches {
		b.Run(c.name, func(b *testing.B) { benchRandRead(b, c.size) })
	}
}

func benchRandRead(b *testing.B, cache int64) {
	const size = 64 << 20
	v := benchVolume(b, size, cache)
	ctx := context.Background()
	p := make([]byte, 4<<10)
	r := rand.New(rand.NewSource(2))
	b.SetBytes(int64(len(p)))
	b.ResetTimer()
	for range b.N {
		if err := v.ReadAt(ctx, p, r.Int63n(size/int64(len(p)))*int64(len(p))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVolumeFlushSmall writes 4 KiB into a stored extent and
// flushes, as a file system's journal commit does: the extent is stored
// again whole and the map committed.
func BenchmarkVolumeFlushSmall(b *testing.B) {
	const size = 16 << 20
	v := benchVolume(b, size, 0)
	ctx := context.Background()
	p := make([]byte, 4<<10)
	b.ResetTimer()
	for i := range b.N {
		p[0] = byte(i)
		if err := v.WriteAt(ctx, p, int64(i%4)*(1<<20), false); err != nil {
			b.Fatal(err)
		}
		if err := v.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVolumeFlushScattered writes 4 KiB into each of 16 stored
// extents and flushes (random writes filling the journal do the same):
// 16 extents read, patched and stored again.
func BenchmarkVolumeFlushScattered(b *testing.B) {
	const size = 64 << 20
	v := benchVolume(b, size, -1)
	ctx := context.Background()
	p := make([]byte, 4<<10)
	b.ResetTimer()
	for i := range b.N {
		p[0] = byte(i)
		for e := range int64(16) {
			if err := v.WriteAt(ctx, p, e*volume.ExtentSize+int64(i%8)*(1<<19), false); err != nil {
				b.Fatal(err)
			}
		}
		if err := v.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVolumeClone clones a volume whose every extent is stored (one
// shared object, bigRecord): 10 MiB (3 extents) against 10 GiB (2,560).
// A clone copies the catalog record, which names the base map and holds
// the overlay (empty here), so the time does not grow with the volume.
func BenchmarkVolumeClone(b *testing.B) {
	for _, c := range []struct {
		name string
		size int64
	}{{"10MiB", 10 << 20}, {"10GiB", 10 << 30}} {
		b.Run(c.name, func(b *testing.B) {
			g := testgrid.New(b, testgrid.Options{Nodes: 4})
			cat := &memCatalog{recs: map[string][]byte{}}
			obj := g.Objects(object.Options{})
			m, err := volume.New(volume.Config{Catalog: cat, Objects: obj, Happy: 4, StateDir: b.TempDir(),
				Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}})
			if err != nil {
				b.Fatal(err)
			}
			bigRecord(b, m, obj, cat, "src", c.size)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				if err := m.Clone(ctx, "src", fmt.Sprintf("c%d", i), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
