package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// nodeIDLen is the length of a node ID in characters: 20 bytes in base32.
const nodeIDLen = 32

// b32 is lowercase RFC 4648 base32 without padding, used for node IDs and
// secrets.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NodeID is a node's identity: lowercase RFC 4648 base32 (no padding) of the
// first 20 bytes of SHA-256 of its Ed25519 public key (32 characters). It is
// valid as a DNS label, so it can be the host of a URL.
type NodeID string

// IDFromPublicKey returns the node ID of pub.
func IDFromPublicKey(pub ed25519.PublicKey) NodeID {
	sum := sha256.Sum256(pub)
	return NodeID(b32.EncodeToString(sum[:20]))
}

// Short returns the first 8 characters of id, for display.
func (id NodeID) Short() string {
	if len(id) <= 8 {
		return string(id)
	}
	return string(id[:8])
}

// String returns id as a string.
func (id NodeID) String() string { return string(id) }

// ParseNodeID checks that s is a node ID: 32 characters of the base32
// alphabet. Upper case is accepted and folded to lower case (DNS names are
// case-insensitive). Errors wrap [ErrBadNodeID].
func ParseNodeID(s string) (NodeID, error) {
	if len(s) != nodeIDLen {
		return "", fmt.Errorf("%w: %q has %d characters, want %d", ErrBadNodeID, s, len(s), nodeIDLen)
	}
	s = strings.ToLower(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", fmt.Errorf("%w: %q has %q at position %d, want a-z or 2-7", ErrBadNodeID, s, c, i)
		}
	}
	return NodeID(s), nil
}
