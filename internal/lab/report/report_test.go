package report

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func sampleTable() *Table {
	t := &Table{
		Title:   "PUT latency",
		Columns: []string{"size", "ops", "p50", "rate", "what"},
		Notes:   []string{"3 runs per size.", "Link: 10 ms RTT."},
	}
	t.Add("64 KiB", 1000, 12300*time.Microsecond, 0.00123, "plain")
	t.Add("1 MiB", int64(42), 1200*time.Millisecond, 12345.0, `a, "quoted" one`)
	t.Add("1 GiB", nil, nil, 1.0/3, nil)
	return t
}

func TestCSVRoundTrip(t *testing.T) {
	tab := sampleTable()
	var buf bytes.Buffer
	if err := tab.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("reading back: %v\n%s", err, buf.String())
	}
	want := [][]string{
		{"size", "ops", "p50", "rate", "what"},
		{"64 KiB", "1000", "0.0123", "0.00123", "plain"},
		{"1 MiB", "42", "1.2", "12345", `a, "quoted" one`},
		{"1 GiB", "", "", strconv.FormatFloat(1.0/3, 'g', -1, 64), ""},
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d: %q", len(recs), len(want), recs)
	}
	for i := range want {
		if strings.Join(recs[i], "\x00") != strings.Join(want[i], "\x00") {
			t.Errorf("record %d = %q, want %q", i, recs[i], want[i])
		}
	}
	// Full precision: the float reads back to the same value.
	if v, err := strconv.ParseFloat(recs[3][3], 64); err != nil || v != 1.0/3 {
		t.Errorf("1/3 read back as %v, %v", v, err)
	}
}

func TestMarkdown(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleTable().WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	want := `### PUT latency

| size   |  ops |     p50 |    rate | what            |
| ------ | ---: | ------: | ------: | --------------- |
| 64 KiB | 1000 | 12.3 ms | 0.00123 | plain           |
| 1 MiB  |   42 |  1.20 s |   12300 | a, "quoted" one |
| 1 GiB  |      |         |   0.333 |                 |

3 runs per size.

Link: 10 ms RTT.
`
	if got != want {
		t.Errorf("markdown:\n%s\nwant:\n%s", got, want)
	}
}

func TestMarkdownEscapesAndNoTitle(t *testing.T) {
	tab := &Table{Columns: []string{"a|b"}}
	tab.Add("x|y\nz")
	var buf bytes.Buffer
	if err := tab.WriteMarkdown(&buf); err != nil {
		t.Fatal(err)
	}
	want := "| a\\|b   |\n| ------ |\n| x\\|y z |\n"
	if buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

func TestFormatSig3(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{0.00123, "0.00123"},
		{0.001234, "0.00123"},
		{1.23, "1.23"},
		{1.2, "1.20"},
		{123, "123"},
		{123.4, "123"},
		{12345, "12300"},
		{999.6, "1000"},
		{-2.5, "-2.50"},
		{1.5e-7, "1.5e-07"},
		{math.NaN(), "NaN"},
	} {
		if got := formatSig3(c.v); got != c.want {
			t.Errorf("formatSig3(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 s"},
		{850, "850 ns"},
		{1500, "1.50 µs"},
		{12300 * time.Microsecond, "12.3 ms"},
		{999999 * time.Microsecond, "1.00 s"},
		{1200 * time.Millisecond, "1.20 s"},
		{90 * time.Second, "90.0 s"},
		{-5 * time.Millisecond, "-5.00 ms"},
	} {
		if got := formatDuration(c.d); got != c.want {
			t.Errorf("formatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestAddPanicsOnWrongCellCount(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Add with %d cells to 2 columns did not panic", n)
				}
			}()
			tab := &Table{Columns: []string{"a", "b"}}
			tab.Add(make([]any, n)...)
		})
	}
}

func TestWriteRejectsBadTables(t *testing.T) {
	var buf bytes.Buffer
	if err := (&Table{}).WriteCSV(&buf); !errors.Is(err, ErrNoColumns) {
		t.Errorf("WriteCSV without columns: %v, want ErrNoColumns", err)
	}
	bad := &Table{Columns: []string{"a", "b"}, Rows: [][]any{{1}}}
	if err := bad.WriteMarkdown(&buf); !errors.Is(err, ErrRowLength) {
		t.Errorf("WriteMarkdown with a short row: %v, want ErrRowLength", err)
	}
	if _, _, err := Write(t.TempDir(), "../x", sampleTable()); err == nil {
		t.Error("Write with a name containing a separator succeeded")
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "nested")
	csvPath, mdPath, err := Write(dir, "latency", sampleTable())
	if err != nil {
		t.Fatal(err)
	}
	if csvPath != filepath.Join(dir, "latency.csv") || mdPath != filepath.Join(dir, "latency.md") {
		t.Errorf("paths %q, %q", csvPath, mdPath)
	}
	c, err := os.ReadFile(csvPath)
	if err != nil || !strings.HasPrefix(string(c), "size,ops,p50,rate,what\n") {
		t.Errorf("csv file: %v %q", err, c)
	}
	m, err := os.ReadFile(mdPath)
	if err != nil || !strings.HasPrefix(string(m), "### PUT latency\n\n|") {
		t.Errorf("md file: %v %q", err, m)
	}
}

