package dag

import "slices"

// Log is an in-memory Store: the reference replica for tests, and the
// model the persistent store in package namespace is checked against. Not
// safe for concurrent use.
type Log struct {
	entries   map[Hash]*Entry
	blocks    map[Hash]*Block
	referrers map[Hash][]Hash
	revokes   map[Hash][]Hash
	signed    map[Hash][]Hash
	wanted    map[Hash]int
}

var _ Store = (*Log)(nil)

// NewLog makes an empty log.
func NewLog() *Log {
	return &Log{entries: map[Hash]*Entry{}, blocks: map[Hash]*Block{}, referrers: map[Hash][]Hash{},
		revokes: map[Hash][]Hash{}, signed: map[Hash][]Hash{}, wanted: map[Hash]int{}}
}

// Entry implements Index.
func (l *Log) Entry(h Hash) (*Entry, bool) { e, ok := l.entries[h]; return e, ok }

// Block returns an admitted block.
func (l *Log) Block(h Hash) (*Block, bool) { b, ok := l.blocks[h]; return b, ok }

// Referrers implements Index.
func (l *Log) Referrers(h Hash) []Hash { return l.referrers[h] }

// Revokes implements Index.
func (l *Log) Revokes(g Hash) []Hash { return l.revokes[g] }

// Revoked implements Index.
func (l *Log) Revoked() []Hash {
	out := make([]Hash, 0, len(l.revokes))
	for g := range l.revokes {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Hash) int { return slices.Compare(a[:], b[:]) })
	return out
}

// SignedBy implements Index.
func (l *Log) SignedBy(g Hash) []Hash { return l.signed[g] }

// Has implements Store.
func (l *Log) Has(h Hash) bool {
	_, e := l.entries[h]
	_, b := l.blocks[h]
	return e || b
}

// BlockWanted implements Store.
func (l *Log) BlockWanted(h Hash) bool { return l.wanted[h] > 0 }

// Len is the number of admitted entries and blocks.
func (l *Log) Len() int { return len(l.entries) + len(l.blocks) }

// Hashes lists every admitted record, sorted.
func (l *Log) Hashes() []Hash {
	out := make([]Hash, 0, l.Len())
	for h := range l.entries {
		out = append(out, h)
	}
	for h := range l.blocks {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Hash) int { return slices.Compare(a[:], b[:]) })
	return out
}

// Admit implements Store.
func (l *Log) Admit(r Record) error {
	if b := r.Block; b != nil {
		l.blocks[r.Hash] = b
		if !b.Next.IsZero() {
			l.wanted[b.Next]++
		}
		return nil
	}
	e := r.Entry
	l.entries[r.Hash] = e
	for _, p := range e.Parents {
		l.referrers[p] = append(l.referrers[p], r.Hash)
	}
	if e.Action == Revoke {
		l.revokes[e.RefHash()] = append(l.revokes[e.RefHash()], r.Hash)
	}
	l.signed[e.Signer] = append(l.signed[e.Signer], r.Hash)
	if e.Kind == Blocks {
		l.wanted[e.RefHash()]++
	}
	return nil
}

// Remove implements Store.
func (l *Log) Remove(hs []Hash) error {
	for _, h := range hs {
		e, ok := l.entries[h]
		if !ok {
			continue
		}
		delete(l.entries, h)
		drop := func(m map[Hash][]Hash, k Hash) {
			m[k] = slices.DeleteFunc(m[k], func(x Hash) bool { return x == h })
			if len(m[k]) == 0 {
				delete(m, k)
			}
		}
		for _, p := range e.Parents {
			drop(l.referrers, p)
		}
		if e.Action == Revoke {
			drop(l.revokes, e.RefHash())
		}
		drop(l.signed, e.Signer)
		if e.Kind == Blocks {
			l.unwant(e.RefHash())
		}
	}
	return nil
}

// unwant drops a reference to a block, and the block chain when nothing
// else refers to it.
func (l *Log) unwant(h Hash) {
	for !h.IsZero() {
		if l.wanted[h]--; l.wanted[h] > 0 {
			return
		}
		delete(l.wanted, h)
		b, ok := l.blocks[h]
		if !ok {
			return
		}
		delete(l.blocks, h)
		h = b.Next
	}
}

// Each calls f for every admitted entry, in no particular order.
func (l *Log) Each(f func(h Hash, e *Entry)) {
	for h, e := range l.entries {
		f(h, e)
	}
}
