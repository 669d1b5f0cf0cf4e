package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
)

// repairGridArgs are the node flags of the repair tests: a scrub pass a
// second, a repair pass every 300 ms.
var repairGridArgs = []string{"--scrub-every", "1s", "--repair-every", "300ms", "--repair-budget", "4MiB"}

// gridClient returns a node client of g's grid with an identity of its
// own, as a client machine has.
func gridClient(t *testing.T, g *testGrid) *node.Client {
	t.Helper()
	inv, err := identity.ParseInvite(g.invite)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.New(key, inv.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return node.NewClient(inv, id)
}

// putForRepair stores random bytes with quilt put -v and returns the
// read and verify capabilities.
func putForRepair(t *testing.T, g *testGrid, size, k, n int) (string, codec.VerifyCap) {
	t.Helper()
	b := make([]byte, size)
	rand.Read(b)
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := g.quilt(nil, "put", "-v", "-k", itoa(k), "-n", itoa(n), "--happy", itoa(n), "--segment-size", "64KiB", file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(errOut, "verify capability (checks and repairs, cannot read): ")
	if !ok {
		t.Fatalf("put -v printed no verify capability:\n%s", errOut)
	}
	vc, err := codec.ParseVerifyCap(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out), vc
}

func itoa(i int) string { return strconv.Itoa(i) }

// shareFiles returns the files of node i's shares of the object.
func shareFiles(t *testing.T, g *testGrid, i int, vc codec.VerifyCap) []string {
	t.Helper()
	si := hex.EncodeToString(vc.SI[:])
	m, err := filepath.Glob(filepath.Join(g.nodeDir(i), "store", "shares", si[:2], si+".*"))
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

// waitVerified waits, within a bound, until quilt check --verify of every
// object exits 0: every share has a good copy and no copy found is bad.
func waitVerified(t *testing.T, g *testGrid, vcs []codec.VerifyCap, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, vc := range vcs {
		for {
			out, _, err := g.quilt(nil, "check", "--verify", vc.String())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("object %x not whole after %v: %v\n%s", vc.SI[:4], within, err, out)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}

// A node of a grid of real processes stops for good: the other nodes'
// repairers, which hold only the verify capabilities that quilt put
// registered with them (never a read capability), bring every object
// back to n good shares.
func TestRepairAfterNodeLostProcesses(t *testing.T) {
	g := startTestGridArgs(t, 5, repairGridArgs...)
	var vcs []codec.VerifyCap
	var rcs []string
	for range 3 {
		rc, vc := putForRepair(t, g, 200<<10, 2, 4)
		rcs, vcs = append(rcs, rc), append(vcs, vc)
	}
	waitVerified(t, g, vcs, 10*time.Second)
	// Every node's registry (GET /v1/repair) has the verify
	// capabilities, no read one.
	nc := gridClient(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms, err := nc.Members(ctx, 0)
	if err != nil || len(ms) != 5 {
		t.Fatalf("members: %d, %v", len(ms), err)
	}
	for _, m := range ms {
		entries, err := nc.Registry(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(entries, "\n")
		for j, vc := range vcs {
			if !slices.Contains(entries, vc.String()) || strings.Contains(all, rcs[j]) {
				t.Fatalf("node %.8s's registry lacks object %d's verify capability, or has its read capability:\n%s", m.ID, j, all)
			}
		}
	}
	victim := -1
	for i := range 5 {
		if len(shareFiles(t, g, i, vcs[0])) > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no node holds a share of the first object")
	}
	g.killNode(victim)
	waitVerified(t, g, vcs, 50*time.Second)
	for _, vc := range vcs {
		shares := 0
		for i := range 5 {
			if i != victim {
				shares += len(shareFiles(t, g, i, vc))
			}
		}
		if shares < vc.N {
			t.Fatalf("object %x has %d shares on the live nodes, want %d", vc.SI[:4], shares, vc.N)
		}
	}
}

// Bits flipped in shares on three nodes of a grid of real processes: each
// node's scheduled scrub finds its damaged share, and repair replaces it,
// so quilt check --verify passes again.
func TestScrubRepairBitFlipsProcesses(t *testing.T) {
	g := startTestGridArgs(t, 5, repairGridArgs...)
	_, vc := putForRepair(t, g, 300<<10, 2, 5)
	waitVerified(t, g, []codec.VerifyCap{vc}, 10*time.Second)
	for i := range 3 {
		files := shareFiles(t, g, i, vc)
		if len(files) == 0 {
			t.Fatalf("node %d holds no share", i)
		}
		f, err := os.OpenFile(files[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Past the 128-byte record and the share's header, inside a block.
		b := make([]byte, 1)
		off := int64(128 + 4096 + 1000)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for i := range 3 {
		deadline := time.Now().Add(20 * time.Second)
		for {
			log, _ := os.ReadFile(g.nodeDir(i) + ".log")
			if strings.Contains(string(log), "scrub found a damaged share") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d's scrub did not report its damaged share:\n%s", i, log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitVerified(t, g, []codec.VerifyCap{vc}, 30*time.Second)
}
