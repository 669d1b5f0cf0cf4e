package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
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
// least listGrace, for holders about as fast) has passed, or every node
// has answered. The shares of nodes that answer later come on late: a
// read does not wait for the slowest node's list.
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
				grace = time.After(max(listGrace, time.Since(start)/4))
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

// listGrace is the least a read waits, once k distinct shares are known,
// for more nodes' share lists before it starts (findSources). Short: the
// first lists come from the nodes nearest the client, and the holders
// whose lists come later join the read as they arrive. (On the lab's
// community network 20 ms of it was 3% of a 4 MiB read.)
const listGrace = 5 * time.Millisecond

// fetcher reads segments block by block, each block one range request to
// one holder, spreading the blocks of consecutive segments over every
// holder it knows, so that more than k nodes feed the reader at once:
// on a network of uneven links the reader's downlink, not the k fastest
// uplinks, is the limit. It keeps a running estimate of each holder's
// throughput and of the bytes it still owes, and gives each block to the
// holder that should finish it soonest counting that backlog; when that
// holder already has perHolder requests in flight the block waits for it
// (it pulls the block when one of its requests ends) rather than going
// to a free but slower one. Fast holders thus take block after block and
// a slow one gets only the blocks it can deliver as soon as a fast one
// could: work goes to whichever holder is free first, and no block is
// stuck behind a slow link. Each block that is late against its
// holder's estimate is hedged by asking a spare holder for the same
// segment: the first k blocks win.
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
	owed     map[string]int64 // node → bytes asked of it and not yet received
	got      int64            // bytes of blocks received from every holder
	firstAsk time.Time        // when the first request was made
	// down is the client's downlink estimate (links.downlink; 0: none),
	// and need the bytes of the blocks the read must still receive.
	down  float64
	need  int64
	start time.Time
}

// fsrc is a holder as the fetcher sees it.
type fsrc struct {
	src      *source
	inflight int
	rate     float64 // bytes per second, running estimate (0: none yet)
	// link is what its link is known to carry at least: the client's
	// estimate when the read started, raised by what the read measures
	// while other holders send too, replaced by what it measures while
	// the holder has the downlink to itself (see links.download).
	link   float64
	failed bool
	bad    int
	// busyAt is when the holder's requests in flight last went from
	// none to one, and busyBytes what it has sent since: the rate is
	// their quotient, the holder's throughput over the time it had work,
	// whatever its requests' number (blocks of one request come back to
	// back once buffered, so their gaps say nothing of the link).
	busyAt    time.Time
	busyBytes int64
	// busyFrom is the read's bytes received (fetcher.got) at busyAt:
	// what the others sent while it was busy tells whether it had the
	// downlink to itself (see links.download).
	busyFrom int64
	lastAt   time.Time // when its latest block arrived
	blocks   int       // blocks received and used
	bytes    int64     // bytes of blocks received (used, or lost to a hedge)
	first    time.Time
}

// fseg is a segment being fetched.
type fseg struct {
	blocks [][]byte
	got    int
	asked  map[int]*freq // share number → its request
	tried  map[int]bool  // share numbers that sent a bad block of it
}

// freq is one request: the blocks of one share for segments [first,
// last] (a run), from one holder.
type freq struct {
	src         int // index in fetcher.srcs
	at          time.Time
	cancel      context.CancelFunc
	hedge       bool
	first, last int64
	// wait is how long the first block was expected to take to start
	// arriving when asked (round trip and the holder's backlog), and
	// rate the holder's throughput estimate then (0: none).
	wait time.Duration
	rate float64
	left int64 // bytes of the request not yet received
}

// fresult is a block of a request, or its failure.
type fresult struct {
	req   *freq
	seg   int64
	src   int
	b     []byte
	err   error
	share int
	end   bool // the request's last result
}

// perHolder is how many block requests a holder has in flight at most:
// two keep its link busy across a request's round trip.
const perHolder = 2

func (c *Client) newFetcher(ctx context.Context, vc codec.VerifyCap, feed *sourceFeed, from, to int64, bufs bufList) *fetcher {
	f := &fetcher{c: c, vc: vc, ctx: ctx, feed: feed, segs: map[int64]*fseg{}, next: from, to: to,
		results: make(chan fresult, 64), bufs: bufs, owed: map[string]int64{}, start: time.Now()}
	for _, s := range feed.first {
		f.srcs = append(f.srcs, f.newSrc(s))
	}
	f.down = c.links.downlink()
	l := vc.Layout()
	for seg := from; seg <= to; seg++ {
		f.need += int64(vc.K * l.BlockLen(seg))
	}
	f.setWindow()
	return f
}

