package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// PutReport tells where an upload's shares went.
type PutReport struct {
	Shares    []ShareResult // one per share number
	Happiness int           // distinct nodes holding a share at acknowledgement
	Zones     int           // distinct zones of those nodes
	Bytes     int64         // plaintext bytes stored
	// Pending counts the shares still being placed when Put returned
	// (Options.AckAtHappy): their ShareResult's Err is ErrPending, and
	// Background says how they end. Shares cut off for lagging too far
	// behind, or that failed, count too: the background places them by
	// repair.
	Pending    int
	Background *Pending // nil when nothing was left to do
}

// ShareResult is the fate of one share of an upload.
type ShareResult struct {
	Share int
	Node  string
	Err   error // nil: stored
}

// job is one segment on its way through the encoders.
type job struct {
	index int64
	last  bool
	plain []byte
	seg   *codec.Segment
	err   error
	done  chan struct{}
}

// readSegment fills buf from r, returning how many bytes it got and
// whether r ended.
func readSegment(r io.Reader, buf []byte) (int, bool, error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return n, true, nil
	case err != nil:
		return n, false, fmt.Errorf("object: reading input: %w", err)
	}
	return n, false, nil
}

// errLonger is the error of an input longer than the size announced.
func errLonger(size int64) error {
	return fmt.Errorf("object: input is longer than the %d bytes announced", size)
}

// atEOF reports whether r has nothing more to read.
func atEOF(r io.Reader) bool {
	var b [1]byte
	n, err := io.ReadFull(r, b[:])
	return n == 0 && err == io.EOF
}

// Put stores the bytes of r as a new object encoded with p, on at least
// happy distinct nodes. size is the input's length if known (it sizes the
// placement), or -1. The report says where each share went.
func (c *Client) Put(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, *PutReport, error) {
	if err := c.needLease(); err != nil {
		return codec.ReadCap{}, nil, err
	}
	if err := p.Validate(); err != nil {
		return codec.ReadCap{}, nil, err
	}
	if happy < 1 || happy > p.N {
		return codec.ReadCap{}, nil, fmt.Errorf("object: happiness %d must be between 1 and n=%d", happy, p.N)
	}
	key := codec.NewKey()
	si := key.StorageIndex()
	cd, err := codec.New(p, key)
	if err != nil {
		return codec.ReadCap{}, nil, err
	}
	vc, rep, err := c.put(ctx, r, size, p, happy, putInput{si: si, cd: cd, lease: c.leaseFor(si), secret: c.opt.LeaseSecret(si)})
	if err != nil {
		return codec.ReadCap{}, rep, err
	}
	return codec.ReadCap{Key: key, Root: vc.Root, Params: p, Size: vc.Size}, rep, nil
}

// putInput is what differs between an upload of plaintext (Put) and one
// of sealed segments (PutSealed, an upload helper's).
type putInput struct {
	si     sharefile.SI
	cd     *codec.Codec
	sealed bool // the input is sealed segments, not plaintext
	lease  sharestore.Lease
	secret []byte // the lease's cancel secret; nil: unknown (not deleted on failure)
}

