package object

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

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
	blocks := make([][]byte, vc.N)
	errs := make([]error, vc.K)
	cancelled := make([]bool, vc.K) // failed after a sibling's failure cancelled it
	var wg sync.WaitGroup
	for i := range vc.K {
		wg.Add(1)
		go func() {
			defer wg.Done()
			block := buf[i*bl : (i+1)*bl : (i+1)*bl]
			errs[i] = guarded(func() error { return c.wholeShare(ctx, vc, i, plan.Nodes[i], block) })
			if errs[i] == nil {
				blocks[i] = block
			}
			if errs[i] != nil {
				cancelled[i] = errors.Is(ctx.Err(), context.Canceled) && parent.Err() == nil &&
					!errors.Is(errs[i], sharefile.ErrCorrupt)
				cancel() // the usual way it is, then
			}
		}()
	}
	wg.Wait()
	for i, e := range errs {
		// A share cancelled because another failed, or missing where
		// placement says, tells nothing about its node.
		if e == nil || cancelled[i] || errors.Is(e, sharestore.ErrNotFound) {
			continue
		}
		problems = append(problems, Problem{Share: i, Node: plan.Nodes[i], Err: e})
	}
	for i, e := range errs {
		if e != nil {
			return nil, nil, problems, fmt.Errorf("share %d on node %.8s: %w", i, plan.Nodes[i], e)
		}
	}
	plain, err = cd.Decode(buf[:0], 0, true, l.SegmentPlainLen(0), blocks)
	if err != nil {
		return nil, nil, problems, err
	}
	shares = make([]int, vc.K)
	for i := range shares {
		shares[i] = i
	}
	return plain, shares, problems, nil
}

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