func TestQuartiles(t *testing.T) {
	for _, c := range []struct {
		name      string
		xs        []float64
		q1, m, q3 float64
	}{
		// numpy.percentile([3,1,2,5,4], [25,50,75]) = 2, 3, 4
		{"odd", []float64{3, 1, 2, 5, 4}, 2, 3, 4},
		// numpy.percentile([4,1,3,2], [25,50,75]) = 1.75, 2.5, 3.25
		{"even", []float64{4, 1, 3, 2}, 1.75, 2.5, 3.25},
		// sorted [1,2,4,8,16,32], ranks 0.25·5, 0.5·5, 0.75·5 = 1.25, 2.5, 3.75:
		// 2+0.25·2, 4+0.5·4, 8+0.75·8
		{"six", []float64{32, 1, 16, 2, 8, 4}, 2.5, 6, 14},
		{"single", []float64{7}, 7, 7, 7},
	} {
		orig := append([]float64(nil), c.xs...)
		q1, m, q3 := Quartiles(c.xs)
		if !approxEqual(q1, c.q1) || !approxEqual(m, c.m) || !approxEqual(q3, c.q3) {
			t.Errorf("%s: Quartiles = %v, %v, %v; want %v, %v, %v", c.name, q1, m, q3, c.q1, c.m, c.q3)
		}
		for i := range orig {
			if orig[i] != c.xs[i] {
				t.Errorf("%s: Quartiles modified its input: %v", c.name, c.xs)
				break
			}
		}
	}
	q1, m, q3 := Quartiles(nil)
	if !math.IsNaN(q1) || !math.IsNaN(m) || !math.IsNaN(q3) {
		t.Errorf("Quartiles(nil) = %v, %v, %v; want NaNs", q1, m, q3)
	}
}

func TestMean(t *testing.T) {
	if got := Mean([]float64{1, 2, 3, 10}); got != 4 {
		t.Errorf("Mean = %v, want 4", got)
	}
	if got := Mean(nil); !math.IsNaN(got) {
		t.Errorf("Mean(nil) = %v, want NaN", got)
	}
}

