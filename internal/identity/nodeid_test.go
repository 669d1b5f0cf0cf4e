package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"strings"
	"testing"
)

func TestIDFromPublicKey(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)

	// Computed independently: standard base32 of SHA-256[:20], lowercased.
	sum := sha256.Sum256(pub)
	want := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:20]))

	id := IDFromPublicKey(pub)
	if string(id) != want {
		t.Fatalf("IDFromPublicKey = %q, want %q", id, want)
	}
	if len(id) != 32 {
		t.Fatalf("len(id) = %d, want 32", len(id))
	}
	if again := IDFromPublicKey(append(ed25519.PublicKey(nil), pub...)); again != id {
		t.Fatalf("not deterministic: %q then %q", id, again)
	}
	if got := id.Short(); got != want[:8] {
		t.Fatalf("Short = %q, want %q", got, want[:8])
	}

	other := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	if IDFromPublicKey(other) == id {
		t.Fatal("different keys gave the same ID")
	}

	parsed, err := ParseNodeID(string(id))
	if err != nil || parsed != id {
		t.Fatalf("ParseNodeID(%q) = %q, %v; want round trip", id, parsed, err)
	}
	parsed, err = ParseNodeID(strings.ToUpper(string(id)))
	if err != nil || parsed != id {
		t.Fatalf("ParseNodeID(upper) = %q, %v; want %q", parsed, err, id)
	}
}

func TestParseNodeIDBad(t *testing.T) {
	good := "abcdefghijklmnopqrstuvwxyz234567"
	if _, err := ParseNodeID(good); err != nil {
		t.Fatalf("ParseNodeID(%q): %v", good, err)
	}
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"short", good[:31]},
		{"long", good + "a"},
		{"digit 0", "0" + good[1:]},
		{"digit 1", good[:31] + "1"},
		{"digit 8", good[:10] + "8" + good[11:]},
		{"padding", good[:31] + "="},
		{"dash", good[:5] + "-" + good[6:]},
		{"dot", good[:5] + "." + good[6:]},
		{"space", " " + good[1:]},
		{"non-ASCII", "é" + good[2:]},
		{"host:port", good[:27] + ":7000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ParseNodeID(tc.in)
			if !errors.Is(err, ErrBadNodeID) {
				t.Fatalf("ParseNodeID(%q) = %q, %v; want ErrBadNodeID", tc.in, id, err)
			}
			if !strings.HasPrefix(err.Error(), "identity: ") {
				t.Errorf("error %q does not start with the package name", err)
			}
		})
	}
}
