package lab

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/report"
)

// transfer is one finished (or failed) upload or download.
type transfer struct {
	door string
	np   int
	up   bool
	size int64
	d    time.Duration
	err  error
}

// xferCell sums up the transfers of one door, Np, direction and size.
type xferCell struct {
	door string
	np   int
	up   bool
	size int64
	n    int // transfers
	ok   int // of which succeeded
	// mean and sd are of the seconds the successful transfers took
	// (sd is the sample standard deviation); NaN if there are too few.
	mean, sd float64
	firstErr string // the first failure's error, if any
}

// efficiency is the fraction of c's transfers that succeeded (NaN if
// there were none).
func (c xferCell) efficiency() float64 {
	if c.n == 0 {
		return math.NaN()
	}
	return float64(c.ok) / float64(c.n)
}

func opName(up bool) string {
	if up {
		return "upload"
	}
	return "download"
}

// summarize groups transfers by door, Np, direction and size, ordered by
// door as in doors (doors not listed are left out), then Np, downloads
// before uploads, then size; only groups with transfers are returned.
func summarize(ts []transfer, doors []string) []xferCell {
	type key struct {
		door string
		np   int
		up   bool
		size int64
	}
	secs := map[key][]float64{}
	cells := map[key]*xferCell{}
	for _, t := range ts {
		if !slices.Contains(doors, t.door) {
			continue
		}
		k := key{t.door, t.np, t.up, t.size}
		c := cells[k]
		if c == nil {
			c = &xferCell{door: t.door, np: t.np, up: t.up, size: t.size}
			cells[k] = c
		}
		c.n++
		if t.err != nil {
			if c.firstErr == "" {
				c.firstErr = t.err.Error()
			}
			continue
		}
		c.ok++
		secs[k] = append(secs[k], t.d.Seconds())
	}
	var out []xferCell
	for k, c := range cells {
		c.mean, c.sd = meanSD(secs[k])
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b xferCell) int {
		switch {
		case a.door != b.door:
			return slices.Index(doors, a.door) - slices.Index(doors, b.door)
		case a.np != b.np:
			return a.np - b.np
		case a.up != b.up:
			if a.up {
				return 1
			}
			return -1
		}
		return int(a.size - b.size)
	})
	return out
}

// meanSD is the mean and sample standard deviation of xs: NaN, NaN for
// none; the standard deviation is NaN for one.
func meanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	mean = report.Mean(xs)
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// opTotals adds up a door's transfers at one Np in one direction over
// all sizes: efficiency as the paper's Fig. 4 has it.
func opTotals(cells []xferCell, door string, np int, up bool) (n, ok int) {
	for _, c := range cells {
		if c.door == door && c.np == np && c.up == up {
			n, ok = n+c.n, ok+c.ok
		}
	}
	return n, ok
}

// paperTable is one of the paper's Tables 4–7: mean transfer time in
// seconds per Np, for 1 GB, 100 MB, 10 MB, 1 MB and 100 kB (its column
// order; paperSizes).
type paperTable struct {
	number  int
	service string // ownCloud or StoRM
	door    string // our door that does what the service did
	up      bool
	rows    map[int][5]float64
}

// paperSizes are the sizes of paperTable's columns.
var paperSizes = []int64{1e9, 100e6, 10e6, 1e6, 100e3}

