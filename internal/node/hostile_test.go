package node_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
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

// startNode starts a lone node with cfg (Dir and Listen filled in) and a
// client of its grid that knows it.
func startNode(t *testing.T, cfg node.Config) (*node.Node, *node.Client) {
	t.Helper()
	cfg.Dir, cfg.Listen, cfg.TuneGossip = t.TempDir(), "127.0.0.1:0", testgrid.FastGossip
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	id, err := identity.New(key, n.Invite().Secret)
	if err != nil {
		t.Fatal(err)
	}
	c := node.NewClient(n.Invite(), id)
	if _, err := c.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	return n, c
}

// waitFor polls cond every 10 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A peer that announces a share, sends a little of it and stalls loses
// the upload once the body has made no progress for the node's
// BodyStall: the space it reserved is free again, and a share that needs
// it goes in.
func TestStalledUploadReleasesSpace(t *testing.T) {
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 64 << 10}, codec.NewKey(), bytes.Repeat([]byte("s"), 2<<20))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(shares[0]))
	capacity := size + size/2 // room for one share, not two
	n, c := startNode(t, node.Config{Capacity: capacity, BodyStall: 300 * time.Millisecond})
	ctx := context.Background()
	id := string(n.ID())
	si := rc.Key.StorageIndex()
	lease := sharestore.LeaseFor([]byte("secret"))

	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	stalled := make(chan error, 1)
	go func() {
		_, err := c.PutShare(ctx, id, sharestore.Key{SI: si, Share: 1}, pr, size, lease)
		stalled <- err
	}()
	if _, err := pw.Write(shares[1][:64<<10]); err != nil {
		t.Fatal(err)
	}
	// The share's whole size is reserved while it arrives...
	waitFor(t, 5*time.Second, "space reserved for the announced share", func() bool {
		return n.Store().Usage().Free < size
	})
	// ...and released once it stalls.
	waitFor(t, 5*time.Second, "space released after the stall", func() bool {
		u := n.Store().Usage()
		return u.Free >= capacity && u.Used == 0
	})
	select {
	case err := <-stalled:
		if err == nil {
			t.Fatal("a stalled upload was stored")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled upload's PUT did not end")
	}
	if _, err := c.PutShare(ctx, id, sharestore.Key{SI: si, Share: 0}, bytes.NewReader(shares[0]), size, lease); err != nil {
		t.Fatalf("a share that needs the released space: %v", err)
	}
	// An upload that keeps going, taking longer than the limit in all
	// but never stalling that long, is not cut off: the limit is on
	// progress, not on the whole body.
	if err := c.DeleteShare(ctx, id, sharestore.Key{SI: si, Share: 0}, []byte("secret")); err != nil {
		t.Fatal(err)
	}
	pr2, pw2 := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := c.PutShare(ctx, id, sharestore.Key{SI: si, Share: 1}, pr2, size, lease)
		done <- err
	}()
	go func() {
		rest := shares[1]
		for len(rest) > 0 {
			m := min(len(rest), len(shares[1])/5+1)
			if _, err := pw2.Write(rest[:m]); err != nil {
				return
			}
			rest = rest[m:]
			time.Sleep(100 * time.Millisecond)
		}
		pw2.Close()
	}()
	if err := <-done; err != nil {
		t.Fatalf("a slow upload that never stalled: %v", err)
	}
}

// A connection that sends nothing is closed after the node's
// HeaderTimeout.
func TestSilentConnectionClosed(t *testing.T) {
	n, _ := startNode(t, node.Config{HeaderTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the node kept a silent connection open for 10 s")
	}
	if err == nil {
		t.Fatal("the node sent bytes to a connection that said nothing")
	}
}
