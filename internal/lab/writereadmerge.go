package lab

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// MergeWriteRead pools the write-read results in dirs (each the --out of
// a `quilt lab run write-read`) into one results directory, out: the same
// CSV, Markdown and plots a single run writes. It is for the long
// variants, whose cases can be run side by side as separate processes
// (a 128 MiB write from qmpsu's worst client alone takes about 50 minutes
// on Tahoe-LAFS).
//
// A case (system, client and size) found in one directory only is
// copied as it is. A case found in several is pooled: each of them must
// hold a single run (--runs 1), and the merged row gives the median and
// quartiles of those runs, and counts the failed ones. Rows go by client,
// then size, then system, each in the order first seen. sc names the
// scenario in the title and notes; the inputs must have been run on it.
func MergeWriteRead(out string, sc *scenario.Scenario, dirs []string) error {
	if len(dirs) == 0 {
		return fmt.Errorf("lab: merge: no results directories")
	}
	type key struct {
		sys, client string
		size        int64
	}
	type pooled struct {
		rows   [][]any // as read, one per directory
		froms  []string
		writes []float64
		reads  []float64
		failed []string
	}
	cases := map[key]*pooled{}
	var keys []key
	var clients []string
	systems := map[string][]string{} // client → its systems, in the order first seen
	for _, d := range dirs {
		rows, err := readWriteReadCSV(filepath.Join(d, "write-read.csv"))
		if err != nil {
			return err
		}
		for _, row := range rows {
			k := key{row[0].(string), row[1].(string), row[3].(int64)}
			c := cases[k]
			if c == nil {
				c = &pooled{}
				cases[k] = c
				keys = append(keys, k)
			}
			if slices.Contains(c.froms, d) {
				return fmt.Errorf("lab: merge: %s has the case %s, client %s, %s twice", d, k.sys, k.client, report.SizeLabel(k.size))
			}
			c.rows, c.froms = append(c.rows, row), append(c.froms, d)
			if !slices.Contains(systems[k.client], k.sys) {
				systems[k.client] = append(systems[k.client], k.sys)
			}
			if !slices.Contains(clients, k.client) {
				clients = append(clients, k.client)
			}
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("lab: merge: no results in %s", strings.Join(dirs, ", "))
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if c := slices.Index(clients, a.client) - slices.Index(clients, b.client); c != 0 {
			return c
		}
		if c := cmp.Compare(a.size, b.size); c != 0 {
			return c
		}
		return slices.Index(systems[a.client], a.sys) - slices.Index(systems[a.client], b.sys)
	})
	tab := writeReadTable(sc)
	runs := 0
	for _, k := range keys {
		c := cases[k]
		if len(c.rows) == 1 {
			tab.Rows = append(tab.Rows, c.rows[0])
			runs += c.rows[0][4].(int)
			continue
		}
		for i, row := range c.rows {
			if n := row[4].(int); n != 1 {
				return fmt.Errorf("lab: merge: %s has %d runs of %s, client %s, %s, also in %s: only single runs (--runs 1) can be pooled",
					c.froms[i], n, k.sys, k.client, report.SizeLabel(k.size), strings.Join(slices.Delete(slices.Clone(c.froms), i, i+1), ", "))
			}
			w, ok1 := row[5].(float64)
			r, ok2 := row[8].(float64)
			if !ok1 || !ok2 {
				note, _ := row[11].(string)
				// A failure note reads "N: first error".
				if _, e, ok := strings.Cut(note, ": "); ok {
					note = e
				}
				c.failed = append(c.failed, note)
				continue
			}
			c.writes, c.reads = append(c.writes, w), append(c.reads, r)
		}
		runs += len(c.rows)
		if len(c.writes) == 0 {
			tab.Add(k.sys, k.client, report.SizeLabel(k.size), k.size, len(c.rows), nil, nil, nil, nil, nil, nil, failureNote(c.failed))
			continue
		}
		w1, wm, w3 := report.Quartiles(c.writes)
		r1, rm, r3 := report.Quartiles(c.reads)
		tab.Add(k.sys, k.client, report.SizeLabel(k.size), k.size, len(c.rows), wm, w1, w3, rm, r1, r3, failureNote(c.failed))
	}
	return saveWriteRead(out, sc, tab, fmt.Sprintf("Pooled by `quilt lab merge` from %d results directories (%d runs in all); a case run in several of them shows the median and quartiles of their runs.", len(dirs), runs))
}

// readWriteReadCSV reads the rows of a write-read.csv, typed as
// writeReadTable's rows are when written.
func readWriteReadCSV(path string) ([][]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lab: merge: %w", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("lab: merge: %s: %w", path, err)
	}
	want := writeReadTable(&scenario.Scenario{}).Columns
	if len(recs) == 0 || !slices.Equal(recs[0], want) {
		return nil, fmt.Errorf("lab: merge: %s is not a write-read result (its header is not %q)", path, strings.Join(want, ","))
	}
	var rows [][]any
	for i, r := range recs[1:] {
		bad := func(what string) error {
			return fmt.Errorf("lab: merge: %s line %d: %s", path, i+2, what)
		}
		size, err := strconv.ParseInt(r[3], 10, 64)
		if err != nil || size <= 0 {
			return nil, bad("bytes " + strconv.Quote(r[3]))
		}
		n, err := strconv.Atoi(r[4])
		if err != nil || n <= 0 {
			return nil, bad("runs " + strconv.Quote(r[4]))
		}
		row := []any{r[0], r[1], r[2], size, n}
		for j := 5; j <= 10; j++ {
			if r[j] == "" {
				row = append(row, nil)
				continue
			}
			v, err := strconv.ParseFloat(r[j], 64)
			if err != nil || v < 0 {
				return nil, bad(fmt.Sprintf("%s %q", want[j], r[j]))
			}
			row = append(row, v)
		}
		rows = append(rows, append(row, r[11]))
	}
	return rows, nil
}
