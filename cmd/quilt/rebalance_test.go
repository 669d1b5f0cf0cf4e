package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
)

// rebalanceTestArgs are the flags of the nodes of the rebalancing test:
// small capacities, so that the data fills them by half, and repair (so
// rebalancing) passes every half second at the default budget.
var rebalanceTestArgs = []string{"--capacity", "16MiB", "--repair-every", "500ms", "--rebalance-min-age", "1s"}

// Add a node (issue 22, "what it must show" (4)): a grid of six real
// processes in three zones is half full when a seventh node joins, in
// one of the zones; within a bound, the others move shares onto it
// until it holds near its share of the data (space spread by capacity,
// equal here), while every object reads, keeps its shares on at least
// its happiness of distinct nodes, and on no fewer zones than before.
// With --rebalance=false the new node receives nothing, and this fails.
func TestRebalanceNewNodeProcesses(t *testing.T) {
	zones := []string{"a", "a", "b", "b", "c", "c", "c"}
	g := startTestGridFunc(t, 6, func(i int) []string {
		return append([]string{"--zone", zones[i]}, rebalanceTestArgs...)
	})
	t.Cleanup(func() {
		if t.Failed() {
			for i := range g.procs {
				b, _ := os.ReadFile(g.nodeDir(i) + ".log")
				t.Logf("node %d's log:\n%s", i, b)
			}
		}
	})
	// A bad setting is refused before the node starts.
	bad := exec.Command(g.bin, "node", "--data", filepath.Join(g.base, "bad"), "--rebalance-spread", "2")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "--rebalance-spread 2: want a fraction") {
		t.Fatalf("quilt node --rebalance-spread 2: %v\n%s", err, out)
	}
	const objects, size, k, n = 48, 512 << 10, 2, 4
	var rcs []string
	var vcs []codec.VerifyCap
	var data [][]byte
	for range objects {
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
		_, after, _ := strings.Cut(errOut, "verify capability (checks and repairs, cannot read): ")
		vc, err := codec.ParseVerifyCap(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		if err != nil {
			t.Fatalf("put -v printed no verify capability: %v\n%s", err, errOut)
		}
		rcs, vcs, data = append(rcs, strings.TrimSpace(out)), append(vcs, vc), append(data, b)
	}
	// spread returns, for object j, on how many distinct nodes and zones
	// its shares are, and how many share files there are.
	spread := func(j int) (nodes, zs, files int) {
		seen := map[string]bool{}
		for i := range g.procs {
			if f := len(shareFiles(t, g, i, vcs[j])); f > 0 {
				nodes++
				files += f
				seen[zones[i]] = true
			}
		}
		return nodes, len(seen), files
	}
	// The six may move shares among themselves as they fill (rendezvous
	// placement is uneven); wait until no move is under way (the share
	// files stay the same for two seconds).
	zonesBefore := make([]int, objects)
	filesBefore := make([]int, objects)
	snapshot := func() string {
		var b strings.Builder
		for j := range objects {
			for i := range g.procs {
				fmt.Fprintf(&b, "%d,", len(shareFiles(t, g, i, vcs[j])))
			}
		}
		return b.String()
	}
	settle := time.Now().Add(30 * time.Second)
	for last, since := snapshot(), time.Now(); time.Since(since) < 2*time.Second; {
		if time.Now().After(settle) {
			t.Fatal("the six nodes still move shares after 30 s")
		}
		time.Sleep(200 * time.Millisecond)
		if now := snapshot(); now != last {
			last, since = now, time.Now()
		}
	}
	for j := range objects {
		var nodes int
		nodes, zonesBefore[j], filesBefore[j] = spread(j)
		if nodes < n {
			t.Fatalf("object %d on %d nodes, want at least %d", j, nodes, n)
		}
	}
	total := g.shareBytes(t, 6)
	g.startNode(append([]string{"--zone", zones[6]}, rebalanceTestArgs...)...)
	g.waitAlive(7)
	fair := total / 7
	newBytes := func() int64 {
		before := g.shareBytes(t, 6)
		return g.shareBytes(t, 7) - before
	}
	// Within a bound, the new node holds near its share: each of the six
	// senders stops within a tenth of the spread (the default, 0.05) above
	// the grid's fraction of its 16 MiB, and moves whole shares of its part
	// of the new node's room, so each may stop that margin and two shares
	// short. The test waits until the new node holds that much and has
	// received nothing more for 5 s (rebalancing has settled), or holds
	// 90% of its share. Every object reads meanwhile, one in turn.
	short := int64(6 * (2*size/k + (16<<20)/200))
	deadline := time.Now().Add(90 * time.Second)
	last, grew := int64(-1), time.Now()
	for j := 0; ; j++ {
		got := newBytes()
		if got != last {
			last, grew = got, time.Now()
		}
		if got >= fair*9/10 || got >= fair-short && time.Since(grew) > 5*time.Second {
			t.Logf("the new node holds %d of a fair %d bytes after %d reads", got, fair, j)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new node holds %d bytes; its share of the data is %d", got, fair)
		}
		out, _, err := g.quilt(nil, "get", rcs[j%objects])
		if err != nil || !bytes.Equal([]byte(out), data[j%objects]) {
			t.Fatalf("object %d does not read while the grid rebalances: %v", j%objects, err)
		}
	}
	if got := newBytes(); got > fair+int64(size/k) {
		t.Fatalf("the new node holds %d bytes, more than its share %d and a share", got, fair)
	}
	for j := range objects {
		nodes, zs, files := spread(j)
		// A move under way may show a share twice for a moment, and
		// rarely a move keeps both copies (see internal/repairer).
		if nodes < n || files > filesBefore[j]+1 || zs < zonesBefore[j] {
			t.Fatalf("object %d: %d share files on %d nodes in %d zones (before: %d zones)", j, files, nodes, zs, zonesBefore[j])
		}
		out, _, err := g.quilt(nil, "get", rcs[j])
		if err != nil || !bytes.Equal([]byte(out), data[j]) {
			t.Fatalf("object %d does not read after rebalancing: %v", j, err)
		}
	}
}
