package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// shapes covers the edge cases of segmenting: empty, one byte, exactly one
// segment, one more than a segment, several segments, k=1, k=n.
var shapes = []struct {
	p    Params
	size int
}{
	{Params{3, 10, 4096}, 0},
	{Params{3, 10, 4096}, 1},
	{Params{3, 10, 4096}, 4096},
	{Params{3, 10, 4096}, 4097},
	{Params{3, 10, 1000}, 10_000},
	{Params{1, 3, 512}, 2000},
	{Params{4, 4, 512}, 2000},
	{Params{2, 5, 7}, 100},
	{DefaultParams(), 3<<20 + 12345},
}

// Any k of the n shares decode to the original bytes.
func TestAnyKOfNDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range shapes {
		data := randBytes(r, sh.size)
		rc, shares, err := EncodeAll(sh.p, NewKey(), data)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 20; trial++ {
			keep := r.Perm(sh.p.N)[:sh.p.K]
			subset := make([][]byte, sh.p.N)
			for _, i := range keep {
				subset[i] = shares[i]
			}
			got, bad, err := DecodeAll(rc, subset)
			if err != nil || len(bad) != 0 {
				t.Fatalf("%+v size %d shares %v: err %v bad %v", sh.p, sh.size, keep, err, bad)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%+v size %d shares %v: wrong bytes", sh.p, sh.size, keep)
			}
		}
		if sh.p.K > 1 {
			subset := make([][]byte, sh.p.N)
			for _, i := range r.Perm(sh.p.N)[:sh.p.K-1] {
				subset[i] = shares[i]
			}
			if _, _, err := DecodeAll(rc, subset); err == nil {
				t.Fatalf("%+v: k-1 shares decoded", sh.p)
			}
		}
	}
}

