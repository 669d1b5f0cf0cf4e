package nsclient

import (
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/dag"
)

func newCap(t *testing.T, rules dag.Rules) Cap {
	t.Helper()
	id, _, err := dag.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	rk, err := dag.NewReadKey()
	if err != nil {
		t.Fatal(err)
	}
	return Cap{NS: id, Read: rk, Rules: rules}
}

func TestCapRoundTrip(t *testing.T) {
	for _, rules := range []dag.Rules{dag.ConfigRules, dag.ObjectRules} {
		c := newCap(t, rules)
		s := c.String()
		if !strings.HasPrefix(s, CapPrefix) {
			t.Fatalf("%q lacks the prefix", s)
		}
		if got := strings.HasSuffix(s, ":object"); got != (rules == dag.ObjectRules) {
			t.Errorf("rules %d written as %q", rules, s)
		}
		back, err := ParseCap(s)
		if err != nil {
			t.Fatal(err)
		}
		if back != c {
			t.Errorf("round trip of %q: %+v, want %+v", s, back, c)
		}
		// Space around a pasted capability and upper case are fine.
		if back, err := ParseCap("  " + strings.ToUpper(s[len(CapPrefix):]) + "\n"); err == nil {
			t.Errorf("no prefix accepted: %+v", back)
		}
		if back, err := ParseCap(" " + s + "\n"); err != nil || back != c {
			t.Errorf("with spaces: %+v, %v", back, err)
		}
	}
}

func TestCapMalformed(t *testing.T) {
	c := newCap(t, dag.ConfigRules)
	id, rk := c.NS.String(), c.Read.String()
	for _, tc := range []struct{ in, want string }{
		{"", "does not start with"},
		{"quilt:ns:", "fields"},
		{"quilt:ns:" + id, "fields"},
		{"quilt:obj:" + id + ":" + rk, "does not start with"},
		{"quilt:ns:" + id + ":" + rk + ":object:x", "fields"},
		{"quilt:ns:" + id + ":" + rk + ":config", "rules"},
		{"quilt:ns:" + id + ":" + rk + ":", "rules"},
		{"quilt:ns:" + id[:10] + ":" + rk, "ID"},
		{"quilt:ns:" + id + ":" + rk[:20], "read key"},
		{"quilt:ns::" + rk, "ID"},
		{"quilt:ns:" + id + "!:" + rk, "ID"},
		{"quilt:ns:" + rk + ":" + id + "x", "read key"},
		{strings.Repeat("q", 500), "does not start with"},
	} {
		_, err := ParseCap(tc.in)
		if err == nil {
			t.Errorf("ParseCap(%q) accepted", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCap(%q): %v, want it to mention %q", tc.in, err, tc.want)
		}
		if len(err.Error()) > 400 {
			t.Errorf("error for a long input is %d bytes long", len(err.Error()))
		}
	}
}