// paperTables are the paper's Appendix A (Tables 4–7) as printed.
var paperTables = []paperTable{
	{4, "ownCloud", doorWebDAV, false, map[int][5]float64{
		1: {23.9, 2.4, 0.7, 0.4, 0.3}, 5: {24.8, 2.6, 0.8, 0.4, 0.3}, 25: {30.1, 3.5, 1.5, 0.6, 0.8},
		50: {31.6, 4.2, 1.4, 0.7, 0.6}, 100: {40.2, 5.7, 2.6, 1.6, 1.7}, 200: {62.3, 7.4, 2.9, 1.5, 1.2}}},
	{5, "ownCloud", doorWebDAV, true, map[int][5]float64{
		1: {74.6, 5.9, 1.8, 1.2, 1.0}, 5: {137.0, 8.1, 3.4, 2.2, 2.7}, 25: {266.5, 22.0, 12.4, 7.2, 5.5},
		50: {239.1, 18.9, 13.3, 6.0, 7.6}, 100: {590.9, 58.4, 28.7, 23.6, 23.5}, 200: {518.0, 61.4, 25.5, 20.8, 23.1}}},
	{6, "StoRM", doorS3, false, map[int][5]float64{
		1: {11.56, 1.37, 0.66, 0.39, 0.26}, 5: {17.48, 2.00, 0.63, 0.30, 0.24}, 25: {28.73, 3.29, 1.01, 0.41, 0.38},
		50: {30.85, 3.06, 1.08, 0.46, 0.31}, 100: {66.87, 6.75, 1.71, 0.86, 0.51}, 200: {101.53, 11.05, 2.28, 0.95, 1.26}}},
	{7, "StoRM", doorS3, true, map[int][5]float64{
		1: {11.40, 1.24, 0.41, 0.26, 0.22}, 5: {14.93, 1.76, 0.61, 0.30, 0.24}, 25: {26.97, 2.75, 0.97, 0.45, 0.25},
		50: {31.04, 3.03, 0.86, 0.38, 0.31}, 100: {57.82, 6.10, 1.46, 0.66, 0.40}, 200: {76.95, 8.22, 2.03, 0.79, 0.87}}},
}

// paperFor is the paper's table for a door and direction, if there is one.
func paperFor(door string, up bool) (paperTable, bool) {
	i := slices.IndexFunc(paperTables, func(t paperTable) bool { return t.door == door && t.up == up })
	if i < 0 {
		return paperTable{}, false
	}
	return paperTables[i], true
}

// paperTime is the paper's mean time for size at np, if it has one.
func (t paperTable) time(np int, size int64) (float64, bool) {
	row, ok := t.rows[np]
	i := slices.Index(paperSizes, size)
	if !ok || i < 0 {
		return 0, false
	}
	return row[i], true
}

// doorTitle names a door in tables and plots.
func doorTitle(door string) string {
	switch door {
	case doorWebDAV:
		return "Quilt WebDAV"
	case doorS3:
		return "Quilt S3 multipart"
	case doorObject:
		return "Quilt object API"
	case doorRclone:
		return "rclone serve webdav, local disk"
	}
	return door
}

// comparable reports whether sizes are the paper's, so its times can be
// set beside ours.
func comparable(sizes []int64) bool { return slices.Equal(sizes, parallelSizes) }

// timeTables are the paper's Tables 4–7 for our doors: per door and
// direction (downloads first, as Table 4 before 5), a row per Np with the
// mean time per size, largest first, the transfers and the efficiency.
// When the sizes are the paper's, each Np with a row of the paper's
// counterpart table (ownCloud for WebDAV, StoRM for S3) has that row
// under ours.
func timeTables(cells []xferCell, doors []string, sizes []int64, nps []int) []*report.Table {
	desc := slices.Clone(sizes)
	slices.Reverse(desc)
	var tabs []*report.Table
	for _, door := range doors {
		for _, up := range []bool{false, true} {
			pt, counterpart := paperFor(door, up)
			hasPaper := counterpart && comparable(sizes)
			t := &report.Table{Title: fmt.Sprintf("%s / %s transfer time (seconds)", doorTitle(door), opName(up))}
			if counterpart {
				t.Title += fmt.Sprintf(", as the paper's Tab. %d (%s)", pt.number, pt.service)
			}
			t.Columns = []string{"Np"}
			if hasPaper {
				t.Columns = append(t.Columns, "measured")
			}
			for _, s := range desc {
				t.Columns = append(t.Columns, sizeName(s))
			}
			t.Columns = append(t.Columns, "transfers", "efficiency")
			for _, np := range nps {
				n, ok := opTotals(cells, door, np, up)
				if n == 0 {
					continue
				}
				row := []any{np}
				if hasPaper {
					row = append(row, "here")
				}
				for _, s := range desc {
					row = append(row, nil)
					for _, c := range cells {
						if c.door == door && c.np == np && c.up == up && c.size == s && !math.IsNaN(c.mean) {
							row[len(row)-1] = c.mean
						}
					}
				}
				t.Add(append(row, n, float64(ok)/float64(n))...)
				if !hasPaper {
					continue
				}
				if _, ok := pt.rows[np]; !ok {
					continue
				}
				prow := []any{np, "paper"}
				for _, s := range desc {
					v, _ := pt.time(np, s)
					prow = append(prow, v)
				}
				// The paper gives download efficiency (100% for both) but
				// upload efficiency only as a plot (Fig. 4).
				var eff any
				if !up {
					eff = 1.0
				}
				t.Add(append(prow, nil, eff)...)
			}
			if len(t.Rows) > 0 {
				tabs = append(tabs, t)
			}
		}
	}
	return tabs
}