// newSrc is a holder, with the client's estimate of its link as the
// starting point of the read's own.
func (f *fetcher) newSrc(s *source) *fsrc {
	r := f.c.links.readRate(s.node)
	return &fsrc{src: s, rate: r, link: r}
}

// maxRun is the most segments one request reads, and runTime how long
// a run should take by its holder's throughput: on a fast network a
// holder streams many blocks per request (requests cost more than the
// bytes there), on a slow one each request is a block or two, so that
// the blocks spread over every holder and a slow one is noticed soon.
const (
	maxRun    = 8
	runTime   = 250 * time.Millisecond
	windowMem = 16 << 20 // bytes of segments read ahead at most
	minWindow = 2
)

// setWindow sizes the read-ahead to keep every holder busy, within
// windowMem.
func (f *fetcher) setWindow() {
	w := max(minWindow, perHolder*len(f.srcs)*maxRun/max(f.vc.K, 1))
	f.window = int64(max(minWindow, min(w, windowMem/max(f.vc.SegmentSize, 1))))
}

// runLen is how many segments to ask holder i for in one request.
func (f *fetcher) runLen(i, blockLen int) int64 {
	r := f.srcs[i].rate
	if r == 0 {
		return 1
	}
	return int64(max(1, min(maxRun, int(r*runTime.Seconds())/max(blockLen, 1))))
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
			f.srcs = append(f.srcs, f.newSrc(s))
			f.setWindow()
		default:
			return
		}
	}
}

// parityRate is what decoding costs a block of a parity share, as a
// throughput: a parity block is as good as a data block delivered
// n/parityRate later. On a network of a few MB/s that is nothing; on
// loopback, where blocks take about as long to fetch as to decode, it
// keeps reads on the data shares (no Reed–Solomon reconstruction).
const parityRate = 256 << 20

// rateOf is holder i's throughput estimate, and for a holder not yet
// measured the median of those that are (a probe of middling promise);
// 0 when none is.
//
// A holder at work that has not sent its next block yet has a link no
// faster than that block over the time it has been at it: so the
// estimate of a holder that has stalled, or was never measured and is
// slow, falls as the wait goes on, and blocks and hedges go elsewhere.
//
// An idle holder measured slower than the median, but by less than
// slowRatio, may only have had a small part of a downlink that many
// holders shared when it was measured (the start of a read asks them
// all at once): its estimate relaxes toward the median with the time it
// has been idle (idleRelax), so that it is asked again and measured
// anew. One measured slower than that has a slow link, and keeps its
// estimate.
func (f *fetcher) rateOf(i int) float64 {
	s := f.srcs[i]
	r := s.rate
	if r == 0 || (s.inflight == 0 && !s.lastAt.IsZero()) {
		med := f.medianRate()
		switch {
		case r == 0:
			r = med
		case r < med && r*slowRatio > med:
			idle := time.Since(s.lastAt).Seconds() / idleRelax.Seconds()
			r = med - (med-r)*math.Exp(-idle)
		}
	}
	return f.lateCap(i, r)
}

// lateCap caps rate r of holder i, if it is at work, at its next block
// over the time it has been at it (see rateOf).
func (f *fetcher) lateCap(i int, r float64) float64 {
	s := f.srcs[i]
	if s.inflight > 0 && r > 0 {
		if busy := time.Since(s.busyAt) - s.src.latency; busy > 0 {
			next := f.vc.Layout().BlockLen(0)
			r = min(r, float64(s.busyBytes+int64(next))/busy.Seconds())
		}
	}
	return r
}

// etaRate is the rate at which wait and eta expect holder i to deliver
// what it is asked: its throughput estimate, or what its link is known
// to carry (fsrc.link) where that is more, capped as rateOf caps a
// late holder's. While many holders share the client's downlink, each
// one's throughput is its part of it, and fast holders' parts are no
// bigger than slow ones' (a slow link's is its link, a fast one's the
// downlink's fair share): counting by those alone, a block goes to a
// free slow holder rather than wait for a busy fast one, and the slow
// one's block, arriving once the others are done, ends the read.
func (f *fetcher) etaRate(i int) float64 {
	return max(f.rateOf(i), f.lateCap(i, f.srcs[i].link))
}

