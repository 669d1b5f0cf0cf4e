package placement

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrUnhappy means the shares cannot be placed well enough: fewer than
	// happy distinct nodes have room for a share, or the usable nodes
	// together lack room for all n shares. The wrapping error's message says
	// how many nodes were known, how many were full and how many were usable.
	ErrUnhappy = errors.New("placement: not enough distinct nodes with free space")

	// ErrBadParams means Place was called with n < 1, happy < 1, happy > n
	// or a negative share size.
	ErrBadParams = errors.New("placement: bad parameters")
)

// placeError is a failed placement: it matches ErrUnhappy with errors.Is and
// explains the numbers behind the failure in its message.
type placeError struct {
	n, happy  int   // shares to place, distinct nodes required
	shareSize int64 // bytes per share
	known     int   // distinct nodes given
	full      int   // nodes skipped because Free < shareSize
	usable    int   // nodes with room for at least one share
	placed    int   // shares that found room (< n only if space ran out)
}

func (e *placeError) Error() string {
	nodes := fmt.Sprintf("%d %s known, %d full (need %s free each), %d usable",
		e.known, plural(e.known, "node", "nodes"), e.full, formatBytes(e.shareSize), e.usable)
	if e.placed < e.n {
		return fmt.Sprintf("placement: cannot place %d shares: room for only %d: %s: add nodes or free space",
			e.n, e.placed, nodes)
	}
	return fmt.Sprintf("placement: cannot place %d shares on at least %d distinct nodes: %s: add nodes, free space, or lower --happy",
		e.n, e.happy, nodes)
}

func (e *placeError) Unwrap() error { return ErrUnhappy }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatBytes formats a byte count for people, in binary units with at most
// one decimal: "512 B", "1.3 MiB", "2 GiB".
func formatBytes(b int64) string {
	if b < 1024 && b > -1024 {
		return strconv.FormatInt(b, 10) + " B"
	}
	const units = "KMGTPE"
	v := float64(b) / 1024
	i := 0
	// Move up a unit before rounding would show "1024.0".
	for (v >= 1023.95 || v <= -1023.95) && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	if len(s) > 2 && s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + units[i:i+1] + "iB"
}
