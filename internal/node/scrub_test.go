package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// The scheduled scrub, on a short schedule, finds a share whose bits a
// failing disk flipped, counts it, and quarantines it: reads of it answer
// corrupt while the sound share beside it is still served; putting a
// sound copy back replaces the damaged one and lifts the quarantine.
func TestScheduledScrubQuarantines(t *testing.T) {
	ctx := context.Background()
	n, c := startNode(t, node.Config{ScrubEvery: 50 * time.Millisecond, ScrubRate: 64 << 20})
	id := string(n.ID())
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("s"), 3000))
	if err != nil {
		t.Fatal(err)
	}
	si := rc.Key.StorageIndex()
	lease := sharestore.LeaseFor([]byte("scrub"))
	for i, b := range shares {
		if _, err := c.PutShare(ctx, id, sharestore.Key{SI: si, Share: i}, bytes.NewReader(b), int64(len(b)), lease); err != nil {
			t.Fatal(err)
		}
	}
	bad := sharestore.Key{SI: si, Share: 1}
	if err := n.Store().(*sharestore.Disk).Corrupt(bad, sharefile.HeaderSize+10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the scrub to quarantine the damaged share", func() bool {
		return slices.Contains(n.Quarantined(), bad)
	})
	if q := n.Quarantined(); len(q) != 1 {
		t.Fatalf("quarantined %v, want only %v", q, bad)
	}
	fams, err := n.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := metricValue(fams, "quilt_node_scrubbed_shares_total", map[string]string{"result": "damaged"}); v < 1 {
		t.Errorf("damaged shares counted: %v", v)
	}
	if v, _ := metricValue(fams, "quilt_node_quarantined_shares", nil); v != 1 {
		t.Errorf("quarantined shares gauge: %v, want 1", v)
	}
	if _, err := c.GetShare(ctx, id, bad, 0, 10); !errors.Is(err, sharestore.ErrCorrupt) {
		t.Fatalf("read of the quarantined share: %v, want ErrCorrupt", err)
	}
	rd, err := c.GetShare(ctx, id, sharestore.Key{SI: si, Share: 0}, 0, 10)
	if err != nil {
		t.Fatalf("read of the sound share: %v", err)
	}
	io.Copy(io.Discard, rd)
	rd.Close()
	if _, err := c.PutShare(ctx, id, bad, bytes.NewReader(shares[1]), int64(len(shares[1])), lease); err != nil {
		t.Fatalf("putting a sound copy over the damaged one: %v", err)
	}
	if q := n.Quarantined(); len(q) != 0 {
		t.Fatalf("still quarantined after a sound copy replaced it: %v", q)
	}
	rd, err = c.GetShare(ctx, id, bad, 0, -1)
	if err != nil {
		t.Fatalf("read of the replaced share: %v", err)
	}
	got, _ := io.ReadAll(rd)
	rd.Close()
	if !bytes.Equal(got, shares[1]) {
		t.Fatal("the replaced share is not the sound copy")
	}
}
