package object

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// source is a share on a node whose trailer checked out against the
// capability: its block hashes can be trusted.
type source struct {
	share   int
	node    string
	hashes  []sharefile.Hash
	roots   []sharefile.Hash
	latency time.Duration
}

// found is what locating an object's shares turned up.
type found struct {
	holders  map[int][]string // share → nodes that say they hold it, best-ranked first
	asked    int
	answered int
	problems []Problem
	// With trailers: what each node sent of each share, and how long
	// the node took to answer.
	trailers map[heldShare][]byte
	latency  map[string]time.Duration
}

// heldShare is one share on one node.
type heldShare struct {
	share int
	node  string
}

// locate asks the live nodes, best-ranked first, which shares of the
// object they hold; with trailers (and a TrailerGrid), also for their
// trailers, in the same request.
func (c *Client) locate(ctx context.Context, si sharefile.SI, trailers bool) (*found, error) {
	tg, _ := c.grid.(TrailerGrid)
	if !trailers {
		tg = nil
	}
	nodes, err := c.grid.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	ranked := placement.Rank(si[:], placementNodes(nodes))
	f := &found{holders: map[int][]string{}, asked: len(ranked),
		trailers: map[heldShare][]byte{}, latency: map[string]time.Duration{}}
	lists := make([][]int, len(ranked))
	tails := make([]map[int][]byte, len(ranked))
	took := make([]time.Duration, len(ranked))
	errs := make([]error, len(ranked))
	var wg sync.WaitGroup
	for i, n := range ranked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, c.opt.Stall)
			defer cancel()
			start := time.Now()
			if tg == nil {
				lists[i], errs[i] = c.grid.ListShares(lctx, n.ID, si)
				return
			}
			tails[i], errs[i] = tg.ListTrailers(lctx, n.ID, si)
			took[i] = time.Since(start)
			for sh := range tails[i] {
				lists[i] = append(lists[i], sh)
			}
			slices.Sort(lists[i])
		}()
	}
	wg.Wait()
	for i, n := range ranked {
		if errs[i] != nil {
			f.problems = append(f.problems, Problem{Share: -1, Node: n.ID, Err: errs[i]})
			continue
		}
		f.answered++
		f.latency[n.ID] = took[i]
		for _, sh := range lists[i] {
			f.holders[sh] = append(f.holders[sh], n.ID)
			if b := tails[i][sh]; b != nil {
				f.trailers[heldShare{sh, n.ID}] = b
			}
		}
	}
	return f, ctx.Err()
}

// checkedSource checks a trailer a node sent with its share list.
func checkedSource(vc codec.VerifyCap, share int, node string, b []byte, latency time.Duration) (*source, error) {
	if err := sharefile.CheckShape(b, vc.Layout()); err != nil {
		return nil, fmt.Errorf("%w: share %d: %v", sharefile.ErrCorrupt, share, err)
	}
	t, err := vc.CheckTrailer(share, b)
	if err != nil {
		return nil, err
	}
	return &source{share: share, node: node, hashes: t.BlockHashes, roots: t.ShareRoots, latency: latency}, nil
}

// checkBlock checks block seg of the source's share against its hash.
func (s *source) checkBlock(seg int64, b []byte) error {
	if sharefile.BlockHash(b) != s.hashes[seg] {
		return fmt.Errorf("%w: block %d of share %d does not match its hash", sharefile.ErrCorrupt, seg, s.share)
	}
	return nil
}

