package volume

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/quilt-grid/quilt/internal/codec"
)

// DefaultReadCache is how many bytes of decoded extent data an open
// volume keeps for reads by default: 32 MiB, eight extents.
const DefaultReadCache = 32 << 20

// readAhead is how many recent reads' ends a volume remembers to tell a
// sequential reader: a read that starts where one of them ended fetches
// the rest of its extent.
const readAhead = 16

// segCache keeps decoded segments of a volume's extents, least recently
// used first out, bounded in bytes. Extents are immutable objects, so a
// segment is keyed by its extent's capability and never goes stale. A
// segment being fetched is in the cache already, not ready: readers that
// need it wait for the one fetch instead of starting their own. It is
// safe for concurrent use.
type segCache struct {
	max  int64
	mu   sync.Mutex
	size int64
	lru  *list.List // of *segEntry, most recently used in front
	m    map[segKey]*segEntry
	ends [readAhead]int64 // where recent reads ended, to spot sequential ones
	endN int
}

type segKey struct {
	cap string
	seg int64
}

type segEntry struct {
	key   segKey
	n     int64 // bytes it counts for in the cache's size
	data  []byte
	err   error
	ready chan struct{} // closed once data or err is set
	el    *list.Element
}

func newSegCache(max int64) *segCache {
	c := &segCache{max: max, lru: list.New(), m: map[segKey]*segEntry{}}
	for i := range c.ends {
		c.ends[i] = -1
	}
	return c
}

// sequential says whether a read of [off, end) continues a recent read,
// and remembers where it ends.
func (c *segCache) sequential(off, end int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	seq := false
	for _, e := range c.ends {
		if e == off {
			seq = true
			break
		}
	}
	c.ends[c.endN%readAhead] = end
	c.endN++
	return seq
}

// fetchFunc writes segments [from, to] of an extent, in order, to w.
type fetchFunc func(ctx context.Context, from, to int64, w io.Writer) error

// read fills p from offset eoff of the extent cap (rc), from cached
// segments and by fetching the missing ones; with ahead, the fetch runs
// on to the end of the extent.
func (c *segCache) read(ctx context.Context, cap string, rc codec.ReadCap, eoff int64, p []byte, ahead bool, fetch fetchFunc) error {
	ss := int64(rc.SegmentSize)
	nseg := (rc.Size + ss - 1) / ss
	first, last := eoff/ss, (eoff+int64(len(p))-1)/ss
	to := last
	if ahead {
		to = nseg - 1
	}
	for try := 0; ; try++ {
		ents, owned := c.claim(cap, rc, first, to)
		if lo, hi := ownedRange(owned); lo >= 0 {
			c.fill(ctx, ents[lo:hi+1], owned[lo:hi+1], first+int64(lo), first+int64(hi), rc, fetch)
		}
		err := c.copyOut(ctx, ents[:last-first+1], first*ss, eoff, p)
		// A fetch another reader started may have ended with that
		// reader's context: fetch again, with this one's.
		if err == nil || try == 2 || ctx.Err() != nil || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
	}
}

// claim returns the entries of segments [from, to] of an extent, making
// the missing ones: those are owned, the caller must fill them.
func (c *segCache) claim(cap string, rc codec.ReadCap, from, to int64) ([]*segEntry, []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := int64(rc.SegmentSize)
	ents := make([]*segEntry, 0, to-from+1)
	owned := make([]bool, 0, to-from+1)
	for s := from; s <= to; s++ {
		k := segKey{cap, s}
		e := c.m[k]
		made := e == nil
		if made {
			e = &segEntry{key: k, n: min(ss, rc.Size-s*ss), ready: make(chan struct{})}
			e.el = c.lru.PushFront(e)
			c.m[k] = e
			c.size += e.n
		} else {
			c.lru.MoveToFront(e.el)
		}
		ents = append(ents, e)
		owned = append(owned, made)
	}
	c.evict()
	return ents, owned
}

func (c *segCache) evict() {
	for c.size > c.max && c.lru.Len() > 0 {
		e := c.lru.Remove(c.lru.Back()).(*segEntry)
		delete(c.m, e.key)
		c.size -= e.n
	}
}

func ownedRange(owned []bool) (lo, hi int) {
	lo, hi = -1, -1
	for i, o := range owned {
		if o {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	return lo, hi
}

// fill fetches segments [from, to] and hands each to its entry (the
// entries not owned, fetched by another reader meanwhile, are left).
func (c *segCache) fill(ctx context.Context, ents []*segEntry, owned []bool, from, to int64, rc codec.ReadCap, fetch fetchFunc) {
	ss := int64(rc.SegmentSize)
	bufs := make([][]byte, len(ents))
	for i := range ents {
		bufs[i] = make([]byte, min(ss, rc.Size-(from+int64(i))*ss))
	}
	w := &segWriter{bufs: bufs}
	err := fetch(ctx, from, to, w)
	if err == nil && (w.i != len(bufs) || w.n != 0) {
		err = fmt.Errorf("short read of segments %d-%d", from, to)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range ents {
		if !owned[i] {
			continue
		}
		if err != nil {
			e.err = err
			if c.m[e.key] == e {
				c.lru.Remove(e.el)
				delete(c.m, e.key)
				c.size -= e.n
			}
		} else {
			e.data = bufs[i]
		}
		close(e.ready)
	}
}

// copyOut waits for the entries (segments from first on, first starting
// at extent offset base) and copies extent bytes from eoff on into p.
func (c *segCache) copyOut(ctx context.Context, ents []*segEntry, base, eoff int64, p []byte) error {
	for _, e := range ents {
		select {
		case <-e.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
		if e.err != nil {
			return e.err
		}
		n := copy(p, e.data[eoff-base:])
		p, eoff = p[n:], eoff+int64(n)
		base += int64(len(e.data))
	}
	if len(p) != 0 {
		return fmt.Errorf("short read (%d bytes missing)", len(p))
	}
	return nil
}

// put caches the segments of an extent just stored (plain is the whole
// extent; it is copied).
func (c *segCache) put(cap string, rc codec.ReadCap, plain []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := int64(rc.SegmentSize)
	for s := int64(0); s*ss < int64(len(plain)); s++ {
		k := segKey{cap, s}
		if c.m[k] != nil {
			continue
		}
		b := plain[s*ss : min((s+1)*ss, int64(len(plain)))]
		e := &segEntry{key: k, n: int64(len(b)), data: append(make([]byte, 0, len(b)), b...), ready: make(chan struct{})}
		close(e.ready)
		e.el = c.lru.PushFront(e)
		c.m[k] = e
		c.size += int64(len(b))
	}
	c.evict()
}

// segWriter writes a stream into consecutive buffers.
type segWriter struct {
	bufs [][]byte
	i, n int // buffer, and bytes of it written
}

func (w *segWriter) Write(b []byte) (int, error) {
	total := len(b)
	for len(b) > 0 {
		if w.i == len(w.bufs) {
			return total - len(b), io.ErrShortWrite
		}
		k := copy(w.bufs[w.i][w.n:], b)
		b, w.n = b[k:], w.n+k
		if w.n == len(w.bufs[w.i]) {
			w.i, w.n = w.i+1, 0
		}
	}
	return total, nil
}