// A flipped bit anywhere in a share is detected, that share is skipped,
// and the object still reads from the others.
func TestFlippedBitDetected(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, sh := range shapes {
		data := randBytes(r, sh.size)
		rc, shares, err := EncodeAll(sh.p, NewKey(), data)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 30; trial++ {
			victim := r.IntN(sh.p.N)
			// Damage the victim; keep exactly k shares including it, plus
			// one spare, so decoding must notice and use the spare.
			damaged := slices.Clone(shares[victim])
			bit := r.IntN(len(damaged) * 8)
			damaged[bit/8] ^= 1 << (bit % 8)
			subset := make([][]byte, sh.p.N)
			subset[victim] = damaged
			others := r.Perm(sh.p.N)
			added := 0
			for _, i := range others {
				if i != victim && added < sh.p.K {
					subset[i] = shares[i]
					added++
				}
			}
			if added < sh.p.K {
				continue // k == n: no spare exists
			}
			got, bad, err := DecodeAll(rc, subset)
			if err != nil {
				t.Fatalf("%+v: bit %d of share %d: %v", sh.p, bit, victim, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("%+v: bit %d of share %d: wrong bytes", sh.p, bit, victim)
			}
			if !slices.Contains(bad, victim) {
				// A flip in a block this read did not need goes unseen by
				// a read; the share check must still see it.
				if info, err := sharefile.Verify(bytes.NewReader(damaged), int64(len(damaged))); err == nil && info.Root == rc.Root {
					t.Fatalf("%+v: bit %d of share %d: not detected", sh.p, bit, victim)
				}
			}
		}
	}
}

// Every share passes the key-less check; any damage fails it.
func TestShareVerify(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rc, shares, err := EncodeAll(Params{3, 10, 1000}, NewKey(), randBytes(r, 5500))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range shares {
		info, err := sharefile.Verify(bytes.NewReader(s), int64(len(s)))
		if err != nil {
			t.Fatalf("share %d: %v", i, err)
		}
		if info.Root != rc.Root || info.Share != i || info.SI != rc.Key.StorageIndex() {
			t.Fatalf("share %d: info %+v does not match cap", i, info.Header)
		}
		for range 50 {
			d := slices.Clone(s)
			bit := r.IntN(len(d) * 8)
			d[bit/8] ^= 1 << (bit % 8)
			// Key-less, the check either fails or yields another root
			// (damage to the other shares' roots listed in the trailer).
			if info, err := sharefile.Verify(bytes.NewReader(d), int64(len(d))); err == nil && info.Root == rc.Root {
				t.Fatalf("share %d: flipped bit %d passed", i, bit)
			}
		}
		if _, err := sharefile.Verify(bytes.NewReader(s[:len(s)-1]), int64(len(s)-1)); err == nil {
			t.Fatalf("share %d: truncated share passed", i)
		}
	}
}

// frameCheck runs a share through sharefile's frame-only check, as a
// storage node does on upload.
func frameCheck(s []byte) (sharefile.Info, error) {
	c := sharefile.NewFrameChecker()
	if _, err := c.Write(s); err != nil {
		return sharefile.Info{}, err
	}
	return c.Finish(bytes.NewReader(s), int64(len(s)))
}

// The frame check finds any damage outside the blocks, and damage to a
// block only under Verify: it hashes no block.
func TestFrameCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rc, shares, err := EncodeAll(Params{3, 10, 1000}, NewKey(), randBytes(r, 5500))
	if err != nil {
		t.Fatal(err)
	}
	l := rc.Verify().Layout()
	for i, s := range shares {
		info, err := frameCheck(s)
		if err != nil {
			t.Fatalf("share %d: %v", i, err)
		}
		if info.Root != rc.Root || info.Share != i {
			t.Fatalf("share %d: frame check gives root %x share %d", i, info.Root[:4], info.Share)
		}
		for range 50 {
			d := slices.Clone(s)
			off := r.Int64N(int64(len(d)))
			d[off] ^= 1 << r.IntN(8)
			info, err := frameCheck(d)
			inBlocks := off >= sharefile.HeaderSize && off < l.TrailerOffset()
			switch {
			case inBlocks && (err != nil || info.Root != rc.Root):
				t.Fatalf("share %d: a block flipped at %d failed the frame check: %v", i, off, err)
			case !inBlocks && err == nil && info.Root == rc.Root:
				t.Fatalf("share %d: header or trailer flipped at %d passed the frame check", i, off)
			}
			if inBlocks {
				if _, err := sharefile.Verify(bytes.NewReader(d), int64(len(d))); err == nil {
					t.Fatalf("share %d: block flipped at %d passed Verify", i, off)
				}
			}
		}
		if _, err := frameCheck(s[:len(s)-1]); err == nil {
			t.Fatalf("share %d: truncated share passed the frame check", i)
		}
	}
}

// A wrong key fails cleanly with ErrDecrypt, never returns bytes.
func TestWrongKey(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	data := randBytes(r, 10_000)
	rc, shares, err := EncodeAll(Params{3, 10, 4096}, NewKey(), data)
	if err != nil {
		t.Fatal(err)
	}
	// Through the capability: another key names another storage index,
	// so the shares do not belong to it and nothing is returned.
	wrong := rc
	wrong.Key = NewKey()
	if got, _, err := DecodeAll(wrong, shares); err == nil || got != nil {
		t.Fatalf("wrong key: got %d bytes, err %v", len(got), err)
	}
	// At the codec: the right blocks under another key do not open.
	l := rc.Verify().Layout()
	blocks := make([][]byte, rc.N)
	for i := range blocks {
		blocks[i] = slices.Clone(shares[i][l.BlockOffset(0) : l.BlockOffset(0)+int64(l.BlockLen(0))])
	}
	c, _ := New(rc.Params, wrong.Key)
	if got, err := c.Decode(nil, 0, false, rc.SegmentSize, blocks); !errors.Is(err, ErrDecrypt) || got != nil {
		t.Fatalf("wrong key at the codec: got %d bytes, err %v", len(got), err)
	}
}

