package object

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// quickRead reads a one-segment object the short way: its first k shares
// (the data shares, which need no Reed–Solomon reconstruction), whole, in
// one request each, from the nodes that placement puts them on for the
// live nodes of now, which are the nodes its upload put them on unless
// membership or free space changed enough since. That is k requests where
// the usual way asks every node for its shares first. Every block is
// checked as on the usual way. If anything is amiss (a node without its
// share, down, slow, lying), quickRead gives up and the caller reads the
// usual way, which finds where the shares are and works around bad ones.
//
// Whatever quickRead found wrong on the way (a corrupt or lying share, a
// node that failed) comes back as problems, with or without an error, so
// that the report names it even when the usual way then reads around that
// node without touching it. A share that is simply not where placement
// says is no problem: placement moves with membership.
//
// The blocks are read into buf (grown if it has not room for k of them;
// Get gives it one of k full blocks, from the process's free list) where
// decoding wants them, and the segment is opened there: plain is buf's
// memory.
func (c *Client) quickRead(ctx context.Context, vc codec.VerifyCap, cd *codec.Codec, buf []byte) (plain []byte, shares []int, problems []Problem, err error) {
	l := vc.Layout()
	if l.Segments != 1 {
		return nil, nil, nil, fmt.Errorf("object: %d segments", l.Segments)
	}
	bl := l.BlockLen(0)
	buf = slices.Grow(buf[:0], vc.K*bl)[:vc.K*bl]
	nodes, err := c.grid.Nodes(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	plan, err := placement.Place(vc.SI[:], placementNodes(nodes), vc.N, 1, l.ShareSize())
	if err != nil {
		return nil, nil, nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opt.Stall)
	defer cancel()
	which := c.quickShares(vc, plan)
	blocks := make([][]byte, vc.N)
	for i := range vc.K { // room to rebuild a data share not read into
		blocks[i] = buf[i*bl : i*bl : (i+1)*bl]
	}
	errs := make([]error, vc.K)
	cancelled := make([]bool, vc.K) // failed after a sibling's failure cancelled it
	var wg sync.WaitGroup
	for j, sh := range which {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var block []byte
			if sh < vc.K {
				block = buf[sh*bl : (sh+1)*bl : (sh+1)*bl]
			} else {
				block = make([]byte, bl)
			}
			start := time.Now()
			errs[j] = guarded(func() error { return c.wholeShare(ctx, vc, sh, plan.Nodes[sh], block) })
			if errs[j] == nil {
				blocks[sh] = block
				if bl >= 16<<10 { // less times round trips, as a read's blocks
					c.links.download(plan.Nodes[sh], int64(bl), time.Since(start), vc.K > 1) // its k shares come at once
				}
			}
			if errs[j] != nil {
				cancelled[j] = errors.Is(ctx.Err(), context.Canceled) && parent.Err() == nil &&
					!errors.Is(errs[j], sharefile.ErrCorrupt)
				cancel() // the usual way it is, then
			}
		}()
	}
	wg.Wait()
	for j, e := range errs {
		// A share cancelled because another failed, or missing where
		// placement says, tells nothing about its node.
		if e == nil || cancelled[j] || errors.Is(e, sharestore.ErrNotFound) {
			continue
		}
		problems = append(problems, Problem{Share: which[j], Node: plan.Nodes[which[j]], Err: e})
	}
	for j, e := range errs {
		if e != nil {
			return nil, nil, problems, fmt.Errorf("share %d on node %.8s: %w", which[j], plan.Nodes[which[j]], e)
		}
	}
	plain, err = cd.Decode(buf[:0], 0, true, l.SegmentPlainLen(0), blocks)
	if err != nil {
		return nil, nil, problems, err
	}
	return plain, which, problems, nil
}

// quickShares chooses the k shares a quick read fetches: the data shares
// (no decoding), but a data share whose node the client's link
// estimates put at less than a quarter of the speed of a parity share's
// node (far beyond the noise of measurements on a uniform network) is
// swapped for that parity share (a small segment decodes in
// microseconds; a radio link of 1 Mbit/s costs seconds). Where the data
// share's block would take its node slowSwapBlock or more, half the
// speed is enough: the estimates were measured on links shared with
// other transfers, which brings fast nodes' figures down toward slow
// ones', and a block that costs tens of milliseconds is worth a swap
// that the noise of a fast network is not.
func (c *Client) quickShares(vc codec.VerifyCap, plan placement.Plan) []int {
	which := make([]int, vc.K)
	for i := range which {
		which[i] = i
	}
	rate := func(sh int) float64 { return c.links.readRate(plan.Nodes[sh]) }
	spare := make([]int, 0, vc.N-vc.K)
	for sh := vc.K; sh < vc.N && sh < len(plan.Nodes); sh++ {
		if rate(sh) > 0 {
			spare = append(spare, sh)
		}
	}
	slices.SortStableFunc(spare, func(a, b int) int { return cmp.Compare(rate(b), rate(a)) })
	used := map[string]bool{}
	for _, sh := range which {
		used[plan.Nodes[sh]] = true
	}
	for i, sh := range which {
		r := rate(sh)
		if r == 0 || len(spare) == 0 {
			continue // nothing known: the data share
		}
		best := spare[0]
		ratio := 4.0
		if float64(vc.Layout().BlockLen(0))/r >= slowSwapBlock.Seconds() {
			ratio = 2
		}
		if used[plan.Nodes[best]] || rate(best) < ratio*r {
			continue
		}
		which[i], spare = best, spare[1:]
		used[plan.Nodes[best]] = true
	}
	slices.Sort(which)
	return which
}

// slowSwapBlock is how long a data share's block must be expected to
// take before a quick read swaps it for a parity share's from a node
// twice as fast (quickShares).
const slowSwapBlock = 20 * time.Millisecond

// wholeShare fetches a one-segment share whole, its block into block
// (which must be the block's length), checked against the share's
// trailer, which is checked against the capability.
func (c *Client) wholeShare(ctx context.Context, vc codec.VerifyCap, share int, node string, block []byte) error {
	l := vc.Layout()
	head := make([]byte, l.BlockOffset(0))
	trailer := make([]byte, l.TrailerLen())
	if err := c.readInto(ctx, vc.SI, share, node, 0, head, block, trailer); err != nil {
		return err
	}
	src, err := checkedSource(vc, share, node, trailer, 0)
	if err != nil {
		return err
	}
	return src.checkBlock(0, block)
}
