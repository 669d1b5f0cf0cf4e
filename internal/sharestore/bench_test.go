package sharestore_test

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// BenchmarkDiskPut stores the shares of 1 MiB objects (3-of-10: ~350 KiB
// each, what a node of a ten-node grid receives for a 1 MiB S3 PUT) one
// after another, and reports the process's CPU time per Put beside the
// wall time: the store's cost per share, fsyncs included. At most 640
// Puts (-benchtime 600x).
func BenchmarkDiskPut(b *testing.B) {
	ctx := context.Background()
	d, err := sharestore.OpenDisk(b.TempDir(), sharestore.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// Distinct shares for up to 640 Puts: 64 objects, 10 shares each.
	type share struct {
		key  sharestore.Key
		data []byte
	}
	var all []share
	for o := range 64 {
		rc, shares, err := codec.EncodeAll(codec.Params{K: 3, N: 10, SegmentSize: 1 << 20}, codec.NewKey(), bytes.Repeat([]byte{byte(o)}, 1<<20))
		if err != nil {
			b.Fatal(err)
		}
		for n, sh := range shares {
			all = append(all, share{sharestore.Key{SI: rc.Key.StorageIndex(), Share: n}, sh})
		}
	}
	if b.N > len(all) {
		b.Fatalf("at most %dx", len(all))
	}
	b.SetBytes(int64(len(all[0].data)))
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := all[i]
		if _, err := d.Put(ctx, s.key, bytes.NewReader(s.data), int64(len(s.data)), sharestore.LeaseFor([]byte("s"))); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
