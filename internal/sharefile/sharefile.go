// Package sharefile defines the byte layout of one share of a Quilt object,
// and checks a share against its own hash tree without any key.
//
// A share is what one storage node holds of an object: block i of every
// erasure-coded segment, plus the hashes that let anybody check those
// blocks. It is laid out so an uploader can stream it front to back without
// knowing the object's size in advance:
//
//	header   64 bytes: "QSH1", version, share number, k, n, segment size,
//	         block size, storage index
//	blocks   one per segment; all BlockSize bytes but the last
//	trailer  segment count, object size, last block size,
//	         the BLAKE3 hash of every block of this share,
//	         the share root of every share of the object,
//	         trailer length, "QSHT"
//
// The hash tree has three levels: block hashes; the share root, a hash of
// this share's block hashes; the object root, a hash of the parameters and
// all share roots, which the capabilities carry. A storage node can check
// that a share is internally consistent (every block matches its hash, the
// hashes match the share root, the share root is the one listed for this
// share number) with no key; a reader holding the object root can also
// check that the share belongs to the object it asked for.
//
// This package is pure: it parses and hashes bytes it is given.
package sharefile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/zeebo/blake3"
)

// HeaderSize is the size of a share's header in bytes.
const HeaderSize = 64

// MaxSegmentSize bounds the plaintext segment size a share may declare, so
// a hostile header cannot make a node or reader allocate without bound.
const MaxSegmentSize = 64 << 20

// Overhead is the number of bytes the AEAD adds to every segment.
const Overhead = 16

// SILen is the length of a storage index.
const SILen = 16

// HashLen is the length of every hash in the tree.
const HashLen = 32

var (
	// ErrMalformed means the bytes are not a share: bad magic, impossible
	// parameters, or a length that does not add up.
	ErrMalformed = errors.New("sharefile: malformed share")
	// ErrCorrupt means the share parses but a block or hash does not match
	// the hash tree: the bytes were damaged or forged.
	ErrCorrupt = errors.New("sharefile: share is corrupt")
)

// SI is a storage index: the name of an object on the storage nodes. It is
// derived from the object's key, so it reveals nothing about the contents.
type SI [SILen]byte

// Hash is a node of the hash tree.
type Hash [HashLen]byte

// Header is the fixed-size start of every share.
type Header struct {
	Share       int // share number, 0 <= Share < N
	K, N        int // erasure-coding parameters
	SegmentSize int // plaintext bytes per segment (all but the last)
	BlockSize   int // bytes of every block but the last
	SI          SI
}

// BlockSizeFor returns the size of one block of a full segment.
func BlockSizeFor(segmentSize, k int) int {
	return (segmentSize + Overhead + k - 1) / k
}

// Validate reports whether the header's parameters are possible.
func (h Header) Validate() error {
	switch {
	case h.K < 1 || h.N < h.K || h.N > 255:
		return fmt.Errorf("%w: k=%d n=%d", ErrMalformed, h.K, h.N)
	case h.Share < 0 || h.Share >= h.N:
		return fmt.Errorf("%w: share number %d of %d", ErrMalformed, h.Share, h.N)
	case h.SegmentSize < 1 || h.SegmentSize > MaxSegmentSize:
		return fmt.Errorf("%w: segment size %d", ErrMalformed, h.SegmentSize)
	case h.BlockSize != BlockSizeFor(h.SegmentSize, h.K):
		return fmt.Errorf("%w: block size %d for segment size %d and k=%d", ErrMalformed, h.BlockSize, h.SegmentSize, h.K)
	}
	return nil
}

// Marshal returns the header's 64 bytes.
func (h Header) Marshal() []byte {
	b := make([]byte, HeaderSize)
	copy(b, "QSH1")
	b[4] = 1
	b[5] = byte(h.Share)
	b[6] = byte(h.K)
	b[7] = byte(h.N)
	binary.BigEndian.PutUint32(b[8:], uint32(h.SegmentSize))
	binary.BigEndian.PutUint32(b[12:], uint32(h.BlockSize))
	copy(b[16:32], h.SI[:])
	return b
}

// ParseHeader parses and validates a header from the first HeaderSize bytes of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize || string(b[:4]) != "QSH1" {
		return Header{}, fmt.Errorf("%w: no share header", ErrMalformed)
	}
	if b[4] != 1 {
		return Header{}, fmt.Errorf("%w: unknown share version %d", ErrMalformed, b[4])
	}
	h := Header{
		Share:       int(b[5]),
		K:           int(b[6]),
		N:           int(b[7]),
		SegmentSize: int(binary.BigEndian.Uint32(b[8:])),
		BlockSize:   int(binary.BigEndian.Uint32(b[12:])),
	}
	copy(h.SI[:], b[16:32])
	if !bytes.Equal(b[32:HeaderSize], make([]byte, HeaderSize-32)) {
		return Header{}, fmt.Errorf("%w: reserved header bytes are not zero", ErrMalformed)
	}
	return h, h.Validate()
}

