package dag

import (
	"errors"
	"slices"
)

// Store is a replica's log as Pool needs it: an Index that can also admit
// and remove records. Implementations need not be safe for concurrent use.
type Store interface {
	Index
	Has(h Hash) bool            // an entry or block with this hash is admitted
	BlockWanted(h Hash) bool    // an admitted entry's Ref or block's Next names h
	Admit(r Record) error       // store a record that passed the checks
	Remove(hashes []Hash) error // drop entries a revoke made invalid
}

// Outcome is what one Pool.Ingest did.
type Outcome struct {
	Admitted []Record // records now in the store, in the order admitted
	Purged   []Hash   // entries removed because a revoke made them invalid
	Missing  []Hash   // references to fetch so held entries can be checked
	Rejected []error  // why records were refused (each once)
}

// Pool admits records into a Store in any order: entries whose references
// have not arrived wait in the pool until they do, blocks wait until an
// entry refers to them. It holds at most Max records (default 100,000);
// beyond that new arrivals that must wait are dropped (anti-entropy brings
// them again). Not safe for concurrent use.
type Pool struct {
	NS     NSID
	Max    int
	held   map[Hash]Record
	waits  map[Hash][]Hash // missing reference -> held entries
	blocks map[Hash]Record // blocks nothing refers to yet
	sigs   map[Hash]bool   // entries whose signature checked
}

// Held is the number of records waiting.
func (p *Pool) Held() int { return len(p.held) + len(p.blocks) }

// Ingest offers one decoded record. Errors from the store are returned;
// refusals of the record are in Outcome.Rejected.
func (p *Pool) Ingest(st Store, r Record) (Outcome, error) {
	var out Outcome
	if p.held == nil {
		p.held, p.waits, p.blocks, p.sigs = map[Hash]Record{}, map[Hash][]Hash{}, map[Hash]Record{}, map[Hash]bool{}
	}
	if p.Max == 0 {
		p.Max = 100_000
	}
	queue := []Record{r}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		if st.Has(r.Hash) {
			continue
		}
		if r.Block != nil {
			if !st.BlockWanted(r.Hash) {
				if p.Held() < p.Max {
					p.blocks[r.Hash] = r
				}
				continue
			}
			if err := st.Admit(r); err != nil {
				return out, err
			}
			delete(p.blocks, r.Hash)
			out.Admitted = append(out.Admitted, r)
			p.wantBlock(st, r.Block.Next, &queue, &out)
			continue
		}
		if len(p.sigs) > 4*p.Max {
			clear(p.sigs)
		}
		c := Checker{NS: p.NS, Index: st, Waiting: p.waiting, Verified: p.sigs}
		err := c.Check(r.Entry)
		var miss *MissingError
		switch {
		case errors.As(err, &miss):
			if _, ok := p.held[r.Hash]; !ok && p.Held() >= p.Max {
				continue
			}
			p.held[r.Hash] = r
			for _, m := range miss.Hashes {
				if !slices.Contains(p.waits[m], r.Hash) {
					p.waits[m] = append(p.waits[m], r.Hash)
				}
				out.Missing = append(out.Missing, m)
			}
			continue
		case err != nil:
			delete(p.held, r.Hash)
			out.Rejected = append(out.Rejected, err)
			continue
		}
		if err := st.Admit(r); err != nil {
			return out, err
		}
		delete(p.held, r.Hash)
		out.Admitted = append(out.Admitted, r)
		if r.Entry.Action == Revoke {
			if gone := c.Purge(); len(gone) > 0 {
				if err := st.Remove(gone); err != nil {
					return out, err
				}
				out.Purged = append(out.Purged, gone...)
			}
		}
		if r.Entry.Kind == Blocks {
			p.wantBlock(st, r.Entry.RefHash(), &queue, &out)
		}
		for _, w := range p.waits[r.Hash] {
			if h, ok := p.held[w]; ok {
				queue = append(queue, h)
			}
		}
		delete(p.waits, r.Hash)
	}
	return out, nil
}

// waiting lists held entries that name h among their parents.
func (p *Pool) waiting(h Hash) []Record {
	var out []Record
	for _, w := range p.waits[h] {
		if r, ok := p.held[w]; ok {
			for _, par := range r.Entry.Parents {
				if par == h {
					out = append(out, r)
					break
				}
			}
		}
	}
	return out
}

// wantBlock queues a referenced block if the pool holds it, else reports
// it missing.
func (p *Pool) wantBlock(st Store, h Hash, queue *[]Record, out *Outcome) {
	if h.IsZero() || st.Has(h) {
		return
	}
	if b, ok := p.blocks[h]; ok {
		*queue = append(*queue, b)
	} else {
		out.Missing = append(out.Missing, h)
	}
}
