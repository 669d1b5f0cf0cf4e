package nsclient

import (
	"errors"
	"fmt"
	"strings"

	"github.com/quilt-grid/quilt/internal/dag"
)

// CapPrefix starts every namespace capability.
const CapPrefix = "quilt:ns:"

// Cap is a namespace capability: what lets someone find and read a
// namespace (its ID and read key) and apply the same conflict rules as
// every other replica. It is written quilt:ns:ID:READKEY, with :object
// appended for an object namespace. It does not let anyone write: that
// takes the root key or a granted one.
type Cap struct {
	NS    dag.NSID
	Read  dag.ReadKey
	Rules dag.Rules
}

// String is the capability as ParseCap reads it.
func (c Cap) String() string {
	s := CapPrefix + c.NS.String() + ":" + c.Read.String()
	if c.Rules == dag.ObjectRules {
		s += ":object"
	}
	return s
}

// errCapForm is the shape every malformed capability is told to have.
var errCapForm = errors.New("a namespace capability looks like quilt:ns:ID:READKEY, or quilt:ns:ID:READKEY:object for an object namespace")

// ParseCap reads a capability written by Cap.String. Surrounding space is
// ignored; anything else out of shape is an error saying what is wrong.
func ParseCap(s string) (Cap, error) {
	var c Cap
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), CapPrefix)
	if !ok {
		return c, fmt.Errorf("nsclient: %q does not start with %s: %w", short(s), CapPrefix, errCapForm)
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return c, fmt.Errorf("nsclient: %q has %d fields after %s, not 2 or 3: %w", short(s), len(parts), CapPrefix, errCapForm)
	}
	var err error
	if c.NS, err = dag.ParseNSID(parts[0]); err != nil {
		return c, fmt.Errorf("nsclient: capability's ID: %w", err)
	}
	if c.Read, err = dag.ParseReadKey(parts[1]); err != nil {
		return c, fmt.Errorf("nsclient: capability's read key: %w", err)
	}
	c.Rules = dag.ConfigRules
	if len(parts) == 3 {
		if parts[2] != "object" {
			return c, fmt.Errorf("nsclient: capability's rules are %q: only \"object\" may follow the read key", short(parts[2]))
		}
		c.Rules = dag.ObjectRules
	}
	return c, nil
}

// short cuts s for an error message (a capability may be pasted whole,
// or be a whole file by mistake).
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
