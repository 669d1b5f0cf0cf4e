package lab

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// TestPayload: a payload reads the same at any offset as in one piece,
// two names give different bytes, and the verifier takes the right bytes
// and refuses a wrong byte, a short file and a long one.
func TestPayload(t *testing.T) {
	p := payloadOf("a", 1000)
	whole, err := io.ReadAll(p.section(0, p.size))
	if err != nil || len(whole) != 1000 {
		t.Fatalf("read %d bytes: %v", len(whole), err)
	}
	for _, off := range []int64{0, 1, 7, 8, 9, 500, 993, 999} {
		b := make([]byte, 13)
		n, err := p.ReadAt(b, off)
		if want := min(13, 1000-int(off)); n != want || !bytes.Equal(b[:n], whole[off:off+int64(n)]) {
			t.Errorf("ReadAt(%d): %d bytes, %v; want %d matching bytes", off, n, err, want)
		}
		if n < 13 && err != io.EOF {
			t.Errorf("ReadAt(%d) past the end: %v, want EOF", off, err)
		}
	}
	if other, _ := io.ReadAll(payloadOf("b", 1000).section(0, 1000)); bytes.Equal(other, whole) {
		t.Error("two names give the same bytes")
	}

	v := newVerifier(p, 0, p.size)
	if _, err := v.Write(whole[:333]); err != nil {
		t.Fatal(err)
	}
	if err := v.done(); err == nil {
		t.Error("a third of the file passed as the whole")
	}
	if _, err := v.Write(whole[333:]); err != nil {
		t.Fatal(err)
	}
	if err := v.done(); err != nil {
		t.Errorf("the right bytes: %v", err)
	}
	if _, err := v.Write([]byte{0}); err == nil {
		t.Error("a byte past the end was taken")
	}

	bad := slices.Clone(whole)
	bad[600] ^= 1
	v = newVerifier(p, 0, p.size)
	if _, err := io.Copy(v, bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "offset 600") {
		t.Errorf("a flipped byte at 600: %v", err)
	}
	// A range checked from its own offset.
	v = newVerifier(p, 500, 100)
	if _, err := v.Write(whole[500:600]); err != nil || v.done() != nil {
		t.Errorf("range 500-599: %v, %v", err, v.done())
	}
	v = newVerifier(p, 500, 100)
	if _, err := v.Write(whole[400:500]); err == nil {
		t.Error("bytes from another offset passed")
	}
}

// sampleTransfers: webdav at Np 1 and 5, s3 at Np 1, with a failure and
// a timeout among them, and a door the report does not list.
func sampleTransfers() []transfer {
	s := time.Second
	fail := errors.New("PUT: 500 Internal Server Error")
	return []transfer{
		{door: doorWebDAV, np: 1, up: false, size: 1000, d: 1 * s},
		{door: doorWebDAV, np: 1, up: false, size: 1000, d: 3 * s},
		{door: doorWebDAV, np: 1, up: true, size: 1000, d: 2 * s},
		{door: doorWebDAV, np: 1, up: true, size: 1000, d: 9 * s, err: fail},
		{door: doorWebDAV, np: 1, up: true, size: 10, d: 4 * s},
		{door: doorWebDAV, np: 5, up: true, size: 10, d: 5 * s, err: errors.New("timed out after 2m0s: context deadline exceeded")},
		{door: doorS3, np: 1, up: false, size: 10, d: s / 2},
		{door: doorObject, np: 1, up: false, size: 10, d: s},
	}
}

