package repairer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Rebalancing (docs/grid.md, "Rebalancing"): at each pass, a node whose
// share of its capacity in use is clearly above the grid's (more than
// Spread above the used bytes over the capacity of every live node that
// is not draining, as gossip tells them) moves shares to nodes clearly
// below it, with drain's move (a share copied with its leases, checked
// first, removed here only once the target lists it), under the repair
// budget, until it is back near the grid's fraction. The decisions are
// pure functions of the members' loads (planRebalance, pickTarget), so
// that they can be tested on their own; RebalancePass does the I/O.
//
// Three rules keep it from oscillating or over-filling a node:
//   - hysteresis: a node starts when it is Spread above the grid's
//     fraction and goes on until it is within a tenth of Spread of it;
//   - nobody crosses the grid's fraction: a source stops above it, and a
//     target (a tenth of Spread below it) receives at most what brings
//     it up to it;
//   - concurrent sources share each target's room: a source sends a
//     target only its part of the target's room, in proportion of its
//     own excess over the total excess of the nodes above the grid's
//     fraction.
//
// Happiness and zone spread: a share goes only to a node that holds none
// of the object's shares, and only to a zone that then holds no more of
// the object's shares than the source's zone held before (so no zone
// gets more of the object than the most any zone had, and no zone loses
// its last share), the zones with the fewest of them first. Two moves
// of one object at the same time, each right on its own, could be wrong
// together (both to one node, or both out of one zone), so of the
// holders of an object that are above the grid (in this node's view of
// the loads) and could move a share of it (movers), only the one
// Responsible for it does. Nodes whose views differ may still both move
// one: so the target is asked again just before the copy, the copy is
// sent as the only share of the object (node.Client.PutOnlyShare: the
// target refuses it if it holds or is receiving another), and, once it
// is in place, the source asks every node again and removes its own
// copy only if the object stays on as many nodes and zones as before,
// no zone fuller (spreadKept); else both copies stay: one share too
// many, but no node or zone fewer. (Two sources whose checks both run
// after both copies landed and before either removed its own could
// still both remove.)
// A share stored in the last RebalanceMinAge stays, as its object's
// upload may be under way.

// Defaults of the rebalancing settings of Config.
const (
	// DefaultSpread is Config.Spread's default: a node rebalances once
	// its used fraction of capacity is 5 points above the grid's.
	DefaultSpread = 0.05
	// DefaultRebalanceMinAge is Config.RebalanceMinAge's default.
	DefaultRebalanceMinAge = 10 * time.Minute
	// DefaultRebalanceMax is Config.RebalanceMax's default: at most 1 GiB
	// of shares leaves a node in one pass.
	DefaultRebalanceMax = 1 << 30
	// maxRebalanceObjects bounds the objects a pass looks at (each costs
	// a request to every live node).
	maxRebalanceObjects = 2000
)

// Load is a node's space as rebalancing sees it.
type Load struct {
	ID       string
	Zone     string
	Used     int64 // bytes of shares stored
	Capacity int64 // bytes it may hold in all: used and free
}

// fraction is the node's used share of its capacity.
func (l Load) fraction() float64 { return float64(l.Used) / float64(l.Capacity) }

// rebalancePlan is what a node should do in a rebalancing pass.
type rebalancePlan struct {
	// Active says whether the node is (still) above the grid: the
	// hysteresis state to pass to the next planRebalance.
	Active bool
	Avg    float64 // the grid's used fraction of capacity
	// Excess is how many bytes the node may send away in this pass
	// without going below the grid's fraction (at most RebalanceMax).
	Excess int64
	// Allot is, for each node clearly below the grid, how many bytes this
	// node may send it in this pass.
	Allot map[string]int64
}

// loads returns the space of the live members that are not draining and
// have a known capacity, with self's own (fresher than its gossip).
func loads(ms []member.Member, self Load) []Load {
	out := []Load{self}
	for _, m := range ms {
		if m.ID == self.ID || m.State != member.Alive || m.Draining || m.Leaving {
			continue
		}
		if c := m.Used + m.Free; c > 0 {
			out = append(out, Load{ID: m.ID, Zone: m.Zone, Used: m.Used, Capacity: c})
		}
	}
	return out
}

