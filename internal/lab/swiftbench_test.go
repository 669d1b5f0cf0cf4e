package lab

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// TestSwiftBenchRegistered: the experiment is listed, on kreonet by
// default, and its full variant has the paper's sizes (100 kB … 100 MB)
// and latencies (0 … 50 ms); the quick one is a subset of each.
func TestSwiftBenchRegistered(t *testing.T) {
	i := slices.IndexFunc(Experiments(), func(e Experiment) bool { return e.Name == "swift-bench" })
	if i < 0 {
		t.Fatal("no swift-bench experiment")
	}
	if e := Experiments()[i]; e.Scenario != "kreonet" || e.Run == nil {
		t.Errorf("swift-bench: scenario %q", e.Scenario)
	}
	if got := swiftBenchSizes(false); !slices.Equal(got, []int64{100_000, 1_000_000, 10_000_000, 100_000_000}) {
		t.Errorf("sizes %v", got)
	}
	if got := swiftBenchDelays(false); got[0] != 0 || got[len(got)-1] != 50*time.Millisecond {
		t.Errorf("delays %v", got)
	}
	for _, s := range swiftBenchSizes(true) {
		if !slices.Contains(swiftBenchSizes(false), s) {
			t.Errorf("quick size %d not among the full ones", s)
		}
	}
	for _, d := range swiftBenchDelays(true) {
		if !slices.Contains(swiftBenchDelays(false), d) {
			t.Errorf("quick delay %v not among the full ones", d)
		}
	}
	if l := swiftBenchLimit(100_000_000, benchObjects, benchGets); l < time.Hour {
		t.Errorf("a full 100 MB run is allowed only %v", l)
	}
}

// TestSwiftBenchNeedsGateway: on a scenario without a gateway the
// experiment says so before installing or starting anything.
func TestSwiftBenchNeedsGateway(t *testing.T) {
	err := Run(context.Background(), "swift-bench", &Env{Scenario: scenario.LAN(10), Out: t.TempDir(), Work: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "gateway") {
		t.Fatalf("swift-bench on lan: %v", err)
	}
}

// TestSwiftBenchQuick runs the experiment's quick variant end to end:
// swift-bench against Quilt's Swift API and against OpenStack Swift, on
// kreonet. Every case of both systems is in the CSV with its rates, and
// none of Quilt's requests failed. It needs python3, memcached,
// eatmydata and, the first time, PyPI, and takes about ten minutes on
// two cores, so it runs only with QUILT_OPENSTACK=1.
func TestSwiftBenchQuick(t *testing.T) {
	if os.Getenv("QUILT_OPENSTACK") != "1" {
		t.Skip("set QUILT_OPENSTACK=1 to run swift-bench against Quilt and OpenStack Swift (about 10 min)")
	}
	out := t.TempDir()
	env := &Env{Quick: true, Out: out, Work: t.TempDir(), Seed: 1, SwiftVenv: os.Getenv("SWIFT_VENV")}
	if err := Run(context.Background(), "swift-bench", env); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"swift-bench.csv", "swift-bench.md", "swift-bench-put.png", "swift-bench-get.png", "swift-bench-del.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("output %s: %v", f, err)
		}
	}
	f, err := os.Open(filepath.Join(out, "swift-bench.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	cases := map[string]int{}
	for _, r := range rows[1:] {
		sys := r[col["system"]]
		cases[sys]++
		if e := r[col["error"]]; e != "" {
			t.Errorf("%s %s %s: %s", sys, r[col["added latency"]], r[col["size"]], e)
			continue
		}
		for _, c := range []string{"PUT/s", "GET/s", "DEL/s"} {
			if v, err := strconv.ParseFloat(r[col[c]], 64); err != nil || v <= 0 {
				t.Errorf("%s %s %s: %s %q", sys, r[col["added latency"]], r[col["size"]], c, r[col[c]])
			}
		}
		if sys == "quilt" && r[col["failed PUT/GET/DEL"]] != "0/0/0" {
			t.Errorf("quilt %s %s: failed %s", r[col["added latency"]], r[col["size"]], r[col["failed PUT/GET/DEL"]])
		}
	}
	want := len(swiftBenchDelays(true)) * len(swiftBenchSizes(true))
	if cases["quilt"] != want || cases["openstack-swift"] != want {
		t.Errorf("cases per system %v, want %d each", cases, want)
	}
}
