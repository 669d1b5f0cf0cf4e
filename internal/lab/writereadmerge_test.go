package lab

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// writeResults saves a write-read results directory holding rows.
func writeResults(t *testing.T, sc *scenario.Scenario, rows ...[]any) string {
	t.Helper()
	d := t.TempDir()
	tab := writeReadTable(sc)
	for _, r := range rows {
		tab.Add(r...)
	}
	if err := saveWriteRead(d, sc, tab); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestMergeWriteReadPoolsSingleRuns(t *testing.T) {
	sc, err := scenario.Builtin("qmpsu")
	if err != nil {
		t.Fatal(err)
	}
	const mib = int64(1 << 20)
	one := func(sys, client string, size int64, w, r float64) []any {
		return []any{sys, client, "", size, 1, w, w, w, r, r, r, ""}
	}
	failed := func(sys, client string, size int64, why string) []any {
		return []any{sys, client, "", size, 1, nil, nil, nil, nil, nil, nil, "1: " + why}
	}
	a := writeResults(t, sc, one("quilt", "worst", 128*mib, 0.140, 0.150), failed("tahoe", "worst", 128*mib, "tahoe: write: unhappy"))
	b := writeResults(t, sc, one("quilt", "worst", 128*mib, 0.148, 0.146), one("tahoe", "worst", 128*mib, 0.045, 0.14))
	c := writeResults(t, sc, one("quilt", "worst", 128*mib, 0.144, 0.130), one("tahoe", "worst", 128*mib, 0.044, 0.15),
		one("quilt", "worst", 64*mib, 0.147, 0.149))
	// A case with three runs in one directory is copied as it is.
	d := writeResults(t, sc, []any{"quilt", "best", "", 4 * mib, 3, 2.1, 2.0, 2.2, 7.5, 7.0, 7.6, ""})

	out := t.TempDir()
	if err := MergeWriteRead(out, sc, []string{a, b, c, d}); err != nil {
		t.Fatal(err)
	}
	got, err := readWriteReadCSV(filepath.Join(out, "write-read.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// Clients in the order first seen, then sizes, then systems.
	want := []struct {
		sys, client string
		size        int64
		runs        int
		wm, rm      any
		failed      string
	}{
		{"quilt", "worst", 64 * mib, 1, 0.147, 0.149, ""},
		{"quilt", "worst", 128 * mib, 3, 0.144, 0.146, ""},
		{"tahoe", "worst", 128 * mib, 3, 0.0445, 0.145, "1: tahoe: write: unhappy"},
		{"quilt", "best", 4 * mib, 3, 2.1, 7.5, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("merged %d rows, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g[0] != w.sys || g[1] != w.client || g[3] != w.size || g[4] != w.runs || g[11] != w.failed {
			t.Errorf("row %d = %v, want %+v", i, g, w)
		}
		for j, v := range map[int]any{5: w.wm, 8: w.rm} {
			if f, ok := g[j].(float64); !ok || !near(f, v.(float64)) {
				t.Errorf("row %d column %d = %v, want %v", i, j, g[j], v)
			}
		}
	}
	if g := got[1]; !near(g[6].(float64), 0.142) || !near(g[7].(float64), 0.146) {
		t.Errorf("write quartiles of the pooled case = %v, %v, want 0.142, 0.146", g[6], g[7])
	}
	md, err := os.ReadFile(filepath.Join(out, "write-read.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "from 4 results directories (10 runs in all)") {
		t.Errorf("the merged table does not say what it pooled:\n%s", md)
	}
	for _, p := range []string{"write-read-write.png", "write-read-read.png"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Error(err)
		}
	}
}

func TestMergeWriteReadRefuses(t *testing.T) {
	sc, err := scenario.Builtin("qmpsu")
	if err != nil {
		t.Fatal(err)
	}
	three := []any{"quilt", "best", "", int64(4 << 20), 3, 2.1, 2.0, 2.2, 7.5, 7.0, 7.6, ""}
	single := []any{"quilt", "best", "", int64(4 << 20), 1, 2.1, 2.1, 2.1, 7.5, 7.5, 7.5, ""}
	notResults := t.TempDir()
	if err := os.WriteFile(filepath.Join(notResults, "write-read.csv"), []byte("system,client\nquilt,best\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"several runs of a case in several directories", []string{writeResults(t, sc, three), writeResults(t, sc, single)}, "only single runs (--runs 1) can be pooled"},
		{"a case twice in one directory", []string{writeResults(t, sc, single, single)}, "twice"},
		{"not a write-read result", []string{notResults}, "is not a write-read result"},
		{"no results file", []string{t.TempDir()}, "no such file"},
		{"no directories", nil, "no results directories"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			err := MergeWriteRead(out, sc, c.dirs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("MergeWriteRead = %v, want an error saying %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(out, "write-read.csv")); err == nil {
				t.Error("a refused merge wrote results")
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