// TestSummarize: transfers grouped by door (in the order asked), Np,
// direction (downloads first) and size; means and sample standard
// deviations over the successes only; efficiency counts failures and
// timeouts against the door.
func TestSummarize(t *testing.T) {
	cells := summarize(sampleTransfers(), []string{doorS3, doorWebDAV})
	type row struct {
		door string
		np   int
		up   bool
		size int64
		n    int
		ok   int
	}
	var got []row
	for _, c := range cells {
		got = append(got, row{c.door, c.np, c.up, c.size, c.n, c.ok})
	}
	want := []row{
		{doorS3, 1, false, 10, 1, 1},
		{doorWebDAV, 1, false, 1000, 2, 2},
		{doorWebDAV, 1, true, 10, 1, 1},
		{doorWebDAV, 1, true, 1000, 2, 1},
		{doorWebDAV, 5, true, 10, 1, 0},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("cells:\n%v\nwant\n%v", got, want)
	}
	down := cells[1]
	if down.mean != 2 || math.Abs(down.sd-math.Sqrt2) > 1e-12 || down.efficiency() != 1 {
		t.Errorf("webdav Np 1 download 1000 B: mean %v sd %v efficiency %v, want 2, √2, 1", down.mean, down.sd, down.efficiency())
	}
	up := cells[3]
	if up.mean != 2 || !math.IsNaN(up.sd) || up.efficiency() != 0.5 || !strings.Contains(up.firstErr, "500") {
		t.Errorf("webdav Np 1 upload 1000 B: mean %v sd %v efficiency %v error %q, want 2, NaN, 0.5, the 500", up.mean, up.sd, up.efficiency(), up.firstErr)
	}
	if c := cells[4]; !math.IsNaN(c.mean) || c.efficiency() != 0 || !strings.Contains(c.firstErr, "timed out") {
		t.Errorf("the timed-out upload: mean %v efficiency %v error %q", c.mean, c.efficiency(), c.firstErr)
	}
	if n, ok := opTotals(cells, doorWebDAV, 1, true); n != 3 || ok != 2 {
		t.Errorf("webdav Np 1 uploads: %d of %d succeeded, want 2 of 3", ok, n)
	}
	if n, _ := opTotals(cells, doorObject, 1, false); n != 0 {
		t.Errorf("a door not asked for was counted: %d", n)
	}
	if len(summarize(nil, defaultDoors)) != 0 {
		t.Error("cells from no transfers")
	}
}

