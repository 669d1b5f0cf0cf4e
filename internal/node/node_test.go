package node_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// Errors keep their kind across the wire, so a client can act on them.
func TestAPIErrorsKeepTheirKind(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1, Capacity: func(int) int64 { return 64 << 10 }})
	c := g.NodeClient()
	ctx := context.Background()
	if _, err := c.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	id := string(g.Nodes[0].ID())
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("x"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	key := sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0}
	lease := sharestore.LeaseFor([]byte("secret"))

	if _, err := c.GetShare(ctx, id, key, 0, 10); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("missing share: %v", err)
	}
	bad := bytes.Clone(shares[0])
	bad[20] ^= 1 // the header names another object
	if _, err := c.PutShare(ctx, id, key, bytes.NewReader(bad), int64(len(bad)), lease); !errors.Is(err, sharestore.ErrCorrupt) {
		t.Fatalf("corrupt share: %v", err)
	}
	if _, err := c.PutShare(ctx, id, key, bytes.NewReader(shares[0]), int64(len(shares[0])), lease); err != nil {
		t.Fatal(err)
	}
	r, err := c.GetShare(ctx, id, key, 64, 100)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, shares[0][64:164]) {
		t.Fatalf("range read: %d bytes, wrong content", len(got))
	}
	if err := c.DeleteShare(ctx, id, key, []byte("guess")); !errors.Is(err, sharestore.ErrForbidden) {
		t.Fatalf("delete with the wrong secret: %v", err)
	}
	big := make([]byte, 1<<20)
	if _, err := c.PutShare(ctx, id, sharestore.Key{SI: key.SI, Share: 1}, bytes.NewReader(big), int64(len(big)), lease); !errors.Is(err, sharestore.ErrFull) {
		t.Fatalf("share over capacity: %v", err)
	}
	if err := c.DeleteShare(ctx, id, key, []byte("secret")); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// A share with a damaged block is stored as it came by a node that checks
// only the frame (readers and scrub find the block), and refused at once
// by a node made to check blocks.
func TestDamagedBlockOnUpload(t *testing.T) {
	ctx := context.Background()
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("z"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	key := sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0}
	bad := bytes.Clone(shares[0])
	bad[100] ^= 1 // in the first block
	for _, check := range []bool{false, true} {
		g := testgrid.New(t, testgrid.Options{Nodes: 1, CheckBlocks: check})
		c := g.NodeClient()
		if _, err := c.Members(ctx, 0); err != nil {
			t.Fatal(err)
		}
		id := string(g.Nodes[0].ID())
		_, err := c.PutShare(ctx, id, key, bytes.NewReader(bad), int64(len(bad)), sharestore.LeaseFor([]byte("s")))
		switch {
		case check && !errors.Is(err, sharestore.ErrCorrupt):
			t.Errorf("node checking blocks: %v, want ErrCorrupt", err)
		case !check && err != nil:
			t.Errorf("node checking the frame: %v", err)
		}
		_, err = c.GetShare(ctx, id, key, 0, 10)
		if stored := err == nil; stored == check {
			t.Errorf("check blocks %v: share stored %v (%v)", check, stored, err)
		}
	}
}

// A client of another grid is refused at the TLS handshake; malformed
// requests from a member get 400 with a reason.
func TestAPIRefusesStrangersAndNonsense(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := identity.NewSecret()
	stranger, err := identity.New(key, other)
	if err != nil {
		t.Fatal(err)
	}
	sc := node.NewClient(identity.Invite{Secret: other, Addrs: []string{g.Nodes[0].Addr()}}, stranger)
	if _, err := sc.Members(context.Background(), 0); !errors.Is(err, node.ErrNoGrid) {
		t.Fatalf("stranger: %v", err)
	}

	member, _ := identity.New(key, g.Invite.Secret)
	hc := &http.Client{Transport: member.NewTransport(nil, nil)}
	for _, path := range []string{"/v1/shares/zz", "/v1/shares/00112233445566778899aabbccddeeff/300", "/v1/shares/0011/1"} {
		resp, err := hc.Get("https://" + g.Nodes[0].Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "bad_request") {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest("PUT", "https://"+g.Nodes[0].Addr()+"/v1/shares/00112233445566778899aabbccddeeff/1", strings.NewReader("x"))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("PUT without a lease: %d", resp.StatusCode)
	}
}

// A share body that writes itself (io.WriterTo) goes chunked with its size
// in X-Quilt-Size; the node holds the body to that size exactly, and
// refuses a size header that makes no sense.
func TestChunkedShareSize(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	c := g.NodeClient()
	ctx := context.Background()
	if _, err := c.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	id := string(g.Nodes[0].ID())
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("y"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	si := rc.Key.StorageIndex()
	lease := sharestore.LeaseFor([]byte("secret"))
	share := shares[0]
	key := sharestore.Key{SI: si, Share: 0}

	// A reader with WriteTo (but not one whose length net/http knows):
	// sent chunked. Announced longer or shorter than what comes, it is
	// refused as corrupt, and nothing is stored.
	type writerTo struct{ *bytes.Reader }
	for _, announced := range []int64{int64(len(share)) + 1, int64(len(share)) - 1} {
		if _, err := c.PutShare(ctx, id, key, writerTo{bytes.NewReader(share)}, announced, lease); !errors.Is(err, sharestore.ErrCorrupt) {
			t.Errorf("share of %d bytes announced as %d: %v", len(share), announced, err)
		}
	}
	if _, err := c.GetShare(ctx, id, key, 0, 10); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("after refused uploads: %v", err)
	}
	// Right size, chunked: stored.
	if _, err := c.PutShare(ctx, id, key, writerTo{bytes.NewReader(share)}, int64(len(share)), lease); err != nil {
		t.Fatal(err)
	}
	// A body without WriteTo goes with a Content-Length, as before.
	plain := struct{ io.Reader }{bytes.NewReader(shares[1])}
	if _, err := c.PutShare(ctx, id, sharestore.Key{SI: si, Share: 1}, plain, int64(len(shares[1])), lease); err != nil {
		t.Fatal(err)
	}

	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	member, _ := identity.New(priv, g.Invite.Secret)
	hc := &http.Client{Transport: member.NewTransport(nil, nil)}
	for _, tc := range []struct {
		size   string
		length int64 // Content-Length; -1: chunked
	}{{"ten", -1}, {"-5", -1}, {"3", 4}} {
		req, _ := http.NewRequest("PUT", "https://"+g.Nodes[0].Addr()+"/v1/shares/00112233445566778899aabbccddeeff/1", struct{ io.Reader }{strings.NewReader("abcd")})
		req.ContentLength = tc.length
		req.Header.Set("X-Quilt-Lease", strings.Repeat("00", 32))
		req.Header.Set("X-Quilt-Size", tc.size)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "X-Quilt-Size") {
			t.Errorf("X-Quilt-Size %q with Content-Length %d: %d %s", tc.size, tc.length, resp.StatusCode, body)
		}
	}
}
