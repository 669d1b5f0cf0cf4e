package sharefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// share builds a whole share of an object of size bytes in segments of
// segSize, k-of-n, share number 0, with blocks of pattern bytes.
func share(t *testing.T, k, n, segSize int, size int64) []byte {
	t.Helper()
	l := NewLayout(k, n, segSize, size)
	h := Header{Share: 0, K: k, N: n, SegmentSize: segSize, BlockSize: l.BlockSize}
	h.SI[0] = 7
	b := h.Marshal()
	var hashes []Hash
	for i := int64(0); i < l.Segments; i++ {
		blk := bytes.Repeat([]byte{byte(i + 1)}, l.BlockLen(i))
		hashes = append(hashes, BlockHash(blk))
		b = append(b, blk...)
	}
	roots := make([]Hash, n)
	roots[0] = ShareRoot(h, hashes)
	tr := Trailer{Segments: l.Segments, Size: size, LastBlockSize: l.LastBlockSize, BlockHashes: hashes, ShareRoots: roots}
	return append(b, tr.Marshal()...)
}

func TestShareVerifies(t *testing.T) {
	b := share(t, 3, 10, 1000, 4500)
	if _, err := Verify(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// A trailer whose segment count is the real one plus 2^59 makes the
// same length under 64-bit wrap-around (32 * 2^59 = 2^64): it must be
// refused as malformed, not allocated.
func TestTrailerSegmentCountOverflow(t *testing.T) {
	const k, n = 3, 10
	b := share(t, k, n, 1000, 4500)
	l := NewLayout(k, n, 1000, 4500)
	tb := append([]byte(nil), b[l.TrailerOffset():]...)
	for _, add := range []uint64{1 << 59, 1 << 60, 1 << 63, 1<<64 - 1} {
		forged := append([]byte(nil), tb...)
		binary.BigEndian.PutUint64(forged, uint64(l.Segments)+add)
		if _, err := ParseTrailer(forged, n); !errors.Is(err, ErrMalformed) {
			t.Errorf("segments + %#x: ParseTrailer gave %v, want ErrMalformed", add, err)
		}
		whole := append(append([]byte(nil), b[:l.TrailerOffset()]...), forged...)
		if _, err := Verify(bytes.NewReader(whole), int64(len(whole))); !errors.Is(err, ErrMalformed) {
			t.Errorf("segments + %#x: Verify gave %v, want ErrMalformed", add, err)
		}
	}
}

// Every length field of a trailer, set to anything, gives an error and
// no panic.
func TestTrailerHostileFields(t *testing.T) {
	const n = 10
	b := share(t, 3, n, 1000, 4500)
	l := NewLayout(3, n, 1000, 4500)
	tb := b[l.TrailerOffset():]
	values := []uint64{0, 1, 2, 3, 4, 5, 6, 1 << 31, 1<<32 - 1, 1 << 59, 1<<63 - 1, 1 << 63, 1<<64 - 1}
	for _, field := range []struct {
		off, width int
	}{{0, 8}, {8, 8}, {16, 4}, {len(tb) - 8, 4}} {
		for _, v := range values {
			forged := append([]byte(nil), tb...)
			if field.width == 8 {
				binary.BigEndian.PutUint64(forged[field.off:], v)
			} else {
				binary.BigEndian.PutUint32(forged[field.off:], uint32(v))
			}
			if bytes.Equal(forged, tb) {
				continue
			}
			if tr, err := ParseTrailer(forged, n); err == nil {
				if _, err := CheckTrailer(Header{K: 3, N: n, SegmentSize: 1000, BlockSize: l.BlockSize, SI: SI{7}}, tr); err == nil {
					t.Errorf("field at %d set to %#x: accepted", field.off, v)
				}
			}
			whole := append(append([]byte(nil), b[:l.TrailerOffset()]...), forged...)
			if _, err := Verify(bytes.NewReader(whole), int64(len(whole))); err == nil {
				t.Errorf("field at %d set to %#x: share verified", field.off, v)
			}
		}
	}
	for _, nn := range []int{-1, 0, 256, 1 << 62} {
		if _, err := ParseTrailer(tb, nn); err == nil {
			t.Errorf("ParseTrailer with n=%d accepted", nn)
		}
	}
}

func TestTrailerLenBounds(t *testing.T) {
	for _, s := range []int64{-1, MaxSegments + 1, 1 << 59, 1<<63 - 1} {
		if got := TrailerLen(s, 10); got != -1 {
			t.Errorf("TrailerLen(%d, 10) = %d, want -1", s, got)
		}
	}
	if got := TrailerLen(1, 10); got != 20+32*11+8 {
		t.Errorf("TrailerLen(1, 10) = %d", got)
	}
}
