package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

// GetReport tells how a read went.
type GetReport struct {
	Shares   []int     // share numbers read from (the last k in use)
	Problems []Problem // nodes that were down, slow or wrong, and worked around
	Bytes    int64     // plaintext bytes written
	// Holders is the most holders that had block requests in flight at
	// once, and Hedges how many blocks were also asked of a spare holder
	// for being late (reads of more than one segment).
	Holders, Hedges int
	// Reads are the holders a read of more than one segment asked for
	// blocks, in the order of the bytes they sent: how the work spread.
	Reads []HolderRead
	// Located is how long the read took to know of k shares and start
	// fetching blocks (reads of more than one segment).
	Located time.Duration
}

// HolderRead is what one holder sent to one read.
type HolderRead struct {
	Node   string
	Share  int
	Blocks int     // blocks used (a hedge that lost is not counted)
	Bytes  int64   // bytes of blocks received, used or not
	Rate   float64 // the read's final throughput estimate of its link, bytes/s
	// First and Last are when the read first asked it for a block and
	// when its last block arrived, from the start of the fetching.
	First, Last time.Duration
}

// distinctShares counts the share numbers among srcs.
func distinctShares(srcs []*source) int {
	seen := map[int]bool{}
	for _, s := range srcs {
		seen[s.share] = true
	}
	return len(seen)
}

// reader reads segments of one object from k sources, switching to a
// spare source when one fails, or when one is the bottleneck of several
// segments in a row (see slowSwap). It is shared by Get and Repair.
type reader struct {
	c        *Client
	vc       codec.VerifyCap
	ctx      context.Context
	active   []*blockStream
	spares   []*source
	slow     []*source // sources swapped out for being slow: a last resort
	problems []Problem
	to       int64
	bufs     bufList // where streams take their block buffers
	// slowest is the index in active of the stream the last segments
	// waited on most, and slowRun how many segments in a row it was.
	slowest, slowRun int
	swaps            int
}

// A read stream whose block of a segment arrives last, later than the
// next-latest by slowWait or more, for slowSwap segments in a row, is
// replaced by a spare source; one that is late by slowNow or more is
// replaced at once. On links of uneven speed (a community mesh) the read
// thus moves to the fastest k holders it can find; streams of equal speed
// arrive together and stay.
const (
	slowSwap = 2
	slowWait = 50 * time.Millisecond
	slowNow  = 250 * time.Millisecond
)

// startReader opens streams from the first k sources for segments [from,
// to]. Blocks come from bufs (see openStream).
func (c *Client) startReader(ctx context.Context, vc codec.VerifyCap, srcs []*source, from, to int64, bufs bufList) *reader {
	r := &reader{c: c, vc: vc, ctx: ctx, to: to, bufs: bufs, slowest: -1}
	for i, s := range srcs {
		if i < vc.K {
			r.active = append(r.active, c.openStream(ctx, vc, s, from, to, bufs))
		} else {
			r.spares = append(r.spares, s)
		}
	}
	return r
}

// A stream with a bad block keeps serving the other segments, and the
// block of that segment is fetched from another share (see segment):
// bad blocks are a disk's bad sectors, one here and one there. A stream
// with more than maxBadBlocks bad blocks is replaced as a failing one is.
const maxBadBlocks = 3

