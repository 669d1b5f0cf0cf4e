package object_test

import (
	"context"
	"io"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// BenchmarkGrid puts and gets objects on 10 in-process nodes (real TLS,
// real disk), 3-of-10: the whole upload and download path in one process.
func BenchmarkGrid(b *testing.B) {
	g := testgrid.New(b, testgrid.Options{Nodes: 10})
	c := g.Objects(object.Options{})
	for _, size := range []int64{1 << 20, 16 << 20, 64 << 20} {
		var rc codec.ReadCap
		b.Run("put/"+human(size), func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; b.Loop(); i++ {
				var err error
				rc, _, err = c.Put(context.Background(), randReader(uint64(i), size), size, codec.DefaultParams(), 7)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+human(size), func(b *testing.B) {
			if rc.Size != size { // the put above did not run (-bench get/...)
				var err error
				if rc, _, err = c.Put(context.Background(), randReader(0, size), size, codec.DefaultParams(), 7); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := c.Get(context.Background(), rc, io.Discard, 0, -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func human(n int64) string {
	return map[int64]string{1 << 20: "1MiB", 16 << 20: "16MiB", 64 << 20: "64MiB"}[n]
}
