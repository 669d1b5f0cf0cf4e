package node_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A share PUT with a term gets a lease that ends that long after the
// node's clock; a renewal with the renew secret extends it and a wrong
// secret renews and cancels nothing; the sweep deletes a share once its
// lease has been expired for the grace period; a cancel with the cancel
// secret deletes the share at once.
func TestLeasesRenewCancelSweep(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)}
	n, c := startNode(t, node.Config{LeaseSweep: -1, LeaseGrace: time.Hour, Now: clock.Now})
	id := string(n.ID())
	enc := func() (sharestore.Key, []byte) {
		rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("l"), 3000))
		if err != nil {
			t.Fatal(err)
		}
		return sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0}, shares[0]
	}
	lease := sharestore.Lease{
		ID:      sharestore.SecretHash([]byte("renew")),
		Cancel:  sharestore.SecretHash([]byte("cancel")),
		Expires: time.Now().Add(10 * 24 * time.Hour),
	}
	k1, s1 := enc()
	k2, s2 := enc()
	for _, p := range []struct {
		k sharestore.Key
		b []byte
	}{{k1, s1}, {k2, s2}} {
		if _, err := c.PutShare(ctx, id, p.k, bytes.NewReader(p.b), int64(len(p.b)), lease); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := n.Store().Leases(ctx, k1)
	if err != nil || len(ls) != 1 || ls[0].Cancel != lease.Cancel {
		t.Fatalf("leases after PUT: %+v, %v", ls, err)
	}
	if d := ls[0].Expires.Sub(clock.Now()); d < 10*24*time.Hour-time.Minute || d > 10*24*time.Hour+time.Minute {
		t.Fatalf("lease runs %v from the node's clock, want 10 days", d)
	}
	// Strangers' secrets, and each secret in the other's place, do nothing.
	for _, wrong := range []string{"guess", "cancel"} {
		if _, err := c.RenewLeases(ctx, id, k1.SI, []byte(wrong), nil, 100*24*time.Hour); !errors.Is(err, sharestore.ErrForbidden) {
			t.Fatalf("renew with %q: %v, want forbidden", wrong, err)
		}
	}
	for _, wrong := range []string{"guess", "renew"} {
		if _, err := c.CancelLeases(ctx, id, k1.SI, []byte(wrong)); !errors.Is(err, sharestore.ErrForbidden) {
			t.Fatalf("cancel with %q: %v, want forbidden", wrong, err)
		}
	}
	if _, err := c.RenewLeases(ctx, id, [16]byte{1}, []byte("renew"), nil, time.Hour); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("renew of an object not here: %v", err)
	}
	// Renew k2's lease to 30 days; 11 days on, k1's has expired, but
	// within the grace.
	if res, err := c.RenewLeases(ctx, id, k2.SI, []byte("renew"), nil, 30*24*time.Hour); err != nil || res.Shares != 1 {
		t.Fatalf("renew: %+v, %v", res, err)
	}
	used := n.Store().Usage().Used
	clock.Add(10*24*time.Hour + 30*time.Minute)
	if sw, err := n.SweepLeases(ctx); err != nil || sw.Shares != 0 {
		t.Fatalf("sweep within the grace: %+v, %v", sw, err)
	}
	clock.Add(time.Hour)
	sw, err := n.SweepLeases(ctx)
	if err != nil || sw.Shares != 1 || sw.Bytes != int64(len(s1)) {
		t.Fatalf("sweep after the grace: %+v, %v", sw, err)
	}
	if _, err := n.Store().Open(ctx, k1); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("expired share: %v", err)
	}
	if u := n.Store().Usage().Used; u != used-int64(len(s1)) {
		t.Fatalf("%d bytes used after the sweep, want %d", u, used-int64(len(s1)))
	}
	if _, err := n.Store().Open(ctx, k2); err != nil {
		t.Fatalf("renewed share: %v", err)
	}
	// A second party adds a lease of its own: the owner's cancel then
	// leaves the share to it, and its cancel deletes it.
	other := sharestore.SecretHash([]byte("other cancel"))
	if res, err := c.RenewLeases(ctx, id, k2.SI, []byte("other renew"), &other, time.Hour); err != nil || res.Shares != 1 {
		t.Fatalf("add-lease: %+v, %v", res, err)
	}
	res, err := c.CancelLeases(ctx, id, k2.SI, []byte("cancel"))
	if err != nil || res.Shares != 1 || res.Removed != 0 {
		t.Fatalf("owner's cancel with another lease left: %+v, %v", res, err)
	}
	res, err = c.CancelLeases(ctx, id, k2.SI, []byte("other cancel"))
	if err != nil || res.Shares != 1 || res.Removed != 1 {
		t.Fatalf("cancel of the last lease: %+v, %v", res, err)
	}
	if n.Store().Usage().Used != 0 {
		t.Fatalf("%d bytes used once every share is gone", n.Store().Usage().Used)
	}
}