// segment returns the n blocks of segment seg (k present, verified).
func (r *reader) segment(ctx context.Context, seg int64) ([][]byte, error) {
	blocks := make([][]byte, r.vc.N)
	arrivals := make([]time.Time, len(r.active))
	for i := 0; i < len(r.active); i++ {
		for {
			bs := r.active[i]
			b, at, err := bs.next(ctx, r.c.opt.Clock, r.c.opt.Stall)
			if err == nil {
				blocks[bs.src.share] = b
				arrivals[i] = at
				break
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var bad *badBlockError
			if errors.As(err, &bad) {
				bs.bad++
				r.problems = append(r.problems, Problem{Share: bs.src.share, Node: bs.src.node, Err: err})
				if bs.bad <= maxBadBlocks {
					r.c.log.Warn("bad block during read, reading it from another share", "share", bs.src.share, "node", bs.src.node, "segment", seg)
					sh, b, err := r.otherBlock(ctx, seg, blocks)
					if err != nil {
						return nil, err
					}
					blocks[sh] = b
					arrivals[i] = at // the stream's own pace: a late fetch is not its fault
					break
				}
			}
			bs.close()
			r.problems = append(r.problems, Problem{Share: bs.src.share, Node: bs.src.node, Err: err})
			r.c.log.Warn("share failed during read, trying another", "share", bs.src.share, "node", bs.src.node, "err", err)
			if len(r.spares) == 0 { // slow beats nothing
				r.spares, r.slow = r.slow, nil
			}
			if len(r.spares) == 0 {
				return nil, fmt.Errorf("%w: segment %d: ran out of good shares (last problem: %v)", ErrUnavailable, seg, err)
			}
			r.active[i] = r.c.openStream(ctx, r.vc, r.spares[0], seg, r.to, r.bufs)
			r.spares = r.spares[1:]
			r.slowest, r.slowRun = -1, 0
		}
	}
	r.noteArrivals(seg, arrivals)
	return blocks, nil
}

// otherBlock fetches block seg of a share that is not among blocks, from
// the spares, then the sources set aside as slow, without taking them
// out of their lists: a stream keeps its place for the segments after.
func (r *reader) otherBlock(ctx context.Context, seg int64, blocks [][]byte) (int, []byte, error) {
	l := r.vc.Layout()
	var last error
	for _, src := range slices.Concat(r.spares, r.slow) {
		if blocks[src.share] != nil {
			continue
		}
		b := r.bufs.get()[:l.BlockLen(seg)]
		err := guarded(func() error {
			fctx, cancel := context.WithTimeout(ctx, r.c.opt.Stall)
			defer cancel()
			if err := r.c.readInto(fctx, r.vc.SI, src.share, src.node, l.BlockOffset(seg), b); err != nil {
				return err
			}
			return src.checkBlock(seg, b)
		})
		if err == nil {
			return src.share, b, nil
		}
		r.bufs.put(b)
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		r.problems = append(r.problems, Problem{Share: src.share, Node: src.node, Err: err})
		last = err
	}
	return 0, nil, fmt.Errorf("%w: segment %d: no other share has a good block (last problem: %v)", ErrUnavailable, seg, last)
}

// noteArrivals finds the stream whose block of segment seg came last
// and, if it was late enough (see slowSwap) and a spare is left,
// replaces it for the segments after seg; the replaced source is kept as
// a last resort, used only if every spare fails. Blocks already fetched are kept,
// so a swap costs at most one request's set-up.
func (r *reader) noteArrivals(seg int64, arrivals []time.Time) {
	if len(arrivals) < 2 {
		return
	}
	worst := 0
	for i, at := range arrivals {
		if at.After(arrivals[worst]) {
			worst = i
		}
	}
	var next time.Time // the latest arrival but the worst's
	for i, at := range arrivals {
		if i != worst && at.After(next) {
			next = at
		}
	}
	late := arrivals[worst].Sub(next)
	// A stream opened for this segment started late (its request was
	// made when the others had blocks in hand): not judged yet.
	if late < slowWait || r.active[worst].from == seg {
		r.slowest, r.slowRun = -1, 0
		return
	}
	if worst == r.slowest {
		r.slowRun++
	} else {
		r.slowest, r.slowRun = worst, 1
	}
	if (r.slowRun < slowSwap && late < slowNow) || len(r.spares) == 0 || seg >= r.to || r.swaps >= r.vc.N {
		return
	}
	old := r.active[worst]
	old.close()
	r.active[worst] = r.c.openStream(r.ctx, r.vc, r.spares[0], seg+1, r.to, r.bufs)
	r.spares = r.spares[1:]
	r.slow = append(r.slow, old.src)
	r.swaps++
	r.slowest, r.slowRun = -1, 0
	r.c.log.Debug("read: replacing the slowest share stream", "share", old.src.share, "node", old.src.node, "by", r.active[worst].src.node, "late", late, "segment", seg+1)
}

func (r *reader) close() {
	for _, bs := range r.active {
		bs.close()
	}
}

// Get writes length bytes of the object from offset off to w (length < 0:
// to the end). Only the segments covering the range are fetched, and every
// block is verified before use.
func (c *Client) Get(ctx context.Context, rc codec.ReadCap, w io.Writer, off, length int64) (*GetReport, error) {
	if err := rc.Params.Validate(); err != nil || rc.Size < 0 || rc.Size/int64(max(rc.SegmentSize, 1)) >= sharefile.MaxSegments {
		return nil, fmt.Errorf("%w: parameters %+v, size %d", codec.ErrBadCap, rc.Params, rc.Size)
	}
	vc := rc.Verify()
	l := vc.Layout()
	if off < 0 || off > rc.Size || (off == rc.Size && rc.Size > 0 && length != 0) {
		return nil, fmt.Errorf("%w: offset %d of an object of %d bytes", ErrRange, off, rc.Size)
	}
	if length < 0 || length > rc.Size-off { // not off+length: it may overflow
		length = rc.Size - off
	}
	cd, err := codec.New(rc.Params, rc.Key)
	if err != nil {
		return nil, err
	}
	// Room for a segment's k blocks: Decode opens them in place.
	bufs := freeBufs(rc.K * rc.Params.BlockSize())
	var quickProblems []Problem
	if l.Segments == 1 && length > 0 {
		buf := bufs.get()
		plain, shares, problems, err := c.quickRead(ctx, vc, cd, buf)
		quickProblems = problems
		if err == nil {
			rep := &GetReport{Shares: shares, Problems: problems}
			m, err := w.Write(plain[off : off+length])
			bufs.put(plain)
			rep.Bytes = int64(m)
			if err != nil {
				return rep, fmt.Errorf("object: writing output: %w", err)
			}
			return rep, nil
		}
		bufs.put(buf)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.log.Debug("quick read failed, reading the usual way", "si", fmt.Sprintf("%x", vc.SI[:]), "err", err)
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	feed, err := c.findSources(ctx, vc)
	if err != nil {
		return nil, err
	}
	rep := &GetReport{Problems: slices.Concat(quickProblems)}
	if shares := distinctShares(feed.first); shares < rc.K {
		// Every node has answered (findSources returns early only with k).
		for s := range feed.late {
			feed.first = append(feed.first, s)
		}
		if distinctShares(feed.first) < rc.K {
			rep.Problems = append(rep.Problems, feed.problems()...)
			return rep, unavailable(vc, &found{asked: feed.asked, answered: feed.answered()}, distinctShares(feed.first), rep.Problems)
		}
	}
	from, to := int64(0), int64(0)
	if length > 0 {
		from, to = off/int64(rc.SegmentSize), (off+length-1)/int64(rc.SegmentSize)
	}
	blockBufs := freeBufs(rc.Params.BlockSize())
	rep.Located = time.Since(start)
	rd := c.newFetcher(ctx, vc, feed, from, to, blockBufs)
	defer rd.close()

	// Fetch (in order) → decode (in parallel) → write (in order).
	type djob struct {
		seg    int64
		blocks [][]byte
		plain  []byte
		err    error
		done   chan struct{}
	}
	ordered := make(chan *djob, c.opt.Workers+2)
	work := make(chan *djob, c.opt.Workers)
	fetched := make(chan struct{})
	go func() {
		defer close(fetched)
		defer close(ordered)
		defer close(work)
		for seg := from; seg <= to; seg++ {
			blocks, err := rd.segment(ctx, seg)
			j := &djob{seg: seg, blocks: blocks, err: err, done: make(chan struct{})}
			if err != nil {
				close(j.done)
			}
			select {
			case ordered <- j:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			j.plain = bufs.get()[:0]
			work <- j
		}
	}()
	var wg sync.WaitGroup
	for range c.opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				// A data block not read is rebuilt into a spare buffer.
				for i, b := range j.blocks[:rc.K] {
					if b == nil {
						j.blocks[i] = blockBufs.get()[:0]
					}
				}
				j.plain, j.err = cd.Decode(j.plain, j.seg, j.seg == l.Segments-1, l.SegmentPlainLen(j.seg), j.blocks)
				for _, b := range j.blocks {
					blockBufs.put(b)
				}
				close(j.done)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	var werr error
	for j := range ordered {
		<-j.done
		if j.err != nil {
			werr = j.err
			break
		}
		segStart := j.seg * int64(rc.SegmentSize)
		lo := max(off-segStart, 0)
		hi := min(off+length-segStart, int64(len(j.plain)))
		if lo < hi {
			m, err := w.Write(j.plain[lo:hi])
			rep.Bytes += int64(m)
			if err != nil {
				werr = fmt.Errorf("object: writing output: %w", err)
				break
			}
		}
		bufs.put(j.plain)
	}
	cancel()
	<-fetched
	rep.Problems = append(rep.Problems, feed.problems()...)
	rep.Problems = append(rep.Problems, rd.problems...)
	rep.Holders, rep.Hedges = rd.peak, rd.hedges
	rep.Reads = rd.holderReads()
	if werr != nil {
		return rep, werr
	}
	// The fetcher stops quietly when the caller's context ends: a read
	// that wrote less than was asked is an error, never a success.
	if rep.Bytes != length {
		if err := parent.Err(); err != nil {
			return rep, fmt.Errorf("object: read stopped after %d of %d bytes: %w", rep.Bytes, length, err)
		}
		return rep, fmt.Errorf("object: read stopped after %d of %d bytes", rep.Bytes, length)
	}
	rep.Shares = append(rep.Shares, rd.lastUsed...)
	return rep, nil
}