// Layout is where everything sits in a share of an object of a known size.
// Readers build it from a capability; nodes from a header and trailer.
type Layout struct {
	K, N          int
	SegmentSize   int
	Size          int64 // plaintext size of the object
	Segments      int64 // at least 1: an empty object has one empty segment
	BlockSize     int   // all blocks but the last
	LastBlockSize int
}

// NewLayout computes the layout of an object of size bytes.
func NewLayout(k, n, segmentSize int, size int64) Layout {
	l := Layout{K: k, N: n, SegmentSize: segmentSize, Size: size}
	l.Segments = (size + int64(segmentSize) - 1) / int64(segmentSize)
	if l.Segments == 0 {
		l.Segments = 1
	}
	l.BlockSize = BlockSizeFor(segmentSize, k)
	l.LastBlockSize = (l.SegmentPlainLen(l.Segments-1) + Overhead + k - 1) / k
	return l
}

// SegmentPlainLen returns the plaintext length of segment i.
func (l Layout) SegmentPlainLen(i int64) int {
	if i == l.Segments-1 {
		return int(l.Size - i*int64(l.SegmentSize))
	}
	return l.SegmentSize
}

// BlockLen returns the length of block i of every share.
func (l Layout) BlockLen(i int64) int {
	if i == l.Segments-1 {
		return l.LastBlockSize
	}
	return l.BlockSize
}

// BlockOffset returns the offset of block i within a share.
func (l Layout) BlockOffset(i int64) int64 {
	return HeaderSize + i*int64(l.BlockSize)
}

// TrailerOffset returns the offset of the trailer within a share.
func (l Layout) TrailerOffset() int64 {
	return l.BlockOffset(l.Segments-1) + int64(l.LastBlockSize)
}

// TrailerLen returns the length of the trailer.
func (l Layout) TrailerLen() int {
	return TrailerLen(l.Segments, l.N)
}

// ShareSize returns the total size of one share.
func (l Layout) ShareSize() int64 {
	return l.TrailerOffset() + int64(l.TrailerLen())
}

// MaxSegments bounds the segment count a trailer may declare (a trailer
// of that many would be 32 TiB): every length computed from a count parsed
// from bytes stays far from overflowing.
const MaxSegments = 1 << 40

// TrailerLen returns the trailer length for a share with this many segments
// of an object with n shares. segments must be in [0, MaxSegments] and n in
// [0, 255] (a count parsed from bytes is checked first: see ParseTrailer);
// outside, it returns -1.
func TrailerLen(segments int64, n int) int {
	if segments < 0 || segments > MaxSegments || n < 0 || n > 255 {
		return -1
	}
	return 20 + HashLen*(int(segments)+n) + 8
}

// Trailer is the end of a share: what is only known once the whole object
// has been encoded.
type Trailer struct {
	Segments      int64
	Size          int64
	LastBlockSize int
	BlockHashes   []Hash // one per segment, of this share's blocks
	ShareRoots    []Hash // one per share of the object
}

// Marshal returns the trailer's bytes.
func (t Trailer) Marshal() []byte {
	b := make([]byte, 0, 28+HashLen*(len(t.BlockHashes)+len(t.ShareRoots)))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Segments))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Size))
	b = binary.BigEndian.AppendUint32(b, uint32(t.LastBlockSize))
	for _, h := range t.BlockHashes {
		b = append(b, h[:]...)
	}
	for _, h := range t.ShareRoots {
		b = append(b, h[:]...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(b)+8))
	return append(b, "QSHT"...)
}

// TrailerLenFromTail reads the trailer length from a share's last 8 bytes.
func TrailerLenFromTail(tail []byte) (int, error) {
	if len(tail) < 8 || string(tail[len(tail)-4:]) != "QSHT" {
		return 0, fmt.Errorf("%w: no trailer mark", ErrMalformed)
	}
	return int(binary.BigEndian.Uint32(tail[len(tail)-8:])), nil
}

// CheckShape checks, before anything is parsed, that trailer bytes b have
// the shape of the trailer of a share of layout l (which a reader knows
// from its capability): the length, and the segment count they declare.
func CheckShape(b []byte, l Layout) error {
	want := l.TrailerLen()
	if want < 0 || len(b) != want {
		return fmt.Errorf("%w: trailer of %d bytes, want %d", ErrMalformed, len(b), want)
	}
	if declared := binary.BigEndian.Uint64(b); declared != uint64(l.Segments) {
		return fmt.Errorf("%w: trailer declares %d segments, the object has %d", ErrMalformed, declared, l.Segments)
	}
	return nil
}

