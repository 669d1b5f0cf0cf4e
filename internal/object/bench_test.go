package object_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/linkemu"
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

// BenchmarkSegmentSizeSlowLinks writes (to happiness) and reads a 4 MiB
// object of several segment sizes on 10 nodes behind emulated links of
// uneven speed (uplinks and downlinks from 0.25 to 2.5 MB/s, as a
// community mesh's), from a client of unlimited link: the measure of
// the segment size's default on slow networks (docs/benchmarks.md).
func BenchmarkSegmentSizeSlowLinks(b *testing.B) {
	ln := linkemu.New(1)
	g := testgrid.New(b, testgrid.Options{Nodes: 10, Net: ln})
	for i := range 10 {
		rate := int64(250_000 * (i + 1))
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Up: rate, Down: rate})
	}
	ln.SetDefault(linkemu.Link{Delay: 5 * time.Millisecond})
	c := g.ObjectsAt(clientHost, object.Options{AckAtHappy: true, Stall: time.Minute})
	defer c.Close()
	const size = 4 << 20
	for _, seg := range []int{64 << 10, 256 << 10, 1 << 20} {
		p := codec.Params{K: 3, N: 10, SegmentSize: seg}
		var rc codec.ReadCap
		b.Run(fmt.Sprintf("put/seg=%dKiB", seg>>10), func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; b.Loop(); i++ {
				var rep *object.PutReport
				var err error
				rc, rep, err = c.Put(context.Background(), randReader(uint64(i), size), size, p, 7)
				if err != nil {
					b.Fatal(err)
				}
				if rep.Background != nil {
					b.StopTimer()
					rep.Background.Wait(context.Background())
					b.StartTimer()
				}
			}
		})
		b.Run(fmt.Sprintf("get/seg=%dKiB", seg>>10), func(b *testing.B) {
			if rc.Size != size {
				b.Skip("needs the put above")
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
