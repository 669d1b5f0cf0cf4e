package openstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ErrBenchOutput is returned by ParseBench for output that lacks a
// phase's final line.
var ErrBenchOutput = errors.New("openstack: swift-bench output without its final PUTS, GETS and DEL lines")

// BenchConfig is one swift-bench run: the paper's parameters are
// Concurrency 10, Objects 100, Gets 200.
type BenchConfig struct {
	AuthURL, User, Key string // TempAuth v1.0 endpoint and credentials
	Concurrency        int    // workers in each phase
	Objects, Gets      int    // objects PUT (and DELETEd), GETs of random ones
	Size               int64  // bytes per object
	// Container is the one container the run uses (swift-bench's -C 1
	// --container-name). swift-bench's default is 20 containers named
	// NAME_0 … NAME_19, which are not valid S3 bucket names and so not
	// valid Quilt container names; one container serves both systems.
	Container string
}

// Args returns swift-bench's command line (without the program).
func (c BenchConfig) Args() ([]string, error) {
	if c.AuthURL == "" || c.User == "" || c.Key == "" || c.Container == "" {
		return nil, fmt.Errorf("openstack: swift-bench needs AuthURL, User, Key and Container")
	}
	if c.Concurrency < 1 || c.Objects < 1 || c.Gets < 0 || c.Size < 1 {
		return nil, fmt.Errorf("openstack: swift-bench needs Concurrency, Objects and Size >= 1 and Gets >= 0 (got %d, %d, %d, %d)",
			c.Concurrency, c.Objects, c.Size, c.Gets)
	}
	return []string{"-A", c.AuthURL, "-U", c.User, "-K", c.Key, "-V", "1.0",
		"-c", strconv.Itoa(c.Concurrency), "-s", strconv.FormatInt(c.Size, 10),
		"-n", strconv.Itoa(c.Objects), "-g", strconv.Itoa(c.Gets),
		"-C", "1", "--container-name", c.Container}, nil
}

// Phase is one phase of a swift-bench run, as its **FINAL** line reports
// it.
type Phase struct {
	Ops      int     // requests made (failed ones included, as swift-bench counts)
	Failures int     // requests that failed
	Rate     float64 // swift-bench's requests per second (printed to one decimal)
	// Seconds is the time from the phase's start (the "Auth version" line
	// swift-bench logs before each phase, then an authentication) to its
	// final line, from the lines' millisecond timestamps; 0 if unknown.
	Seconds float64
}

// BenchResult is what one swift-bench run measured.
type BenchResult struct {
	Put, Get, Del Phase
}

// Failures is the number of failed requests in all three phases.
func (r BenchResult) Failures() int { return r.Put.Failures + r.Get.Failures + r.Del.Failures }

var (
	// swift-bench 2026-11-27 08:53:02,985 INFO 20 PUTS **FINAL** [0 failures], 17.7/s
	finalLine = regexp.MustCompile(`^swift-bench (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO (\d+) (PUTS|GETS|DEL) \*\*FINAL\*\* \[(\d+) failures\], (\d+(?:\.\d+)?)/s\s*$`)
	authLine  = regexp.MustCompile(`^swift-bench (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO Auth version: `)
)

const benchTime = "2006-01-02 15:04:05,000"

// ParseBench reads swift-bench's output (its log, on stderr) and returns
// the three phases' final figures. Lines it does not know are skipped;
// a missing phase is an error wrapping ErrBenchOutput.
func ParseBench(out []byte) (BenchResult, error) {
	var r BenchResult
	seen := map[string]bool{}
	var start time.Time
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := authLine.FindStringSubmatch(line); m != nil {
			start, _ = time.Parse(benchTime, m[1])
			continue
		}
		m := finalLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var p Phase
		p.Ops, _ = strconv.Atoi(m[2])
		p.Failures, _ = strconv.Atoi(m[4])
		p.Rate, _ = strconv.ParseFloat(m[5], 64)
		if end, err := time.Parse(benchTime, m[1]); err == nil && !start.IsZero() && !end.Before(start) {
			p.Seconds = end.Sub(start).Seconds()
		}
		start = time.Time{}
		switch m[3] {
		case "PUTS":
			r.Put = p
		case "GETS":
			r.Get = p
		case "DEL":
			r.Del = p
		}
		seen[m[3]] = true
	}
	for _, ph := range []string{"PUTS", "GETS", "DEL"} {
		if !seen[ph] {
			return r, fmt.Errorf("%w: no %s line", ErrBenchOutput, ph)
		}
	}
	return r, nil
}

// RunBench runs the swift-bench program with c, for at most limit, and
// returns what it measured and its output. A run that exits with an
// error or whose output lacks a phase is an error (the output is
// returned with it).
func RunBench(ctx context.Context, program string, c BenchConfig, limit time.Duration) (BenchResult, []byte, error) {
	args, err := c.Args()
	if err != nil {
		return BenchResult{}, nil, err
	}
	out, err := runBounded(ctx, limit, program, args...)
	if err != nil {
		return BenchResult{}, out, fmt.Errorf("%w\n%s", err, tail(out))
	}
	r, err := ParseBench(out)
	if err != nil {
		return r, out, fmt.Errorf("%w\n%s", err, tail(out))
	}
	return r, out, nil
}
