package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
	"github.com/quilt-grid/quilt/internal/linkemu"
)

// TestClusterUnderLinks: a client's object traffic passes through its
// host's emulated uplink: a 512 KiB object (1.7 MB of shares) takes at
// least the time a 1 MB/s uplink needs, and reads back intact.
func TestClusterUnderLinks(t *testing.T) {
	sc := scenario.LAN(10)
	for i := range sc.Nodes {
		if sc.Nodes[i].Role == scenario.RoleClient {
			sc.Nodes[i].Up = 1_000_000
		}
	}
	ctx := context.Background()
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, oc, err := cl.Client("client")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 512<<10)
	rand.Read(data)
	start := time.Now()
	rc, _, err := oc.Put(ctx, bytes.NewReader(data), int64(len(data)), codec.DefaultParams(), 7)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// 10 shares of a third of the data each: 10/3 * 512 KiB = 1.75 MB.
	if min := 1600 * time.Millisecond; took < min {
		t.Errorf("put of 512 KiB through a 1 MB/s uplink took %v, want >= %v", took, min)
	}
	var got bytes.Buffer
	if _, err := oc.Get(ctx, rc, &got, 0, -1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("read back different bytes")
	}
	if _, _, err := cl.Client("nobody"); err == nil {
		t.Error("a client at a node the scenario lacks was made")
	}
}

// TestWriteConvergesUnderDelay: on 5 nodes with 300 ms one way between
// any two, a write takes at least one delay to reach them all, and does.
func TestWriteConvergesUnderDelay(t *testing.T) {
	const n = 5
	adm := newAdmissions(n)
	sc := scenario.LAN(n)
	sc.Default = linkemu.Link{Delay: 300 * time.Millisecond}
	ctx := context.Background()
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: t.TempDir(), Namespaces: true, OnAdmit: adm.onAdmit})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	for _, cn := range cl.Nodes {
		if err := cn.DB.Open(ns, &key, dag.ConfigRules); err != nil {
			t.Fatal(err)
		}
	}
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	if err := commitEverywhere(ctx, cl, ns, [][]byte{root.Encode()}, adm); err != nil {
		t.Fatal(err)
	}
	e := w.Entry(dag.Write, root.Hash(), nil, "f", []byte("x"))
	d, err := timeWrite(ctx, cl.Nodes[2], ns, e, time.Minute, adm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("write reached all %d nodes in %v", n, d)
	if d < 300*time.Millisecond {
		t.Errorf("write reached all nodes in %v over 300 ms links", d)
	}
}

// TestPutGetDelQuick runs the put-get-del experiment's quick variant on
// kreonet and checks its outputs: every case present, nothing failed,
// and the added latency slows small PUTs down.
func TestPutGetDelQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment (about 20 s)")
	}
	out := t.TempDir()
	env := &Env{Quick: true, Out: out, Work: t.TempDir(), Seed: 1}
	if err := Run(context.Background(), "put-get-del", env); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"put-get-del.csv", "put-get-del.md", "put-get-del-put.png", "put-get-del-get.png", "put-get-del-del.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", f, err)
		}
	}
	f, err := os.Open(filepath.Join(out, "put-get-del.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + len(putGetDelDelays(true))*len(putGetDelSizes(true)); len(rows) != want {
		t.Fatalf("%d CSV rows, want %d", len(rows), want)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	putAt := map[string]float64{}
	for _, r := range rows[1:] {
		if r[col["failed"]] != "0" {
			t.Errorf("case %v: failures", r)
		}
		if r[col["bytes"]] == "10" {
			v, _ := strconv.ParseFloat(r[col["PUT/s"]], 64)
			putAt[r[col["added latency"]]] = v
		}
	}
	fast, slow := putAt["0"], putAt[fmt.Sprint((50*time.Millisecond).Seconds())]
	t.Logf("10 B PUT/s: %.0f with no added latency, %.0f with 50 ms", fast, slow)
	if fast == 0 || slow == 0 || slow >= fast {
		t.Errorf("10 B PUT/s with 50 ms added (%v) not below that with none (%v): %v", slow, fast, putAt)
	}
}

// TestRunUnknown: a wrong experiment name is a clear error.
func TestRunUnknown(t *testing.T) {
	err := Run(context.Background(), "nope", &Env{Out: t.TempDir(), Work: t.TempDir()})
	if err == nil {
		t.Fatal("unknown experiment ran")
	}
	t.Log(err)
}

// TestConvergenceRefusesScenario: convergence makes its own network, so
// a scenario given to it is an error, not silently ignored.
func TestConvergenceRefusesScenario(t *testing.T) {
	sc, err := scenario.Builtin("qmpsu")
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), "convergence", &Env{Scenario: sc, Out: t.TempDir(), Work: t.TempDir()})
	if err == nil {
		t.Fatal("convergence ran on qmpsu")
	}
	t.Log(err)
}

// --helper names a storage node of the scenario, or best-node (the one
// with the fastest uplink), for a client of the scenario; anything else
// is a clear error.
func TestHelperOf(t *testing.T) {
	sc, err := scenario.Builtin("qmpsu")
	if err != nil {
		t.Fatal(err)
	}
	var fastest string
	var up int64 = -1
	for _, s := range sc.Role("storage") {
		if s.Up > up {
			fastest, up = s.Name, s.Up
		}
	}
	for _, tc := range []struct{ helper, for_, node, client, err string }{
		{"", "", "", "", ""},
		{"best-node", "", fastest, "worst", ""},
		{"s05", "best", "s05", "best", ""},
		{"nosuch", "", "", "", "no such storage node"},
		{"best", "", "", "", "no such storage node"},
		{"s05", "nobody", "", "", "no such client"},
	} {
		node, client, err := helperOf(&Env{Scenario: sc, Helper: tc.helper, HelperFor: tc.for_})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--helper %q --helper-for %q: %v, want an error with %q", tc.helper, tc.for_, err, tc.err)
			}
			continue
		}
		if err != nil || node != tc.node || client != tc.client {
			t.Errorf("--helper %q --helper-for %q: %q %q %v, want %q %q", tc.helper, tc.for_, node, client, err, tc.node, tc.client)
		}
	}
}
