package node_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// A share whose trailer declares its segment count plus 2^59 (which
// makes the same trailer length under 64-bit wrap-around) is refused as
// corrupt, the node stays up, and its space is free again.
func TestPutForgedSegmentCount(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	c := g.NodeClient()
	ctx := context.Background()
	if _, err := c.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	id := string(g.Nodes[0].ID())
	p := codec.Params{K: 2, N: 3, SegmentSize: 1000}
	rc, shares, err := codec.EncodeAll(p, codec.NewKey(), bytes.Repeat([]byte("f"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	l := rc.Verify().Layout()
	key := sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0}
	lease := sharestore.LeaseFor([]byte("secret"))
	forged := bytes.Clone(shares[0])
	binary.BigEndian.PutUint64(forged[l.TrailerOffset():], uint64(l.Segments)+1<<59)
	before := g.Nodes[0].Store().Usage()
	if _, err := c.PutShare(ctx, id, key, bytes.NewReader(forged), int64(len(forged)), lease); !errors.Is(err, sharestore.ErrCorrupt) {
		t.Fatalf("forged trailer: %v, want ErrCorrupt", err)
	}
	if u := g.Nodes[0].Store().Usage(); u.Used != before.Used || u.Shares != before.Shares {
		t.Fatalf("usage after a refused share: %+v, before %+v", u, before)
	}
	// The node is up and takes the real share.
	if _, err := c.PutShare(ctx, id, key, bytes.NewReader(shares[0]), int64(len(shares[0])), lease); err != nil {
		t.Fatal(err)
	}
}
