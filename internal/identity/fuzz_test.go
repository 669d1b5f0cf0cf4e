package identity

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseInvite parses invites: what parses formats back to the same
// text (white space trimmed, the secret in lower case) and parses again
// to the same invite.
func FuzzParseInvite(f *testing.F) {
	var s Secret
	for i := range s {
		s[i] = byte(7 * i)
	}
	for _, inv := range []Invite{
		{Secret: s, Addrs: []string{"node1.example.org:7000"}},
		{Secret: s, Addrs: []string{"10.0.0.1:7000", "[::1]:7000", "[fe80::1%eth0]:443", "host.example:1"}},
	} {
		f.Add(inv.String())
		f.Add(" " + strings.ToUpper(inv.String()) + "\n")
	}
	f.Add("quilt://" + s.String() + "@")
	f.Add("quilt://" + s.String() + "@[::1]")
	f.Add("quilt://" + s.String()[:51] + "z@host:0")
	f.Add("quilt://@host:70000,")
	f.Fuzz(func(t *testing.T, text string) {
		inv, err := ParseInvite(text)
		if err != nil {
			if !errors.Is(err, ErrBadInvite) {
				t.Fatalf("error %v does not match ErrBadInvite", err)
			}
			return
		}
		trimmed := strings.TrimSpace(text)
		at := strings.Index(trimmed, "@")
		want := "quilt://" + strings.ToLower(trimmed[len("quilt://"):at]) + trimmed[at:]
		if got := inv.String(); got != want {
			t.Fatalf("ParseInvite(%q).String() = %q, want %q", text, got, want)
		}
		again, err := ParseInvite(inv.String())
		if err != nil || !reflect.DeepEqual(again, inv) {
			t.Fatalf("ParseInvite(%q) = %+v, %v; want %+v", inv.String(), again, err, inv)
		}
		if len(inv.Addrs) == 0 {
			t.Fatalf("invite %q has no addresses", text)
		}
	})
}