// TestTimeTables: one table per door and direction, downloads first,
// sizes largest first, blanks where nothing succeeded; at the quick
// variant's sizes no paper rows, at the paper's sizes the rows of its
// Tables 4 and 7 under ours.
func TestTimeTables(t *testing.T) {
	tabs := timeTables(summarize(sampleTransfers(), []string{doorWebDAV, doorS3}), []string{doorWebDAV, doorS3}, []int64{10, 1000}, []int{1, 5})
	var titles []string
	for _, tab := range tabs {
		titles = append(titles, tab.Title)
	}
	if len(tabs) != 3 || !strings.Contains(titles[0], "WebDAV / download") || !strings.Contains(titles[0], "Tab. 4 (ownCloud)") ||
		!strings.Contains(titles[1], "WebDAV / upload") || !strings.Contains(titles[2], "S3 multipart / download") || !strings.Contains(titles[2], "Tab. 6 (StoRM)") {
		t.Fatalf("tables: %q", titles)
	}
	up := tabs[1]
	if want := []string{"Np", "1 kB", "10 B", "transfers", "efficiency"}; !slices.Equal(up.Columns, want) {
		t.Errorf("columns %q, want %q", up.Columns, want)
	}
	// Np 1: 1 kB mean 2 s, 10 B 4 s, 3 transfers, 2/3; Np 5: nothing succeeded.
	if len(up.Rows) != 2 {
		t.Fatalf("upload rows: %v", up.Rows)
	}
	if r := up.Rows[0]; r[0] != 1 || r[1] != 2.0 || r[2] != 4.0 || r[3] != 3 || math.Abs(r[4].(float64)-2.0/3) > 1e-12 {
		t.Errorf("Np 1 upload row %v", r)
	}
	if r := up.Rows[1]; r[0] != 5 || r[1] != nil || r[2] != nil || r[3] != 1 || r[4] != 0.0 {
		t.Errorf("Np 5 upload row %v", r)
	}

	// The paper's sizes: its rows appear, ours first.
	var ts []transfer
	for _, s := range parallelSizes {
		ts = append(ts, transfer{door: doorS3, np: 5, up: true, size: s, d: time.Second},
			transfer{door: doorRclone, np: 5, up: true, size: s, d: time.Second})
	}
	doors := []string{doorS3, doorRclone}
	tabs = timeTables(summarize(ts, doors), doors, parallelSizes, []int{5})
	if len(tabs) != 2 {
		t.Fatalf("%d tables, want S3 upload and rclone upload", len(tabs))
	}
	s3up := tabs[0]
	if !strings.Contains(s3up.Title, "Tab. 7 (StoRM)") || len(s3up.Rows) != 2 {
		t.Fatalf("S3 upload: %q, rows %v", s3up.Title, s3up.Rows)
	}
	if want := []any{5, "paper", 14.93, 1.76, 0.61, 0.30, 0.24, nil, nil}; !slices.Equal(s3up.Rows[1], want) {
		t.Errorf("paper row %v, want Tab. 7's Np 5 row %v", s3up.Rows[1], want)
	}
	if s3up.Rows[0][1] != "here" || s3up.Columns[2] != "1 GB" || s3up.Columns[6] != "100 kB" {
		t.Errorf("columns %q: want 1 GB first and 100 kB last, as the paper", s3up.Columns)
	}
	if len(tabs[1].Rows) != 1 || strings.Contains(tabs[1].Title, "Tab.") {
		t.Errorf("rclone has no counterpart in the paper: %q %v", tabs[1].Title, tabs[1].Rows)
	}
	// A download table of the paper's carries its stated 100% efficiency.
	ts = []transfer{{door: doorWebDAV, np: 200, size: 1e9, d: time.Minute}}
	tabs = timeTables(summarize(ts, []string{doorWebDAV}), []string{doorWebDAV}, parallelSizes, []int{200})
	if r := tabs[0].Rows[1]; r[2] != 62.3 || r[len(r)-1] != 1.0 {
		t.Errorf("Tab. 4 at Np 200: %v", r)
	}
}

// TestEfficiencyAndPlots: the efficiency table has a column per door and
// direction; the plots are Fig. 3 (largest size), Fig. 4 (efficiency)
// and one per door and direction, with the paper's curves in Fig. 3 only
// at its sizes.
func TestEfficiencyAndPlots(t *testing.T) {
	doors := []string{doorWebDAV, doorS3}
	cells := summarize(sampleTransfers(), doors)
	eff := efficiencyTable(cells, doors, []int{1, 5})
	if want := []string{"Np", "webdav download", "webdav upload", "s3 download", "s3 upload"}; !slices.Equal(eff.Columns, want) {
		t.Errorf("columns %q", eff.Columns)
	}
	if want := []any{5, nil, 0.0, nil, nil}; !slices.Equal(eff.Rows[1], want) {
		t.Errorf("Np 5 row %v, want %v", eff.Rows[1], want)
	}
	plots := parallelPlots(cells, doors, []int64{10, 1000}, []int{1, 5})
	var names []string
	for n := range plots {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"parallel-transfers-fig3.png", "parallel-transfers-fig4.png", "parallel-transfers-s3-download.png", "parallel-transfers-webdav-download.png", "parallel-transfers-webdav-upload.png"}
	if !slices.Equal(names, want) {
		t.Errorf("plots %q, want %q", names, want)
	}
	fig3 := plots["parallel-transfers-fig3.png"]
	if len(fig3.Series) != 2 || fig3.Series[0].Name != "webdav download" || !slices.Equal(fig3.Series[0].Y, []float64{2}) {
		t.Errorf("Fig. 3 series: %+v", fig3.Series)
	}
	for _, s := range fig3.Series {
		if strings.Contains(s.Name, "paper") {
			t.Errorf("paper curve %q at sizes not the paper's", s.Name)
		}
	}
	ts := []transfer{{door: doorS3, np: 1, size: 1e9, d: 10 * time.Second}}
	fig3 = parallelPlots(summarize(ts, doors), doors, parallelSizes, []int{1, 5, 25})["parallel-transfers-fig3.png"]
	if len(fig3.Series) != 5 || fig3.Series[1].Name != "ownCloud download (paper)" || !slices.Equal(fig3.Series[1].Y, []float64{23.9, 24.8, 30.1}) {
		t.Errorf("Fig. 3 at the paper's sizes: %+v", fig3.Series)
	}
}