// put stores the object; size is the plaintext's length or -1.
func (c *Client) put(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int, in putInput) (codec.VerifyCap, *PutReport, error) {
	si, cd := in.si, in.cd
	segLen, inSize := p.SegmentSize, size
	if in.sealed {
		segLen = codec.SealedSize(p.SegmentSize)
		if size >= 0 {
			inSize = size + max(1, (size+int64(p.SegmentSize)-1)/int64(p.SegmentSize))*int64(codec.SealedSize(0))
		}
	}
	nodes, err := c.grid.Nodes(ctx)
	if err != nil {
		return codec.VerifyCap{}, nil, err
	}
	// Placement needs room for a share; an unknown size is placed as one
	// segment's worth and streamed with no length.
	shareSize, sendSize := int64(sharefile.HeaderSize+p.BlockSize()), int64(-1)
	if size >= 0 {
		shareSize = sharefile.NewLayout(p.K, p.N, p.SegmentSize, size).ShareSize()
		sendSize = shareSize
	}
	// An upload acknowledged at happiness of an object of several
	// segments goes first to the nodes the client's links reach fastest
	// (placement.PlaceBy). One that waits for every share gains nothing
	// from that, and one of a single segment is placed by rendezvous
	// alone, where a reader's quick read looks for its data shares.
	var plan placement.Plan
	if c.opt.AckAtHappy && size > int64(p.SegmentSize) {
		plan, err = placement.PlaceBy(si[:], placementNodes(nodes), p.N, happy, shareSize, c.links.eta(nodes, shareSize))
	} else {
		plan, err = placement.Place(si[:], placementNodes(nodes), p.N, happy, shareSize)
	}
	if err != nil {
		return codec.VerifyCap{}, nil, fmt.Errorf("%w: %w", ErrUnhappy, err)
	}

	zoneOf := map[string]string{}
	for _, nd := range nodes {
		zoneOf[nd.ID] = nd.Zone
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// With AckAtHappy, the shares stream under the client's background
	// context, so that those still on their way when the upload is
	// acknowledged go on after Put returns; the caller's context ends
	// them only until then.
	early := c.opt.AckAtHappy && c.bg.Err() == nil
	sctx, bgCancel := ctx, context.CancelFunc(func() {})
	queue := sinkQueue
	if early {
		sctx, bgCancel = context.WithTimeout(c.bg, c.opt.Background)
		// Room past sinkQueue for the pieces a share may lag by; a share
		// that pace counts as keeping up always has room for the next.
		queue = sinkQueue + max(1, int(min(c.opt.LagBytes/int64(max(p.BlockSize()*p.N, 1)), 1<<16)))
	}
	handedOff := false
	defer func() {
		if !handedOff {
			bgCancel()
		}
	}()
	lease := in.lease
	ss := make(sinks, p.N)
	moved := make(chan struct{}, 1)
	for i := range ss {
		ss[i] = c.newSink(sctx, i, plan.Nodes[i], sharestore.Key{SI: si, Share: i}, sendSize, lease, queue, moved)
		ss[i].send(item{b: p.Header(i, si)}, c.opt.Stall)
	}
	var acked atomic.Bool
	if early {
		stop := context.AfterFunc(ctx, func() {
			if !acked.Load() {
				for _, s := range ss {
					s.abort(errOr(context.Cause(ctx), errAborted))
				}
			}
		})
		defer stop()
	}

	// Reader → encoders (in parallel) → dispatcher (in order) → sinks.
	jobs := make(chan *job, c.opt.Workers)
	ordered := make(chan *job, c.opt.Workers+2)
	plainPool := freeBufs(segLen)
	var readErr error
	var total int64
	go func() {
		defer close(jobs)
		defer close(ordered)
		cur := plainPool.get()
		n, eof, err := readSegment(r, cur)
		for idx := int64(0); ; idx++ {
			if err == nil && inSize >= 0 && total+int64(n) > inSize {
				err = errLonger(inSize)
			}
			if err != nil {
				readErr = err
				return
			}
			j := &job{index: idx, plain: cur[:n], done: make(chan struct{})}
			var next []byte
			var nn int
			switch {
			case inSize >= 0:
				// With the size known, so is whether this segment is the
				// last: it goes to the encoders before the next is read.
				j.last = eof || total+int64(n) == inSize
			case !eof:
				// Read ahead to learn whether this segment is the last.
				next = plainPool.get()
				nn, eof, err = readSegment(r, next)
				if err == nil && nn == 0 && eof {
					plainPool.put(next)
					next = nil
				}
				j.last = next == nil && err == nil
			default:
				j.last = true
			}
			total += int64(n)
			select {
			case ordered <- j:
			case <-ctx.Done():
				readErr = ctx.Err()
				return
			}
			jobs <- j
			if j.last {
				if inSize >= 0 && !eof && !atEOF(r) {
					readErr = errLonger(inSize)
				}
				return
			}
			if inSize >= 0 {
				next = plainPool.get()
				nn, eof, err = readSegment(r, next)
				if err == nil && nn == 0 {
					plainPool.put(next)
					readErr = fmt.Errorf("object: input was %d bytes, not the %d announced", total, inSize)
					return
				}
			}
			cur, n = next, nn
		}
	}()
	var wg sync.WaitGroup
	for range c.opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.seg = cd.NewSegment()
				if in.sealed {
					j.err = cd.EncodeSealed(j.seg, j.index, j.plain)
				} else {
					j.err = cd.Encode(j.seg, j.index, j.last, j.plain)
				}
				plainPool.put(j.plain[:cap(j.plain)])
				close(j.done)
			}
		}()
	}
	// On any return: stop the reader, then wait for the encoders.
	defer func() { cancel(); wg.Wait() }()

	tree := codec.NewTree(p, si)
	var sawLast bool
	for j := range ordered {
		<-j.done
		if j.err != nil {
			ss.abortAll(j.err)
			return codec.VerifyCap{}, nil, j.err
		}
		tree.Add(j.seg)
		seg := j.seg
		var refs atomic.Int32
		refs.Store(int32(p.N))
		release := func() {
			if refs.Add(-1) == 0 {
				cd.Release(seg)
			}
		}
		for i, s := range ss {
			if early {
				s.offer(item{b: seg.Blocks[i], release: release})
			} else {
				s.send(item{b: seg.Blocks[i], release: release}, c.opt.Stall)
			}
		}
		if early {
			if err := ss.pace(ctx, plan, happy, moved, c.opt.Clock, c.opt.Stall); err != nil {
				ss.abortAll(err)
				return codec.VerifyCap{}, nil, err
			}
		}
		if happiness(plan, ss) < happy {
			lost := ss.lost()
			err := fmt.Errorf("%w: %d shares lost during the upload (%v); the rest cannot reach %d distinct nodes", ErrUnhappy, len(lost), lost, happy)
			ss.abortAll(err)
			return codec.VerifyCap{}, nil, err
		}
		sawLast = j.last
	}
	if readErr != nil || !sawLast {
		err := errOr(readErr, ctx.Err())
		ss.abortAll(errOr(err, errAborted))
		return codec.VerifyCap{}, nil, errOr(err, errAborted)
	}
	if in.sealed {
		total -= tree.Segments() * int64(codec.SealedSize(0))
	}
	if size >= 0 && total != size {
		err := fmt.Errorf("object: input was %d bytes, not the %d announced", total, size)
		ss.abortAll(err)
		return codec.VerifyCap{}, nil, err
	}

	root, trailers := tree.Finish(total)
	for i, s := range ss {
		s.send(item{b: trailers[i]}, c.opt.Stall)
	}
	rep := &PutReport{Shares: make([]ShareResult, p.N), Bytes: total}
	// Each share's end, as it comes: with AckAtHappy, the upload is
	// acknowledged once the shares stored are on happy distinct nodes
	// over enough zones, and the rest end in the background.
	fin := make([]chan struct{}, p.N)
	ferr := make([]error, p.N)
	ended := make(chan int, p.N)
	for i, s := range ss {
		fin[i] = make(chan struct{})
		go func() {
			ferr[i] = s.finish()
			close(fin[i])
			ended <- i
		}()
	}
	done := make([]bool, p.N)
	stored := map[string]bool{}
	zones := map[string]bool{}
	for range p.N {
		i := <-ended
		done[i] = true
		if ferr[i] == nil {
			stored[plan.Nodes[i]] = true
			zones[zoneOf[plan.Nodes[i]]] = true
		}
		if early && len(stored) >= happy && len(zones) >= ss.zonesWanted(plan, zoneOf, happy) {
			acked.Store(true)
			break
		}
	}
	rep.Happiness, rep.Zones = len(stored), len(zones)
	var pending []int
	missing := 0
	for i, s := range ss {
		switch {
		case !done[i]:
			pending = append(pending, i)
			rep.Shares[i] = ShareResult{Share: i, Node: s.node, Err: ErrPending}
		case ferr[i] != nil:
			missing++
			rep.Shares[i] = ShareResult{Share: i, Node: s.node, Err: ferr[i]}
			c.log.Warn("share not stored", "share", i, "node", s.node, "err", ferr[i])
		default:
			rep.Shares[i] = ShareResult{Share: i, Node: s.node}
		}
	}
	vc := codec.VerifyCap{SI: si, Root: root, Params: p, Size: total}
	if rep.Happiness < happy {
		c.deleteShares(context.WithoutCancel(ctx), si, rep, in.secret)
		var errs []error
		for _, sr := range rep.Shares {
			if sr.Err != nil {
				errs = append(errs, sr.Err)
			}
		}
		return codec.VerifyCap{}, rep, fmt.Errorf("%w: shares reached %d distinct nodes, %d needed: %w", ErrUnhappy, rep.Happiness, happy, errors.Join(errs...))
	}
	if early && (len(pending) > 0 || missing > 0) {
		rep.Pending = len(pending) + missing
		rep.Background = &Pending{done: make(chan struct{})}
		c.stats.running.Inc()
		handedOff = c.goBackground(func() {
			c.complete(sctx, bgCancel, vc, fin, ferr, ss, pending, missing, rep.Background)
		})
		if !handedOff {
			// Closed meanwhile: the shares in flight are cut off (sctx
			// ends with this return) and left to the grid's repairers.
			c.stats.running.Dec()
			close(rep.Background.done)
			rep.Background.rep.Err = errors.New("object: client closed: shares left to the grid's repairers")
		}
	}
	return vc, rep, nil
}