// efficiencyTable is the paper's Fig. 4 as a table: per Np, each door's
// efficiency in each direction.
func efficiencyTable(cells []xferCell, doors []string, nps []int) *report.Table {
	t := &report.Table{Title: "Efficiency (fraction of transfers that succeeded), as the paper's Fig. 4", Columns: []string{"Np"}}
	for _, d := range doors {
		t.Columns = append(t.Columns, d+" download", d+" upload")
	}
	for _, np := range nps {
		row := []any{np}
		for _, d := range doors {
			for _, up := range []bool{false, true} {
				n, ok := opTotals(cells, d, np, up)
				if n == 0 {
					row = append(row, nil)
				} else {
					row = append(row, float64(ok)/float64(n))
				}
			}
		}
		t.Add(row...)
	}
	return t
}

// dataTable holds every cell at full precision, for the CSV.
func dataTable(cells []xferCell) *report.Table {
	t := &report.Table{Title: "parallel-transfers: every door, Np, operation and size",
		Columns: []string{"door", "Np", "operation", "size", "bytes", "transfers", "succeeded", "efficiency", "mean s", "sd s", "first error"}}
	for _, c := range cells {
		t.Add(c.door, c.np, opName(c.up), sizeName(c.size), c.size, c.n, c.ok, c.efficiency(), nanNil(c.mean), nanNil(c.sd), oneLine(c.firstErr, 300))
	}
	return t
}

// nanNil makes NaN a blank cell.
func nanNil(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return v
}

// failureNotes lists, per door and direction, the first error of each
// size that had failures (at most a few), for the Markdown.
func failureNotes(cells []xferCell) []string {
	var notes []string
	for _, c := range cells {
		if c.firstErr != "" && len(notes) < 12 {
			notes = append(notes, fmt.Sprintf("Failed: %s %s %s at Np %d, %d of %d; first: %s", c.door, opName(c.up), sizeName(c.size), c.np, c.n-c.ok, c.n, oneLine(c.firstErr, 200)))
		}
	}
	return notes
}