// A holder measured at less than 1/slowRatio of the median throughput
// has a slow link; a faster one's estimate relaxes toward the median
// while it is idle, with time constant idleRelax (see rateOf).
const (
	slowRatio = 4
	idleRelax = time.Second
)

// medianRate is the median of the holders' measured throughputs, 0 if
// none is measured.
func (f *fetcher) medianRate() float64 {
	known := make([]float64, 0, len(f.srcs))
	for _, o := range f.srcs {
		if o.rate > 0 && !o.failed {
			known = append(known, o.rate)
		}
	}
	if len(known) == 0 {
		return 0
	}
	slices.Sort(known)
	return known[len(known)/2]
}

// wait is how long holder i would take to start delivering a block
// asked now: a round trip, and the bytes it owes already.
func (f *fetcher) wait(i int) time.Duration {
	return f.waitAt(i, f.etaRate(i))
}

// waitAt is wait with holder i's etaRate r given.
func (f *fetcher) waitAt(i int, r float64) time.Duration {
	s := f.srcs[i]
	w := s.src.latency
	if r > 0 {
		w += time.Duration(float64(f.owed[s.src.node]) / r * float64(time.Second))
	} else {
		w *= time.Duration(s.inflight + 1) // nothing measured: spread evenly
	}
	return w
}

// eta is how long holder i would take to deliver a block of n bytes
// asked now, its backlog counted.
func (f *fetcher) eta(i, n int) time.Duration {
	s := f.srcs[i]
	r := f.etaRate(i) // once: it takes the median of the holders' rates
	e := f.waitAt(i, r)
	if r > 0 {
		e += time.Duration(float64(n) / r * float64(time.Second))
	}
	if s.src.share >= f.vc.K {
		e += time.Duration(float64(n) / parityRate * float64(time.Second))
	}
	return e
}

// pick returns the holder to ask for a block of seg, or -1: the one that
// would deliver it soonest, counting what each owes. If that holder has
// limit requests in flight, pick returns -1 when pull is set (the block
// waits for it to finish one), and otherwise the soonest among those
// with room (a hedge wants another holder now).
func (f *fetcher) pick(seg *fseg, n int, limit int, pull bool) int {
	best, tail := -1, -1
	var bestETA, tailETA time.Duration
	// A holder whose link would take longer over what it owes and the
	// block than the read's capacity (the downlink) needs for all the
	// read has still to receive, and longer than another holder's link
	// needs for its own, is asked only if no other can be: its block
	// would end the read late. Counting what it owes keeps a slow
	// holder to the blocks it can deliver by the read's end. (The
	// rates measured in the read do not show it: while the downlink is
	// the limit, a fast holder's is only its part of it.)
	var rest time.Duration
	if down := f.capacity(); down > 0 {
		rest = time.Duration(float64(f.need) / down * float64(time.Second))
	}
	// linkDone is when a holder's link would deliver the block after
	// what it owes, by its link estimate.
	linkDone := func(s *fsrc) time.Duration {
		return s.src.latency + time.Duration(float64(f.owed[s.src.node]+int64(n))/s.link*float64(time.Second))
	}
	sooner := time.Duration(math.MaxInt64) // the soonest linkDone of any holder
	if rest > 0 {
		for _, s := range f.srcs {
			if s.link > 0 && f.eligible(s, seg, limit, pull) {
				sooner = min(sooner, linkDone(s))
			}
		}
	}
	for i, s := range f.srcs {
		if !f.eligible(s, seg, limit, pull) {
			continue
		}
		e := f.eta(i, n)
		if rest > 0 && s.link > 0 && max(rest, sooner) < linkDone(s) {
			if tail < 0 || e < tailETA {
				tail, tailETA = i, e
			}
			continue
		}
		if best < 0 || e < bestETA {
			best, bestETA = i, e
		}
	}
	if best < 0 {
		best = tail
	}
	if best >= 0 && f.srcs[best].inflight >= limit {
		return -1
	}
	return best
}

