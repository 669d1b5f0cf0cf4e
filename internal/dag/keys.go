package dag

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/blake3"
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NSID names a namespace: its root public key.
type NSID [32]byte

// String is the ID in lower-case base32 (52 characters).
func (id NSID) String() string { return strings.ToLower(b32.EncodeToString(id[:])) }

// PublicKey is the namespace's root key.
func (id NSID) PublicKey() ed25519.PublicKey { return ed25519.PublicKey(id[:]) }

// ParseNSID reads an ID written by String.
func ParseNSID(s string) (NSID, error) {
	var id NSID
	b, err := b32.DecodeString(strings.ToUpper(strings.TrimSpace(s)))
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("dag: %q is not a namespace ID", s)
	}
	copy(id[:], b)
	// The last character carries unused bits: only the spelling String
	// writes is an ID, so that a namespace has one name.
	if id.String() != strings.ToLower(strings.TrimSpace(s)) {
		return NSID{}, fmt.Errorf("dag: %q is not a namespace ID (last character not canonical)", s)
	}
	return id, nil
}

// Fingerprint names a public key to a person: 16 hex digits of its hash.
func Fingerprint(pub ed25519.PublicKey) string {
	h := blake3.Sum256(pub)
	return fmt.Sprintf("%x", h[:8])
}

// ReadKey seals the names and contents of a namespace.
type ReadKey [32]byte

// NewReadKey makes a random read key.
func NewReadKey() (ReadKey, error) {
	var k ReadKey
	_, err := rand.Read(k[:])
	return k, err
}

// String is the key in lower-case base32.
func (k ReadKey) String() string { return strings.ToLower(b32.EncodeToString(k[:])) }

// ParseReadKey reads a key written by String.
func ParseReadKey(s string) (ReadKey, error) {
	var k ReadKey
	b, err := b32.DecodeString(strings.ToUpper(strings.TrimSpace(s)))
	if err != nil || len(b) != len(k) {
		return k, fmt.Errorf("dag: not a read key")
	}
	copy(k[:], b)
	if k.String() != strings.ToLower(strings.TrimSpace(s)) {
		return ReadKey{}, fmt.Errorf("dag: not a read key (last character not canonical)")
	}
	return k, nil
}

var sealAD = []byte("quilt namespace sealed v1")

func (k ReadKey) aead() cipher.AEAD {
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // 32-byte key: cannot fail
	}
	g, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return g
}

// Seal encrypts a name and content (AES-256-GCM, random nonce).
func (k ReadKey) Seal(name string, content []byte) []byte {
	g := k.aead()
	pt := binary.AppendUvarint(nil, uint64(len(name)))
	pt = append(append(pt, name...), content...)
	out := make([]byte, g.NonceSize(), g.NonceSize()+len(pt)+g.Overhead())
	if _, err := rand.Read(out); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return g.Seal(out, out, pt, sealAD)
}

// sealedLen is the length of what Seal makes of name and content.
func sealedLen(name string, content []byte) int {
	return sealNonce + len(binary.AppendUvarint(nil, uint64(len(name)))) + len(name) + len(content) + sealTag
}

// The AES-GCM nonce and tag around every sealed name and content.
const sealNonce, sealTag = 12, 16

// Open decrypts what Seal made.
func (k ReadKey) Open(sealed []byte) (name string, content []byte, err error) {
	g := k.aead()
	if len(sealed) < g.NonceSize()+g.Overhead() {
		return "", nil, ErrBadKey
	}
	pt, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], sealAD)
	if err != nil {
		return "", nil, ErrBadKey
	}
	n, w := binary.Uvarint(pt)
	if w <= 0 || n > uint64(len(pt)-w) {
		return "", nil, ErrBadKey
	}
	return string(pt[w : w+int(n)]), pt[w+int(n):], nil
}

// HLC is a hybrid logical clock reading: milliseconds since the Unix epoch
// in the high 48 bits, a counter in the low 16. Readings from one clock
// increase strictly, and a clock that has seen a reading never goes below
// it, so causally later entries have later times even when wall clocks
// disagree.
type HLC uint64

// Time is the wall-clock part.
func (h HLC) Time() time.Time { return time.UnixMilli(int64(h >> 16)) }

// Clock issues HLC readings. It is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	last HLC
	Now  func() time.Time // the wall clock; nil: time.Now
}

// Next returns a reading later than every reading issued or observed.
func (c *Clock) Next() HLC {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	wall := HLC(now().UnixMilli()) << 16
	switch {
	case wall > c.last:
		c.last = wall
	case c.last < ^HLC(0):
		c.last++
	}
	return c.last
}

// MaxDrift is how far ahead of the local wall clock an observed reading
// may be; readings further ahead are ignored, so one writer with a wild
// clock cannot drag every clock with it.
const MaxDrift = 24 * time.Hour

// Observe moves the clock past a reading seen on another entry.
func (c *Clock) Observe(h HLC) {
	c.mu.Lock()
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if h > c.last && h.Time().Before(now().Add(MaxDrift)) {
		c.last = h
	}
	c.mu.Unlock()
}