// zonesWanted is how many zones the shares stored must cover before an
// upload is acknowledged early: as many as the nodes of the shares still
// going (not failed) span, up to happy. A share cut off for lagging does
// not hold the acknowledgement back for its zone.
func (ss sinks) zonesWanted(plan placement.Plan, zoneOf map[string]string, happy int) int {
	zones := map[string]bool{}
	for i, s := range ss {
		if !s.failed.Load() {
			zones[zoneOf[plan.Nodes[i]]] = true
		}
	}
	return min(len(zones), happy)
}

// pace holds an upload with AckAtHappy back until the shares of at least
// happy distinct nodes have taken all but sinkQueue of what was queued
// to them: the upload goes at the pace of the happy-th fastest node, and
// slower shares fall behind (up to their queue, see offer). A node that
// makes no progress for stall while the upload waits on it is given up.
func (ss sinks) pace(ctx context.Context, plan placement.Plan, happy int, moved chan struct{}, clk clock.Clock, stall time.Duration) error {
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		live, ready := map[string]bool{}, map[string]bool{}
		for i, s := range ss {
			if s.failed.Load() {
				continue
			}
			live[plan.Nodes[i]] = true
			if len(s.q) <= sinkQueue {
				ready[plan.Nodes[i]] = true
			}
		}
		if len(ready) >= happy || len(live) < happy {
			return nil // (too few live: the caller's happiness check fails)
		}
		if t == nil {
			t = clk.NewTimer(stall)
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Chan():
			for _, s := range ss {
				if !s.failed.Load() && len(s.q) > sinkQueue {
					s.abort(fmt.Errorf("object: node %.8s made no progress for %v", s.node, stall))
				}
			}
			return nil
		}
	}
}

