package sharefile

import (
	"fmt"
	"io"

	"github.com/zeebo/blake3"
)

// Checker verifies a share while it streams in, so a storage node can
// refuse a damaged or truncated upload before it commits it. Write the
// share's bytes to it in order, then call Finish with a way to re-read the
// tail. A Checker from NewChecker hashes every full-size chunk after the
// header as it arrives, and Finish re-reads only the last block and the
// trailer; one from NewFrameChecker hashes no block.
//
// A Checker is not safe for concurrent use.
type Checker struct {
	frame   bool // check the frame only: no block is hashed
	hdrBuf  []byte
	hdr     Header
	hdrOK   bool
	n       int64 // bytes written
	h       *blake3.Hasher
	inChunk int
	chunks  []Hash // hash of every complete BlockSize chunk after the header
}

// NewChecker returns a Checker for one share that checks everything:
// the frame, and every block against its hash.
func NewChecker() *Checker {
	return &Checker{h: blake3.New()}
}

// NewFrameChecker returns a Checker for one share that checks its frame:
// the header, the length, the trailer, and that the block hashes the
// trailer lists make the share root it lists for this share number (so
// Finish returns the object root the share claims). It does not hash the
// blocks: a block that does not match its hash passes, to be found by any
// reader (who checks every block it reads) or by a scrub (Verify). This is
// what a storage node needs on upload when the transport already
// authenticates every byte (TLS): the block check would then only catch
// the uploader's own mistakes, at the cost of hashing every byte stored.
func NewFrameChecker() *Checker {
	return &Checker{frame: true}
}

// Header returns the share's header once at least HeaderSize bytes were
// written and it parsed.
func (c *Checker) Header() (Header, bool) { return c.hdr, c.hdrOK }

// Write consumes the next bytes of the share. It fails as soon as the
// header is malformed.
func (c *Checker) Write(p []byte) (int, error) {
	total := len(p)
	c.n += int64(total)
	if !c.hdrOK {
		need := HeaderSize - len(c.hdrBuf)
		if len(p) < need {
			c.hdrBuf = append(c.hdrBuf, p...)
			return total, nil
		}
		c.hdrBuf = append(c.hdrBuf, p[:need]...)
		p = p[need:]
		h, err := ParseHeader(c.hdrBuf)
		if err != nil {
			return 0, err
		}
		c.hdr, c.hdrOK = h, true
	}
	for len(p) > 0 && !c.frame {
		m := min(c.hdr.BlockSize-c.inChunk, len(p))
		c.h.Write(p[:m])
		c.inChunk += m
		p = p[m:]
		if c.inChunk == c.hdr.BlockSize {
			var s Hash
			c.h.Sum(s[:0])
			c.chunks = append(c.chunks, s)
			c.h.Reset()
			c.inChunk = 0
		}
	}
	return total, nil
}

// Finish checks the whole share, whose size bytes can be re-read from r
// (the temporary file the share was written to). size must equal the bytes
// written. It returns what the share says about itself.
func (c *Checker) Finish(r io.ReaderAt, size int64) (Info, error) {
	if !c.hdrOK {
		return Info{}, fmt.Errorf("%w: share of %d bytes has no header", ErrMalformed, c.n)
	}
	if size != c.n {
		return Info{}, fmt.Errorf("sharefile: checker saw %d bytes, file has %d", c.n, size)
	}
	if size < HeaderSize+8 {
		return Info{}, fmt.Errorf("%w: share of %d bytes has no trailer", ErrMalformed, size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return Info{}, err
	}
	tl, err := TrailerLenFromTail(tail[:])
	if err != nil {
		return Info{}, err
	}
	if tl < 28 || int64(tl) > size-HeaderSize {
		return Info{}, fmt.Errorf("%w: trailer length %d in a share of %d bytes", ErrMalformed, tl, size)
	}
	tb := make([]byte, tl)
	if _, err := r.ReadAt(tb, size-int64(tl)); err != nil {
		return Info{}, err
	}
	t, err := ParseTrailer(tb, c.hdr.N)
	if err != nil {
		return Info{}, err
	}
	root, err := CheckTrailer(c.hdr, t)
	if err != nil {
		return Info{}, err
	}
	l := NewLayout(c.hdr.K, c.hdr.N, c.hdr.SegmentSize, t.Size)
	if l.ShareSize() != size {
		return Info{}, fmt.Errorf("%w: share is %d bytes, its trailer says %d", ErrMalformed, size, l.ShareSize())
	}
	if c.frame {
		return Info{Header: c.hdr, Trailer: t, Root: root}, nil
	}
	// Blocks 0..S-2 are full chunks hashed on the way in.
	for i := int64(0); i < l.Segments-1; i++ {
		if c.chunks[i] != t.BlockHashes[i] {
			return Info{}, fmt.Errorf("%w: block %d does not match its hash", ErrCorrupt, i)
		}
	}
	// The last block is re-read in pieces: it may be most of the share
	// (all of it, for an object of one segment).
	c.h.Reset()
	buf := make([]byte, min(l.LastBlockSize, 32<<10))
	if _, err := io.CopyBuffer(c.h, io.NewSectionReader(r, l.BlockOffset(l.Segments-1), int64(l.LastBlockSize)), buf); err != nil {
		return Info{}, err
	}
	var last Hash
	c.h.Sum(last[:0])
	if last != t.BlockHashes[l.Segments-1] {
		return Info{}, fmt.Errorf("%w: block %d does not match its hash", ErrCorrupt, l.Segments-1)
	}
	return Info{Header: c.hdr, Trailer: t, Root: root}, nil
}
