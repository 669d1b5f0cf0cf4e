package report

import (
	"strconv"
	"strings"
)

// sizeUnits are the binary units SizeLabel uses, each 1024 times the last.
var sizeUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// SizeLabel formats a byte count with binary units for axes and tables:
// 10 → "10 B", 65536 → "64 KiB", 1<<20 → "1 MiB", 100e6 → "95.4 MiB".
// It picks the largest unit not above n; a whole number of units is shown
// without decimals, other values with three significant digits (at least
// the whole part), trailing zeros dropped.
func SizeLabel(n int64) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign = "-"
		u = -u // two's complement: correct for math.MinInt64 too
	}
	unit := 0
	div := uint64(1)
	for unit < len(sizeUnits)-1 && u >= div*1024 {
		div *= 1024
		unit++
	}
	if u%div == 0 {
		return sign + strconv.FormatUint(u/div, 10) + " " + sizeUnits[unit]
	}
	v := float64(u) / float64(div)
	prec := 0
	switch {
	case v < 10:
		prec = 2
	case v < 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return sign + s + " " + sizeUnits[unit]
}
