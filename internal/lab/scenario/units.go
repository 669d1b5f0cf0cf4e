package scenario

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Values are parsed as exact decimals (big.Rat) and rounded once, so that
// 17.4Mbit is exactly 2,175,000 bytes/s and what Format writes parses back
// to the same value.

// splitNumber splits "17.4Mbit" into the exact value 17.4 and "Mbit".
func splitNumber(s string) (*big.Rat, string, error) {
	i := 0
	dot := false
	for i < len(s) && ('0' <= s[i] && s[i] <= '9' || s[i] == '.' && !dot) {
		dot = dot || s[i] == '.'
		i++
	}
	num := s[:i]
	if num == "" || num == "." {
		return nil, "", fmt.Errorf("%q does not start with a number", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, "", fmt.Errorf("%q does not start with a number", s)
	}
	return r, s[i:], nil
}

// roundInt rounds r (>= 0) to the nearest integer, halves up.
func roundInt(r *big.Rat) (int64, error) {
	n := new(big.Int).Mul(r.Num(), big.NewInt(2))
	n.Add(n, r.Denom())
	n.Quo(n, new(big.Int).Mul(r.Denom(), big.NewInt(2)))
	if !n.IsInt64() {
		return 0, errors.New("too large")
	}
	return n.Int64(), nil
}

var (
	bitUnits = map[string]int64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
	// byte units for rates and sizes
	byteUnits = map[string]int64{
		"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50,
	}
	rateByteUnits = []string{"B", "kB", "KB", "MB", "GB"}
)

// parseRate parses a bandwidth such as 17.4Mbit or 2.5MB/s into bytes per
// second.
func parseRate(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	r, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	unit = strings.TrimSuffix(unit, "/s")
	v := new(big.Rat)
	if u, ok := bitUnits[strings.ToLower(unit)]; ok {
		v.Mul(r, big.NewRat(u, 8))
	} else if u, ok := byteUnits[unit]; ok && slices.Contains(rateByteUnits, unit) {
		v.Mul(r, big.NewRat(u, 1))
	} else if unit == "" {
		return 0, fmt.Errorf("%q has no unit (kbit, Mbit, Gbit for bit/s; B, kB, MB, GB for bytes/s)", s)
	} else {
		return 0, fmt.Errorf("%q: unknown unit %q (kbit, Mbit, Gbit for bit/s; B, kB, MB, GB for bytes/s)", s, unit)
	}
	b, err := roundInt(v)
	if err != nil {
		return 0, fmt.Errorf("%q is %v", s, err)
	}
	if b == 0 && r.Sign() != 0 {
		return 0, fmt.Errorf("%q is less than 1 byte/s", s)
	}
	return b, nil
}

// formatRate writes bytes per second b in the largest bit unit that b
// reaches, with as many decimals as it takes to be exact.
func formatRate(b int64) string {
	if b == 0 {
		return "0"
	}
	if b > math.MaxInt64/8 {
		return strconv.FormatInt(b, 10) + "B"
	}
	bits := b * 8
	for _, u := range []struct {
		name string
		size int64
	}{{"Gbit", 1e9}, {"Mbit", 1e6}, {"kbit", 1e3}} {
		if bits >= u.size {
			return decimal(bits, u.size) + u.name
		}
	}
	return strconv.FormatInt(bits, 10) + "bit"
}

// decimal writes v/unit exactly, unit being a power of ten.
func decimal(v, unit int64) string {
	s := strconv.FormatInt(v/unit, 10)
	if f := v % unit; f != 0 {
		width := len(strconv.FormatInt(unit, 10)) - 1
		s += "." + strings.TrimRight(fmt.Sprintf("%0*d", width, f), "0")
	}
	return s
}

// parseSize parses a capacity such as 50GiB, 1.5TB or 4096 into bytes.
func parseSize(s string) (int64, error) {
	r, unit, err := splitNumber(s)
	if err != nil {
		return 0, err
	}
	u := int64(1)
	if unit != "" {
		var ok bool
		if u, ok = byteUnits[unit]; !ok {
			return 0, fmt.Errorf("%q: unknown unit %q (B, KiB, MiB, GiB, TiB, PiB, kB, MB, GB, TB, PB)", s, unit)
		}
	}
	b, err := roundInt(new(big.Rat).Mul(r, big.NewRat(u, 1)))
	if err != nil {
		return 0, fmt.Errorf("%q is %v", s, err)
	}
	return b, nil
}

// formatSize writes b bytes in the unit that gives the shortest exact
// text, binary units first: 50GiB, 1.5TB, 1536B.
func formatSize(b int64) string {
	best := strconv.FormatInt(b, 10) + "B"
	for _, name := range []string{"PiB", "TiB", "GiB", "MiB", "KiB", "PB", "TB", "GB", "MB", "kB"} {
		// b/unit is a finite decimal of at most 50 places: units are
		// 2^k or 10^k with k <= 50.
		s := big.NewRat(b, byteUnits[name]).FloatString(50)
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		if s != "0" && len(s+name) < len(best) {
			best = s + name
		}
	}
	return best
}

// parsePercent parses a percentage such as 0.5% into a fraction, 0..1.
func parsePercent(s string) (float64, error) {
	if s == "0" {
		return 0, nil
	}
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q needs a %% sign", s)
	}
	r, rest, err := splitNumber(num)
	if err != nil {
		return 0, err
	}
	if rest != "" {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	if r.Cmp(big.NewRat(100, 1)) > 0 {
		return 0, fmt.Errorf("%q is more than 100%%", s)
	}
	f, _ := r.Quo(r, big.NewRat(100, 1)).Float64()
	return f, nil
}

// formatPercent writes fraction f as the shortest percentage that
// parsePercent reads back as f.
func formatPercent(f float64) string {
	if f == 0 {
		return "0%"
	}
	for prec := 0; prec <= 20; prec++ {
		s := strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
		if g, err := parsePercent(s); err == nil && g == f {
			return s
		}
	}
	// Exact: f is a binary fraction, so f·100 is a finite decimal.
	r := new(big.Rat).SetFloat64(f)
	r.Mul(r, big.NewRat(100, 1))
	s := strings.TrimRight(strings.TrimRight(r.FloatString(1100), "0"), ".")
	return s + "%"
}

// formatDuration writes d as Go does, with "us" for "µs".
func formatDuration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}

// parseDuration parses a non-negative Go duration.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 2.3ms", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}