// TestWriteParallelReport writes the report of the sample transfers and
// reads the CSV back.
func TestWriteParallelReport(t *testing.T) {
	dir := t.TempDir()
	plan := parallelPlan{scale: 1e-6, sizes: []int64{10, 1000}, nps: []int{1, 5}, quilt: []string{doorWebDAV, doorS3}}
	if err := writeParallelReport(dir, sampleTransfers(), plan, []string{"a note"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "parallel-transfers.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 || rows[0][0] != "door" || rows[1][0] != doorWebDAV || rows[5][0] != doorS3 {
		t.Errorf("CSV: %q", rows)
	}
	md, err := os.ReadFile(filepath.Join(dir, "parallel-transfers.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Tab. 4 (ownCloud)", "Tab. 6 (StoRM)", "as the paper's Fig. 4", "a note", "Failed: webdav upload 1 kB at Np 1, 1 of 2; first: PUT: 500"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md)
		}
	}
	for _, n := range []string{"parallel-transfers-fig3.png", "parallel-transfers-fig4.png", "parallel-transfers-webdav-upload.png"} {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", n, err)
		}
	}
}

// TestPlanParallel: defaults for each variant, and clear errors for a
// door that does not exist, one given twice and a negative scale.
func TestPlanParallel(t *testing.T) {
	p, err := planParallel(&Env{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.sizes, []int64{1e3, 10e3, 100e3, 1e6, 10e6}) || !slices.Equal(p.doors(), []string{doorWebDAV, doorS3, doorRclone}) || !slices.Equal(p.nps, []int{1, 5, 25}) {
		t.Errorf("quick plan %+v", p)
	}
	p, err = planParallel(&Env{Doors: []string{doorObject, doorRclone, doorWebDAV}})
	if err != nil {
		t.Fatal(err)
	}
	if !comparable(p.sizes) || !slices.Equal(p.doors(), []string{doorWebDAV, doorObject, doorRclone}) || slices.Max(p.nps) != 200 {
		t.Errorf("full plan %+v", p)
	}
	for _, env := range []*Env{{Doors: []string{"ftp"}}, {Doors: []string{doorS3, doorS3}}, {Scale: -1}} {
		if _, err := planParallel(env); err == nil {
			t.Errorf("%+v: no error", env)
		} else {
			t.Log(err)
		}
	}
}

// TestParallelDoors starts a grid on lan with every Quilt door and
// rclone's: a file goes up through each door and comes down, checked,
// through each of the others over the same bucket; a file asked for as
// another's bytes fails; a short case of 3 workers succeeds throughout;
// and a file changed on rclone's disk fails its download.
func TestParallelDoors(t *testing.T) {
	if _, err := exec.LookPath("rclone"); err != nil {
		t.Fatal("rclone is not installed (apt-get install rclone): ", err)
	}
	ctx := context.Background()
	env := &Env{Scenario: scenario.LAN(10), Work: t.TempDir(), Seed: 1, Doors: []string{doorWebDAV, doorS3, doorObject, doorRclone}}
	plan, err := planParallel(env)
	if err != nil {
		t.Fatal(err)
	}
	// Sizes around the S3 part: a multipart upload of 3 parts, the last short.
	plan.sizes = []int64{1000, 2*s3Part + 12345}
	work, err := env.workDir("parallel-transfers")
	if err != nil {
		t.Fatal(err)
	}
	hc := httpClient(4)
	doors, stop, err := openQuiltDoors(ctx, env, work, "client", hc, plan)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, from := range plan.quilt {
		for _, size := range plan.sizes {
			name := "via-" + from + "-" + sizeName(size)
			if err := doors[from].upload(ctx, name, payloadOf(name, size)); err != nil {
				t.Fatalf("upload %s through %s: %v", sizeName(size), from, err)
			}
			for _, to := range plan.quilt {
				if err := doors[to].download(ctx, name, payloadOf(name, size)); err != nil {
					t.Errorf("%s up through %s, down through %s: %v", sizeName(size), from, to, err)
				}
				if err := doors[to].download(ctx, name, payloadOf("another", size)); err == nil {
					t.Errorf("%s through %s: another file's bytes passed", name, to)
				}
			}
		}
	}
	if err := doors[doorWebDAV].download(ctx, "missing", payloadOf("missing", 10)); err == nil {
		t.Error("WebDAV: a missing file downloaded")
	}
	pool := &filePool{}
	for _, s := range plan.sizes {
		pool.add(seedName(s), s)
	}
	res := parallelCase(ctx, doors, plan.quilt, pool, plan.sizes, 3, 2*time.Second, time.Minute, 1)
	if len(res) == 0 {
		t.Fatal("no transfers in the case")
	}
	for _, tr := range res {
		if tr.err != nil {
			t.Errorf("%s %s %s: %v", tr.door, opName(tr.up), sizeName(tr.size), tr.err)
		}
	}

	rd, stopR, err := openRcloneDoor(ctx, env, work, hc, plan.sizes)
	if err != nil {
		t.Fatal(err)
	}
	defer stopR()
	p := payloadOf("r", 3000)
	if err := rd.upload(ctx, "r", p); err != nil {
		t.Fatal(err)
	}
	if err := rd.download(ctx, "r", p); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(work, "rclone-disk", "r")
	b, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	b[2999] ^= 0x80
	if err := os.WriteFile(disk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rd.download(ctx, "r", p); err == nil || !strings.Contains(err.Error(), "offset 2999") {
		t.Errorf("a changed byte on rclone's disk: %v", err)
	}
}

// TestParallelTransfersQuick runs the experiment's quick variant with
// the S3 door and rclone's at 1/1000 of the paper's sizes and checks its
// outputs: every door, Np and direction has transfers, none failed, and
// rclone's directory holds only the seed files after the run.
func TestParallelTransfersQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick experiment (about 30 s)")
	}
	if _, err := exec.LookPath("rclone"); err != nil {
		t.Fatal("rclone is not installed (apt-get install rclone): ", err)
	}
	out, work := t.TempDir(), t.TempDir()
	// Cases of 3 s instead of 20: every door, Np and direction still runs.
	env := &Env{Quick: true, Out: out, Work: work, Seed: 1, Scale: 0.001, Doors: []string{doorS3, doorRclone}, CaseTime: 3 * time.Second}
	if err := Run(context.Background(), "parallel-transfers", env); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "parallel-transfers.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		seen[r[0]+" "+r[1]+" "+r[2]] = true
		if r[5] != r[6] {
			t.Errorf("%v: failures", r)
		}
	}
	for _, d := range []string{doorS3, doorRclone} {
		for _, np := range []string{"1", "5", "25"} {
			for _, op := range []string{"download", "upload"} {
				if !seen[d+" "+np+" "+op] {
					t.Errorf("no %s %s at Np %s", d, op, np)
				}
			}
		}
	}
	for _, n := range []string{"parallel-transfers.md", "parallel-transfers-fig3.png", "parallel-transfers-fig4.png", "parallel-transfers-rclone-upload.png"} {
		if st, err := os.Stat(filepath.Join(out, n)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", n, err)
		}
	}
	left, err := os.ReadDir(filepath.Join(work, "parallel-transfers", rcloneDisk))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if !strings.HasPrefix(e.Name(), "seed-") {
			t.Errorf("rclone's upload %s left after the run", e.Name())
		}
	}
}
