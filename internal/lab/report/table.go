package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoColumns is returned when writing a [Table] that has no columns.
var ErrNoColumns = errors.New("report: table has no columns")

// ErrRowLength is returned when writing a [Table] with a row whose cell
// count differs from the number of columns (possible only when Rows is
// filled without [Table.Add]).
var ErrRowLength = errors.New("report: row length differs from column count")

// Table is a result table: named columns and rows of cells, written as CSV
// by [Table.WriteCSV] and as Markdown by [Table.WriteMarkdown].
//
// A cell is a string, an int, an int64, a float64, a [time.Duration] or nil
// (a blank cell). Other integer and float types are accepted as numbers;
// any other value is written as text with fmt.Sprint.
type Table struct {
	Title   string   // shown above the Markdown table
	Columns []string // column names, the CSV header
	Rows    [][]any  // each row has len(Columns) cells
	Notes   []string // lines printed under the Markdown table
}

// Add appends a row. It panics if the number of cells differs from the
// number of columns: that is a bug in the experiment, not a runtime
// condition.
func (t *Table) Add(cells ...any) {
	if len(cells) != len(t.Columns) {
		panic(fmt.Sprintf("report: Add with %d cells to a table with %d columns", len(cells), len(t.Columns)))
	}
	t.Rows = append(t.Rows, append([]any(nil), cells...))
}

// check reports whether t can be written.
func (t *Table) check() error {
	if len(t.Columns) == 0 {
		return ErrNoColumns
	}
	for i, row := range t.Rows {
		if len(row) != len(t.Columns) {
			return fmt.Errorf("%w: row %d has %d cells, want %d", ErrRowLength, i, len(row), len(t.Columns))
		}
	}
	return nil
}

// Write writes t to DIR/NAME.csv and DIR/NAME.md, creating DIR if needed,
// and returns the two paths. Existing files are replaced. NAME must be a
// plain file name (no path separator).
func Write(dir, name string, t *Table) (csvPath, mdPath string, err error) {
	return WriteSet(dir, name, t, t)
}

// WriteSet is Write for an experiment whose data is one long table and
// whose readable form is several: data goes to DIR/NAME.csv and views,
// one after the other with a blank line between, to DIR/NAME.md.
func WriteSet(dir, name string, data *Table, views ...*Table) (csvPath, mdPath string, err error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", "", fmt.Errorf("report: invalid output name %q", name)
	}
	for _, t := range append([]*Table{data}, views...) {
		if err := t.check(); err != nil {
			return "", "", err
		}
	}
	if len(views) == 0 {
		return "", "", fmt.Errorf("report: %s: no tables for the Markdown", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("report: %w", err)
	}
	csvPath = filepath.Join(dir, name+".csv")
	mdPath = filepath.Join(dir, name+".md")
	if err := writeFile(csvPath, data.WriteCSV); err != nil {
		return "", "", err
	}
	md := func(w io.Writer) error {
		for i, t := range views {
			if i > 0 {
				if _, err := io.WriteString(w, "\n"); err != nil {
					return fmt.Errorf("report: markdown: %w", err)
				}
			}
			if err := t.WriteMarkdown(w); err != nil {
				return err
			}
		}
		return nil
	}
	if err := writeFile(mdPath, md); err != nil {
		return "", "", err
	}
	return csvPath, mdPath, nil
}

// writeFile creates path and fills it with write, reporting close errors.
func writeFile(path string, write func(io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("report: %w", cerr)
		}
	}()
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
