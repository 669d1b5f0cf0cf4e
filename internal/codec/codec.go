// Package codec turns plaintext segments into erasure-coded, encrypted
// blocks and back, and defines the capabilities that name an object.
//
// An object is encoded as Tahoe-LAFS encodes its CHK files, with modern
// parts: the plaintext is split into segments (1 MiB by default); each
// segment is sealed with AES-256-GCM under a random per-object key (the
// nonce is the segment index; the last segment is marked in the associated
// data, so a stream cannot be truncated or extended); the ciphertext is cut
// into k data blocks and Reed–Solomon-coded into n blocks. Block i of every
// segment goes to share i. The hash tree over the blocks is in package
// sharefile.
//
// The package is pure and has no I/O. A Codec is safe for concurrent use,
// so an uploader may encode several segments at once.
//
//	c, _ := codec.New(codec.DefaultParams(), codec.NewKey())
//	seg := c.NewSegment()
//	c.Encode(seg, 0, true, plaintext) // seg.Blocks[i] goes to share i
package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/klauspost/reedsolomon"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/zeebo/blake3"
)

var (
	// ErrBadParams means k, n or the segment size are impossible.
	ErrBadParams = errors.New("codec: bad parameters")
	// ErrDecrypt means a segment did not authenticate: the key is wrong or
	// the blocks are not the ones that were encoded.
	ErrDecrypt = errors.New("codec: segment does not decrypt: wrong key or damaged data")
	// ErrTooFewBlocks means fewer than k blocks were given to decode.
	ErrTooFewBlocks = errors.New("codec: fewer than k blocks")
)

// Params are an object's encoding parameters.
type Params struct {
	K           int // blocks needed to read
	N           int // blocks written, one per share
	SegmentSize int // plaintext bytes per segment
}

// DefaultParams returns Tahoe's 3-of-10 with 1 MiB segments.
func DefaultParams() Params { return Params{K: 3, N: 10, SegmentSize: 1 << 20} }

// Validate reports whether the parameters are usable.
func (p Params) Validate() error {
	switch {
	case p.K < 1 || p.N < p.K || p.N > 255:
		return fmt.Errorf("%w: need 1 <= k <= n <= 255, have k=%d n=%d", ErrBadParams, p.K, p.N)
	case p.SegmentSize < 1 || p.SegmentSize > sharefile.MaxSegmentSize:
		return fmt.Errorf("%w: segment size %d is not in 1..%d", ErrBadParams, p.SegmentSize, sharefile.MaxSegmentSize)
	}
	return nil
}

// BlockSize returns the size of one block of a full segment.
func (p Params) BlockSize() int { return sharefile.BlockSizeFor(p.SegmentSize, p.K) }

// Key is an object's encryption key.
type Key [32]byte

// NewKey returns a random key.
func NewKey() Key {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k
}

// StorageIndex derives the object's name on the storage nodes from its key.
func (k Key) StorageIndex() sharefile.SI {
	var si sharefile.SI
	var out [32]byte
	blake3.DeriveKey("quilt storage index v1", k[:], out[:])
	copy(si[:], out[:])
	return si
}

// Codec encodes and decodes the segments of one object.
type Codec struct {
	p     Params
	aead  cipher.AEAD
	rs    reedsolomon.Encoder // for repair and decoding: splits big blocks over cores
	strip reedsolomon.Encoder // for Encode: one goroutine, a strip at a time
	free  chan *Segment       // the process's free segments of this size
}

// New returns a Codec for an object with these parameters and key.
func New(p Params, key Key) (*Codec, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	var rs reedsolomon.Encoder
	if p.N > p.K {
		rs, err = reedsolomon.New(p.K, p.N-p.K)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadParams, err)
		}
	}
	c := &Codec{p: p, aead: aead, rs: rs, free: freeSegments(p.BlockSize(), p.N)}
	if p.N > p.K {
		// The encoder works a strip at a time on the goroutine that
		// calls Encode: several segments are encoded at once already.
		c.strip, err = reedsolomon.New(p.K, p.N-p.K, reedsolomon.WithMaxGoroutines(1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadParams, err)
		}
	}
	return c, nil
}