// lost returns the share numbers whose upload failed.
func (ss sinks) lost() []int {
	var out []int
	for _, s := range ss {
		if s.failed.Load() {
			out = append(out, s.share)
		}
	}
	return out
}

// happiness counts the distinct nodes of shares still going.
func happiness(plan placement.Plan, ss sinks) int {
	nodes := map[string]bool{}
	for i, s := range ss {
		if !s.failed.Load() {
			nodes[plan.Nodes[i]] = true
		}
	}
	return len(nodes)
}

// deleteShares removes the shares a failed upload left, best effort: an
// object below happiness is not reported stored, so nobody could read it.
func (c *Client) deleteShares(ctx context.Context, si sharefile.SI, rep *PutReport, secret []byte) {
	if secret == nil {
		return // (an upload helper's: the uploader holds the secret)
	}
	for _, sr := range rep.Shares {
		if sr.Err == nil {
			if err := c.grid.DeleteShare(ctx, sr.Node, sharestore.Key{SI: si, Share: sr.Share}, secret); err != nil {
				c.log.Debug("delete after failed upload", "share", sr.Share, "node", sr.Node, "err", err)
			}
		}
	}
}

func placementNodes(nodes []Node) []placement.Node {
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = placement.Node{ID: n.ID, Zone: n.Zone, Free: n.Free, Used: n.Used}
	}
	return out
}
