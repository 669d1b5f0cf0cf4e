package keystone_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T) (*gateway.Gateway, *keystone.Service, *clock) {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	gw, err := gateway.Open(context.Background(), gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(),
		Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	c := &clock{t: time.Now()}
	return gw, keystone.New(gw, keystone.Config{Now: c.Now, Cost: bcrypt.MinCost, TokenTTL: time.Minute}), c
}

// TestProjectsAndUsers: names are checked, duplicates refused, a user
// needs its project and a password of at most 72 bytes; a deleted user
// cannot log in; passwords are kept hashed.
func TestProjectsAndUsers(t *testing.T) {
	gw, ids, _ := open(t)
	ctx := context.Background()
	k, err := gw.CreateKey(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", "a:b", ".x", strings.Repeat("a", 65), "a b"} {
		if _, err := ids.AddProject(ctx, bad, k.ID); !errors.Is(err, keystone.ErrBadName) {
			t.Errorf("project %q: %v", bad, err)
		}
	}
	if _, err := ids.AddProject(ctx, "p", "QKNOSUCHKEY"); err == nil {
		t.Error("project with an unknown access key made")
	}
	p, err := ids.AddProject(ctx, "p", k.ID)
	if err != nil || p.Key != k.ID || !strings.HasPrefix(p.Account(), "AUTH_") {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := ids.AddProject(ctx, "p", k.ID); !errors.Is(err, keystone.ErrExists) {
		t.Errorf("second project p: %v", err)
	}
	if _, _, err := ids.AddUser(ctx, "nope", "u", "pw"); !errors.Is(err, keystone.ErrNoProject) {
		t.Errorf("user of a missing project: %v", err)
	}
	if _, _, err := ids.AddUser(ctx, "p", "u", strings.Repeat("x", 73)); err == nil {
		t.Error("73-byte password taken")
	}
	u, pw, err := ids.AddUser(ctx, "p", "u", "")
	if err != nil || len(pw) < 16 || strings.Contains(u.Hash, pw) {
		t.Fatalf("%+v %q %v", u, pw, err)
	}
	if _, _, err := ids.AddUser(ctx, "p", "u", "x"); !errors.Is(err, keystone.ErrExists) {
		t.Errorf("second user p:u: %v", err)
	}
	if _, _, err := ids.Authenticate(ctx, "p", "u", pw, "password"); err != nil {
		t.Fatal(err)
	}
	if err := ids.DeleteUser(ctx, "p", "u"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ids.Authenticate(ctx, "p", "u", pw, "password"); !errors.Is(err, keystone.ErrUnauthorized) {
		t.Errorf("deleted user logged in: %v", err)
	}
	if err := ids.DeleteUser(ctx, "p", "u"); err == nil {
		t.Error("deleting a missing user succeeded")
	}
}

// TestTokensExpireAndPrune: a token is refused once its time is up, and
// Prune removes the records of expired tokens only.
func TestTokensExpireAndPrune(t *testing.T) {
	gw, ids, c := open(t)
	ctx := context.Background()
	k, _ := gw.CreateKey(ctx, true, nil)
	if _, err := ids.AddProject(ctx, "p", k.ID); err != nil {
		t.Fatal(err)
	}
	_, pw, err := ids.AddUser(ctx, "p", "u", "")
	if err != nil {
		t.Fatal(err)
	}
	_, old, err := ids.Authenticate(ctx, "p", "u", pw, "password")
	if err != nil {
		t.Fatal(err)
	}
	c.add(50 * time.Second)
	_, fresh, err := ids.Authenticate(ctx, "p", "u", pw, "password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Verify(ctx, old); err != nil {
		t.Fatalf("token before expiry: %v", err)
	}
	c.add(20 * time.Second)
	if n, err := ids.Prune(ctx); err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if _, err := ids.Verify(ctx, old); !errors.Is(err, keystone.ErrUnauthorized) {
		t.Errorf("expired token: %v", err)
	}
	if _, err := ids.Verify(ctx, fresh); err != nil {
		t.Errorf("fresh token: %v", err)
	}
	if _, err := ids.Verify(ctx, "short"); !errors.Is(err, keystone.ErrUnauthorized) {
		t.Errorf("garbage token: %v", err)
	}
}

// TestEndpoints: an endpoint needs a region and a public URL; the same
// URL registered again is one entry.
func TestEndpoints(t *testing.T) {
	_, ids, _ := open(t)
	ctx := context.Background()
	if es, err := ids.Endpoints(ctx); err != nil || len(es) != 0 {
		t.Fatalf("no endpoint yet: %+v %v", es, err)
	}
	if _, err := ids.Register(ctx, keystone.Endpoint{Region: "", Public: "http://x"}); err == nil {
		t.Error("endpoint without a region")
	}
	if _, err := ids.Register(ctx, keystone.Endpoint{Region: "r1"}); err == nil {
		t.Error("endpoint without a URL")
	}
	a, err := ids.Register(ctx, keystone.Endpoint{Region: "r1", Public: "http://a"})
	if err != nil || a.Internal != "http://a" {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := ids.Register(ctx, keystone.Endpoint{Region: "r1", Public: "http://a", Internal: "http://a.internal"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Register(ctx, keystone.Endpoint{Region: "r2", Public: "http://b"}); err != nil {
		t.Fatal(err)
	}
	es, err := ids.Endpoints(ctx)
	if err != nil || len(es) != 2 || es[0].Internal != "http://a.internal" || es[1].Region != "r2" {
		t.Fatalf("%+v %v", es, err)
	}
	if err := ids.Unregister(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if es, _ := ids.Endpoints(ctx); len(es) != 1 {
		t.Fatalf("after unregister: %+v", es)
	}
}
