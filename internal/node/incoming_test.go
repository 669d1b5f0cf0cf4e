package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// A PUT as the only share of an object (PutOnlyShare) is refused with
// `exists` while the node holds, or is receiving, another share of the
// object, and taken otherwise (the same share again adds a lease);
// ordinary PUTs are not held back by it.
func TestPutOnlyShare(t *testing.T) {
	rc, shares, err := codec.EncodeAll(codec.Params{K: 2, N: 4, SegmentSize: 16 << 10}, codec.NewKey(), bytes.Repeat([]byte("o"), 100<<10))
	if err != nil {
		t.Fatal(err)
	}
	const capacity = 10 << 20
	n, c := startNode(t, node.Config{BodyStall: 10 * time.Second, Capacity: capacity})
	ctx := context.Background()
	id := string(n.ID())
	si := rc.Key.StorageIndex()
	key := func(i int) sharestore.Key { return sharestore.Key{SI: si, Share: i} }
	size := int64(len(shares[0]))
	lease := sharestore.LeaseFor([]byte("secret"))
	put := func(only bool, i int, l sharestore.Lease) error {
		f := c.PutShare
		if only {
			f = c.PutOnlyShare
		}
		_, err := f(ctx, id, key(i), bytes.NewReader(shares[i]), size, l)
		return err
	}
	// Share 1 arrives slowly: an only-share PUT of share 0 is refused
	// meanwhile; one of share 1 itself is not held back by it.
	pr, pw := io.Pipe()
	arriving := make(chan error, 1)
	go func() {
		_, err := c.PutShare(ctx, id, key(1), pr, size, lease)
		arriving <- err
	}()
	if _, err := pw.Write(shares[1][:1000]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the slow upload to have started", func() bool { return n.Store().Usage().Free < capacity })
	if err := put(true, 0, lease); !errors.Is(err, sharestore.ErrExists) {
		t.Fatalf("an only share while another arrives: %v, want exists", err)
	}
	if _, err := pw.Write(shares[1][1000:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-arriving; err != nil {
		t.Fatal(err)
	}
	// Share 1 held: share 0 as the only one is refused; share 1 again
	// (another lease) is taken; an ordinary PUT of share 2 is taken.
	if err := put(true, 0, lease); !errors.Is(err, sharestore.ErrExists) {
		t.Fatalf("an only share beside a held one: %v, want exists", err)
	}
	if err := put(true, 1, sharestore.LeaseFor([]byte("other"))); err != nil {
		t.Fatalf("the held share itself as the only one: %v", err)
	}
	if err := put(false, 2, lease); err != nil {
		t.Fatalf("an ordinary PUT beside a held share: %v", err)
	}
	if held, _ := n.Store().List(ctx, si); len(held) != 2 {
		t.Fatalf("the node holds %d shares of the object, want 2", len(held))
	}
	// Of another object it holds nothing: taken.
	rc2, shares2, _ := codec.EncodeAll(codec.Params{K: 2, N: 4, SegmentSize: 16 << 10}, codec.NewKey(), bytes.Repeat([]byte("p"), 10<<10))
	if _, err := c.PutOnlyShare(ctx, id, sharestore.Key{SI: rc2.Key.StorageIndex(), Share: 3}, bytes.NewReader(shares2[3]), int64(len(shares2[3])), lease); err != nil {
		t.Fatalf("an only share of a new object: %v", err)
	}
}
