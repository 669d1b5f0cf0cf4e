package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteMarkdown writes t as GitHub-flavoured Markdown: a "### Title" line
// and a blank line if Title is set, then a pipe table, then each note as a
// paragraph of its own. Columns whose non-blank cells are all numbers are
// right-aligned ("---:"). Floats are shown to three significant digits
// (0.00123, 1.23, 123, 12300), durations with a unit ("12.3 ms", "1.20 s"),
// nil as a blank cell. Cells are padded so the source lines up too.
func (t *Table) WriteMarkdown(w io.Writer) error {
	if err := t.check(); err != nil {
		return err
	}
	ncol := len(t.Columns)
	header := make([]string, ncol)
	width := make([]int, ncol)
	numeric := make([]bool, ncol)
	for j, name := range t.Columns {
		header[j] = escapeCell(name)
		width[j] = max(3, utf8.RuneCountInString(header[j]))
		numeric[j] = columnIsNumeric(t.Rows, j)
	}
	cells := make([][]string, len(t.Rows))
	for i, row := range t.Rows {
		cells[i] = make([]string, ncol)
		for j, c := range row {
			s := escapeCell(humanCell(c))
			cells[i][j] = s
			width[j] = max(width[j], utf8.RuneCountInString(s))
		}
	}

	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", t.Title)
	}
	writeRow(&b, header, width, numeric)
	rule := make([]string, ncol)
	for j := range rule {
		if numeric[j] {
			rule[j] = strings.Repeat("-", width[j]-1) + ":"
		} else {
			rule[j] = strings.Repeat("-", width[j])
		}
	}
	writeRow(&b, rule, width, numeric)
	for _, row := range cells {
		writeRow(&b, row, width, numeric)
	}
	for _, note := range t.Notes {
		fmt.Fprintf(&b, "\n%s\n", note)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("report: markdown: %w", err)
	}
	return nil
}

// columnIsNumeric reports whether column j has at least one number and
// nothing but numbers and blanks.
func columnIsNumeric(rows [][]any, j int) bool {
	seen := false
	for _, row := range rows {
		switch c := row[j]; {
		case c == nil:
		case isNumber(c):
			seen = true
		default:
			return false
		}
	}
	return seen
}

// writeRow writes one table line, padding each cell to its column width:
// on the left in right-aligned columns, on the right otherwise.
func writeRow(b *strings.Builder, cells []string, width []int, right []bool) {
	b.WriteString("|")
	for j, s := range cells {
		pad := strings.Repeat(" ", width[j]-utf8.RuneCountInString(s))
		b.WriteString(" ")
		if right[j] {
			b.WriteString(pad + s)
		} else {
			b.WriteString(s + pad)
		}
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

// escapeCell makes s safe inside a pipe-table cell: pipes are escaped and
// line breaks become spaces.
func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\r\n", " ")
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
