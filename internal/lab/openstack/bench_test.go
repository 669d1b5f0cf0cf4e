package openstack

import (
	"errors"
	"math"
	"slices"
	"testing"
)

// benchOutput is swift-bench 2.0.0's output of a run against this
// package's cluster (20 objects of 100 kB, 40 GETs, concurrency 10),
// warnings and all.
const benchOutput = `/root/.cache/quilt-bench/swift-venv/lib/python3.11/site-packages/swiftbench/bench.py:31: EventletDeprecationWarning: 
Eventlet is deprecated. It is currently being maintained in bugfix mode, and
we strongly recommend against using it for new projects.

  import eventlet
swift-bench 2026-11-27 08:52:58,860 INFO Auth version: 1.0
swift-bench 2026-11-27 08:53:01,841 INFO Auth version: 1.0
swift-bench 2026-11-27 08:53:02,985 INFO 20 PUTS **FINAL** [0 failures], 17.7/s
swift-bench 2026-11-27 08:53:02,986 INFO Auth version: 1.0
swift-bench 2026-11-27 08:53:03,533 INFO 40 GETS **FINAL** [2 failures], 76.0/s
swift-bench 2026-11-27 08:53:03,538 INFO Auth version: 1.0
swift-bench 2026-11-27 08:53:18,000 INFO 12 DEL [0 failures], 0.8/s
swift-bench 2026-11-27 08:53:27,538 INFO 20 DEL **FINAL** [1 failures], 0.8/s
swift-bench 2026-11-27 08:53:27,540 INFO Auth version: 1.0
`

// TestParseBench reads each phase's final line, its failures, and the
// phase's length from the timestamps (the heartbeat line in between does
// not count).
func TestParseBench(t *testing.T) {
	r, err := ParseBench([]byte(benchOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := BenchResult{
		Put: Phase{Ops: 20, Failures: 0, Rate: 17.7, Seconds: 1.144},
		Get: Phase{Ops: 40, Failures: 2, Rate: 76.0, Seconds: 0.547},
		Del: Phase{Ops: 20, Failures: 1, Rate: 0.8, Seconds: 24.0},
	}
	for _, c := range []struct {
		name      string
		got, want Phase
	}{{"PUT", r.Put, want.Put}, {"GET", r.Get, want.Get}, {"DEL", r.Del, want.Del}} {
		if c.got.Ops != c.want.Ops || c.got.Failures != c.want.Failures || c.got.Rate != c.want.Rate ||
			math.Abs(c.got.Seconds-c.want.Seconds) > 1e-9 {
			t.Errorf("%s: %+v, want %+v", c.name, c.got, c.want)
		}
	}
	if r.Failures() != 3 {
		t.Errorf("failures %d, want 3", r.Failures())
	}
}

// TestParseBenchIncomplete: output that stops before a phase's final
// line (swift-bench crashed, or was killed) is ErrBenchOutput.
func TestParseBenchIncomplete(t *testing.T) {
	for _, out := range []string{"", "Traceback (most recent call last):\n  ...\nConnectionRefusedError: [Errno 111]\n",
		benchOutput[:len(benchOutput)-200]} {
		if _, err := ParseBench([]byte(out)); !errors.Is(err, ErrBenchOutput) {
			t.Errorf("ParseBench(%q…): %v", out[:min(len(out), 40)], err)
		}
	}
}

// TestBenchArgs: the command line carries the paper's parameters and one
// container; missing or impossible ones are errors.
func TestBenchArgs(t *testing.T) {
	c := BenchConfig{AuthURL: "http://127.0.0.1:1/auth/v1.0", User: "a:b", Key: "k", Concurrency: 10, Objects: 100, Gets: 200,
		Size: 100_000_000, Container: "bench-0"}
	args, err := c.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-A", "http://127.0.0.1:1/auth/v1.0", "-U", "a:b", "-K", "k", "-V", "1.0", "-c", "10", "-s", "100000000",
		"-n", "100", "-g", "200", "-C", "1", "--container-name", "bench-0"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q\nwant %q", args, want)
	}
	for _, edit := range []func(*BenchConfig){
		func(c *BenchConfig) { c.Key = "" },
		func(c *BenchConfig) { c.Container = "" },
		func(c *BenchConfig) { c.Concurrency = 0 },
		func(c *BenchConfig) { c.Size = 0 },
		func(c *BenchConfig) { c.Gets = -1 },
	} {
		bad := c
		edit(&bad)
		if _, err := bad.Args(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