// readRange fetches n bytes of a share from offset off on one node, whole:
// a node that sends fewer has sent a corrupt share.
func (c *Client) readRange(ctx context.Context, si sharefile.SI, share int, node string, off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if err := c.readInto(ctx, si, share, node, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

// readInto fetches a range of a share from offset off on one node into
// bufs, filling one after the other (as many bytes as they hold
// together), whole: a node that sends fewer has sent a corrupt share.
func (c *Client) readInto(ctx context.Context, si sharefile.SI, share int, node string, off int64, bufs ...[]byte) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	rd, err := c.grid.GetShare(ctx, node, sharestore.Key{SI: si, Share: share}, off, n)
	if err != nil {
		return err
	}
	defer rd.Close()
	for _, b := range bufs {
		if _, err := io.ReadFull(rd, b); err != nil {
			return fmt.Errorf("%w: short read of %d bytes at %d of share %d: %v", sharefile.ErrCorrupt, n, off, share, err)
		}
	}
	return nil
}

// trailer fetches and checks one share's trailer from one node.
func (c *Client) trailer(ctx context.Context, vc codec.VerifyCap, share int, node string) (*source, error) {
	l := vc.Layout()
	ctx, cancel := context.WithTimeout(ctx, c.opt.Stall)
	defer cancel()
	start := time.Now()
	b, err := c.readRange(ctx, vc.SI, share, node, l.TrailerOffset(), int64(l.TrailerLen()))
	if err != nil {
		return nil, err
	}
	return checkedSource(vc, share, node, b, time.Since(start))
}

// sources checks the trailer of every share found, trying each holder
// in turn, and returns one good source per share number, fastest first.
func (c *Client) sources(ctx context.Context, vc codec.VerifyCap, f *found) ([]*source, []Problem) {
	var mu sync.Mutex
	var out []*source
	var problems []Problem
	var wg sync.WaitGroup
	for share, nodes := range f.holders {
		if share < 0 || share >= vc.N {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, n := range nodes {
				var s *source
				err := guarded(func() (err error) {
					if b, ok := f.trailers[heldShare{share, n}]; ok {
						s, err = checkedSource(vc, share, n, b, f.latency[n])
					} else {
						s, err = c.trailer(ctx, vc, share, n)
					}
					return err
				})
				mu.Lock()
				if err != nil {
					problems = append(problems, Problem{Share: share, Node: n, Err: err})
					mu.Unlock()
					continue
				}
				out = append(out, s)
				mu.Unlock()
				return
			}
		}()
	}
	wg.Wait()
	// Fastest first, but a data share (number < k) that answered within
	// twice the time of a parity share goes first: reading the k data
	// shares needs no Reed–Solomon reconstruction.
	score := func(s *source) time.Duration {
		if s.share >= vc.K {
			return 2 * s.latency
		}
		return s.latency
	}
	sort.Slice(out, func(i, j int) bool { return score(out[i]) < score(out[j]) })
	return out, problems
}

// unavailable explains why an object cannot be read.
func unavailable(vc codec.VerifyCap, f *found, good int, problems []Problem) error {
	return fmt.Errorf("%w: found %d good shares of the %d needed (asked %d nodes, %d answered, %d problems): is the object on this grid, and are enough of its nodes up?",
		ErrUnavailable, good, vc.K, f.asked, f.answered, len(problems))
}

// blockStream reads one share's blocks of segments [from, to] from a node
// in one request, verifying each block against the trusted hashes.
type blockStream struct {
	src    *source
	from   int64 // the first segment it reads
	blocks chan arrived
	err    error // valid once blocks is closed
	cancel context.CancelFunc
	bufs   bufList // where its blocks' buffers came from
	closed bool
	bad    int // bad blocks it sent (see maxBadBlocks)
}

// openStream starts reading src's blocks of segments [from, to] in the
// background. Blocks come from bufs, a list of buffers of the object's
// block size; the caller gives them back there once it is done with
// them, or leaves them to the collector.
func (c *Client) openStream(ctx context.Context, vc codec.VerifyCap, src *source, from, to int64, bufs bufList) *blockStream {
	ctx, cancel := context.WithCancel(ctx)
	bs := &blockStream{src: src, from: from, blocks: make(chan arrived, 4), cancel: cancel, bufs: bufs}
	l := vc.Layout()
	go func() {
		defer close(bs.blocks)
		defer func() {
			if r := recover(); r != nil { // see guarded
				bs.err = fmt.Errorf("%w: checking what node %.8s sent failed: %v", sharefile.ErrCorrupt, src.node, r)
			}
		}()
		off := l.BlockOffset(from)
		end := l.BlockOffset(to) + int64(l.BlockLen(to))
		rd, err := c.grid.GetShare(ctx, src.node, sharestore.Key{SI: vc.SI, Share: src.share}, off, end-off)
		if err != nil {
			bs.err = err
			return
		}
		defer rd.Close()
		for seg := from; seg <= to; seg++ {
			b := bufs.get()[:l.BlockLen(seg)]
			if _, err := io.ReadFull(rd, b); err != nil {
				bufs.put(b)
				bs.err = fmt.Errorf("reading block %d: %w", seg, err)
				return
			}
			a := arrived{b: b, at: time.Now()}
			if err := src.checkBlock(seg, b); err != nil {
				// One bad block: the stream goes on with the next (a
				// disk's bad sector spoils a block, not a share); the
				// reader finds this segment's block elsewhere.
				bufs.put(b)
				a = arrived{at: a.at, err: &badBlockError{seg: seg, err: err}}
			}
			select {
			case bs.blocks <- a:
			case <-ctx.Done():
				// a.b, not b: a bad block's buffer is back in the list
				// already, and a buffer given back twice is handed out
				// twice, to two readers that then overwrite each other.
				if a.b != nil {
					bufs.put(a.b)
				}
				bs.err = ctx.Err()
				return
			}
		}
	}()
	return bs
}

// arrived is a verified block and when its last byte came in, or the
// error of a block that did not match its hash.
type arrived struct {
	b   []byte
	at  time.Time
	err error
}

// badBlockError is a block of a stream that did not match its hash. The
// stream goes on with the blocks after it.
type badBlockError struct {
	seg int64
	err error
}

func (e *badBlockError) Error() string { return e.err.Error() }
func (e *badBlockError) Unwrap() error { return e.err }

// next returns the stream's next verified block and when it arrived, or
// an error if the node failed, lied, or made no progress for stall.
func (bs *blockStream) next(ctx context.Context, clk clock.Clock, stall time.Duration) ([]byte, time.Time, error) {
	t := clk.NewTimer(stall)
	defer t.Stop()
	select {
	case a, ok := <-bs.blocks:
		if !ok {
			return nil, time.Time{}, errOr(bs.err, io.ErrUnexpectedEOF)
		}
		return a.b, a.at, a.err
	case <-t.Chan():
		return nil, time.Time{}, fmt.Errorf("node %.8s made no progress for %v", bs.src.node, stall)
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	}
}

// close stops the stream. The blocks it read ahead and no one took go
// back to the free list (a stream is closed early when a faster source
// replaces it).
func (bs *blockStream) close() {
	bs.cancel()
	if bs.closed {
		return
	}
	bs.closed = true
	go func() {
		for a := range bs.blocks { // closed once the reader sees the cancel
			if a.b != nil {
				bs.bufs.put(a.b)
			}
		}
	}()
}