// Decode appends to dst, opening the segment in dst's spare room: with
// room for k blocks it allocates nothing, and a failed open leaves dst as
// it was.
func TestDecodeInPlace(t *testing.T) {
	p := Params{3, 10, 4096}
	c, _ := New(p, NewKey())
	seg := c.NewSegment()
	plain := randBytes(rand.New(rand.NewPCG(1, 2)), 4000)
	if err := c.Encode(seg, 0, true, plain); err != nil {
		t.Fatal(err)
	}
	blocks := slices.Clone(seg.Blocks)
	buf := make([]byte, 0, 3+p.K*p.BlockSize())
	buf = append(buf, "abc"...)
	got, err := c.Decode(buf, 0, true, len(plain), blocks)
	if err != nil || string(got[:3]) != "abc" || !bytes.Equal(got[3:], plain) {
		t.Fatalf("decode after a prefix: %v", err)
	}
	// (Nonce and associated data are a few bytes on the heap; a segment
	// copied would be kilobytes.)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		c.Decode(buf, 0, true, len(plain), blocks)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 20; per > 256 {
		t.Errorf("decode with room allocated %d bytes a call", per)
	}
	if got, err := c.Decode(buf, 0, false, len(plain), blocks); !errors.Is(err, ErrDecrypt) || string(got) != "abc" {
		t.Fatalf("failed open: got %q, %v", got, err)
	}
	// Blocks already where Decode gathers them (as a quick read puts
	// them) are opened where they lie.
	bl := len(seg.Blocks[0])
	room := make([]byte, p.K*bl)
	inPlace := make([][]byte, p.N)
	for i := range p.K {
		inPlace[i] = room[i*bl : (i+1)*bl]
		copy(inPlace[i], seg.Blocks[i])
	}
	got, err = c.Decode(room[:0], 0, true, len(plain), inPlace)
	if err != nil || !bytes.Equal(got, plain) || &got[0] != &room[0] {
		t.Fatalf("decode of blocks in place: %v", err)
	}
	// A missing data block given as an empty buffer is rebuilt in it; one
	// too small for a block is missing too, and rebuilt elsewhere.
	spare := make([]byte, 0, bl)
	rebuilt := make([][]byte, p.N)
	rebuilt[0] = spare
	rebuilt[1] = make([]byte, 0, bl-1)
	copy(rebuilt[p.K:], seg.Blocks[p.K:])
	got, err = c.Decode(nil, 0, true, len(plain), rebuilt)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("decode with empty buffers for missing blocks: %v", err)
	}
	if !bytes.Equal(rebuilt[0], seg.Blocks[0]) || &rebuilt[0][0] != &spare[:1][0] {
		t.Errorf("data block 0 was not rebuilt in the buffer given for it")
	}
	if !bytes.Equal(rebuilt[1], seg.Blocks[1]) {
		t.Errorf("data block 1 was not rebuilt")
	}
	// Empty buffers count as missing: k of them and too few present.
	few := [][]byte{seg.Blocks[0], {}, make([]byte, 0, bl), nil, nil, nil, nil, nil, nil, seg.Blocks[9]}
	if _, err := c.Decode(nil, 0, true, len(plain), few); !errors.Is(err, ErrTooFewBlocks) {
		t.Errorf("two blocks and empty buffers: got %v, want ErrTooFewBlocks", err)
	}
}

// Segments cannot be reordered, truncated or passed off as the last one.
func TestSegmentsBound(t *testing.T) {
	p := Params{2, 4, 64}
	c, _ := New(p, NewKey())
	seg := c.NewSegment()
	plain := bytes.Repeat([]byte("x"), 64)
	if err := c.Encode(seg, 0, false, plain); err != nil {
		t.Fatal(err)
	}
	blocks := make([][]byte, p.N)
	for i := range blocks {
		blocks[i] = slices.Clone(seg.Blocks[i])
	}
	if _, err := c.Decode(nil, 1, false, 64, slices.Clone(blocks)); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("segment 0 opened as segment 1: %v", err)
	}
	if _, err := c.Decode(nil, 0, true, 64, slices.Clone(blocks)); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("inner segment opened as last: %v", err)
	}
	if got, err := c.Decode(nil, 0, false, 64, slices.Clone(blocks)); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("segment 0: %v", err)
	}
}

