package placement

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
)

// Node is a candidate storage node as placement sees it.
type Node struct {
	ID   string // node ID (stable, unique)
	Zone string // failure domain; "" is a zone of its own named ""
	Free int64  // free bytes; the weight of the node in rendezvous hashing
	// Used is the bytes the node stores (0: not known, or empty). Only
	// PlaceBy looks at it: Free/(Free+Used) is the part of the node's
	// room still free.
	Used int64
}

// hashDomain separates placement hashes from every other use of SHA-256 in
// Quilt. Changing it, or anything else in score, moves every object: all
// nodes of a grid must agree on it.
const hashDomain = "quilt placement v1\x00"

// Rank orders nodes by weighted rendezvous hashing of the storage index si,
// best first.
//
// A node's score is -w/ln(u), where w = max(Free, 1) and u is a uniform
// value in the open interval (0,1) taken from the first 53 bits of
// SHA-256(domain || uvarint(len(si)) || si || ID). The probability that a
// node ranks first is its free space over the total free space, and a node
// that joins or leaves changes the order of the others for no object.
//
// The order depends only on si and the set of nodes, not on the order of
// the slice: equal scores are broken by ID, then Zone, then Free. Rank
// returns a new slice and does not modify nodes.
func Rank(si []byte, nodes []Node) []Node {
	// Sort small pointer-free records, not Nodes: it is most of the cost.
	type scored struct {
		score float64
		i     int
	}
	s := make([]scored, len(nodes))
	buf := make([]byte, 0, len(hashDomain)+binary.MaxVarintLen64+len(si)+64)
	buf = append(buf, hashDomain...)
	buf = binary.AppendUvarint(buf, uint64(len(si)))
	buf = append(buf, si...)
	prefix := len(buf)
	for i, n := range nodes {
		buf = append(buf[:prefix], n.ID...)
		s[i] = scored{score(sha256.Sum256(buf), n.Free), i}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		na, nb := &nodes[a.i], &nodes[b.i]
		if c := cmp.Compare(na.ID, nb.ID); c != 0 {
			return c
		}
		if c := cmp.Compare(na.Zone, nb.Zone); c != 0 {
			return c
		}
		return cmp.Compare(na.Free, nb.Free)
	})
	out := make([]Node, len(s))
	for j, r := range s {
		out[j] = nodes[r.i]
	}
	return out
}

// score is the weighted rendezvous score of a node whose hash is sum and
// whose free space is free: -w/ln(u), higher is better.
func score(sum [sha256.Size]byte, free int64) float64 {
	x := binary.BigEndian.Uint64(sum[:8]) >> 11 // 53 bits
	u := (float64(x) + 0.5) / (1 << 53)         // in (0,1), never 0 or 1
	w := float64(max(free, 1))
	return -w / math.Log(u)
}