// Params returns the codec's parameters.
func (c *Codec) Params() Params { return c.p }

// Segment is one encoded segment: n blocks and their hashes. Blocks alias
// one buffer owned by the Segment; reuse it with Release.
type Segment struct {
	Index  int64
	Blocks [][]byte
	Hashes []sharefile.Hash
	buf    []byte
	// Encode's scratch: a strip of every block, and a hasher per block.
	strip [][]byte
	h     []*blake3.Hasher
}

func (c *Codec) newSegment() *Segment {
	bs, n := c.p.BlockSize(), c.p.N
	s := &Segment{buf: make([]byte, bs*n), Blocks: make([][]byte, n), Hashes: make([]sharefile.Hash, n),
		strip: make([][]byte, n), h: make([]*blake3.Hasher, n)}
	for i := range s.h {
		s.h[i] = blake3.New()
	}
	return s
}

// NewSegment returns a segment buffer, one released before if there is
// one.
func (c *Codec) NewSegment() *Segment {
	select {
	case s := <-c.free:
		return s
	default:
		return c.newSegment()
	}
}

// Release returns a segment buffer for reuse, by any Codec of the same
// parameters: objects are small next to their segments' buffers (a
// 1 MiB object at 3-of-10 is one 3.5 MB segment), and memory allocated
// afresh for every object costs more than the encoding (it is zeroed,
// and on some virtual machines each new page is a fault in the host).
// The caller must not use its blocks afterwards.
func (c *Codec) Release(s *Segment) {
	select {
	case c.free <- s:
	default:
	}
}

// freeBytes bounds the memory the process keeps in free segments of one
// size (at least two are kept).
const freeBytes = 64 << 20

var (
	freeMu   sync.Mutex
	freeSegs = map[[2]int]chan *Segment{}
)

// freeSegments returns the free list of segments of n blocks of
// blockSize bytes.
func freeSegments(blockSize, n int) chan *Segment {
	freeMu.Lock()
	defer freeMu.Unlock()
	k := [2]int{blockSize, n}
	ch := freeSegs[k]
	if ch == nil {
		ch = make(chan *Segment, max(2, freeBytes/(blockSize*n)))
		freeSegs[k] = ch
	}
	return ch
}

func nonce(index int64) []byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[:], uint64(index))
	return n[:]
}

func aad(index int64, last bool) []byte {
	var a [17]byte
	copy(a[:8], "quiltseg")
	binary.BigEndian.PutUint64(a[8:16], uint64(index))
	if last {
		a[16] = 1
	}
	return a[:]
}

// Encode seals plain (at most SegmentSize bytes; less only for the last
// segment) as segment index, erasure-codes it, and hashes the blocks into
// seg.
func (c *Codec) Encode(seg *Segment, index int64, last bool, plain []byte) error {
	if len(plain) > c.p.SegmentSize || (!last && len(plain) != c.p.SegmentSize) {
		return fmt.Errorf("codec: segment %d has %d bytes, segment size is %d", index, len(plain), c.p.SegmentSize)
	}
	seg.Index = index
	ctLen := len(plain) + sharefile.Overhead
	bs := (ctLen + c.p.K - 1) / c.p.K
	data := seg.buf[:bs*c.p.K]
	c.aead.Seal(data[:0], nonce(index), plain, aad(index, last))
	clear(data[ctLen:])
	return c.code(seg, index, bs)
}

