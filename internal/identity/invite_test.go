package identity

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSecretRoundTrip(t *testing.T) {
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if s == (Secret{}) {
		t.Fatal("NewSecret returned zeros")
	}
	s2, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if s == s2 {
		t.Fatal("two NewSecret calls returned the same secret")
	}
	str := s.String()
	if len(str) != 52 || str != strings.ToLower(str) || strings.Contains(str, "=") {
		t.Fatalf("String() = %q, want 52 lowercase characters without padding", str)
	}
	for _, in := range []string{str, strings.ToUpper(str)} {
		got, err := ParseSecret(in)
		if err != nil {
			t.Fatalf("ParseSecret(%q): %v", in, err)
		}
		if got != s {
			t.Fatalf("ParseSecret(%q) = %x, want %x", in, got, s)
		}
	}
}

func TestParseSecretBad(t *testing.T) {
	var s Secret
	for i := range s {
		s[i] = byte(i * 7)
	}
	good := s.String()
	// The last character holds one bit of the secret; flip an unused bit.
	last := good[len(good)-1]
	nonCanonical := good[:len(good)-1] + string(rune(last+1))

	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"short", good[:51]},
		{"long", good + "a"},
		{"padding", good[:51] + "="},
		{"illegal 1", "1" + good[1:]},
		{"illegal 8", good[:20] + "8" + good[21:]},
		{"non-canonical", nonCanonical},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSecret(tc.in)
			if !errors.Is(err, ErrBadSecret) {
				t.Fatalf("ParseSecret(%q) error = %v, want ErrBadSecret", tc.in, err)
			}
		})
	}
}

// hkdfSHA256 is RFC 5869 HKDF-SHA256 for 32 bytes of output with no salt,
// written out to check Derive independently.
func hkdfSHA256(ikm []byte, info string) []byte {
	ext := hmac.New(sha256.New, make([]byte, sha256.Size))
	ext.Write(ikm)
	prk := ext.Sum(nil)
	exp := hmac.New(sha256.New, prk)
	exp.Write([]byte(info))
	exp.Write([]byte{1})
	return exp.Sum(nil)
}

func TestSecretDerive(t *testing.T) {
	var s Secret
	for i := range s {
		s[i] = byte(i)
	}
	for _, label := range []string{"quilt gossip v1", "quilt grid ca v1", ""} {
		got := s.Derive(label)
		if len(got) != 32 {
			t.Fatalf("Derive(%q) has %d bytes, want 32", label, len(got))
		}
		if want := hkdfSHA256(s[:], label); !bytes.Equal(got, want) {
			t.Errorf("Derive(%q) = %x, want %x", label, got, want)
		}
	}
	if bytes.Equal(s.Derive("a"), s.Derive("b")) {
		t.Fatal("different labels gave the same key")
	}
	var other Secret
	if bytes.Equal(s.Derive("a"), other.Derive("a")) {
		t.Fatal("different secrets gave the same key")
	}
}

func TestInviteRoundTrip(t *testing.T) {
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	for _, addrs := range [][]string{
		{"node1.example.org:7000"},
		{"10.0.0.1:7000", "[::1]:7000", "[fe80::1%eth0]:443", "host.example:1"},
	} {
		inv := Invite{Secret: s, Addrs: addrs}
		text := inv.String()
		if !strings.HasPrefix(text, "quilt://"+s.String()+"@") {
			t.Fatalf("String() = %q", text)
		}
		for _, in := range []string{text, "  " + text + "\n", "\t" + text + "\r\n"} {
			got, err := ParseInvite(in)
			if err != nil {
				t.Fatalf("ParseInvite(%q): %v", in, err)
			}
			if !reflect.DeepEqual(got, inv) {
				t.Fatalf("ParseInvite(%q) = %+v, want %+v", in, got, inv)
			}
		}
	}
}

func TestParseInviteBad(t *testing.T) {
	var s Secret
	sec := s.String()
	for _, tc := range []struct {
		name, in, want string // want: a substring of the message
	}{
		{"empty", "", `does not start with "quilt://"`},
		{"blank", " \n", `does not start with "quilt://"`},
		{"wrong scheme", "http://" + sec + "@a:1", `does not start with "quilt://"`},
		{"missing at", "quilt://" + sec, "missing '@'"},
		{"scheme only", "quilt://", "missing '@'"},
		{"bad secret", "quilt://abc@a:1", "secret has 3 characters, want 52"},
		{"secret illegal char", "quilt://1" + sec[1:] + "@a:1", "secret not base32"},
		{"no addresses", "quilt://" + sec + "@", "no addresses"},
		{"no addresses with newline", "quilt://" + sec + "@\n", "no addresses"},
		{"empty address", "quilt://" + sec + "@a:1,,b:2", "empty address"},
		{"trailing comma", "quilt://" + sec + "@a:1,", "empty address"},
		{"no port", "quilt://" + sec + "@node.example", `address "node.example" has no port`},
		{"IPv6 no port", "quilt://" + sec + "@[::1]", `address "[::1]" has no port`},
		{"IPv6 unbracketed", "quilt://" + sec + "@::1:7000", `address "::1:7000"`},
		{"empty port", "quilt://" + sec + "@a:", `address "a:" has no port`},
		{"no host", "quilt://" + sec + "@:7000", `address ":7000" has no host`},
		{"port zero", "quilt://" + sec + "@a:0", "bad port"},
		{"port too big", "quilt://" + sec + "@a:70000", "bad port"},
		{"port not a number", "quilt://" + sec + "@a:http", "bad port"},
		{"space inside", "quilt://" + sec + "@a:1, b:2", "bad host"},
		{"second address bad", "quilt://" + sec + "@a:1,b", `address "b" has no port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := ParseInvite(tc.in)
			if !errors.Is(err, ErrBadInvite) {
				t.Fatalf("ParseInvite(%q) = %+v, %v; want ErrBadInvite", tc.in, inv, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "identity: bad invite: ") {
				t.Errorf("error %q does not start with \"identity: bad invite: \"", err)
			}
		})
	}
}