// ParseTrailer parses a trailer for a share of an object with n shares.
func ParseTrailer(b []byte, n int) (Trailer, error) {
	if n < 1 || n > 255 {
		return Trailer{}, fmt.Errorf("%w: %d shares", ErrMalformed, n)
	}
	if len(b) < 28+HashLen*n {
		return Trailer{}, fmt.Errorf("%w: trailer too short", ErrMalformed)
	}
	l, err := TrailerLenFromTail(b)
	if err != nil {
		return Trailer{}, err
	}
	if l != len(b) {
		return Trailer{}, fmt.Errorf("%w: trailer length %d, have %d bytes", ErrMalformed, l, len(b))
	}
	// The segment count the bytes have room for, computed from the length
	// actually present, is what the declared count must equal: no
	// arithmetic on the declared count, which may be anything.
	hashes := len(b) - 28 - HashLen*n
	if hashes%HashLen != 0 {
		return Trailer{}, fmt.Errorf("%w: trailer of %d bytes holds no whole number of hashes", ErrMalformed, len(b))
	}
	room := uint64(hashes / HashLen)
	declared := binary.BigEndian.Uint64(b)
	if declared < 1 || declared != room {
		return Trailer{}, fmt.Errorf("%w: trailer of %d bytes cannot hold %d segments", ErrMalformed, len(b), declared)
	}
	t := Trailer{
		Segments:      int64(room),
		Size:          int64(binary.BigEndian.Uint64(b[8:])),
		LastBlockSize: int(binary.BigEndian.Uint32(b[16:])),
	}
	if t.Size < 0 {
		return Trailer{}, fmt.Errorf("%w: trailer says the object has %d bytes", ErrMalformed, t.Size)
	}
	p := b[20:]
	t.BlockHashes = make([]Hash, t.Segments)
	for i := range t.BlockHashes {
		copy(t.BlockHashes[i][:], p)
		p = p[HashLen:]
	}
	t.ShareRoots = make([]Hash, n)
	for i := range t.ShareRoots {
		copy(t.ShareRoots[i][:], p)
		p = p[HashLen:]
	}
	return t, nil
}

// BlockHash hashes one block.
func BlockHash(block []byte) Hash {
	return blake3.Sum256(block)
}

// ShareRoot hashes a share's header and block hashes into its root, so
// that every byte of the share is under the hash tree.
func ShareRoot(hdr Header, blockHashes []Hash) Hash {
	h := blake3.New()
	h.Write([]byte("quilt share root v1"))
	h.Write(hdr.Marshal())
	for i := range blockHashes {
		h.Write(blockHashes[i][:])
	}
	var r Hash
	h.Sum(r[:0])
	return r
}

// ObjectRoot hashes an object's parameters, size and share roots into the
// root that capabilities carry.
func ObjectRoot(k, n, segmentSize int, size int64, shareRoots []Hash) Hash {
	h := blake3.New()
	var p [27]byte
	copy(p[:], "quilt object v1")
	p[15], p[16] = byte(k), byte(n)
	binary.BigEndian.PutUint32(p[17:], uint32(segmentSize))
	binary.BigEndian.PutUint64(p[19:], uint64(size))
	h.Write(p[:])
	for i := range shareRoots {
		h.Write(shareRoots[i][:])
	}
	var r Hash
	h.Sum(r[:0])
	return r
}

// Info is what a check of a whole share found.
type Info struct {
	Header
	Trailer
	Root Hash // the object root the share belongs to
}

// Layout returns the layout the share describes.
func (i Info) Layout() Layout {
	return NewLayout(i.K, i.N, i.SegmentSize, i.Size)
}

// CheckTrailer checks a trailer against a header: consistent sizes, the
// share's own root listed in its place. It returns the object root.
func CheckTrailer(h Header, t Trailer) (Hash, error) {
	l := NewLayout(h.K, h.N, h.SegmentSize, t.Size)
	if l.Segments != t.Segments || l.LastBlockSize != t.LastBlockSize {
		return Hash{}, fmt.Errorf("%w: trailer says %d segments of an object of %d bytes", ErrMalformed, t.Segments, t.Size)
	}
	if ShareRoot(h, t.BlockHashes) != t.ShareRoots[h.Share] {
		return Hash{}, fmt.Errorf("%w: block hashes do not match share root %d", ErrCorrupt, h.Share)
	}
	return ObjectRoot(h.K, h.N, h.SegmentSize, t.Size, t.ShareRoots), nil
}

// Verify reads a whole share from r (size bytes) and checks every block
// against the hash tree. It needs no key: a storage node scrubs with it.
// Without a key it cannot know which object root is right, so it returns
// the root the share hashes to: the caller compares it with the one it
// expects (the root a node recorded when it accepted the share, or the
// root in a capability).
func Verify(r io.ReaderAt, size int64) (Info, error) {
	c := NewChecker()
	if _, err := io.Copy(c, io.NewSectionReader(r, 0, size)); err != nil {
		return Info{}, err
	}
	return c.Finish(r, size)
}
