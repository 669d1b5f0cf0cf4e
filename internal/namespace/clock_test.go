package namespace

import (
	"context"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
)

// TestAntiEntropyFollowsTheClock: the periodic sync runs when the
// replica's clock passes its interval (jittered to between half and one
// and a half of SyncInterval), once per interval, and never while the
// clock stands still. A fake clock moves time, so the test waits for no
// interval.
func TestAntiEntropyFollowsTheClock(t *testing.T) {
	_, _, _, a, b := twoReplicas(t)
	peer := &countingPeer{Peer: b.AsPeer()}
	clk := clock.NewFake()
	const interval = 10 * time.Second
	rep := NewReplica(ReplicaConfig{DB: a, SyncInterval: interval, Clock: clk})
	rep.Start(func() []Peer { return []Peer{peer} })
	defer rep.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// waitIdle waits until the loop waits on its timer again: any sync
	// the last advance started has finished by then.
	waitIdle := func() {
		t.Helper()
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("the anti-entropy loop never waited on its timer: %v", err)
		}
	}
	syncs := func() int64 { return rep.Stats().Syncs }
	waitIdle()
	for round := int64(1); round <= 3; round++ {
		// Just short of the shortest interval since the start or the
		// last sync: no sync.
		clk.Advance(interval/2 - time.Millisecond)
		waitIdle()
		if n, p := syncs(), peer.syncs.Load(); n != round-1 || p != round-1 {
			t.Fatalf("round %d: %d syncs (%d started) before half the interval had passed, want %d", round, n, p, round-1)
		}
		// Past the longest interval: exactly one sync.
		clk.Advance(interval + time.Millisecond)
		for syncs() < round && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		waitIdle()
		if n, p := syncs(), peer.syncs.Load(); n != round || p != round {
			t.Fatalf("round %d: %d syncs (%d started), want %d", round, n, p, round)
		}
	}
}
