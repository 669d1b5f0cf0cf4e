package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// ShareStatus is one copy of a share on one node, as a check found it.
type ShareStatus struct {
	Share int
	Node  string
	Err   error // nil: good
}

// CheckReport is the health of an object.
type CheckReport struct {
	Copies    []ShareStatus // every share found, good or bad, by share number
	Good      int           // distinct share numbers with a good copy
	Nodes     int           // distinct nodes holding a good share
	Needed    int           // k
	Total     int           // n
	Repaired  []ShareStatus // shares rebuilt by Repair, and where
	Unreached []Problem     // nodes that did not answer
}

// Healthy reports whether every share has a good copy.
func (r *CheckReport) Healthy() bool { return r.Good == r.Total }

// Damaged returns the copies found bad that no rebuilt share, checked
// after it was written, replaced on the same node.
func (r *CheckReport) Damaged() []ShareStatus {
	var out []ShareStatus
	for _, cp := range r.Copies {
		if cp.Err == nil {
			continue
		}
		if !slices.ContainsFunc(r.Repaired, func(s ShareStatus) bool {
			return s.Err == nil && s.Share == cp.Share && s.Node == cp.Node
		}) {
			out = append(out, cp)
		}
	}
	return out
}

// Clean reports whether every share has a good copy and no copy found
// is bad (or every bad one was replaced in place).
func (r *CheckReport) Clean() bool { return r.Healthy() && len(r.Damaged()) == 0 }

// Readable reports whether at least k shares are good.
func (r *CheckReport) Readable() bool { return r.Good >= r.Needed }

