package codec

import (
	"errors"
	"fmt"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

// CheckTrailer parses the trailer of share number share and checks it
// against the capability: the right shape for the object, share roots that
// hash to the object root, and block hashes that hash to this share's root.
// The returned block hashes are then trusted for checking blocks.
func (c VerifyCap) CheckTrailer(share int, b []byte) (sharefile.Trailer, error) {
	l := c.Layout()
	if len(b) != l.TrailerLen() {
		return sharefile.Trailer{}, fmt.Errorf("%w: share %d trailer is %d bytes, want %d", sharefile.ErrCorrupt, share, len(b), l.TrailerLen())
	}
	t, err := sharefile.ParseTrailer(b, c.N)
	if err != nil {
		return t, fmt.Errorf("%w: share %d: %v", sharefile.ErrCorrupt, share, err)
	}
	if t.Segments != l.Segments || t.Size != c.Size || t.LastBlockSize != l.LastBlockSize {
		return t, fmt.Errorf("%w: share %d trailer describes another object", sharefile.ErrCorrupt, share)
	}
	if sharefile.ObjectRoot(c.K, c.N, c.SegmentSize, c.Size, t.ShareRoots) != c.Root {
		return t, fmt.Errorf("%w: share %d: share roots do not hash to the object root", sharefile.ErrCorrupt, share)
	}
	if sharefile.ShareRoot(c.Params.header(share, c.SI), t.BlockHashes) != t.ShareRoots[share] {
		return t, fmt.Errorf("%w: share %d: block hashes do not hash to the share root", sharefile.ErrCorrupt, share)
	}
	return t, nil
}

// DecodeAll reads a whole object from shares held in memory (nil for a
// missing share). Shares that fail any check are skipped and reported in
// bad. It is the reference for the streaming reader and serves tests and
// small objects.
func DecodeAll(rc ReadCap, shares [][]byte) (data []byte, bad []int, err error) {
	vc := rc.Verify()
	l := vc.Layout()
	c, err := New(rc.Params, rc.Key)
	if err != nil {
		return nil, nil, err
	}
	trees := make([][]sharefile.Hash, rc.N)
	for i, s := range shares {
		if s == nil || i >= rc.N {
			continue
		}
		if int64(len(s)) != l.ShareSize() {
			bad = append(bad, i)
			continue
		}
		t, err := vc.CheckTrailer(i, s[l.TrailerOffset():])
		if err != nil {
			bad = append(bad, i)
			continue
		}
		trees[i] = t.BlockHashes
	}
	isBad := func(i int) bool {
		for _, b := range bad {
			if b == i {
				return true
			}
		}
		return false
	}
	for seg := int64(0); seg < l.Segments; seg++ {
		blocks := make([][]byte, rc.N)
		have := 0
		for i := range trees {
			if trees[i] == nil || isBad(i) || have == rc.K {
				continue
			}
			off := l.BlockOffset(seg)
			b := shares[i][off : off+int64(l.BlockLen(seg))]
			if sharefile.BlockHash(b) != trees[i][seg] {
				bad = append(bad, i)
				continue
			}
			blocks[i] = append([]byte(nil), b...)
			have++
		}
		data, err = c.Decode(data, seg, seg == l.Segments-1, l.SegmentPlainLen(seg), blocks)
		if err != nil {
			if errors.Is(err, ErrTooFewBlocks) {
				return nil, bad, fmt.Errorf("codec: segment %d: only %d good shares of the %d needed", seg, have, rc.K)
			}
			return nil, bad, err
		}
	}
	if data == nil {
		data = []byte{}
	}
	return data, bad, nil
}