// parallelPlots are the paper's Figs. 3 and 4 and, per door and
// direction, mean time against Np for each size; by file name.
func parallelPlots(cells []xferCell, doors []string, sizes []int64, nps []int) map[string]*report.Plot {
	plots := map[string]*report.Plot{}
	largest := slices.Max(sizes)
	fig3 := &report.Plot{Title: fmt.Sprintf("Mean transfer time of %s files vs Np (paper's Fig. 3)", sizeName(largest)),
		XLabel: "Np (parallel workers)", YLabel: "seconds", LogX: true, LogY: true}
	fig4 := &report.Plot{Title: "Efficiency vs Np (paper's Fig. 4)", XLabel: "Np (parallel workers)", YLabel: "fraction of transfers that succeeded",
		LogX: true, YMin: 0, YMax: 1.05, LegendBottom: true}
	for _, door := range doors {
		for _, up := range []bool{false, true} {
			var t3, e4 report.Series
			t3.Name, e4.Name = door+" "+opName(up), door+" "+opName(up)
			bySize := &report.Plot{Title: fmt.Sprintf("%s: mean %s time vs Np", doorTitle(door), opName(up)),
				XLabel: "Np (parallel workers)", YLabel: "seconds", LogX: true, LogY: true}
			for _, s := range sizes {
				ser := report.Series{Name: sizeName(s)}
				for _, c := range cells {
					if c.door == door && c.up == up && c.size == s && !math.IsNaN(c.mean) {
						ser.X, ser.Y = append(ser.X, float64(c.np)), append(ser.Y, c.mean)
						if s == largest {
							t3.X, t3.Y = append(t3.X, float64(c.np)), append(t3.Y, c.mean)
						}
					}
				}
				if len(ser.X) > 0 {
					bySize.Series = append(bySize.Series, ser)
				}
			}
			for _, np := range nps {
				if n, ok := opTotals(cells, door, np, up); n > 0 {
					e4.X, e4.Y = append(e4.X, float64(np)), append(e4.Y, float64(ok)/float64(n))
				}
			}
			if len(t3.X) > 0 {
				fig3.Series = append(fig3.Series, t3)
			}
			if len(e4.X) > 0 {
				fig4.Series = append(fig4.Series, e4)
			}
			if len(bySize.Series) > 0 {
				plots[fmt.Sprintf("parallel-transfers-%s-%s.png", door, opName(up))] = bySize
			}
		}
	}
	if comparable(sizes) {
		for _, pt := range paperTables {
			ser := report.Series{Name: fmt.Sprintf("%s %s (paper)", pt.service, opName(pt.up))}
			for _, np := range nps {
				if v, ok := pt.time(np, largest); ok {
					ser.X, ser.Y = append(ser.X, float64(np)), append(ser.Y, v)
				}
			}
			if len(ser.X) > 0 {
				fig3.Series = append(fig3.Series, ser)
			}
		}
	}
	if len(fig3.Series) > 0 {
		plots["parallel-transfers-fig3.png"] = fig3
	}
	if len(fig4.Series) > 0 {
		plots["parallel-transfers-fig4.png"] = fig4
	}
	return plots
}

// writeParallelReport writes parallel-transfers.csv (every cell),
// parallel-transfers.md (the tables of the paper's shape, the
// efficiencies, notes) and the plots into dir.
func writeParallelReport(dir string, ts []transfer, plan parallelPlan, notes []string) error {
	doors := plan.doors()
	cells := summarize(ts, doors)
	tabs := timeTables(cells, doors, plan.sizes, plan.nps)
	eff := efficiencyTable(cells, doors, plan.nps)
	eff.Notes = append(eff.Notes, notes...)
	if comparable(plan.sizes) {
		eff.Notes = append(eff.Notes, "Rows \"paper\" are the paper's Tables 4–7 (ownCloud beside WebDAV, StoRM beside S3); its files were those of its Table 2 (86,950 B … 1,376,498,512 B for \"100kB\" … \"1GB\"). It gives download efficiency as 100% for both services and upload efficiency only as a plot (Fig. 4): StoRM about 100%, ownCloud falling from Np = 100 to about 92% at Np = 200.")
	} else {
		eff.Notes = append(eff.Notes, fmt.Sprintf("The paper's Tables 4–7 are set beside these only at --scale 1 (its file sizes); these sizes are %g of its.", plan.scale))
	}
	eff.Notes = append(eff.Notes, failureNotes(cells)...)
	if _, _, err := report.WriteSet(dir, "parallel-transfers", dataTable(cells), append(tabs, eff)...); err != nil {
		return err
	}
	plots := parallelPlots(cells, doors, plan.sizes, plan.nps)
	names := make([]string, 0, len(plots))
	for n := range plots {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := plots[n].Save(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("lab: %s: %w", n, err)
		}
	}
	return nil
}
