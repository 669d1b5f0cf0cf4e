package report

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// logTicks marks a log axis. Unlike plot.LogTicks, which labels only powers
// of ten, it labels enough values that a range within one or two decades
// still gets several labels, and it never panics on a range that is not
// positive (it returns no ticks).
type logTicks struct{}

var _ plot.Ticker = logTicks{}

// Ticks returns the ticks between vmin and vmax: labelled ones at 1-9, at
// 1, 2 and 5, or at 1 times each power of ten, for ranges of up to one, up
// to three and more decades, and unlabelled minor ones at the other
// multiples when there are few enough decades to show them. A range too
// narrow for two such labels gets linear ticks instead.
func (logTicks) Ticks(vmin, vmax float64) []plot.Tick {
	if !(vmin > 0) || !(vmax >= vmin) || math.IsInf(vmax, 0) {
		return nil
	}
	lo := int(math.Floor(math.Log10(vmin)))
	hi := int(math.Ceil(math.Log10(vmax)))
	if hi == lo {
		hi++
	}
	decades := hi - lo
	var major []int
	switch span := math.Log10(vmax / vmin); {
	case span <= 1:
		major = []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	case span <= 3:
		major = []int{1, 2, 5}
	default:
		major = []int{1}
	}
	// Label only every step-th decade on very wide ranges.
	step := max(1, (decades+7)/8)
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		for m := 1; m <= 9; m++ {
			if e == hi && m > 1 {
				break
			}
			// Parsed rather than multiplied, so that 3e-1 is the double
			// nearest 0.3 and its label is "0.3".
			v, _ := strconv.ParseFloat(strconv.Itoa(m)+"e"+strconv.Itoa(e), 64)
			if v < vmin || v > vmax {
				continue
			}
			switch {
			case slices.Contains(major, m) && (m != 1 || (e-lo)%step == 0):
				ticks = append(ticks, plot.Tick{Value: v, Label: tickLabel(v)})
			case decades <= 8:
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	if labelled(ticks) < 2 {
		// A range too narrow for any multiple of a power of ten to fall
		// in twice: it is nearly linear, so linear ticks read well. Keep
		// only positive ones, as the log scale cannot place the others.
		ticks = ticks[:0]
		for _, t := range (plot.DefaultTicks{}).Ticks(vmin, vmax) {
			if t.Value > 0 {
				ticks = append(ticks, t)
			}
		}
	}
	return ticks
}

// labelled counts the major (labelled) ticks.
func labelled(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if !t.IsMinor() {
			n++
		}
	}
	return n
}

// tickLabel formats a log-axis tick value compactly: plainly from 0.001 to
// 99999, as "1e6" or "2e-5" outside that.
func tickLabel(v float64) string {
	if a := math.Abs(v); a >= 1e-3 && a < 1e5 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	s := strconv.FormatFloat(v, 'e', -1, 64) // "1e+06", "2.5e-05"
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	return mant + "e" + strconv.Itoa(e)
}
