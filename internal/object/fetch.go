package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
)

// found sources, as they come: a read starts on the first holders that
// answer (see findSources) and takes the others as they arrive.
type sourceFeed struct {
	first    []*source
	late     chan *source // closed once every node answered
	asked    int
	answered func() int
	problems func() []Problem
}

// findSources asks the live nodes, best-ranked first, for their shares of
// the object with their trailers, and returns as soon as k distinct good
// shares are known and a grace of a quarter of the time that took (at
// least 20 ms, for holders about as fast) has passed, or every node has
// answered. The shares of nodes that answer later come on late: a read
// does not wait for the slowest node's list.
func (c *Client) findSources(ctx context.Context, vc codec.VerifyCap) (*sourceFeed, error) {
	tg, ok := c.grid.(TrailerGrid)
	if !ok {
		f, err := c.locate(ctx, vc.SI, true)
		if err != nil {
			return nil, err
		}
		srcs, problems := c.sources(ctx, vc, f)
		late := make(chan *source)
		close(late)
		all := slices.Concat(f.problems, problems)
		return &sourceFeed{first: srcs, late: late, asked: f.asked,
			answered: func() int { return f.answered }, problems: func() []Problem { return all }}, nil
	}
	nodes, err := c.grid.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	ranked := placement.Rank(vc.SI[:], placementNodes(nodes))
	type answer struct {
		srcs []*source
	}
	var mu sync.Mutex
	var problems []Problem
	answered := 0
	answers := make(chan answer, len(ranked))
	start := time.Now()
	for _, n := range ranked {
		go func() {
			lctx, cancel := context.WithTimeout(ctx, c.opt.Stall)
			defer cancel()
			t0 := time.Now()
			tails, err := tg.ListTrailers(lctx, n.ID, vc.SI)
			took := time.Since(t0)
			if err == nil {
				c.links.roundTrip(n.ID, took)
			}
			var out []*source
			mu.Lock()
			if err != nil {
				problems = append(problems, Problem{Share: -1, Node: n.ID, Err: err})
			} else {
				answered++
			}
			mu.Unlock()
			for sh, b := range tails {
				if sh < 0 || sh >= vc.N || b == nil {
					continue
				}
				var s *source
				err := guarded(func() (err error) {
					s, err = checkedSource(vc, sh, n.ID, b, took)
					return err
				})
				if err != nil {
					mu.Lock()
					problems = append(problems, Problem{Share: sh, Node: n.ID, Err: err})
					mu.Unlock()
					continue
				}
				out = append(out, s)
			}
			answers <- answer{out}
		}()
	}
	feed := &sourceFeed{asked: len(ranked), late: make(chan *source, len(ranked)*vc.N),
		answered: func() int { mu.Lock(); defer mu.Unlock(); return answered },
		problems: func() []Problem { mu.Lock(); defer mu.Unlock(); return slices.Clone(problems) }}
	shares := map[int]bool{}
	got := 0
	var grace <-chan time.Time
	for got < len(ranked) {
		select {
		case a := <-answers:
			got++
			for _, s := range a.srcs {
				shares[s.share] = true
				feed.first = append(feed.first, s)
			}
			if grace == nil && len(shares) >= vc.K {
				grace = time.After(max(20*time.Millisecond, time.Since(start)/4))
			}
			continue
		case <-grace:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	left := len(ranked) - got
	go func() {
		defer close(feed.late)
		for range left {
			a := <-answers
			for _, s := range a.srcs {
				feed.late <- s
			}
		}
	}()
	sort.Slice(feed.first, func(i, j int) bool { return feed.first[i].latency < feed.first[j].latency })
	return feed, nil
}

// fetcher reads segments block by block, each block one range request to
// one holder, spreading the blocks of consecutive segments over every
// holder it knows, so that more than k nodes feed the reader at once:
// on a network of uneven links the reader's downlink, not the k fastest
// uplinks, is the limit. It keeps a running estimate of each holder's
// throughput, gives each block to the holder that should deliver it
// soonest, and hedges a block that is late against that estimate by
// asking a spare holder for the same segment: the first k blocks win.
type fetcher struct {
	c        *Client
	vc       codec.VerifyCap
	ctx      context.Context
	feed     *sourceFeed
	srcs     []*fsrc
	segs     map[int64]*fseg
	next     int64 // the first segment not yet returned
	to       int64
	window   int64
	results  chan fresult
	bufs     bufList
	problems []Problem
	lastUsed []int // share numbers of the last segment returned
	peak     int   // most holders with requests in flight at once
	hedges   int
}

// fsrc is a holder as the fetcher sees it.
type fsrc struct {
	src      *source
	inflight int
	rate     float64 // bytes per second, running estimate (0: none yet)
	failed   bool
	bad      int
}

// fseg is a segment being fetched.
type fseg struct {
	blocks [][]byte
	got    int
	asked  map[int]*freq // share number → its request
	tried  map[int]bool  // share numbers that sent a bad block of it
}

// freq is one block request.
type freq struct {
	src    int // index in fetcher.srcs
	at     time.Time
	cancel context.CancelFunc
	hedge  bool
}

// fresult is a block request's end.
type fresult struct {
	seg   int64
	src   int
	b     []byte
	took  time.Duration
	err   error
	share int
}

// perHolder is how many block requests a holder has in flight at most:
// two keep its link busy across a request's round trip.
const perHolder = 2

func (c *Client) newFetcher(ctx context.Context, vc codec.VerifyCap, feed *sourceFeed, from, to int64, bufs bufList) *fetcher {
	f := &fetcher{c: c, vc: vc, ctx: ctx, feed: feed, segs: map[int64]*fseg{}, next: from, to: to,
		results: make(chan fresult, 64), bufs: bufs}
	for _, s := range feed.first {
		f.srcs = append(f.srcs, &fsrc{src: s})
	}
	f.setWindow()
	return f
}

// setWindow sizes the read-ahead to keep every holder busy.
func (f *fetcher) setWindow() {
	f.window = int64(max(2, perHolder*len(f.srcs)/max(f.vc.K, 1)))
}

// takeLate adds the holders whose lists came after the read started.
func (f *fetcher) takeLate() {
	for {
		select {
		case s, ok := <-f.feed.late:
			if !ok {
				f.feed.late = nil
				return
			}
			f.srcs = append(f.srcs, &fsrc{src: s})
			f.setWindow()
		default:
			return
		}
	}
}

// eta is when holder i would deliver a block of n bytes asked now.
func (f *fetcher) eta(i, n int) time.Duration {
	s := f.srcs[i]
	per := s.src.latency
	if s.rate > 0 {
		per += time.Duration(float64(n) / s.rate * float64(time.Second))
	}
	// Data shares (no decoding) win ties.
	if s.src.share >= f.vc.K {
		per += per / 8
	}
	return time.Duration(s.inflight+1) * per
}

// pick returns the holder to ask for a block of seg, or -1.
func (f *fetcher) pick(seg *fseg, n int, limit int) int {
	best := -1
	var bestETA time.Duration
	for i, s := range f.srcs {
		if s.failed || s.inflight >= limit || seg.blocks[s.src.share] != nil {
			continue
		}
		if _, asked := seg.asked[s.src.share]; asked || seg.tried[s.src.share] {
			continue
		}
		if e := f.eta(i, n); best < 0 || e < bestETA {
			best, bestETA = i, e
		}
	}
	return best
}

// ask starts a request for block seg of holder i.
func (f *fetcher) ask(seg int64, st *fseg, i int, hedge bool) {
	s := f.srcs[i]
	s.inflight++
	ctx, cancel := context.WithCancel(f.ctx)
	st.asked[s.src.share] = &freq{src: i, at: time.Now(), cancel: cancel, hedge: hedge}
	l := f.vc.Layout()
	go func() {
		b := f.bufs.get()[:l.BlockLen(seg)]
		start := time.Now()
		err := guarded(func() error {
			if err := f.c.readInto(ctx, f.vc.SI, s.src.share, s.src.node, l.BlockOffset(seg), b); err != nil {
				return err
			}
			if err := s.src.checkBlock(seg, b); err != nil {
				return &badBlockError{seg: seg, err: err}
			}
			return nil
		})
		if err != nil {
			f.bufs.put(b)
			b = nil
			if ctx.Err() != nil {
				err = context.Canceled // cut short here, not by the node
			}
		}
		select {
		case f.results <- fresult{seg: seg, src: i, b: b, took: time.Since(start), err: err, share: s.src.share}:
		case <-f.ctx.Done(): // the read is over
			if b != nil {
				f.bufs.put(b)
			}
		}
	}()
	busy := 0
	for _, s := range f.srcs {
		if s.inflight > 0 {
			busy++
		}
	}
	f.peak = max(f.peak, busy)
}

// schedule asks for the blocks of the segments in the window that have
// fewer than k blocks asked for or in hand.
func (f *fetcher) schedule() {
	l := f.vc.Layout()
	for seg := f.next; seg <= f.to && seg < f.next+f.window; seg++ {
		st := f.segs[seg]
		if st == nil {
			st = &fseg{blocks: make([][]byte, f.vc.N), asked: map[int]*freq{}, tried: map[int]bool{}}
			f.segs[seg] = st
		}
		for st.got+len(st.asked) < f.vc.K {
			i := f.pick(st, l.BlockLen(seg), perHolder)
			if i < 0 {
				break
			}
			f.ask(seg, st, i, false)
		}
	}
}

// hedgeAfter is how late a block may be, against its holder's estimate,
// before a spare holder is asked for the segment too.
func (f *fetcher) hedgeAfter(r *freq, n int) time.Duration {
	s := f.srcs[r.src]
	exp := s.src.latency
	if s.rate > 0 {
		exp += time.Duration(float64(n*perHolder) / s.rate * float64(time.Second))
	} else {
		exp = max(exp*4, slowNow)
	}
	return max(2*exp, slowWait)
}

// segment returns the blocks of segment seg (k present, verified); seg
// must be the next one.
func (f *fetcher) segment(ctx context.Context, seg int64) ([][]byte, error) {
	l := f.vc.Layout()
	stall := f.c.opt.Clock.NewTimer(f.c.opt.Stall)
	defer stall.Stop()
	hedge := time.NewTimer(time.Hour)
	defer hedge.Stop()
	var last error
	for {
		f.takeLate()
		f.schedule()
		st := f.segs[seg]
		if st.got >= f.vc.K {
			for sh, r := range st.asked {
				r.cancel() // late and hedged requests: the segment is whole
				delete(st.asked, sh)
			}
			delete(f.segs, seg)
			f.next = seg + 1
			f.lastUsed = f.lastUsed[:0]
			for sh, b := range st.blocks {
				if b != nil {
					f.lastUsed = append(f.lastUsed, sh)
				}
			}
			return st.blocks, nil
		}
		if len(st.asked) == 0 && st.got < f.vc.K {
			if f.feed.late != nil { // holders still to come
				select {
				case s, ok := <-f.feed.late:
					if !ok {
						f.feed.late = nil
					} else {
						f.srcs = append(f.srcs, &fsrc{src: s})
						f.setWindow()
					}
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return nil, fmt.Errorf("%w: segment %d: ran out of good shares (last problem: %v)", ErrUnavailable, seg, last)
		}
		// Hedge the segment's latest request, once, when it is late.
		var due time.Duration = time.Hour
		hedged := false
		for _, r := range st.asked {
			hedged = hedged || r.hedge
		}
		if !hedged {
			for _, r := range st.asked {
				d := time.Until(r.at.Add(f.hedgeAfter(r, l.BlockLen(seg))))
				due = min(due, d)
			}
			if due <= 0 {
				if i := f.pick(st, l.BlockLen(seg), perHolder+1); i >= 0 {
					f.ask(seg, st, i, true)
					f.hedges++
					continue
				}
				due = time.Hour
			}
		}
		hedge.Reset(max(due, time.Millisecond))
		select {
		case r := <-f.results:
			f.done(r, &last)
			stall.Reset(f.c.opt.Stall)
		case <-hedge.C:
		case <-stall.Chan():
			for _, r := range st.asked {
				if !f.srcs[r.src].failed {
					last = fmt.Errorf("node %.8s made no progress for %v", f.srcs[r.src].src.node, f.c.opt.Stall)
					f.fail(r.src, last)
				}
			}
			stall.Reset(f.c.opt.Stall)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// done takes a request's end.
func (f *fetcher) done(r fresult, last *error) {
	s := f.srcs[r.src]
	s.inflight--
	st := f.segs[r.seg]
	if st != nil {
		if req := st.asked[r.share]; req != nil && req.src == r.src {
			delete(st.asked, r.share)
			req.cancel()
		}
	}
	switch {
	case r.err == nil:
		n := float64(len(r.b))
		if rate := n / max(r.took.Seconds(), 1e-6); s.rate == 0 {
			s.rate = rate
		} else {
			s.rate = 0.7*s.rate + 0.3*rate
		}
		if st == nil || st.blocks[r.share] != nil || st.got >= f.vc.K {
			f.bufs.put(r.b) // a hedge that lost, or a segment already whole
			return
		}
		st.blocks[r.share] = r.b
		st.got++
	case errors.Is(r.err, context.Canceled):
		// Cancelled here: its segment was whole, or its holder was cut
		// off for a stall (reported then), or the read is over.
	default:
		var bad *badBlockError
		if errors.As(r.err, &bad) {
			s.bad++
			f.problems = append(f.problems, Problem{Share: r.share, Node: s.src.node, Err: r.err})
			f.c.log.Warn("bad block during read, reading it from another share", "share", r.share, "node", s.src.node, "segment", r.seg)
			if st != nil {
				st.tried[r.share] = true
			}
			*last = r.err
			if s.bad > maxBadBlocks {
				f.fail(r.src, nil)
			}
			return
		}
		f.c.log.Warn("share failed during read, trying another", "share", r.share, "node", s.src.node, "err", r.err)
		f.fail(r.src, r.err)
		*last = r.err
	}
}

// fail gives up on holder i (reporting err, if any) and cancels its
// requests in flight.
func (f *fetcher) fail(i int, err error) {
	s := f.srcs[i]
	s.failed = true
	if err != nil {
		f.problems = append(f.problems, Problem{Share: s.src.share, Node: s.src.node, Err: err})
	}
	for _, st := range f.segs {
		for _, r := range st.asked {
			if r.src == i {
				r.cancel()
			}
		}
	}
}

// close cancels every request in flight.
func (f *fetcher) close() {
	for _, st := range f.segs {
		for _, r := range st.asked {
			r.cancel()
		}
	}
}
