package main

import (
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
)

// allShareFiles returns the files of every share node i holds.
func allShareFiles(t *testing.T, g *testGrid, i int) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(g.nodeDir(i), "store", "shares", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m {
		if !strings.HasSuffix(f, ".leases") {
			out = append(out, f)
		}
	}
	return out
}

// A node of a grid of six real processes is drained: it ends holding no
// share, says it is safe to turn off, takes no new shares, and every
// object still reads and checks with all n shares healthy, on the other
// nodes, with the owner's leases (quilt rm still deletes the moved
// shares).
func TestNodeDrainProcesses(t *testing.T) {
	g := startTestGrid(t, 6)
	var vcs []codec.VerifyCap
	var rcs []string
	for range 4 {
		rc, vc := putForRepair(t, g, 150<<10, 2, 4)
		rcs, vcs = append(rcs, rc), append(vcs, vc)
	}
	victim := -1
	for i := range 6 {
		if len(shareFiles(t, g, i, vcs[0])) > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no node holds a share of the first object")
	}
	held := len(allShareFiles(t, g, victim))
	key, err := identity.LoadOrCreateKey(g.nodeDir(victim))
	if err != nil {
		t.Fatal(err)
	}
	id := identity.IDFromPublicKey(key.Public().(ed25519.PublicKey)).String()

	if _, _, err := g.quilt(nil, "node", "drain", "--timeout", "5s", "ffffnotanode"); err == nil || !strings.Contains(err.Error(), "no member") {
		t.Fatalf("drain of an unknown node: %v", err)
	}
	out, _, err := g.quilt(nil, "node", "drain", "--timeout", "40s", id[:12])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "safe to turn off") {
		t.Fatalf("drain did not say it is safe to turn off:\n%s", out)
	}
	if left := allShareFiles(t, g, victim); len(left) != 0 {
		t.Fatalf("the drained node still holds %d of its %d shares", len(left), held)
	}
	// The grid learns that it drains (gossip), and then gives it no new
	// shares: a put of five shares, each on its own node, goes to the
	// five others.
	deadline := time.Now().Add(10 * time.Second)
	for {
		nodes, _, err := g.quilt(nil, "nodes")
		if err == nil && strings.Count(nodes, "alive,draining") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quilt nodes does not show the node draining: %v\n%s", err, nodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, err := g.quilt([]byte(strings.Repeat("x", 100<<10)), "put", "-k", "2", "-n", "5", "--happy", "5", "-"); err != nil {
		t.Fatalf("a put onto the five other nodes: %v", err)
	}
	if got := allShareFiles(t, g, victim); len(got) != 0 {
		t.Fatalf("the drained node took %d new shares", len(got))
	}
	for j, vc := range vcs {
		out, _, err := g.quilt(nil, "check", "--verify", vc.String())
		if err != nil {
			t.Fatalf("object %d after the drain: %v\n%s", j, err, out)
		}
		shares := 0
		for i := range 6 {
			shares += len(shareFiles(t, g, i, vc))
		}
		if shares < vc.N {
			t.Fatalf("object %d has %d share files, want %d", j, shares, vc.N)
		}
		if _, _, err := g.quilt(nil, "get", rcs[j]); err != nil {
			t.Fatalf("object %d does not read after the drain: %v", j, err)
		}
	}
	// The moved shares kept the owner's lease: quilt rm deletes them all.
	if _, _, err := g.quilt(nil, "rm", rcs[0]); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		n := 0
		for i := range 6 {
			n += len(shareFiles(t, g, i, vcs[0]))
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quilt rm left %d shares of the first object", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
