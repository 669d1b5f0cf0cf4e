// Package report writes the lab's results: CSV, Markdown tables and PNG plots.
//
// An experiment collects its measurements in a [Table] and hands it to
// [Write], which puts NAME.csv (full precision, for scripts) and NAME.md
// (three significant digits, for people and docs/benchmarks.md) into the
// output directory. Curves go into a [Plot], saved as a PNG with
// [Plot.Save]. [Quartiles], [Mean] and [SizeLabel] are the small summaries
// and labels experiments need to fill both.
//
//	t := &report.Table{Title: "PUT latency", Columns: []string{"size", "p50"}}
//	t.Add(report.SizeLabel(1<<20), 12*time.Millisecond)
//	csvPath, mdPath, err := report.Write(dir, "put-latency", t)
//
// The package does no experiment logic and holds no state: every function
// is safe to call concurrently on distinct values. A Table or Plot must not
// be modified while it is being written.
package report
