package object

import (
	"context"
	"errors"
	"fmt"
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
	l := vc.Layout()
	bufs := freeBufs(vc.BlockSize())
	bs := c.openStream(ctx, vc, src, 0, l.Segments-1, bufs)
	defer bs.close()
	for range l.Segments {
		b, _, err := bs.next(ctx, c.opt.Stall)
		if err != nil {
			return err
		}
		bufs.put(b)
	}
	return nil
}

// Repair checks the object and rebuilds every share that has no good copy
// from any k good ones, placing the new shares on nodes that hold none of
// the object's shares where it can. It needs only the verify capability.
func (c *Client) Repair(ctx context.Context, vc codec.VerifyCap, verify bool) (*CheckReport, error) {
	rep, err := c.Check(ctx, vc, verify)
	if err != nil {
		return rep, err
	}
	if rep.Healthy() {
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
		if !have[i] {
			missing = append(missing, i)
		}
	}
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
	results, err := c.rebuild(ctx, vc, srcs, missing, plan.Nodes)
	rep.Repaired = results
	rep.tally()
	return rep, err
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
	lease := sharestore.LeaseFor(c.opt.LeaseSecret(vc.SI))
	ss := make(sinks, len(missing))
	hashes := make([][]sharefile.Hash, len(missing))
	for i, sh := range missing {
		ss[i] = c.newSink(ctx, sh, targets[i], sharestore.Key{SI: vc.SI, Share: sh}, l.ShareSize(), lease)
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
