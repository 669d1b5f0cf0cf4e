package lab

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dbenchOutput is the end of a real dbench 4.0 run's output.
const dbenchOutput = `   2       982   190.23 MB/sec  execute   2 sec  latency 12.345 ms
   2  cleanup   3 sec
   2  cleanup   3 sec

 Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX      16345     0.043    30.421
 Flush           1366     2.221    54.781

Throughput 202.844 MB/sec  2 clients  2 procs  max_latency=54.787 ms
`

// TestParseDbench: the final Throughput line gives MB/s, the client
// count and the maximum latency; progress lines (MB/sec too) are not it;
// output without it, with another client count or a bad number is an
// error.
func TestParseDbench(t *testing.T) {
	r, err := parseDbench([]byte(dbenchOutput), 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.MBs != 202.844 || r.Clients != 2 || r.MaxLatency != time.Duration(54.787*float64(time.Millisecond)) {
		t.Errorf("parsed %+v", r)
	}
	for name, c := range map[string]struct {
		out  string
		want int
		msg  string
	}{
		"no throughput line": {strings.Split(dbenchOutput, "Throughput")[0], 2, "no Throughput line"},
		"other client count": {dbenchOutput, 4, "ran 2 clients, want 4"},
		"bad number":         {"Throughput x.1 MB/sec  2 clients  2 procs  max_latency=1 ms\n", 2, `throughput "x.1"`},
		"negative":           {"Throughput -1 MB/sec  2 clients  2 procs  max_latency=1 ms\n", 2, `throughput "-1"`},
		"bad latency":        {"Throughput 1 MB/sec  2 clients  2 procs  max_latency=abc ms\n", 2, "max_latency"},
		"empty":              {"", 1, "no Throughput line"},
	} {
		if _, err := parseDbench([]byte(c.out), c.want); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.msg)
		}
	}
}

// TestParseProcStat: utime and stime are fields 14 and 15, counted after
// the command name, which may hold spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	line := "4242 (nbd kit) (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 9 0 100 1000 10 18446744073709551615\n"
	d, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if d != 3800*time.Millisecond {
		t.Errorf("CPU %s, want 3.8s (380 ticks)", d)
	}
	for _, bad := range []string{"", "4242 nbdkit S 1", "4242 (nbdkit) S 1 2 3", "4242 (nbdkit) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 130 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestDbenchReport: a row per run in client order with Quilt's MB/s as a
// percentage of nbdkit's, the total CPU per system, and the two plots
// (the relative one only where both systems ran).
func TestDbenchReport(t *testing.T) {
	rows := []dbenchRow{
		{System: "Quilt", Clients: 1, MBs: 2, MaxLatency: 500 * time.Millisecond, ServerCPU: 9 * time.Second, FuseCPU: time.Second, Flushes: 4, FlushTime: time.Second},
		{System: "nbdkit file", Clients: 1, MBs: 8, ServerCPU: 2 * time.Second},
		{System: "nbdkit file", Clients: 2, MBs: 10, ServerCPU: 3 * time.Second},
		{System: "Quilt", Clients: 2, MBs: 1, ServerCPU: 4 * time.Second},
		{System: "Quilt", Clients: 4, MBs: 3, ServerCPU: time.Second},
		{System: "nbdkit file, no flush", Clients: 4, MBs: 30, ServerCPU: time.Second},
	}
	tab, plots := dbenchReport("lan", rows, []string{"a note"})
	var got []string
	for _, r := range tab.Rows {
		if len(r) != len(tab.Columns) {
			t.Fatalf("row %v has %d cells for %d columns", r, len(r), len(tab.Columns))
		}
		cells := make([]string, len(r))
		for i, c := range r {
			if c == nil {
				cells[i] = "-"
			} else {
				cells[i] = strings.TrimSpace(strings.ReplaceAll(strings.TrimSpace(fmtCell(c)), " ", ""))
			}
		}
		got = append(got, strings.Join(cells, "|"))
	}
	want := []string{
		"1|Quilt|2|500|9|1|25%|4|250",
		"2|Quilt|1|0|4|0|10%|-|-",
		"4|Quilt|3|0|1|0|-|-|-",
		"1|nbdkitfile|8|0|2|0|-|-|-",
		"2|nbdkitfile|10|0|3|0|-|-|-",
		"4|nbdkitfile,noflush|30|0|1|0|-|-|-",
		"all|Quilt(total)|-|-|14|-|-|-|-",
		"all|nbdkitfile(total)|-|-|5|-|-|-|-",
		"all|nbdkitfile,noflush(total)|-|-|1|-|-|-|-",
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(plots) != 2 || len(plots[0].Series) != 3 || len(plots[1].Series) != 1 {
		t.Fatalf("plots: %d", len(plots))
	}
	if rel := plots[1].Series[0]; !slices.Equal(rel.X, []float64{1, 2}) || !slices.Equal(rel.Y, []float64{25, 10}) {
		t.Errorf("relative series %v %v", rel.X, rel.Y)
	}
	if tab.Notes[0] != "a note" {
		t.Errorf("notes %v", tab.Notes)
	}
	// Without nbdkit, no relative plot.
	if _, plots := dbenchReport("lan", rows[4:5], nil); len(plots) != 1 {
		t.Errorf("%d plots from Quilt alone", len(plots))
	}
}

// TestNbdFioArgs: each job's fio command line (writes end with a flush),
// and bad sizes or runtimes refused.
func TestNbdFioArgs(t *testing.T) {
	a, err := nbdFioArgs(nbdFioJobs[2], "nbd://127.0.0.1:1/lab", 64<<20, 20*time.Second, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"--ioengine=nbd", "--uri=nbd://127.0.0.1:1/lab", "--rw=randwrite", "--bs=4096", "--size=67108864", "--iodepth=8", "--runtime=20", "--end_fsync=1", "--output-format=json"} {
		if !slices.Contains(a, w) {
			t.Errorf("randwrite args %v lack %s", a, w)
		}
	}
	a, err = nbdFioArgs(nbdFioJobs[1], "nbd://h/x", 64<<20, 20*time.Second, 8)
	if err != nil || slices.Contains(a, "--end_fsync=1") || !slices.Contains(a, "--rw=read") {
		t.Errorf("read args %v, %v", a, err)
	}
	for _, c := range []struct {
		size int64
		rt   time.Duration
		qd   int
	}{{1 << 20, time.Second, 0}, {(1 << 20) + 1, time.Second, 1}, {1 << 10, time.Second, 1}, {1 << 20, time.Millisecond, 1}} {
		if _, err := nbdFioArgs(nbdFioJobs[0], "nbd://h/x", c.size, c.rt, c.qd); err == nil {
			t.Errorf("size %d runtime %s iodepth %d: no error", c.size, c.rt, c.qd)
		}
	}
	// fio's JSON output of an nbd job is read as the sshfs-fio jobs' is.
	if _, err := parseFio([]byte(`{"jobs":[{"jobname":"randread","error":5,"read":{"io_bytes":1,"bw_bytes":1,"runtime":1}}]}`), true); !errors.Is(err, errFio) {
		t.Errorf("a job with an error: %v", err)
	}
}

// fmtCell writes a table cell as the test compares it.
func fmtCell(c any) string {
	if f, ok := c.(float64); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return fmt.Sprint(c)
}
