package identity

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
)

// secretLen is the length of a secret's text form: 32 bytes in base32.
const secretLen = 52

// Secret is the grid secret: 32 random bytes. Knowing it admits to the
// grid, so it must be handled like a password.
type Secret [32]byte

// NewSecret returns a new random grid secret.
func NewSecret() (Secret, error) {
	var s Secret
	if _, err := rand.Read(s[:]); err != nil {
		return Secret{}, fmt.Errorf("identity: generate secret: %w", err)
	}
	return s, nil
}

// String returns the secret as lowercase base32 without padding
// (52 characters).
func (s Secret) String() string { return b32.EncodeToString(s[:]) }

// ParseSecret parses the text form of a secret (see [Secret.String]). Upper
// case is accepted. Errors wrap [ErrBadSecret]; they do not repeat the
// input, which may be a nearly-right secret.
func ParseSecret(str string) (Secret, error) {
	s, problem := parseSecret(str)
	if problem != "" {
		return Secret{}, fmt.Errorf("%w: %s", ErrBadSecret, problem)
	}
	return s, nil
}

// parseSecret parses a secret, or says what is wrong with it.
func parseSecret(str string) (s Secret, problem string) {
	if len(str) != secretLen {
		return Secret{}, fmt.Sprintf("has %d characters, want %d", len(str), secretLen)
	}
	str = strings.ToLower(str)
	n, err := b32.Decode(s[:], []byte(str))
	if err != nil {
		return Secret{}, fmt.Sprintf("not base32 (a-z, 2-7): %v", err)
	}
	// The last character carries one bit of the secret and four unused bits;
	// accept only the canonical encoding so that a secret has one text form.
	if n != len(s) || s.String() != str {
		return Secret{}, "last character is not canonical"
	}
	return s, ""
}

// Derive returns a 32-byte key for one purpose, named by label:
// HKDF-SHA256 with the secret as input keying material, no salt, and label
// as info. Labels in use: "quilt gossip v1" (memberlist key), "quilt grid ca
// v1" (grid CA seed).
func (s Secret) Derive(label string) []byte {
	k, err := hkdf.Key(sha256.New, s[:], nil, label, 32)
	if err != nil {
		// Only possible for lengths HKDF-SHA256 cannot produce.
		panic("identity: hkdf: " + err.Error())
	}
	return k
}
