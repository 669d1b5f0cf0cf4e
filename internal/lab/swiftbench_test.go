package lab

import (
	"context"
	"slices"
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