// Check finds every copy of every share of the object and checks its
// trailer against the capability; with verify, it also reads every block
// and checks it against the hash tree (as Tahoe's check --verify).
func (c *Client) Check(ctx context.Context, vc codec.VerifyCap, verify bool) (*CheckReport, error) {
	if err := vc.Params.Validate(); err != nil || vc.Size < 0 || vc.Size/int64(max(vc.SegmentSize, 1)) >= sharefile.MaxSegments {
		return nil, fmt.Errorf("%w: parameters %+v, size %d", codec.ErrBadCap, vc.Params, vc.Size)
	}
	f, err := c.locate(ctx, vc.SI, false)
	if err != nil {
		return nil, err
	}
	rep := &CheckReport{Needed: vc.K, Total: vc.N, Unreached: f.problems}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for share, nodes := range f.holders {
		for _, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := guarded(func() error { return c.checkCopy(ctx, vc, share, n, verify) })
				mu.Lock()
				rep.Copies = append(rep.Copies, ShareStatus{Share: share, Node: n, Err: err})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	sort.Slice(rep.Copies, func(i, j int) bool {
		a, b := rep.Copies[i], rep.Copies[j]
		if a.Share != b.Share {
			return a.Share < b.Share
		}
		return a.Node < b.Node
	})
	rep.tally()
	return rep, ctx.Err()
}

func (r *CheckReport) tally() {
	good, nodes := map[int]bool{}, map[string]bool{}
	for _, s := range append(r.Copies, r.Repaired...) {
		if s.Err == nil && s.Share >= 0 && s.Share < r.Total {
			good[s.Share], nodes[s.Node] = true, true
		}
	}
	r.Good, r.Nodes = len(good), len(nodes)
}

func (c *Client) checkCopy(ctx context.Context, vc codec.VerifyCap, share int, node string, verify bool) error {
	if share < 0 || share >= vc.N {
		return fmt.Errorf("%w: share number %d of an object with %d shares", sharefile.ErrCorrupt, share, vc.N)
	}
	src, err := c.trailer(ctx, vc, share, node)
	if err != nil || !verify {
		return err
	}
	// Readers build the header from the capability and never read it;
	// a verifying check reads it, as a scrub would.
	hdr, err := c.readRange(ctx, vc.SI, share, node, 0, sharefile.HeaderSize)
	if err != nil {
		return err
	}
	if !bytes.Equal(hdr, vc.Params.Header(share, vc.SI)) {
		return fmt.Errorf("%w: the header of share %d is damaged", sharefile.ErrCorrupt, share)
	}
	l := vc.Layout()
	bufs := freeBufs(vc.BlockSize())
	bs := c.openStream(ctx, vc, src, 0, l.Segments-1, bufs)
	defer bs.close()
	for range l.Segments {
		b, _, err := bs.next(ctx, c.opt.Clock, c.opt.Stall)
		if err != nil {
			return err
		}
		bufs.put(b)
	}
	return nil
}

// Repair checks the object and rebuilds every share that has no good copy
// from any k good ones, placing the new shares on nodes that hold none of
// the object's shares where it can. A copy the check found damaged is
// rebuilt onto the node that holds it, which replaces it (see
// sharestore.Store.Put), also when another node has a good copy. Every
// rebuilt share is checked again, every block, once written: Repaired
// says which went in good. It needs only the verify capability; with
// verify, the check reads every block (without, only shares whose
// trailers are wrong are found).
func (c *Client) Repair(ctx context.Context, vc codec.VerifyCap, verify bool) (*CheckReport, error) {
	if err := c.needLease(); err != nil {
		return nil, err
	}
	rep, err := c.Check(ctx, vc, verify)
	if err != nil {
		return rep, err
	}
	// Damaged copies, rebuilt in place.
	var shares []int
	var targets []string
	for _, cp := range rep.Copies {
		if cp.Err != nil && isDamage(cp.Err) && cp.Share >= 0 && cp.Share < vc.N {
			shares, targets = append(shares, cp.Share), append(targets, cp.Node)
		}
	}
	if rep.Healthy() && len(shares) == 0 {
		return rep, nil
	}
	var srcs []*source
	have := map[int]bool{}
	holders := map[string]bool{}
	for _, cp := range rep.Copies {
		if cp.Err == nil {
			holders[cp.Node] = true
			if !have[cp.Share] {
				s, err := c.trailer(ctx, vc, cp.Share, cp.Node)
				if err == nil {
					have[cp.Share] = true
					srcs = append(srcs, s)
				}
			}
		}
	}
	if len(srcs) < vc.K {
		return rep, fmt.Errorf("%w: %d good shares, %d needed to rebuild the others", ErrUnavailable, len(srcs), vc.K)
	}
	sort.Slice(srcs, func(i, j int) bool { return srcs[i].latency < srcs[j].latency })
	var missing []int
	for i := range vc.N {
		if !have[i] && !slices.Contains(shares, i) {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		nodes, err := c.grid.Nodes(ctx)
		if err != nil {
			return rep, err
		}
		l := vc.Layout()
		var ids []string
		for id := range holders {
			ids = append(ids, id)
		}
		candidates := placement.Exclude(placementNodes(nodes), ids...)
		plan, err := placement.Place(vc.SI[:], candidates, len(missing), 1, l.ShareSize())
		if err != nil {
			// No fresh node has room: doubling up on holders beats not repairing.
			if plan, err = placement.Place(vc.SI[:], placementNodes(nodes), len(missing), 1, l.ShareSize()); err != nil {
				return rep, fmt.Errorf("object: nowhere to put the rebuilt shares: %w", err)
			}
		}
		shares, targets = append(shares, missing...), append(targets, plan.Nodes...)
	}
	results, err := c.rebuild(ctx, vc, srcs, shares, targets)
	// Only what is on the node's disk now, checked, counts as repaired.
	var wg sync.WaitGroup
	for i := range results {
		if results[i].Err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cerr := guarded(func() error { return c.checkCopy(ctx, vc, results[i].Share, results[i].Node, true) }); cerr != nil {
				results[i].Err = fmt.Errorf("the rebuilt share did not check once written: %w", cerr)
			}
		}()
	}
	wg.Wait()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range results {
		if r.Err != nil && (err == nil || !errors.Is(err, r.Err)) {
			errs = append(errs, fmt.Errorf("share %d on node %.8s: %w", r.Share, r.Node, r.Err))
		}
	}
	rep.Repaired = results
	rep.tally()
	return rep, errors.Join(errs...)
}

// isDamage reports whether a copy's problem is damage (bytes that do not
// check, a record the node cannot read) rather than a node that did not
// answer.
func isDamage(err error) bool {
	return errors.Is(err, sharefile.ErrCorrupt) || errors.Is(err, sharefile.ErrMalformed) || errors.Is(err, sharestore.ErrCorrupt)
}

// rebuild streams the missing shares to their nodes, reconstructing their
// blocks segment by segment from k good sources.
func (c *Client) rebuild(ctx context.Context, vc codec.VerifyCap, srcs []*source, missing []int, targets []string) ([]ShareStatus, error) {
	cd, err := codec.New(vc.Params, codec.Key{}) // the key is not needed to rebuild
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l := vc.Layout()
	lease := c.leaseFor(vc.SI)
	ss := make(sinks, len(missing))
	hashes := make([][]sharefile.Hash, len(missing))
	for i, sh := range missing {
		ss[i] = c.newSink(ctx, sh, targets[i], sharestore.Key{SI: vc.SI, Share: sh}, l.ShareSize(), lease, sinkQueue, nil)
		ss[i].send(item{b: vc.Params.Header(sh, vc.SI)}, c.opt.Stall)
	}
	// Rebuilt blocks go to the new shares' uploads, which do not give
	// them back.
	rd := c.startReader(ctx, vc, srcs, 0, l.Segments-1, freeBufs(vc.BlockSize()))
	defer rd.close()
	for seg := range l.Segments {
		blocks, err := rd.segment(ctx, seg)
		if err == nil {
			err = cd.Reconstruct(blocks)
		}
		if err != nil {
			ss.abortAll(err)
			return nil, fmt.Errorf("object: rebuilding segment %d: %w", seg, err)
		}
		for i, sh := range missing {
			hashes[i] = append(hashes[i], sharefile.BlockHash(blocks[sh]))
			ss[i].send(item{b: blocks[sh]}, c.opt.Stall)
		}
	}
	roots := srcs[0].roots
	var out []ShareStatus
	var errs []error
	for i, sh := range missing {
		hdr, _ := sharefile.ParseHeader(vc.Params.Header(sh, vc.SI))
		if sharefile.ShareRoot(hdr, hashes[i]) != roots[sh] {
			err := fmt.Errorf("%w: rebuilt share %d does not match its root", sharefile.ErrCorrupt, sh)
			ss[i].abort(err)
			ss[i].finish()
			out = append(out, ShareStatus{Share: sh, Node: targets[i], Err: err})
			errs = append(errs, err)
			continue
		}
		tr := sharefile.Trailer{Segments: l.Segments, Size: vc.Size, LastBlockSize: l.LastBlockSize, BlockHashes: hashes[i], ShareRoots: roots}
		ss[i].send(item{b: tr.Marshal()}, c.opt.Stall)
		err := ss[i].finish()
		out = append(out, ShareStatus{Share: sh, Node: targets[i], Err: err})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
