package codec

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// An object sealed by one party and erasure-coded by another, which has
// no key (an upload helper), gets the same blocks, hashes and root as one
// encoded in a single step: the uploader can check the helper's root.
func TestEncodeSealedMatchesEncode(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range shapes {
		key := NewKey()
		data := randBytes(r, sh.size)
		want, wantShares, err := EncodeAll(sh.p, key, data)
		if err != nil {
			t.Fatal(err)
		}
		sealer, _ := New(sh.p, key)
		coder, _ := New(sh.p, Key{}) // the helper's: no key
		si := key.StorageIndex()
		tree := NewTree(sh.p, si)
		shares := make([][]byte, sh.p.N)
		for i := range shares {
			shares[i] = sh.p.Header(i, si)
		}
		for idx, off := int64(0), 0; ; idx++ {
			end := min(off+sh.p.SegmentSize, len(data))
			last := end == len(data)
			sealed, err := sealer.Seal(nil, idx, last, data[off:end])
			if err != nil {
				t.Fatal(err)
			}
			seg := coder.NewSegment()
			if err := coder.EncodeSealed(seg, idx, sealed); err != nil {
				t.Fatal(err)
			}
			tree.Add(seg)
			for i := range shares {
				shares[i] = append(shares[i], seg.Blocks[i]...)
			}
			off = end
			if last {
				break
			}
		}
		root, trailers := tree.Finish(int64(len(data)))
		if root != want.Root {
			t.Fatalf("%v size %d: root through Seal+EncodeSealed differs", sh.p, sh.size)
		}
		for i := range shares {
			if !bytes.Equal(append(shares[i], trailers[i]...), wantShares[i]) {
				t.Fatalf("%v size %d: share %d differs", sh.p, sh.size, i)
			}
		}
	}
}

// A sealed segment of an impossible length is refused, not coded.
func TestEncodeSealedBadLength(t *testing.T) {
	p := Params{3, 10, 4096}
	c, _ := New(p, Key{})
	seg := c.NewSegment()
	for _, n := range []int{0, SealedSize(0) - 1, SealedSize(p.SegmentSize) + 1} {
		if err := c.EncodeSealed(seg, 0, make([]byte, n)); err == nil {
			t.Errorf("sealed segment of %d bytes accepted", n)
		}
	}
	if _, err := c.Seal(nil, 0, false, slices.Repeat([]byte{1}, 10)); err == nil {
		t.Error("a short segment that is not the last was sealed")
	}
}
