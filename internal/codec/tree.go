package codec

import (
	"github.com/quilt-grid/quilt/internal/sharefile"
)

// Tree collects the block hashes of every share as segments are encoded,
// and builds the shares' trailers and the object root at the end.
// Not safe for concurrent use: add segments in index order.
type Tree struct {
	p      Params
	si     sharefile.SI
	hashes [][]sharefile.Hash // [share][segment]
	last   int                // block length of the last segment added
}

// NewTree returns an empty Tree for the object with these parameters and
// storage index.
func NewTree(p Params, si sharefile.SI) *Tree {
	return &Tree{p: p, si: si, hashes: make([][]sharefile.Hash, p.N)}
}

// Add records the block hashes of the next segment.
func (t *Tree) Add(seg *Segment) {
	for i := range t.p.N {
		t.hashes[i] = append(t.hashes[i], seg.Hashes[i])
	}
	t.last = len(seg.Blocks[0])
}

// Segments returns how many segments were added.
func (t *Tree) Segments() int64 { return int64(len(t.hashes[0])) }

// Finish returns the object root and each share's trailer for an object of
// size plaintext bytes.
func (t *Tree) Finish(size int64) (sharefile.Hash, [][]byte) {
	roots := make([]sharefile.Hash, t.p.N)
	for i := range roots {
		roots[i] = sharefile.ShareRoot(t.p.header(i, t.si), t.hashes[i])
	}
	root := sharefile.ObjectRoot(t.p.K, t.p.N, t.p.SegmentSize, size, roots)
	trailers := make([][]byte, t.p.N)
	for i := range trailers {
		trailers[i] = sharefile.Trailer{
			Segments:      int64(len(t.hashes[i])),
			Size:          size,
			LastBlockSize: t.last,
			BlockHashes:   t.hashes[i],
			ShareRoots:    roots,
		}.Marshal()
	}
	return root, trailers
}

// Header returns the header of share number share of an object whose key
// has storage index si.
func (p Params) Header(share int, si sharefile.SI) []byte {
	return p.header(share, si).Marshal()
}

func (p Params) header(share int, si sharefile.SI) sharefile.Header {
	return sharefile.Header{Share: share, K: p.K, N: p.N, SegmentSize: p.SegmentSize, BlockSize: p.BlockSize(), SI: si}
}

// EncodeAll encodes a whole object held in memory and returns its read
// capability and its n shares. It is for small objects and tests; uploads
// stream with Encode and Tree.
func EncodeAll(p Params, key Key, data []byte) (ReadCap, [][]byte, error) {
	c, err := New(p, key)
	if err != nil {
		return ReadCap{}, nil, err
	}
	si := key.StorageIndex()
	shares := make([][]byte, p.N)
	for i := range shares {
		shares[i] = p.Header(i, si)
	}
	tree := NewTree(p, si)
	seg := c.NewSegment()
	defer c.Release(seg)
	l := sharefile.NewLayout(p.K, p.N, p.SegmentSize, int64(len(data)))
	for i := int64(0); i < l.Segments; i++ {
		off := i * int64(p.SegmentSize)
		plain := data[off : off+int64(l.SegmentPlainLen(i))]
		if err := c.Encode(seg, i, i == l.Segments-1, plain); err != nil {
			return ReadCap{}, nil, err
		}
		tree.Add(seg)
		for s := range shares {
			shares[s] = append(shares[s], seg.Blocks[s]...)
		}
	}
	root, trailers := tree.Finish(int64(len(data)))
	for s := range shares {
		shares[s] = append(shares[s], trailers[s]...)
	}
	return ReadCap{Key: key, Root: root, Params: p, Size: int64(len(data))}, shares, nil
}
