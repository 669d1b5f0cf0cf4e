package sharefile_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

// share builds a well-formed share of an object of size bytes (block
// contents are arbitrary: a share is checked against its own hash tree,
// not decrypted), with the package's own encoders.
func share(k, n, shareNum, segSize int, size int64) []byte {
	l := sharefile.NewLayout(k, n, segSize, size)
	hdr := sharefile.Header{Share: shareNum, K: k, N: n, SegmentSize: segSize, BlockSize: l.BlockSize}
	hdr.SI[0], hdr.SI[15] = 0x51, byte(size)
	out := hdr.Marshal()
	t := sharefile.Trailer{Segments: l.Segments, Size: size, LastBlockSize: l.LastBlockSize}
	for i := int64(0); i < l.Segments; i++ {
		b := bytes.Repeat([]byte{byte(i + 1)}, l.BlockLen(i))
		out = append(out, b...)
		t.BlockHashes = append(t.BlockHashes, sharefile.BlockHash(b))
	}
	t.ShareRoots = make([]sharefile.Hash, n)
	for i := range t.ShareRoots {
		t.ShareRoots[i][0] = byte(i)
	}
	t.ShareRoots[shareNum] = sharefile.ShareRoot(hdr, t.BlockHashes)
	return append(out, t.Marshal()...)
}

// seedShares are well-formed shares of a few shapes: one segment, several,
// an empty object, a short last block.
func seedShares() [][]byte {
	return [][]byte{
		share(1, 1, 0, 16, 0),
		share(3, 10, 2, 64, 64),
		share(3, 10, 9, 64, 200),
		share(2, 4, 1, 100, 1000),
		share(5, 7, 0, 1, 5),
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, s := range seedShares() {
		f.Add(s[:sharefile.HeaderSize])
	}
	f.Add([]byte("QSH1"))
	f.Add(append([]byte("QSH2"), make([]byte, 60)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := sharefile.ParseHeader(b)
		if err != nil {
			if !errors.Is(err, sharefile.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if got := h.Marshal(); !bytes.Equal(got, b[:sharefile.HeaderSize]) {
			t.Fatalf("Marshal(ParseHeader(b)) = %x, want %x", got, b[:sharefile.HeaderSize])
		}
	})
}

func FuzzParseTrailer(f *testing.F) {
	for _, s := range seedShares() {
		h, _ := sharefile.ParseHeader(s)
		tl, _ := sharefile.TrailerLenFromTail(s)
		f.Add(s[len(s)-tl:], uint8(h.N))
	}
	f.Add([]byte("QSHT"), uint8(1))
	f.Add(append(make([]byte, 28+32), 0, 0, 0, 60, 'Q', 'S', 'H', 'T'), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		if l, err := sharefile.TrailerLenFromTail(b); err == nil && l < 0 {
			t.Fatalf("TrailerLenFromTail = %d", l)
		}
		tr, err := sharefile.ParseTrailer(b, int(n))
		if err != nil {
			if !errors.Is(err, sharefile.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if int64(len(tr.BlockHashes)) != tr.Segments || len(tr.ShareRoots) != int(n) {
			t.Fatalf("trailer of %d segments has %d block hashes, %d share roots for n=%d",
				tr.Segments, len(tr.BlockHashes), len(tr.ShareRoots), n)
		}
		if got := tr.Marshal(); !bytes.Equal(got, b) {
			t.Fatalf("Marshal(ParseTrailer(b)) = %x, want %x", got, b)
		}
	})
}

// FuzzChecker streams bytes through both checkers, as a node does with an
// upload, and compares them with Verify: the full check passes only what
// the frame check passes, and whatever passes re-encodes to its own
// header and trailer.
func FuzzChecker(f *testing.F) {
	for _, s := range seedShares() {
		f.Add(s, uint16(7))
		f.Add(s, uint16(0))
	}
	bad := share(3, 10, 2, 64, 200)
	bad[sharefile.HeaderSize+3] ^= 1 // a block that does not match its hash
	f.Add(bad, uint16(13))
	f.Add([]byte("QSH1"), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, step uint16) {
		full, fullErr := check(sharefile.NewChecker(), b, int(step))
		frame, frameErr := check(sharefile.NewFrameChecker(), b, int(step))
		v, vErr := sharefile.Verify(bytes.NewReader(b), int64(len(b)))
		if (fullErr == nil) != (vErr == nil) {
			t.Fatalf("Checker: %v; Verify: %v", fullErr, vErr)
		}
		if fullErr == nil && frameErr != nil {
			t.Fatalf("full check passed, frame check failed: %v", frameErr)
		}
		for _, err := range []error{fullErr, frameErr, vErr} {
			if err != nil && !errors.Is(err, sharefile.ErrMalformed) && !errors.Is(err, sharefile.ErrCorrupt) {
				t.Fatalf("error %v matches neither ErrMalformed nor ErrCorrupt", err)
			}
		}
		if frameErr != nil {
			return
		}
		if fullErr == nil && (full.Root != frame.Root || v.Root != full.Root) {
			t.Fatalf("roots differ: full %x, frame %x, Verify %x", full.Root, frame.Root, v.Root)
		}
		if got := frame.Header.Marshal(); !bytes.Equal(got, b[:sharefile.HeaderSize]) {
			t.Fatalf("header re-encodes to %x, share has %x", got, b[:sharefile.HeaderSize])
		}
		if got := frame.Trailer.Marshal(); !bytes.Equal(got, b[len(b)-len(got):]) {
			t.Fatalf("trailer re-encodes to %x, share ends %x", got, b[len(b)-len(got):])
		}
		if size := frame.Layout().ShareSize(); size != int64(len(b)) {
			t.Fatalf("layout says %d bytes, share has %d", size, len(b))
		}
	})
}

// check writes b to c in pieces of step bytes (0: at once) and finishes.
func check(c *sharefile.Checker, b []byte, step int) (sharefile.Info, error) {
	if step <= 0 {
		step = len(b) + 1
	}
	for p := b; len(p) > 0; {
		m := min(step, len(p))
		if _, err := c.Write(p[:m]); err != nil {
			return sharefile.Info{}, err
		}
		p = p[m:]
	}
	return c.Finish(bytes.NewReader(b), int64(len(b)))
}

// TestSeedShares checks that the fuzz seeds are shares, so that the fuzz
// targets start from inputs that reach every check.
func TestSeedShares(t *testing.T) {
	for i, s := range seedShares() {
		if _, err := sharefile.Verify(bytes.NewReader(s), int64(len(s))); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}