// capacity is what the read can bring in at most, in bytes per second
// (0: nothing known): the client's downlink estimate, or before the
// client has one (its first read) what the holders' links carry
// together by their estimates, which were measured on shared links and
// so err low, leaving pick's pass-over rule the less eager.
func (f *fetcher) capacity() float64 {
	if f.down > 0 {
		return f.down
	}
	var sum float64
	for _, s := range f.srcs {
		if !s.failed {
			sum += s.link
		}
	}
	return sum
}

// eligible says whether pick may ask holder s for a block of seg: it
// has not failed, not sent the block or a bad one, not been asked for
// it, and has room for a request unless the block may wait for it
// (pull).
func (f *fetcher) eligible(s *fsrc, seg *fseg, limit int, pull bool) bool {
	if s.failed || seg.blocks[s.src.share] != nil || (!pull && s.inflight >= limit) {
		return false
	}
	_, asked := seg.asked[s.src.share]
	return !asked && !seg.tried[s.src.share]
}

// ask starts a request to holder i for its blocks of segments [from,
// to], which st... (the segments' states) record as asked.
func (f *fetcher) ask(from, to int64, i int, hedge bool) {
	s := f.srcs[i]
	l := f.vc.Layout()
	req := &freq{src: i, at: time.Now(), hedge: hedge, first: from, last: to, wait: f.wait(i), rate: f.rateOf(i)}
	req.left = l.BlockOffset(to) + int64(l.BlockLen(to)) - l.BlockOffset(from)
	f.owed[s.src.node] += req.left
	if s.first.IsZero() {
		s.first = req.at
	}
	if f.firstAsk.IsZero() {
		f.firstAsk = req.at
	}
	if s.inflight == 0 {
		s.busyAt, s.busyBytes, s.busyFrom = req.at, 0, f.got
	}
	s.inflight++
	ctx, cancel := context.WithCancel(f.ctx)
	req.cancel = cancel
	for seg := from; seg <= to; seg++ {
		f.segs[seg].asked[s.src.share] = req
	}
	go func() {
		send := func(r fresult) bool {
			select {
			case f.results <- r:
				return true
			case <-f.ctx.Done(): // the read is over
				if r.b != nil {
					f.bufs.put(r.b)
				}
				return false
			}
		}
		off := l.BlockOffset(from)
		end := l.BlockOffset(to) + int64(l.BlockLen(to))
		var rd io.ReadCloser
		err := guarded(func() (err error) {
			rd, err = f.c.grid.GetShare(ctx, s.src.node, sharestore.Key{SI: f.vc.SI, Share: s.src.share}, off, end-off)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				err = context.Canceled
			}
			send(fresult{req: req, seg: from, src: i, err: err, share: s.src.share, end: true})
			return
		}
		defer rd.Close()
		for seg := from; seg <= to; seg++ {
			b := f.bufs.get()[:l.BlockLen(seg)]
			err := guarded(func() error {
				if _, err := io.ReadFull(rd, b); err != nil {
					return fmt.Errorf("%w: reading block %d of share %d: %v", sharefile.ErrCorrupt, seg, s.src.share, err)
				}
				if err := s.src.checkBlock(seg, b); err != nil {
					return &badBlockError{seg: seg, err: err}
				}
				return nil
			})
			r := fresult{req: req, seg: seg, src: i, b: b, err: err, share: s.src.share, end: seg == to}
			var bad *badBlockError
			if err != nil {
				f.bufs.put(b)
				r.b = nil
				if ctx.Err() != nil {
					r.err = context.Canceled // cut short here, not by the node
				}
				if !errors.As(err, &bad) || ctx.Err() != nil {
					r.end = true // the stream is broken: the request ends here
				}
			}
			if !send(r) || r.end {
				return
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
// fewer than k blocks asked for or in hand, each request a run of the
// following segments too where the same holder's share is wanted.
func (f *fetcher) schedule() {
	l := f.vc.Layout()
	last := min(f.to, f.next+f.window-1)
	state := func(seg int64) *fseg {
		st := f.segs[seg]
		if st == nil {
			st = &fseg{blocks: make([][]byte, f.vc.N), asked: map[int]*freq{}, tried: map[int]bool{}}
			f.segs[seg] = st
		}
		return st
	}
	for seg := f.next; seg <= last; seg++ {
		st := state(seg)
		for st.got+len(st.asked) < f.vc.K {
			i := f.pick(st, l.BlockLen(seg), perHolder, true)
			if i < 0 {
				break
			}
			sh := f.srcs[i].src.share
			to := seg
			for n := f.runLen(i, l.BlockLen(seg)); to+1 <= last && to+1 < seg+n; to++ {
				nx := state(to + 1)
				if _, asked := nx.asked[sh]; asked || nx.tried[sh] || nx.blocks[sh] != nil || nx.got+len(nx.asked) >= f.vc.K {
					break
				}
			}
			f.ask(seg, to, i, false)
		}
	}
}

// hedgeAfter is how late a block may be, against its holder's estimate,
// before a spare holder is asked for the segment too.
func (f *fetcher) hedgeAfter(r *freq, seg int64, n int) time.Duration {
	exp := r.wait
	if r.rate > 0 {
		exp += time.Duration(float64(n*int(seg-r.first+1)) / r.rate * float64(time.Second))
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
				if r.last <= seg {
					r.cancel() // late and hedged requests: the segment is whole
				}
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
						f.srcs = append(f.srcs, f.newSrc(s))
						f.setWindow()
					}
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return nil, fmt.Errorf("%w: segment %d: ran out of good shares (last problem: %v)", ErrUnavailable, seg, last)
		}
		// Hedge each late request of the segment once: as many hedges
		// in flight as requests that are late and not hedges themselves.
		var due time.Duration = time.Hour
		late, hedging := 0, 0
		for _, r := range st.asked {
			if r.hedge {
				hedging++
				continue
			}
			d := time.Until(r.at.Add(f.hedgeAfter(r, seg, l.BlockLen(seg))))
			if d <= 0 {
				late++
			} else {
				due = min(due, d)
			}
		}
		if late > hedging {
			if i := f.pick(st, l.BlockLen(seg), perHolder+1, false); i >= 0 {
				f.ask(seg, seg, i, true)
				f.hedges++
				continue
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
	if r.b != nil {
		r.req.left -= int64(len(r.b))
		f.owed[s.src.node] -= int64(len(r.b))
	}
	if r.end {
		s.inflight--
		f.owed[s.src.node] -= r.req.left // what it will not send now
		r.req.left = 0
		r.req.cancel()
		// A request that ended early leaves its later segments unasked.
		for seg := r.seg; seg <= r.req.last; seg++ {
			if st := f.segs[seg]; st != nil && st.asked[r.share] == r.req {
				delete(st.asked, r.share)
			}
		}
	}
	st := f.segs[r.seg]
	if st != nil && st.asked[r.share] == r.req {
		delete(st.asked, r.share)
	}
	switch {
	case r.err == nil:
		now := time.Now()
		s.lastAt = now
		s.bytes += int64(len(r.b))
		s.busyBytes += int64(len(r.b))
		f.got += int64(len(r.b))
		if f.got >= 1<<20 {
			// Over the time since the first request, round trip
			// included: many holders' first blocks come at once, so
			// bytes since the first block would overstate it.
			f.c.links.inflow(f.got, now.Sub(f.firstAsk))
		}
		took := now.Sub(s.busyAt)
		rate := float64(s.busyBytes) / max(took.Seconds(), 1e-6)
		if s.busyBytes >= 16<<10 { // less times round trips
			shared := f.got-s.busyFrom-s.busyBytes >= s.busyBytes
			f.c.links.download(s.src.node, s.busyBytes, took, shared)
			if shared {
				s.link = max(s.link, rate)
			} else {
				s.link = rate
			}
		}
		if s.rate == 0 || s.busyBytes >= 16<<10 {
			s.rate = rate
		}
		if st == nil || st.blocks[r.share] != nil || st.got >= f.vc.K {
			f.bufs.put(r.b) // a hedge that lost, or a segment already whole
			return
		}
		st.blocks[r.share] = r.b
		st.got++
		f.need -= int64(len(r.b))
		s.blocks++
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

// holderReads is what each holder asked sent, most bytes first.
func (f *fetcher) holderReads() []HolderRead {
	var out []HolderRead
	for _, s := range f.srcs {
		if s.first.IsZero() {
			continue
		}
		h := HolderRead{Node: s.src.node, Share: s.src.share, Blocks: s.blocks, Bytes: s.bytes, Rate: s.rate, First: s.first.Sub(f.start)}
		if !s.lastAt.IsZero() {
			h.Last = s.lastAt.Sub(f.start)
		}
		out = append(out, h)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}