// planRebalance decides, from the loads of the grid's nodes (self's
// among them), whether self moves shares away in this pass, how much,
// and to whom. active is whether it was rebalancing at the last pass;
// spread is Config.Spread; max bounds Excess.
func planRebalance(self string, ls []Load, active bool, spread float64, max int64) rebalancePlan {
	var used, capacity float64
	var me *Load
	for i, l := range ls {
		if l.Capacity <= 0 {
			continue
		}
		used += float64(l.Used)
		capacity += float64(l.Capacity)
		if l.ID == self {
			me = &ls[i]
		}
	}
	if me == nil || capacity == 0 {
		return rebalancePlan{}
	}
	avg := used / capacity
	stop := avg + spread/10 // a source goes on until within this
	p := rebalancePlan{Avg: avg}
	f := me.fraction()
	switch {
	case !active && f <= avg+spread, active && f <= stop:
		return p
	}
	p.Active = true
	p.Excess = min(int64(float64(me.Used)-stop*float64(me.Capacity)), max)
	if p.Excess <= 0 {
		return p
	}
	// The nodes that may be sending now: every node above the stop line
	// (a superset of the active ones, so the room is never over-shared).
	var totalExcess float64
	for _, l := range ls {
		if l.Capacity > 0 && l.fraction() > stop {
			totalExcess += float64(l.Used) - stop*float64(l.Capacity)
		}
	}
	share := float64(me.Used) - stop*float64(me.Capacity)
	p.Allot = map[string]int64{}
	for _, l := range ls {
		if l.Capacity <= 0 || l.ID == self || l.fraction() >= avg-spread/10 {
			continue
		}
		room := avg*float64(l.Capacity) - float64(l.Used)
		if a := int64(room * share / totalExcess); a > 0 {
			p.Allot[l.ID] = a
		}
	}
	return p
}

// pickTarget chooses the node that receives a share of size bytes of an
// object from self, in zone selfZone. holders maps every node known to
// hold a share of the object (self among them) to its zone; targets are
// the candidates with their zones, and allot what each may still receive.
// It returns "" when no target keeps the object's spread: a target must
// hold none of the object's shares, have room for the share in its
// allotment, and be in selfZone or in a zone that holds fewer of the
// object's shares than selfZone does. Of those, the zone with the fewest
// of them wins, then the most room left, then the lower ID.
func pickTarget(selfZone string, holders map[string]string, targets map[string]string, allot map[string]int64, size int64) string {
	inZone := zoneCounts(holders)
	var best string
	for id, z := range targets {
		if _, ok := holders[id]; ok || allot[id] < size {
			continue
		}
		if !zoneAllows(z, selfZone, inZone) {
			continue
		}
		if best == "" {
			best = id
			continue
		}
		bz := targets[best]
		if c := cmp.Or(cmp.Compare(inZone[z], inZone[bz]), cmp.Compare(allot[best], allot[id]), cmp.Compare(id, best)); c < 0 {
			best = id
		}
	}
	return best
}

// zoneCounts returns how many of holders are in each zone.
func zoneCounts(holders map[string]string) map[string]int {
	inZone := map[string]int{}
	for _, z := range holders {
		inZone[z]++
	}
	return inZone
}

// zoneAllows says whether a share may move from a node in zone from to
// one in zone to, the object's holders being inZone: within a zone, or
// to a zone that then holds no more of them than from did.
func zoneAllows(to, from string, inZone map[string]int) bool {
	return to == from || inZone[to]+1 <= inZone[from]
}

