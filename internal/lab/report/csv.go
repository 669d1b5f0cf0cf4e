package report

import (
	"encoding/csv"
	"fmt"
	"io"
)

// WriteCSV writes t as RFC 4180 CSV: a header row of Columns, then one
// record per row. Numbers are written exactly (floats in the shortest form
// that parses back to the same value), durations as seconds, nil as an
// empty field. Title and Notes are not written.
func (t *Table) WriteCSV(w io.Writer) error {
	if err := t.check(); err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(t.Columns); err != nil {
		return fmt.Errorf("report: csv: %w", err)
	}
	rec := make([]string, len(t.Columns))
	for _, row := range t.Rows {
		for i, c := range row {
			rec[i] = csvCell(c)
		}
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("report: csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("report: csv: %w", err)
	}
	return nil
}
