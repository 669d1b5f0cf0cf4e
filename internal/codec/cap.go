package codec

import (
	"encoding/base32"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/zeebo/blake3"
)

// ErrBadCap means a string is not a usable capability.
var ErrBadCap = errors.New("codec: bad capability")

const (
	readPrefix   = "quilt:r:"
	verifyPrefix = "quilt:v:"
	capVersion   = 1
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ReadCap is everything needed to read an object: its key, its root and
// its shape. Whoever holds it can read the object; share it with care.
type ReadCap struct {
	Key  Key
	Root sharefile.Hash
	Params
	Size int64
}

// VerifyCap lets anyone find, check and repair an object's shares without
// being able to read it.
type VerifyCap struct {
	SI   sharefile.SI
	Root sharefile.Hash
	Params
	Size int64
}

// Verify returns the verify capability of the object.
func (c ReadCap) Verify() VerifyCap {
	return VerifyCap{SI: c.Key.StorageIndex(), Root: c.Root, Params: c.Params, Size: c.Size}
}

// Layout returns where everything sits in the object's shares.
func (c VerifyCap) Layout() sharefile.Layout {
	return sharefile.NewLayout(c.K, c.N, c.SegmentSize, c.Size)
}

// String returns the capability as "quilt:r:" and lowercase base32.
func (c ReadCap) String() string { return encodeCap(readPrefix, c.Key[:], c.Root, c.Params, c.Size) }

// String returns the capability as "quilt:v:" and lowercase base32.
func (c VerifyCap) String() string { return encodeCap(verifyPrefix, c.SI[:], c.Root, c.Params, c.Size) }

func encodeCap(prefix string, secret []byte, root sharefile.Hash, p Params, size int64) string {
	b := []byte{capVersion}
	b = append(b, secret...)
	b = append(b, root[:]...)
	b = append(b, byte(p.K), byte(p.N))
	b = binary.AppendUvarint(b, uint64(p.SegmentSize))
	b = binary.AppendUvarint(b, uint64(size))
	sum := blake3.Sum256(append([]byte(prefix), b...))
	b = append(b, sum[:2]...)
	return prefix + strings.ToLower(b32.EncodeToString(b))
}

// ParseReadCap parses a read capability.
func ParseReadCap(s string) (ReadCap, error) {
	var c ReadCap
	secret, err := decodeCap(s, readPrefix, len(c.Key), &c.Root, &c.Params, &c.Size)
	copy(c.Key[:], secret)
	return c, err
}

// ParseVerifyCap parses a verify capability. A read capability is accepted
// too and reduced to its verify capability.
func ParseVerifyCap(s string) (VerifyCap, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, readPrefix) {
		rc, err := ParseReadCap(s)
		return rc.Verify(), err
	}
	var c VerifyCap
	secret, err := decodeCap(s, verifyPrefix, len(c.SI), &c.Root, &c.Params, &c.Size)
	copy(c.SI[:], secret)
	return c, err
}

func decodeCap(s, prefix string, secretLen int, root *sharefile.Hash, p *Params, size *int64) ([]byte, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, prefix) {
		kind := "read"
		if prefix == verifyPrefix {
			kind = "verify"
		}
		if strings.HasPrefix(s, verifyPrefix) && prefix == readPrefix {
			return nil, fmt.Errorf("%w: this is a verify capability (quilt:v:...); reading needs the read capability (quilt:r:...)", ErrBadCap)
		}
		return nil, fmt.Errorf("%w: a %s capability starts with %q", ErrBadCap, kind, prefix)
	}
	b, err := b32.DecodeString(strings.ToUpper(s[len(prefix):]))
	if err != nil {
		return nil, fmt.Errorf("%w: not valid base32 (was it cut or mistyped?)", ErrBadCap)
	}
	// The last character may carry unused bits; only the canonical
	// spelling is a capability, so one object has one capability string.
	if !strings.EqualFold(b32.EncodeToString(b), s[len(prefix):]) {
		return nil, fmt.Errorf("%w: not in canonical form (was it mistyped?)", ErrBadCap)
	}
	if len(b) < 1+secretLen+32+2+2+2 {
		return nil, fmt.Errorf("%w: too short (was it cut?)", ErrBadCap)
	}
	body, sum := b[:len(b)-2], b[len(b)-2:]
	want := blake3.Sum256(append([]byte(prefix), body...))
	if sum[0] != want[0] || sum[1] != want[1] {
		return nil, fmt.Errorf("%w: checksum does not match (was it cut or mistyped?)", ErrBadCap)
	}
	if body[0] != capVersion {
		return nil, fmt.Errorf("%w: unknown version %d (a newer quilt made it?)", ErrBadCap, body[0])
	}
	body = body[1:]
	secret := body[:secretLen]
	body = body[secretLen:]
	copy(root[:], body[:32])
	p.K, p.N = int(body[32]), int(body[33])
	body = body[34:]
	seg, n1 := binary.Uvarint(body)
	if n1 <= 0 {
		return nil, fmt.Errorf("%w: bad segment size", ErrBadCap)
	}
	sz, n2 := binary.Uvarint(body[n1:])
	if n2 <= 0 || n1+n2 != len(body) || sz > 1<<62 {
		return nil, fmt.Errorf("%w: bad size", ErrBadCap)
	}
	p.SegmentSize, *size = int(seg), int64(sz)
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCap, err)
	}
	return secret, nil
}