func TestCapRoundTrip(t *testing.T) {
	rc := ReadCap{Key: NewKey(), Params: Params{3, 10, 1 << 20}, Size: 123456789}
	rc.Root[0], rc.Root[31] = 1, 2
	s := rc.String()
	got, err := ParseReadCap("  " + s + "\n")
	if err != nil || got != rc {
		t.Fatalf("read cap round trip: %v %+v", err, got)
	}
	vc, err := ParseVerifyCap(rc.Verify().String())
	if err != nil || vc != rc.Verify() {
		t.Fatalf("verify cap round trip: %v", err)
	}
	if vc2, err := ParseVerifyCap(s); err != nil || vc2 != vc {
		t.Fatalf("read cap as verify cap: %v", err)
	}
	bad := map[string]string{
		"":                                    "starts with",
		"hello":                               "starts with",
		rc.Verify().String():                  "verify capability",
		s[:len(s)-3]:                          "",
		s[:len(s)-1] + otherChar(s[len(s)-1]): "",
		s + "aa":                              "",
		"quilt:r:!!!!":                        "base32",
		"quilt:r:" + strings.Repeat("a", 8):   "too short",
	}
	for in, want := range bad {
		_, err := ParseReadCap(in)
		if !errors.Is(err, ErrBadCap) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReadCap(%q) = %v, want ErrBadCap mentioning %q", in, err, want)
		}
	}
}

func otherChar(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func benchmarkParams(b *testing.B, p Params) {
	c, _ := New(p, NewKey())
	plain := randBytes(rand.New(rand.NewPCG(1, 1)), p.SegmentSize)
	seg := c.NewSegment()
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(p.SegmentSize))
		for i := 0; b.Loop(); i++ {
			if err := c.Encode(seg, int64(i), false, plain); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As in an upload: every segment a different buffer, and the
	// plaintext new, so nothing starts in the cache (48 segments of
	// 3-of-10 are 170 MB, past any cache).
	b.Run("encode-cold", func(b *testing.B) {
		const ring = 48
		plains := make([][]byte, ring)
		segs := make([]*Segment, ring)
		for i := range ring {
			plains[i] = randBytes(rand.New(rand.NewPCG(uint64(i), 1)), p.SegmentSize)
			segs[i] = c.newSegment()
		}
		b.SetBytes(int64(p.SegmentSize))
		for i := 0; b.Loop(); i++ {
			if err := c.Encode(segs[i%ring], int64(i), false, plains[i%ring]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		if err := c.Encode(seg, 0, false, plain); err != nil {
			b.Fatal(err)
		}
		// The worst case: no data block present, all k rebuilt from parity.
		src := make([][]byte, p.N)
		for i := p.N - p.K; i < p.N; i++ {
			src[i] = seg.Blocks[i]
		}
		if p.N == p.K {
			copy(src, seg.Blocks)
		}
		dst := make([]byte, 0, p.K*p.BlockSize()) // room to open in place
		blocks := make([][]byte, p.N)
		b.SetBytes(int64(p.SegmentSize))
		for b.Loop() {
			copy(blocks, src)
			for i := range blocks[:p.K] {
				if src[i] == nil {
					blocks[i] = nil
				}
			}
			for i := range blocks {
				if blocks[i] != nil {
					if sharefile.BlockHash(blocks[i]) != seg.Hashes[i] {
						b.Fatal("hash")
					}
				}
			}
			if _, err := c.Decode(dst[:0], 0, false, p.SegmentSize, blocks); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCodec measures one core's encode (encrypt + erasure-code + hash
// all n blocks) and decode (hash k blocks + rebuild + decrypt) in MB/s of
// plaintext.
func BenchmarkCodec(b *testing.B) {
	b.Run("3of10", func(b *testing.B) { benchmarkParams(b, DefaultParams()) })
	b.Run("4of6", func(b *testing.B) { benchmarkParams(b, Params{4, 6, 1 << 20}) })
}
