package codec

import (
	"fmt"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

// Seal encrypts plain as segment index of the object (at most
// SegmentSize bytes; less only for the last segment) and appends the
// sealed segment to dst: the bytes Encode erasure-codes. An upload
// through a helper sends these, and the helper, which has no key, codes
// them with EncodeSealed.
func (c *Codec) Seal(dst []byte, index int64, last bool, plain []byte) ([]byte, error) {
	if len(plain) > c.p.SegmentSize || (!last && len(plain) != c.p.SegmentSize) {
		return nil, fmt.Errorf("codec: segment %d has %d bytes, segment size is %d", index, len(plain), c.p.SegmentSize)
	}
	return c.aead.Seal(dst, nonce(index), plain, aad(index, last)), nil
}

// SealedSize returns the length of a sealed segment of plain bytes.
func SealedSize(plain int) int { return plain + sharefile.Overhead }

// EncodeSealed erasure-codes a segment already sealed (by Seal) and
// hashes its blocks into seg, exactly as Encode does after sealing: the
// blocks, hashes and so the object root are the same. It needs no key;
// a Codec made with any key (the zero Key) does it.
func (c *Codec) EncodeSealed(seg *Segment, index int64, sealed []byte) error {
	if len(sealed) < sharefile.Overhead || len(sealed) > c.p.SegmentSize+sharefile.Overhead {
		return fmt.Errorf("codec: sealed segment %d has %d bytes, want %d to %d", index, len(sealed), sharefile.Overhead, c.p.SegmentSize+sharefile.Overhead)
	}
	seg.Index = index
	bs := (len(sealed) + c.p.K - 1) / c.p.K
	data := seg.buf[:bs*c.p.K]
	copy(data, sealed)
	clear(data[len(sealed):])
	return c.code(seg, index, bs)
}