// movers returns the holders of an object that may move a share of it
// now: those above the grid (active, in this node's view) for which
// some target that holds none of the object's shares is in a zone the
// move allows. Of them, the one Responsible for the object moves it.
func movers(holders, targets map[string]string, active map[string]bool) []string {
	inZone := zoneCounts(holders)
	var out []string
	for id, from := range holders {
		if !active[id] {
			continue
		}
		for t, to := range targets {
			if _, held := holders[t]; !held && zoneAllows(to, from, inZone) {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

// spreadKept returns an error unless an object whose shares were on
// the nodes before (a source among them) and are now on the nodes now
// (the source's no longer counted) is on at least as many nodes and zones
// as before, with no zone holding more of them than the most any did:
// what another move of the same object at the same time could undo.
func spreadKept(before, now map[string]string) error {
	b, a := zoneCounts(before), zoneCounts(now)
	if len(now) < len(before) || len(a) < len(b) || slices.Max(slices.Collect(maps.Values(a))) > slices.Max(slices.Collect(maps.Values(b))) {
		return fmt.Errorf("the object would be on %d nodes in %d zones, from %d in %d (another move of it at the same time)", len(now), len(a), len(before), len(b))
	}
	return nil
}

// RebalanceResult is what one rebalancing pass did.
type RebalanceResult struct {
	// Active says whether the node was above the grid's used fraction
	// (by Spread to start, by a tenth of it to go on).
	Active bool
	Moved  int   // shares moved to other nodes and removed here
	Bytes  int64 // their bytes
	Failed int   // shares whose move failed
}

// RebalancePass moves shares of its node to nodes with less of their
// capacity in use, if the node is clearly above the grid (see the
// comment at the top of rebalance.go). It does nothing when rebalancing
// is off (Config.Spread negative) or the node is draining.
func (r *Repairer) RebalancePass(ctx context.Context) (RebalanceResult, error) {
	r.rebalanceMu.Lock()
	defer r.rebalanceMu.Unlock()
	var res RebalanceResult
	if r.cfg.Spread < 0 || r.node.Draining() {
		r.rebalancing = false
		return res, nil
	}
	self := string(r.node.ID())
	u := r.node.Store().Usage()
	me := Load{ID: self, Zone: r.node.Zone(), Used: u.Used, Capacity: u.Used + u.Free}
	if me.Capacity <= 0 {
		return res, nil
	}
	ms := r.node.Members()
	p := planRebalance(self, loads(ms, me), r.rebalancing, r.spread(), r.rebalanceMax())
	r.rebalancing = p.Active
	res.Active = p.Active
	if !p.Active || p.Excess <= 0 || len(p.Allot) == 0 {
		return res, nil
	}
	targets := map[string]string{}
	active := map[string]bool{self: true}
	var others []Load
	for _, l := range loads(ms, me) {
		if l.ID == self {
			continue
		}
		active[l.ID] = l.fraction() > p.Avg+r.spread()/10
		others = append(others, l)
		if p.Allot[l.ID] > 0 {
			targets[l.ID] = l.Zone
		}
	}
	// The client reaches nodes by ID once it has their addresses.
	if _, err := r.nc.Members(ctx, 0); err != nil {
		return res, err
	}
	byObject := map[sharefile.SI][]sharestore.Info{}
	err := r.node.Store().Walk(ctx, func(i sharestore.Info) error {
		byObject[i.SI] = append(byObject[i.SI], i)
		return nil
	})
	if err != nil {
		return res, err
	}
	sis := make([]sharefile.SI, 0, len(byObject))
	for si := range byObject {
		sis = append(sis, si)
	}
	rand.Shuffle(len(sis), func(i, j int) { sis[i], sis[j] = sis[j], sis[i] })
	if len(sis) > maxRebalanceObjects {
		sis = sis[:maxRebalanceObjects]
	}
	left := p.Excess
	for _, si := range sis {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		info := smallest(byObject[si])
		if info.Size > left || time.Since(newest(byObject[si])) < r.rebalanceMinAge() {
			continue
		}
		holders, ok := r.holders(ctx, si, others)
		if !ok {
			continue
		}
		holders[self] = me.Zone
		target := pickTarget(me.Zone, holders, targets, p.Allot, info.Size)
		if target == "" {
			continue
		}
		// Asked again just before: a share of the object may have
		// reached it since (a repair, another holder's move).
		if sh, err := r.nc.ListShares(ctx, target, si, false); err != nil || len(sh) > 0 {
			continue
		}
		if Responsible(si, movers(holders, targets, active)) != self {
			continue // one holder of the object moves a share of it at a time
		}
		before := holders
		keep := func(ctx context.Context) error {
			now, ok := r.holders(ctx, si, others)
			if !ok {
				return errors.New("a holder did not answer")
			}
			return spreadKept(before, now)
		}
		if err := r.move(ctx, info, target, true, keep); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Failed++
			lvl := slog.LevelWarn
			if errors.Is(err, sharestore.ErrExists) {
				lvl = slog.LevelDebug // another source was quicker
			}
			r.log.Log(ctx, lvl, "rebalance: share not moved", "share", info.Key.String(), "target", target, "err", err)
			continue
		}
		res.Moved++
		res.Bytes += info.Size
		left -= info.Size
		p.Allot[target] -= info.Size
		if left <= 0 || !anyRoom(p.Allot) {
			break
		}
	}
	return res, nil
}

// holders asks every node of others which of them hold shares of si, and
// returns them with their zones. ok is false if one did not answer: it
// may hold a share, and a target chosen without knowing could end up
// with two.
func (r *Repairer) holders(ctx context.Context, si sharefile.SI, others []Load) (map[string]string, bool) {
	h := map[string]string{}
	for _, l := range others {
		sh, err := r.nc.ListShares(ctx, l.ID, si, false)
		if err != nil {
			r.log.Debug("rebalance: listing shares", "node", l.ID, "err", err)
			return nil, false
		}
		if len(sh) > 0 {
			h[l.ID] = l.Zone
		}
	}
	return h, true
}

// smallest returns the smallest of a node's shares of one object (almost
// always its only one).
func smallest(infos []sharestore.Info) sharestore.Info {
	return slices.MinFunc(infos, func(a, b sharestore.Info) int { return cmp.Compare(a.Size, b.Size) })
}

// newest returns when the newest of a node's shares of one object was
// stored.
func newest(infos []sharestore.Info) time.Time {
	var t time.Time
	for _, i := range infos {
		if i.Created.After(t) {
			t = i.Created
		}
	}
	return t
}

func (r *Repairer) rebalanceMinAge() time.Duration {
	switch {
	case r.cfg.RebalanceMinAge < 0:
		return 0
	case r.cfg.RebalanceMinAge == 0:
		return DefaultRebalanceMinAge
	}
	return r.cfg.RebalanceMinAge
}

func anyRoom(allot map[string]int64) bool {
	for _, a := range allot {
		if a > 0 {
			return true
		}
	}
	return false
}

func (r *Repairer) spread() float64 {
	if r.cfg.Spread == 0 {
		return DefaultSpread
	}
	return r.cfg.Spread
}

func (r *Repairer) rebalanceMax() int64 {
	if r.cfg.RebalanceMax <= 0 {
		return DefaultRebalanceMax
	}
	return r.cfg.RebalanceMax
}