func approxEqual(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestSizeLabel(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{10, "10 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{65536, "64 KiB"},
		{1 << 20, "1 MiB"},
		{100e6, "95.4 MiB"},
		{128 << 20, "128 MiB"},
		{5 << 30, "5 GiB"},
		{1<<40 + 1<<39, "1.5 TiB"},
		{-2048, "-2 KiB"},
		{math.MaxInt64, "8 EiB"},
	} {
		if got := SizeLabel(c.n); got != c.want {
			t.Errorf("SizeLabel(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// checkPNG decodes the PNG at path and fails unless it has a size and more
// than one colour.
func checkPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() < 300 || b.Dy() < 200 {
		t.Fatalf("image is %dx%d, too small to read", b.Dx(), b.Dy())
	}
	first := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, a0 := first.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 || a != a0 {
				return img
			}
		}
	}
	t.Fatalf("%s is a single colour", path)
	return nil
}

// TestPlotSave draws plots of each kind and checks the PNGs. To look at
// them, set REPORT_PNG_DIR to a directory to keep them in.
func TestPlotSave(t *testing.T) {
	sizes := []float64{64 << 10, 1 << 20, 16 << 20, 128 << 20}
	for _, c := range []struct {
		name string
		p    Plot
	}{
		{"linear", Plot{
			Title: "Throughput", XLabel: "nodes", YLabel: "MB/s",
			Series: []Series{
				{Name: "put", X: []float64{1, 2, 3, 4}, Y: []float64{10, 19, 27, 33}},
				{Name: "get", X: []float64{1, 2, 3, 4}, Y: []float64{12, 23, 31, 40}},
			},
		}},
		{"log", Plot{
			Title: "Latency by size", XLabel: "object size", YLabel: "seconds",
			LogX: true, LogY: true,
			XTicks: []Tick{{64 << 10, "64K"}, {1 << 20, "1M"}, {16 << 20, "16M"}, {128 << 20, "128M"}},
			Series: []Series{
				{Name: "put", X: sizes, Y: []float64{0.01, 0.03, 0.3, 2.5}},
				{Name: "get", X: sizes, Y: []float64{0.005, 0.02, 0.2, 1.5}},
			},
		}},
		{"errorbars", Plot{
			Title: "With quartiles", XLabel: "size", YLabel: "s", LogX: true, LogY: true,
			Series: []Series{{
				Name: "put", X: sizes, Y: []float64{0.01, 0.03, 0.3, 2.5},
				YErrLow:  []float64{0.008, 0.025, 0, 2.0}, // 0 cannot go on a log axis
				YErrHigh: []float64{0.012, 0.04, 0.35, 3.1},
			}},
		}},
		{"errorbars-linear", Plot{
			Series: []Series{{
				Name: "get", X: []float64{1, 2, 3}, Y: []float64{5, 6, 7},
				YErrLow: []float64{4, 5, 6}, YErrHigh: []float64{6, 8, 9},
			}},
		}},
		{"zero-on-log", Plot{
			Title: "Zero on log axes", LogX: true, LogY: true,
			Series: []Series{
				{Name: "with zero", X: []float64{0, 1, 10, 100}, Y: []float64{1, 0, 5, 50}},
				{Name: "nan", X: []float64{1, 10, 100}, Y: []float64{2, math.NaN(), 20}},
			},
		}},
		{"single-point-log", Plot{
			LogX: true, LogY: true,
			Series: []Series{{Name: "one", X: []float64{3}, Y: []float64{7}}},
		}},
		{"fixed-y-range", Plot{
			Title: "Fractions", LogX: true, YMin: 0, YMax: 1.05, LegendBottom: true,
			Series: []Series{{Name: "ok", X: []float64{1, 5, 25}, Y: []float64{1, 1, 0.92}}},
		}},
		{"narrow-log", Plot{
			LogY:   true,
			Series: []Series{{Name: "flat", X: []float64{1, 2, 3}, Y: []float64{150, 155, 160}}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name+".png")
			if d := os.Getenv("REPORT_PNG_DIR"); d != "" {
				path = filepath.Join(d, c.name+".png")
			}
			if err := c.p.Save(path); err != nil {
				t.Fatal(err)
			}
			checkPNG(t, path)
		})
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	if err := (&Plot{Title: "empty"}).Save(filepath.Join(dir, "a.png")); !errors.Is(err, ErrNoSeries) {
		t.Errorf("no series: %v, want ErrNoSeries", err)
	}
	zeroOnLog := &Plot{LogY: true, YMin: 0, YMax: 10, Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1, 2}}}}
	if err := zeroOnLog.Save(filepath.Join(dir, "r.png")); err == nil {
		t.Error("a Y range from 0 on a log axis was drawn")
	}
	allGone := &Plot{LogY: true, Series: []Series{{Name: "z", X: []float64{1, 2}, Y: []float64{0, -1}}}}
	if err := allGone.Save(filepath.Join(dir, "b.png")); !errors.Is(err, ErrNoData) {
		t.Errorf("nothing drawable: %v, want ErrNoData", err)
	}
	mismatched := &Plot{Series: []Series{{Name: "m", X: []float64{1, 2}, Y: []float64{1}}}}
	if err := mismatched.Save(filepath.Join(dir, "c.png")); err == nil {
		t.Error("X and Y of different lengths: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "a.png")); !os.IsNotExist(err) {
		t.Errorf("a failed Save left a file: %v", err)
	}
}

func ExampleTable_WriteMarkdown() {
	t := &Table{Title: "GET", Columns: []string{"size", "p50", "MB/s"}}
	t.Add(SizeLabel(64<<10), 850*time.Microsecond, 73.51)
	t.Add(SizeLabel(100e6), 2100*time.Millisecond, 45.0)
	t.Notes = append(t.Notes, "Median of 5 runs.")
	t.WriteMarkdown(os.Stdout)
	// Output:
	// ### GET
	//
	// | size     |    p50 | MB/s |
	// | -------- | -----: | ---: |
	// | 64 KiB   | 850 µs | 73.5 |
	// | 95.4 MiB | 2.10 s | 45.0 |
	//
	// Median of 5 runs.
}

func TestLogTicks(t *testing.T) {
	labels := func(min, max float64) string {
		var ls []string
		for _, tk := range (logTicks{}).Ticks(min, max) {
			if !tk.IsMinor() {
				ls = append(ls, tk.Label)
			}
		}
		return strings.Join(ls, " ")
	}
	for _, c := range []struct {
		min, max float64
		want     string
	}{
		{0.25, 0.9, "0.3 0.4 0.5 0.6 0.7 0.8 0.9"},
		{1, 1000, "1 2 5 10 20 50 100 200 500 1000"},
		{0.005, 2.5, "0.005 0.01 0.02 0.05 0.1 0.2 0.5 1 2"},
		{65536, 1.4e8, "1e5 1e6 1e7 1e8"},
		{1e-9, 1e9, "1e-9 1e-6 0.001 1 1000 1e6 1e9"},
	} {
		if got := labels(c.min, c.max); got != c.want {
			t.Errorf("logTicks(%v, %v) labels %q, want %q", c.min, c.max, got, c.want)
		}
	}
	if ts := (logTicks{}).Ticks(0, 10); ts != nil {
		t.Errorf("logTicks(0, 10) = %v, want none", ts)
	}
	for _, tk := range (logTicks{}).Ticks(150, 160) {
		if tk.Value <= 0 {
			t.Errorf("narrow range gave tick %v", tk.Value)
		}
	}
}
