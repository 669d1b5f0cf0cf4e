package object_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// Only the owner's cancel secret deletes an object's shares: a stranger
// with the invite (another client, or a gateway that is not the owner),
// a node replaying the hashes it keeps, and the owner's renew secret all
// delete nothing and the object still reads; the owner's Renew extends
// every lease. A second keeper's Renew adds a lease of its own, so the
// owner's Cancel leaves the shares, and the last Cancel frees every byte.
func TestLeasesOnlyOwnerCancels(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	owner := g.Objects(object.Options{LeaseTerm: time.Hour})
	p := codec.Params{K: 2, N: 5, SegmentSize: 4096}
	rc, _ := put(t, owner, 7, 20_000, p, 3)
	si := rc.Key.StorageIndex()
	shares := func() int {
		n := 0
		for _, nd := range g.Nodes {
			infos, _ := nd.Store().List(ctx, si)
			n += len(infos)
		}
		return n
	}
	if shares() != 5 {
		t.Fatalf("%d shares stored, want 5", shares())
	}
	check := func(who string) {
		t.Helper()
		if n := shares(); n != 5 {
			t.Fatalf("after %s: %d shares left, want 5", who, n)
		}
		var out bytes.Buffer
		if _, err := owner.Get(ctx, rc, &out, 0, -1); err != nil || digest(&out) != digest(randReader(7, 20_000)) {
			t.Fatalf("after %s: read: %v", who, err)
		}
	}

	stranger := g.Objects(object.Options{LeaseSecret: func(si sharefile.SI) []byte { return append([]byte("stranger "), si[:]...) }})
	rep, err := stranger.Cancel(ctx, si)
	if !errors.Is(err, object.ErrNoLease) || rep.Refused != 5 {
		t.Fatalf("stranger's cancel: %+v, %v; want ErrNoLease refused by 5 nodes", rep, err)
	}
	check("a stranger's cancel")

	// A node knows the hashes in its records, and tries them as secrets
	// on every node, with the owner's renew secret too.
	var lease sharestore.Lease
	for _, nd := range g.Nodes {
		infos, _ := nd.Store().List(ctx, si)
		ls, err := nd.Store().Leases(ctx, infos[0].Key)
		if err != nil || len(ls) != 1 {
			t.Fatalf("leases: %+v, %v", ls, err)
		}
		lease = ls[0]
		if d := time.Until(lease.Expires); d < 50*time.Minute || d > 70*time.Minute {
			t.Fatalf("lease expires in %v, want the client's term of an hour", d)
		}
	}
	nc := g.NodeClient()
	if _, err := nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	renew := object.RenewSecret(append([]byte("test lease "), si[:]...))
	for _, secret := range [][]byte{lease.Cancel[:], lease.ID[:], renew} {
		for _, nd := range g.Nodes {
			if _, err := nc.CancelLeases(ctx, string(nd.ID()), si, secret); !errors.Is(err, sharestore.ErrForbidden) {
				t.Fatalf("cancel with %x on node %s: %v, want forbidden", secret[:4], nd.ID(), err)
			}
		}
	}
	check("cancels with the nodes' hashes and the renew secret")

	// The owner renews to a longer term (a client of the same lease key,
	// as cron's `quilt renew` is).
	renewer := g.Objects(object.Options{LeaseTerm: 48 * time.Hour})
	if rep, err := renewer.Renew(ctx, si); err != nil || rep.Shares != 5 || rep.Nodes != 5 {
		t.Fatalf("renew: %+v, %v", rep, err)
	}
	for _, nd := range g.Nodes {
		infos, _ := nd.Store().List(ctx, si)
		ls, _ := nd.Store().Leases(ctx, infos[0].Key)
		if d := time.Until(ls[0].Expires); d < 47*time.Hour {
			t.Fatalf("renewed lease expires in %v, want 48 h", d)
		}
	}

	// A second keeper (another gateway of the same buckets) renews: it
	// takes a lease of its own, which its cancel (and only its) removes.
	if rep, err := stranger.Renew(ctx, si); err != nil || rep.Shares != 5 {
		t.Fatalf("second keeper's renew: %+v, %v", rep, err)
	}
	rep, err = owner.Cancel(ctx, si)
	if err != nil || rep.Shares != 5 || rep.Removed != 0 {
		t.Fatalf("owner's cancel with the second keeper's lease left: %+v, %v", rep, err)
	}
	check("the owner's cancel, with another lease left")
	rep, err = stranger.Cancel(ctx, si)
	if err != nil || rep.Shares != 5 || rep.Removed != 5 {
		t.Fatalf("last cancel: %+v, %v", rep, err)
	}
	if n := shares(); n != 0 {
		t.Fatalf("%d shares left after the owner's cancel", n)
	}
	for i, nd := range g.Nodes {
		if u := nd.Store().Usage(); u.Used != 0 {
			t.Fatalf("node %d: %d bytes used after the cancel", i, u.Used)
		}
	}
	if _, err := owner.Cancel(ctx, si); !errors.Is(err, object.ErrNoLease) {
		t.Fatalf("cancel of an object gone: %v", err)
	}
}
