package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
)

// A DELETE, an overwrite and an aborted upload cancel the leases of the
// grid objects no key references any more, and the nodes delete their
// shares; an object a copy by reference still names keeps its shares and
// reads; the renewal walk renews every object still referenced.
func TestGatewayLeases(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(),
		Objects: g.Objects(object.Options{LeaseTerm: time.Hour}), NoSync: true, SyncEvery: 200 * time.Millisecond,
		LeaseRenew: -1, CancelDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if err := gw.CreateBucket(ctx, "gcb", ""); err != nil {
		t.Fatal(err)
	}
	si := func(info gateway.ObjectInfo) sharefile.SI {
		t.Helper()
		rc, err := codec.ParseReadCap(info.Cap)
		if err != nil {
			t.Fatal(err)
		}
		return rc.Key.StorageIndex()
	}
	shares := func(s sharefile.SI) int {
		n := 0
		for _, nd := range g.Nodes {
			infos, _ := nd.Store().List(ctx, s)
			n += len(infos)
		}
		return n
	}
	waitGone := func(what string, s sharefile.SI) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for shares(s) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d shares still there", what, shares(s))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	put := func(key string, body []byte) gateway.ObjectInfo {
		t.Helper()
		info, err := gw.Put(ctx, "gcb", key, bytes.NewReader(body), int64(len(body)), gateway.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	bodyA, bodyB := randBytes(40_000), randBytes(30_000)
	a, b := put("a", bodyA), put("b", bodyB)
	nA := shares(si(a))
	if nA == 0 || shares(si(b)) == 0 {
		t.Fatal("no shares stored")
	}
	// c is a copy of a by reference (the file tree's rename).
	if err := gw.TreeStore("gcb").Apply(ctx, []tree.Op{{Key: "c", From: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Delete(ctx, "gcb", "a"); err != nil {
		t.Fatal(err)
	}
	if err := gw.Delete(ctx, "gcb", "b"); err != nil {
		t.Fatal(err)
	}
	waitGone("deleted key", si(b))
	if n := shares(si(a)); n != nA {
		t.Fatalf("object a copy still names: %d shares, want %d", n, nA)
	}
	var out bytes.Buffer
	if _, err := gw.Get(ctx, "gcb", "c", &out, 0, -1); err != nil || !bytes.Equal(out.Bytes(), bodyA) {
		t.Fatalf("copy by reference after its source's delete: %v", err)
	}
	// A rename (copy by reference, then delete, in one batch) keeps the
	// object; a delete through the file tree frees it.
	if err := gw.TreeStore("gcb").Apply(ctx, []tree.Op{{Key: "d", From: "c"}, {Key: "c", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	e := put("e", randBytes(25_000))
	if err := gw.TreeStore("gcb").Apply(ctx, []tree.Op{{Key: "e", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	waitGone("key deleted through the file tree", si(e))
	if n := shares(si(a)); n != nA {
		t.Fatalf("object of a renamed key: %d shares, want %d", n, nA)
	}
	// Overwriting the renamed copy unreferences a's object.
	put("d", randBytes(20_000))
	waitGone("overwritten key", si(a))

	// An aborted upload's parts go.
	u, err := gw.CreateUpload(ctx, "gcb", "big", gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []sharefile.SI
	for n := 1; n <= 2; n++ {
		p, err := gw.PutPart(ctx, "gcb", "big", u.ID, n, bytes.NewReader(randBytes(10_000)), 10_000, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, si(gateway.ObjectInfo{Cap: p.Cap}))
	}
	// The walk renews what keys and uploads in progress reference.
	rep, err := gw.RenewLeases(ctx)
	if err != nil || rep.Objects != 3 || rep.Renewed != 3 {
		t.Fatalf("renewal walk: %+v, %v; want 3 objects (c and two parts) renewed", rep, err)
	}
	if err := gw.AbortUpload(ctx, "gcb", "big", u.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		waitGone("aborted upload's part", p)
	}
	if rep, err := gw.RenewLeases(ctx); err != nil || rep.Objects != 1 {
		t.Fatalf("renewal walk after the abort: %+v, %v", rep, err)
	}
}

// The renewal walk renews what Config.References names (the extents of
// block volumes) beside the buckets' objects, and a failure to read
// them leaves the buckets' renewal alone.
func TestGatewayRenewsOtherReferences(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	objs := g.Objects(object.Options{LeaseTerm: time.Hour})
	rc, _, err := objs.Put(ctx, bytes.NewReader(bytes.Repeat([]byte("extent "), 2000)), -1, codec.Params{K: 2, N: 5, SegmentSize: 64 << 10}, 5)
	if err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: objs,
		NoSync: true, LeaseRenew: -1, CancelDelay: -1,
		References: func(ctx context.Context, _ *gateway.Gateway) ([]string, error) {
			if fail.Load() {
				return nil, errors.New("volumes not readable")
			}
			return []string{rc.String()}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	rep, err := gw.RenewLeases(ctx)
	if err != nil || rep.Objects != 1 || rep.Renewed != 1 {
		t.Fatalf("renewal with one other reference: %+v, %v", rep, err)
	}
	fail.Store(true)
	if rep, err := gw.RenewLeases(ctx); err != nil || rep.Objects != 0 {
		t.Fatalf("renewal with the other references failing: %+v, %v", rep, err)
	}
}

// A copy by reference into another bucket (Swift's COPY) keeps its
// object when the source key is deleted: the cancellation walk covers
// every bucket, not only the one the delete was in.
func TestGatewayLeasesAcrossBuckets(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(),
		Objects: g.Objects(object.Options{LeaseTerm: time.Hour}), NoSync: true, SyncEvery: 200 * time.Millisecond,
		LeaseRenew: -1, CancelDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	for _, b := range []string{"src", "dst", "other"} {
		if err := gw.CreateBucket(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
	}
	body := randBytes(50_000)
	kept, err := gw.Put(ctx, "src", "k", bytes.NewReader(body), int64(len(body)), gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Rewrite(ctx, "src", "k", "dst", "k", nil); err != nil {
		t.Fatal(err)
	}
	// A second object, referenced by src only: its delete must free it,
	// which shows the retirer has run once the wait below ends.
	gone, err := gw.Put(ctx, "src", "gone", bytes.NewReader(randBytes(40_000)), 40_000, gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shares := func(c string) int {
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
	before := shares(kept.Cap)
	if err := gw.Delete(ctx, "src", "k"); err != nil {
		t.Fatal(err)
	}
	if err := gw.Delete(ctx, "src", "gone"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for shares(gone.Cap) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the object only src referenced was not freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := shares(kept.Cap); n != before {
		t.Fatalf("the object dst still names has %d shares, had %d", n, before)
	}
	var out bytes.Buffer
	if _, err := gw.Get(ctx, "dst", "k", &out, 0, -1); err != nil || !bytes.Equal(out.Bytes(), body) {
		t.Fatalf("dst/k after src/k was deleted: %v", err)
	}
}

// An empty bucket (made, never written: its namespace has no entry on
// a second gateway, which cannot pull what does not exist) does not stop
// that gateway's renewal walk: the other buckets' objects are renewed.
func TestRenewalWalkWithAnEmptyBucket(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	open := func(dir string) *gateway.Gateway {
		gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{LeaseTerm: time.Hour}),
			NoSync: true, LeaseRenew: -1, CancelDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		return gw
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	gw1 := open(dir1)
	for _, b := range []string{"empty", "full"} {
		if err := gw1.CreateBucket(ctx, b, ""); err != nil {
			t.Fatal(err)
		}
	}
	data := bytes.Repeat([]byte("x"), 20_000)
	if _, err := gw1.Put(ctx, "full", "k", bytes.NewReader(data), int64(len(data)), gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	reg, err := os.ReadFile(filepath.Join(dir1, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, gw := range []*gateway.Gateway{gw1, open(dir2)} {
		rep, err := gw.RenewLeases(ctx)
		if err != nil || rep.Objects != 1 || rep.Renewed != 1 {
			t.Fatalf("gateway %d: renewal walk beside an empty bucket: %+v, %v", i+1, rep, err)
		}
	}
}
