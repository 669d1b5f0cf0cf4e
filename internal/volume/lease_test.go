package volume_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/volume"
)

type leaseRec struct {
	Holder  string    `json:"holder"`
	Owner   string    `json:"owner"`
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

func (e *env) leased(t *testing.T, leases *memCatalog, ttl time.Duration) *volume.Manager {
	m, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, Leases: leases, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readLease(t *testing.T, c *memCatalog, name string) *leaseRec {
	raw, _ := c.Get(context.Background(), name)
	if raw == nil {
		return nil
	}
	var l leaseRec
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	return &l
}

func putLease(c *memCatalog, name string, l leaseRec) {
	b, _ := json.Marshal(l)
	c.Put(context.Background(), name, b)
}

// One writer per volume: a second Manager cannot open a volume another
// holds the lease of, while the holder renews it; it can once the holder
// closes it or the lease has run out (the holder died); a snapshot needs
// no lease. A holder whose lease was taken commits nothing more.
func TestVolumeLeaseOneWriter(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	leases := &memCatalog{recs: map[string][]byte{}}
	const ttl = 300 * time.Millisecond
	a, b := e.leased(t, leases, ttl), e.leased(t, leases, ttl)
	if err := a.Create(ctx, "v", 8<<20); err != nil {
		t.Fatal(err)
	}
	va, err := a.Open(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	first := readLease(t, leases, "v")
	if first == nil {
		t.Fatal("Open took no lease")
	}
	if _, err := b.Open(ctx, "v"); !errors.Is(err, volume.ErrLeased) || !strings.Contains(err.Error(), first.Holder) {
		t.Fatalf("second writer: %v, want ErrLeased naming %q", err, first.Holder)
	}
	// Renewed while open: wait (bounded) until the lease has been renewed
	// past its first expiry, then the second writer is still refused.
	deadline := time.Now().Add(5 * time.Second)
	for {
		l := readLease(t, leases, "v")
		if l != nil && l.ID == first.ID && l.Expires.After(first.Expires.Add(ttl/2)) && time.Now().After(first.Expires) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease not renewed: %+v (first %+v)", l, first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := b.Open(ctx, "v"); !errors.Is(err, volume.ErrLeased) {
		t.Fatalf("second writer after renewal: %v", err)
	}
	// The same Manager's handles share the lease.
	va2, err := a.Open(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	va2.Close()
	if err := a.Clone(ctx, "v", "v@s", true); err != nil {
		t.Fatal(err)
	}
	snap, err := b.Open(ctx, "v@s")
	if err != nil {
		t.Fatalf("a snapshot needs no lease: %v", err)
	}
	snap.Close()
	if err := va.Close(); err != nil {
		t.Fatal(err)
	}
	if readLease(t, leases, "v") != nil {
		t.Fatal("Close left the lease")
	}
	vb, err := b.Open(ctx, "v")
	if err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
	vb.Close()

	// A dead holder's lease: refused while live, taken once run out.
	putLease(leases, "v", leaseRec{Holder: "dead host", ID: "dead", Expires: time.Now().Add(time.Hour)})
	if _, err := b.Open(ctx, "v"); !errors.Is(err, volume.ErrLeased) || !strings.Contains(err.Error(), "dead host") {
		t.Fatalf("live lease of a dead holder: %v", err)
	}
	putLease(leases, "v", leaseRec{Holder: "dead host", ID: "dead", Expires: time.Now().Add(-time.Second)})
	vb, err = b.Open(ctx, "v")
	if err != nil {
		t.Fatalf("expired lease: %v", err)
	}

	vb.Close()
	// A live lease of this Manager's owner is of one that crashed: taken over.
	putLease(leases, "v", leaseRec{Holder: "crashed", Owner: "host:/state", ID: "crashed", Expires: time.Now().Add(time.Hour)})
	if _, err := b.Open(ctx, "v"); !errors.Is(err, volume.ErrLeased) {
		t.Fatalf("a live lease of another owner: %v", err)
	}
	c, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, Leases: leases, LeaseTTL: ttl, LeaseOwner: "host:/state"})
	if err != nil {
		t.Fatal(err)
	}
	vc, err := c.Open(ctx, "v")
	if err != nil {
		t.Fatalf("same owner after a crash: %v", err)
	}
	vc.Close()
	if vb, err = b.Open(ctx, "v"); err != nil {
		t.Fatal(err)
	}

	// Its lease taken by another, the handle commits nothing more.
	data := make([]byte, 4096)
	data[0] = 7
	if err := vb.WriteAt(ctx, data, 0, false); err != nil {
		t.Fatal(err)
	}
	putLease(leases, "v", leaseRec{Holder: "thief", ID: "thief", Expires: time.Now().Add(time.Hour)})
	deadline = time.Now().Add(5 * time.Second)
	for {
		err := vb.Flush(ctx)
		if errors.Is(err, volume.ErrLeaseLost) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("flush after the lease was taken: %v", err)
		}
		if err := vb.WriteAt(ctx, data, 0, false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	vb.Close()
	if l := readLease(t, leases, "v"); l == nil || l.ID != "thief" {
		t.Fatalf("the lost holder's Close removed the taker's lease: %+v", l)
	}
}