// Lease headers that make no sense get 400 with a reason, and nothing is
// stored or changed.
func TestLeaseHeadersNonsense(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	member, _ := identity.New(key, g.Invite.Secret)
	hc := &http.Client{Transport: member.NewTransport(nil, nil)}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("n"), 3000))
	if err != nil {
		t.Fatal(err)
	}
	si := fmt.Sprintf("%x", rc.Key.StorageIndex())
	base := "https://" + g.Nodes[0].Addr() + "/v1/shares/" + si
	id := strings.Repeat("ab", 32)
	do := func(method, path string, body []byte, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, hdr := range []map[string]string{
		{"X-Quilt-Lease": id, "X-Quilt-Lease-Seconds": "-5"},
		{"X-Quilt-Lease": id, "X-Quilt-Lease-Seconds": "soon"},
		{"X-Quilt-Lease": id, "X-Quilt-Lease-Seconds": "0"},
		{"X-Quilt-Lease": id, "X-Quilt-Lease-Seconds": "99999999999999"},
		{"X-Quilt-Lease": id, "X-Quilt-Cancel": "abc"},
		{"X-Quilt-Lease": "zz"},
	} {
		if code, body := do("PUT", "/0", shares[0], hdr); code != 400 || !strings.Contains(body, "bad_request") {
			t.Errorf("PUT with %v: %d %s", hdr, code, body)
		}
	}
	if u := g.Nodes[0].Store().Usage(); u.Shares != 0 {
		t.Fatalf("%d shares stored by nonsense", u.Shares)
	}
	if code, body := do("PUT", "/0", shares[0], map[string]string{"X-Quilt-Lease": id, "X-Quilt-Lease-Seconds": "60"}); code != 201 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	for _, c := range []struct {
		path string
		hdr  map[string]string
	}{
		{"/renew", map[string]string{"X-Quilt-Secret": "00"}},                                                       // no term
		{"/renew", map[string]string{"X-Quilt-Secret": "00", "X-Quilt-Lease-Seconds": "x"}},                         // bad term
		{"/renew", map[string]string{"X-Quilt-Lease-Seconds": "60"}},                                                // no secret
		{"/renew", map[string]string{"X-Quilt-Secret": "00", "X-Quilt-Lease-Seconds": "60", "X-Quilt-Cancel": "0"}}, // bad cancel hash
		{"/cancel", map[string]string{"X-Quilt-Secret": "not hex"}},
	} {
		if code, body := do("POST", c.path, nil, c.hdr); code != 400 || !strings.Contains(body, "bad_request") {
			t.Errorf("POST %s with %v: %d %s", c.path, c.hdr, code, body)
		}
	}
	ls, err := g.Nodes[0].Store().Leases(context.Background(), sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0})
	if err != nil || len(ls) != 1 {
		t.Fatalf("leases after nonsense: %+v, %v", ls, err)
	}
}
