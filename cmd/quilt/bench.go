package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"time"
)

func runBench(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", "Usage: quilt bench [flags]\n\nPuts and gets objects of random bytes on the grid, one at a time, and\nprints each operation's throughput in MB/s (10^6 bytes per second of\nplaintext) and the median.")
	var g gridFlags
	var e encodingFlags
	g.register(fs)
	e.register(fs)
	sizeFlag := fs.String("size", "64MiB", "size of each object")
	count := fs.Int("count", 3, "objects to put and get")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return err
	}
	p, err := e.params()
	if err != nil {
		return err
	}
	if *count < 1 {
		return fmt.Errorf("--count must be at least 1")
	}
	// Each put is timed to full redundancy, as it always was: an upload
	// acknowledged at happiness would leave shares to the next one.
	g.waitAll = true
	s, err := g.connect()
	if err != nil {
		return err
	}
	var puts, gets []float64
	fmt.Printf("bench: %d × %s, %d-of-%d, segments of %s\n", *count, human(size), p.K, p.N, human(int64(p.SegmentSize)))
	for i := range *count {
		src := io.LimitReader(rand.NewChaCha8([32]byte{byte(i), 'q'}), size)
		t0 := time.Now()
		rc, _, err := s.objects.Put(ctx, src, size, p, e.happy)
		if err != nil {
			return err
		}
		put := float64(size) / time.Since(t0).Seconds() / 1e6
		t1 := time.Now()
		rep, err := s.objects.Get(ctx, rc, io.Discard, 0, -1)
		if err != nil {
			return err
		}
		if rep.Bytes != size {
			return fmt.Errorf("get returned %d bytes of %d", rep.Bytes, size)
		}
		get := float64(size) / time.Since(t1).Seconds() / 1e6
		puts, gets = append(puts, put), append(gets, get)
		fmt.Printf("  %d: put %8.1f MB/s   get %8.1f MB/s\n", i+1, put, get)
	}
	fmt.Printf("median: put %.1f MB/s, get %.1f MB/s\n", median(puts), median(gets))
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
