package repairer

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/placement"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Draining (docs/grid.md, "Draining a node"): when its node is drained
// (node.Node.Drain), the repairer moves every share the node holds to
// another node that placement picks among the live ones not draining,
// preferring one that holds no share of the same object. A move copies
// the share itself, checked first against its hashes (store Scrub),
// with every lease it has (so its owners still renew and cancel it),
// under the repair budget; the drained copy is removed only once the
// target lists the same share (number, size and root) as stored, which
// it does once the share is durable there.

// maxDrainPasses bounds the passes one drain request runs; a share that
// could not be moved by then waits for the next request.
const maxDrainPasses = 20

// drainLoop waits for drain requests of the node and runs passes until
// the node holds no share, or maxDrainPasses have run.
func (r *Repairer) drainLoop() {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stop
		cancel()
	}()
	for {
		select {
		case <-r.stop:
			return
		case <-r.node.DrainRequests():
		}
		r.drainAll(ctx)
	}
}

// drainAll runs drain passes until the node holds no share.
func (r *Repairer) drainAll(ctx context.Context) {
	st, _ := r.node.DrainStatus(ctx)
	for pass := 0; pass < maxDrainPasses && ctx.Err() == nil; pass++ {
		st.Running = true
		r.node.SetDrainStatus(st)
		res, err := r.DrainPass(ctx)
		st.Running = false
		st.Passes++
		st.Moved += res.Moved
		st.Doubled += res.Doubled
		st.Failed = res.Failed
		st.Err = ""
		if err != nil {
			st.Err = err.Error()
		}
		r.node.SetDrainStatus(st)
		r.log.Info("drain pass", "moved", res.Moved, "failed", res.Failed, "left", res.Left, "err", err)
		if err == nil && res.Left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// DrainResult is what one drain pass did.
type DrainResult struct {
	Moved   int // shares moved to another node and removed here
	Doubled int // of them, onto a node that held a share of the object
	Failed  int // shares not moved
	Left    int // shares the node held at the start of the pass, less those moved
}

// DrainPass moves every share its node holds to other nodes (see
// drainLoop). It does nothing to a node that is not draining.
func (r *Repairer) DrainPass(ctx context.Context) (DrainResult, error) {
	var res DrainResult
	if !r.node.Draining() {
		return res, errors.New("repairer: the node is not being drained")
	}
	store := r.node.Store()
	byObject := map[sharefile.SI][]sharestore.Info{}
	err := store.Walk(ctx, func(i sharestore.Info) error {
		byObject[i.SI] = append(byObject[i.SI], i)
		res.Left++
		return nil
	})
	if err != nil {
		return res, err
	}
	if res.Left == 0 {
		return res, nil
	}
	ms, err := r.nc.Members(ctx, 0)
	if err != nil {
		return res, err
	}
	self := string(r.node.ID())
	var cands []placement.Node
	for _, m := range ms {
		if m.State == member.Alive && m.ID != self && !m.Draining {
			cands = append(cands, placement.Node{ID: m.ID, Zone: m.Zone, Free: m.Free})
		}
	}
	if len(cands) == 0 {
		res.Failed = res.Left
		return res, errors.New("repairer: no other live node to drain to")
	}
	for si, infos := range byObject {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		// Who holds what of the object already; a node that does not
		// answer is no target for it.
		var holders []string
		var reachable []placement.Node
		for _, c := range cands {
			sh, err := r.nc.ListShares(ctx, c.ID, si, false)
			if err != nil {
				continue
			}
			reachable = append(reachable, c)
			if len(sh) > 0 {
				holders = append(holders, c.ID)
			}
		}
		for _, info := range infos {
			target, doubled, err := r.pick(si, reachable, holders, info.Size)
			if err == nil {
				err = r.move(ctx, info, target, false, nil)
			}
			if err != nil {
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				res.Failed++
				r.log.Warn("drain: share not moved", "share", info.Key.String(), "err", err)
				continue
			}
			res.Moved++
			res.Left--
			if doubled {
				res.Doubled++
			}
			holders = append(holders, target)
		}
	}
	return res, nil
}

// pick chooses where a share of si goes: placement among the nodes that
// hold none of the object's shares, or, if there is none with room, among
// all (doubled).
func (r *Repairer) pick(si sharefile.SI, nodes []placement.Node, holders []string, size int64) (string, bool, error) {
	if p, err := placement.Place(si[:], placement.Exclude(nodes, holders...), 1, 1, size); err == nil {
		return p.Nodes[0], false, nil
	}
	p, err := placement.Place(si[:], nodes, 1, 1, size)
	if err != nil {
		return "", false, err
	}
	return p.Nodes[0], true, nil
}

// errDoubled says a move copied its share but left it where it was too,
// as removing it would have left the object on fewer nodes or zones.
var errDoubled = errors.New("repairer: share copied but kept")

// move copies a share with its leases to target and, once the target
// lists it as stored, removes it here. With onlyInto, the copy is sent
// as the only share of the object on the target, and kept here too
// (errDoubled) if the target then holds another, or if keep, called
// once the copy is in place, returns an error.
func (r *Repairer) move(ctx context.Context, info sharestore.Info, target string, onlyInto bool, keep func(context.Context) error) error {
	store := r.node.Store()
	leases, err := store.Leases(ctx, info.Key)
	if err != nil {
		return err
	}
	if len(leases) == 0 {
		return errors.New("the share has no lease")
	}
	// Check every block first: a damaged share is the repairer's to
	// rebuild, not to copy.
	if err := r.bucket.Wait(ctx, info.Size); err != nil {
		return err
	}
	r.moved.Add(info.Size)
	if _, err := store.Scrub(ctx, info.Key); err != nil {
		return fmt.Errorf("checking the share: %w", err)
	}
	sh, err := store.Open(ctx, info.Key)
	if err != nil {
		return err
	}
	defer sh.Close()
	for _, l := range leases {
		rd := &meter{ctx: ctx, r: io.NewSectionReader(sh, 0, info.Size), rep: r}
		put := r.nc.PutShare
		if onlyInto {
			put = r.nc.PutOnlyShare
		}
		if _, err := put(ctx, target, info.Key, rd, info.Size, l); err != nil {
			return fmt.Errorf("copy to %.8s: %w", target, err)
		}
	}
	there, err := r.nc.ListShares(ctx, target, info.SI, false)
	if err != nil {
		return fmt.Errorf("listing the copy on %.8s: %w", target, err)
	}
	root := hex.EncodeToString(info.Root[:])
	for _, s := range there {
		if s.Share == info.Share && s.Size == info.Size && s.Root == root {
			if onlyInto && len(there) > 1 {
				// Another share of the object reached the target
				// meanwhile: removing ours would leave the object on
				// one node fewer. Keep both copies.
				return fmt.Errorf("%w: node %.8s took another share of the object meanwhile; the share is kept here too", errDoubled, target)
			}
			if keep != nil {
				if err := keep(ctx); err != nil {
					return fmt.Errorf("%w: %w; the share is kept here too", errDoubled, err)
				}
			}
			err := store.Remove(ctx, info.Key)
			r.node.UsageChanged()
			return err
		}
	}
	return fmt.Errorf("node %.8s does not list the copy it took", target)
}
