package report

import (
	"math"
	"slices"
)

// Quartiles returns the first quartile, the median and the third quartile
// of xs, interpolating linearly between order statistics (numpy's default
// "linear" method: the p-quantile is at rank p·(n-1)). xs is not modified.
// An empty xs, or one containing a NaN, gives three NaNs.
func Quartiles(xs []float64) (q1, median, q3 float64) {
	if len(xs) == 0 || slices.ContainsFunc(xs, math.IsNaN) {
		nan := math.NaN()
		return nan, nan, nan
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return quantile(s, 0.25), quantile(s, 0.5), quantile(s, 0.75)
}

// quantile returns the p-quantile of the sorted, non-empty s.
func quantile(s []float64, p float64) float64 {
	pos := p * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	frac := pos - float64(lo)
	return s[lo] + frac*(s[lo+1]-s[lo])
}

// Mean returns the arithmetic mean of xs, or NaN if xs is empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