// code erasure-codes the k data blocks of bs bytes at the start of
// seg.buf (the sealed segment, zero-padded) and hashes all n blocks.
func (c *Codec) code(seg *Segment, index int64, bs int) error {
	for i := range c.p.N {
		seg.Blocks[i] = seg.buf[i*bs : (i+1)*bs : (i+1)*bs]
	}
	// Parity is computed and every block hashed one strip at a time, so
	// the hash reads the strip the encoder just wrote while it is still
	// in the core's cache, not the whole segment (n blocks, 3.5 MB at
	// 3-of-10) back from memory.
	for off := 0; off < bs; off += encodeStrip {
		end := min(off+encodeStrip, bs)
		for i, b := range seg.Blocks {
			seg.strip[i] = b[off:end:end]
		}
		if c.strip != nil {
			if err := c.strip.Encode(seg.strip); err != nil {
				return fmt.Errorf("codec: erasure-code segment %d: %w", index, err)
			}
		}
		for i, b := range seg.strip {
			seg.h[i].Write(b)
		}
	}
	for i, h := range seg.h {
		h.Sum(seg.Hashes[i][:0])
		h.Reset()
	}
	return nil
}

// encodeStrip is how many bytes of each block Encode codes and hashes at
// a time: n strips fit a core's L2 cache with room to spare, and a strip
// is a whole number of BLAKE3 chunks (1 KiB), which keeps the hasher on
// its wide path.
const encodeStrip = 64 << 10

// Reconstruct fills in the missing (nil or empty) blocks of one segment
// from any k present ones, in an empty block's capacity if it has room.
// Present blocks must all have the same length. No key is needed: repair
// uses it.
func (c *Codec) Reconstruct(blocks [][]byte) error {
	if present(blocks) < c.p.K {
		return ErrTooFewBlocks
	}
	if c.rs == nil {
		return nil
	}
	return c.rs.Reconstruct(blocks)
}

// Decode rebuilds and opens segment index from any k of its n blocks
// (missing ones nil or empty), appending the plaintext (plainLen bytes)
// to dst. Present blocks must already be verified against their hashes;
// Decode may fill in missing entries of blocks, in the capacity of an
// empty one if it has room for a block, so a caller can give it the
// memory to rebuild into.
//
// The ciphertext is gathered in dst's spare capacity and opened in place,
// so a dst with room for the k blocks (k × the block length) needs no
// allocation, and blocks that already lie there in order (block i at
// i × the block length past len(dst)) are not even copied; after an
// error, what lies past len(dst) is undefined.
func (c *Codec) Decode(dst []byte, index int64, last bool, plainLen int, blocks [][]byte) ([]byte, error) {
	if present(blocks) < c.p.K {
		return dst, ErrTooFewBlocks
	}
	if c.rs != nil {
		if err := c.rs.ReconstructData(blocks); err != nil {
			return dst, fmt.Errorf("codec: rebuild segment %d: %w", index, err)
		}
	}
	ctLen := plainLen + sharefile.Overhead
	in := dst
	need := 0
	for _, b := range blocks[:c.p.K] {
		need += len(b)
	}
	dst = slices.Grow(dst, need)
	ct := dst[len(dst):len(dst)]
	for _, b := range blocks[:c.p.K] {
		at := len(ct)
		ct = ct[:at+len(b)]
		if len(b) > 0 && &ct[at] != &b[0] { // a block read where it belongs stays
			copy(ct[at:], b)
		}
	}
	if len(ct) < ctLen {
		return in, fmt.Errorf("codec: segment %d: %d ciphertext bytes, want %d", index, len(ct), ctLen)
	}
	// The plaintext lands where the ciphertext starts: the exact overlap
	// that cipher.AEAD allows.
	out, err := c.aead.Open(dst, nonce(index), ct[:ctLen], aad(index, last))
	if err != nil {
		return in, fmt.Errorf("%w (segment %d)", ErrDecrypt, index)
	}
	return out, nil
}

// present counts the blocks given. An empty block is a missing one,
// whose capacity (if it is enough) Reconstruct and Decode rebuild it in.
func present(blocks [][]byte) int {
	n := 0
	for _, b := range blocks {
		if len(b) > 0 {
			n++
		}
	}
	return n
}
