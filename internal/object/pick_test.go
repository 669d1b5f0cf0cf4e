package object

import (
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
)

// A read near its end, on a downlink of 8.7 MB/s with 4 MB of blocks
// still to come (under half a second of it): a fast holder, whose link
// is known to carry 4 MB/s, is at its limit of requests with 1.4 MB
// owed, and has sent only 1 MB in the second it has been at work (its
// part of the busy downlink), which caps its estimate at 1.35 MB/s; a
// slow holder, 310 kB/s, is free. By the estimates the slow one would
// deliver the next 350 kB block first (1.13 s against 1.30), but its
// link needs longer over the block than the downlink needs for the rest
// of the read, so its block would end the read late: the block waits
// for the fast holder (pick says -1). A reader that goes by the
// estimates alone asks the slow holder, and the test fails. With
// nothing but slow holders left to ask, the slow one is asked.
//
// The same holds in the client's first read, before it has a downlink
// estimate (down 0), with 1.5 MB left: the read's capacity is then what
// the holders' links carry together (4.31 MB/s, 0.35 s for the rest).
func TestPickPassesOverHolderSlowerThanRestOfRead(t *testing.T) {
	vc, n := pickObject()
	for _, c := range []struct {
		down float64
		need int64
	}{{8.7e6, 4e6}, {0, 1.5e6}} {
		now := time.Now()
		f := &fetcher{vc: vc, down: c.down, need: c.need, owed: map[string]int64{"fast": 1_400_000}}
		f.srcs = []*fsrc{
			{src: &source{share: 0, node: "fast", latency: 2 * time.Millisecond}, rate: 1.5e6, link: 4e6,
				inflight: perHolder, busyAt: now.Add(-time.Second - 2*time.Millisecond), busyBytes: 1e6},
			{src: &source{share: 1, node: "slow", latency: 2 * time.Millisecond}, rate: 310e3, link: 310e3,
				lastAt: now},
		}
		seg := pickSegment(vc)
		if f.eta(1, n) >= f.eta(0, n) {
			t.Fatalf("down %v: set-up: the slow holder's eta %v is not before the fast one's %v", c.down, f.eta(1, n), f.eta(0, n))
		}
		if got := f.pick(seg, n, perHolder, true); got != -1 {
			t.Fatalf("down %v: pick = %d (the slow holder); want -1: wait for the fast holder", c.down, got)
		}
		f.srcs[0].failed = true
		if got := f.pick(seg, n, perHolder, true); got != 1 {
			t.Fatalf("down %v: with the fast holder failed, pick = %d; want 1: the slow holder is all there is", c.down, got)
		}
	}
}

// Early in a read, the downlink shared by many holders: a fast holder,
// its link known to carry 4 MB/s, measured at 1.2 MB/s in this read
// (its fair part of the downlink) and busy with a block; a slow holder
// free, measured at its link's 1 MB/s. By the measured rates the slow
// one delivers the next block first (0.35 s against 0.58), but it keeps
// that pace when the others are done and the fast one does not: the
// block waits for the fast holder, whose link brings both its blocks in
// 0.18 s. A reader that counts by the measured rates alone asks the
// slow holder, and the test fails.
func TestPickWaitsForBusyFastLink(t *testing.T) {
	vc, n := pickObject()
	now := time.Now()
	f := &fetcher{vc: vc, down: 8.7e6, need: 8e6, owed: map[string]int64{"fast": int64(n)}}
	f.srcs = []*fsrc{
		{src: &source{share: 0, node: "fast", latency: 2 * time.Millisecond}, rate: 1.2e6, link: 4e6,
			inflight: perHolder, busyAt: now, busyBytes: 1 << 40},
		{src: &source{share: 1, node: "slow", latency: 2 * time.Millisecond}, rate: 1e6, link: 1e6,
			lastAt: now},
	}
	if got := f.pick(pickSegment(vc), n, perHolder, true); got != -1 {
		t.Fatalf("pick = %d (the slow holder); want -1: wait for the fast holder", got)
	}
}

// A read with 7 MB of blocks still to come on a downlink of 8.7 MB/s
// (0.80 s of it): a fast holder, whose link carries 3 MB/s, has three
// blocks owed and a rate in the read of its part of the busy downlink
// (1.35 MB/s by the late-holder cap); a slow holder, 750 kB/s, has one
// block owed. By the estimates the slow one would deliver the next
// block first (0.93 s against 1.04), and its link needs less than the
// rest of the read for the block alone (0.47 s), but with the block it
// owes already it would end the read late (0.93 s), while the fast
// one's link brings all four of its blocks in 0.47 s: the block goes to
// the fast holder. A reader that weighs a holder's link over the block
// alone asks the slow one, and the test fails.
func TestPickPassesOverHolderWhoseBacklogOutlastsRead(t *testing.T) {
	vc, n := pickObject()
	now := time.Now()
	f := &fetcher{vc: vc, down: 8.7e6, need: 7e6, owed: map[string]int64{"fast": 3 * int64(n), "slow": int64(n)}}
	f.srcs = []*fsrc{
		{src: &source{share: 0, node: "fast", latency: 2 * time.Millisecond}, rate: 1.2e6, link: 3e6,
			inflight: 1, busyAt: now.Add(-time.Second - 2*time.Millisecond), busyBytes: 1e6},
		{src: &source{share: 1, node: "slow", latency: 2 * time.Millisecond}, rate: 750e3, link: 750e3,
			inflight: 1, busyAt: now, busyBytes: 1 << 40},
	}
	if f.eta(1, n) >= f.eta(0, n) {
		t.Fatalf("set-up: the slow holder's eta %v is not before the fast one's %v", f.eta(1, n), f.eta(0, n))
	}
	if got := f.pick(pickSegment(vc), n, perHolder, true); got != 0 {
		t.Fatalf("pick = %d; want 0, the fast holder", got)
	}
}

// Holders of links alike (about 1 MB/s each, as when the client's
// downlink is not the limit), 300 ms of the read left: a free holder
// whose block would outlast that is still asked, since the other's
// link, busy with a block already, would deliver later. A reader that
// passes over every holder slower than the rest of the read leaves the
// block to wait for the busy one, and the test fails.
func TestPickKeepsHolderNoSlowerThanOthers(t *testing.T) {
	vc, n := pickObject()
	now := time.Now()
	f := &fetcher{vc: vc, down: 10e6, need: 3e6, owed: map[string]int64{"busy": int64(n)}}
	f.srcs = []*fsrc{
		{src: &source{share: 0, node: "busy", latency: 2 * time.Millisecond}, rate: 1.2e6, link: 1.2e6,
			inflight: perHolder, busyAt: now, busyBytes: 1 << 40},
		{src: &source{share: 1, node: "free", latency: 2 * time.Millisecond}, rate: 1e6, link: 1e6,
			lastAt: now},
	}
	seg := pickSegment(vc)
	if got := f.pick(seg, n, perHolder, true); got != 1 {
		t.Fatalf("pick = %d; want 1, the free holder", got)
	}
}

// pickObject is the object of the pick tests (8 MiB, 3 of 10, 1 MiB
// segments) and the length of its blocks.
func pickObject() (codec.VerifyCap, int) {
	vc := codec.VerifyCap{Params: codec.Params{K: 3, N: 10, SegmentSize: 1 << 20}, Size: 8 << 20}
	return vc, vc.Layout().BlockLen(0)
}

// pickSegment is a segment of vc with nothing asked or received yet.
func pickSegment(vc codec.VerifyCap) *fseg {
	return &fseg{blocks: make([][]byte, vc.N), asked: map[int]*freq{}, tried: map[int]bool{}}
}
