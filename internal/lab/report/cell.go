package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// isNumber reports whether a cell holds a number (and so is right-aligned
// in Markdown).
func isNumber(c any) bool {
	switch c.(type) {
	case int, int8, int16, int32, int64,
		uint, uint8, uint16, uint32, uint64,
		float32, float64, time.Duration:
		return true
	}
	return false
}

// csvCell formats a cell exactly: integers in decimal, floats in the
// shortest form that reads back to the same value, durations in seconds.
func csvCell(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case time.Duration:
		return strconv.FormatFloat(v.Seconds(), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	}
	return fmt.Sprint(c)
}

// humanCell formats a cell for people: numbers to three significant digits,
// durations with a unit.
func humanCell(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case time.Duration:
		return formatDuration(v)
	case float64:
		return formatSig3(v)
	case float32:
		return formatSig3(float64(v))
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v)
	}
	return fmt.Sprint(c)
}

// round3 rounds v to three significant digits and returns the rounded value
// and its decimal exponent (v = m × 10^exp with 1 <= |m| < 10).
func round3(v float64) (float64, int) {
	s := strconv.FormatFloat(v, 'e', 2, 64) // "-1.23e+04"
	r, _ := strconv.ParseFloat(s, 64)
	exp, _ := strconv.Atoi(s[strings.IndexByte(s, 'e')+1:])
	return r, exp
}

// formatSig3 formats v with three significant digits and without an
// exponent for magnitudes from 1e-4 to 1e15: 0.00123, 1.23, 123, 12300.
// Trailing zeros are kept (1.20), as they carry the precision.
func formatSig3(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	r, exp := round3(v)
	if exp < -4 || exp >= 15 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(r, 'f', max(0, 2-exp), 64)
}

// formatDuration formats d with three significant digits in the largest
// unit that keeps the number at least 1: "850 ns", "12.3 ms", "1.20 s".
// Durations of 1000 s and more stay in seconds.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0 s"
	}
	ns, _ := round3(float64(d))
	a := math.Abs(ns)
	switch {
	case a < 1e3:
		return formatSig3(ns) + " ns"
	case a < 1e6:
		return formatSig3(ns/1e3) + " µs"
	case a < 1e9:
		return formatSig3(ns/1e6) + " ms"
	}
	return formatSig3(ns/1e9) + " s"
}
