package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Plan says which node holds each share: Nodes[shnum] is the ID of the node
// that holds share shnum.
type Plan struct {
	Nodes []string
}

// Happiness returns the number of distinct nodes in the plan.
func (p Plan) Happiness() int {
	seen := make(map[string]struct{}, len(p.Nodes))
	for _, id := range p.Nodes {
		seen[id] = struct{}{}
	}
	return len(seen)
}

// Place chooses a node for each of the n shares of the object with storage
// index si, where each share needs shareSize bytes.
//
// Nodes with Free < shareSize are full and skipped. The others are taken in
// [Rank] order, and shares 0..n-1 are assigned one at a time, each to the
// node with room for it that minimises, in this order: the shares already
// on the node, the shares already in its zone, its rank. So with at least n
// usable nodes every share is on a different node and the zones are used as
// evenly as possible; with fewer, some nodes hold more than one share, the
// zones least used and the best-ranked nodes first. A node holds a further
// share only if Free - held*shareSize >= shareSize. If an ID occurs more
// than once in nodes, only its best-ranked entry is used.
//
// Place returns an error wrapping [ErrUnhappy] if the plan would have fewer
// than happy distinct nodes or not all n shares fit, and [ErrBadParams] if
// n < 1, happy < 1, happy > n or shareSize < 0. It does not modify nodes.
func Place(si []byte, nodes []Node, n, happy int, shareSize int64) (Plan, error) {
	if n < 1 || happy < 1 || happy > n || shareSize < 0 {
		return Plan{}, fmt.Errorf("%w: n=%d happy=%d shareSize=%d: need 1 <= happy <= n and shareSize >= 0",
			ErrBadParams, n, happy, shareSize)
	}

	return assign(Rank(si, nodes), n, happy, shareSize)
}

// PlaceBy is Place for links of uneven speed: eta estimates how long a
// share of shareSize bytes takes to reach a node (0 where nothing is
// known yet: such a node is tried early, so that it gets measured). Of
// the nodes with room, the happy with the smallest eta come first (etas
// within a factor of two of each other count as equal, and equal ones
// keep Rank order) and the others follow in Rank order, and shares are
// assigned as Place does (fewest on the node, then fewest in its zone,
// then that order). So zone spread holds as with Place, the first happy
// shares go to the nodes that will take them soonest, and the other n −
// happy to the rest in rendezvous order, weighted by free space: slow
// nodes keep receiving shares (the ones an upload acknowledged at
// happiness completes in the background), and capacity still counts.
//
// A node short of room, whose free part of its room (Free/(Free+Used))
// is below 3/4 (shortOfRoom) of the mean of the nodes with room, is not
// preferred for its speed and comes last (in Rank order among such
// nodes), so it is the one left out when there are more nodes than
// shares. Fast nodes would otherwise fill up long before slow ones and,
// once fewer than happy nodes had room, leave the slow ones' space
// unusable for ever; this way fast nodes keep their preference while
// they have room to spare, and the grid fills as a whole. Nodes of
// different sizes compare by the part of their room free, not by bytes.
func PlaceBy(si []byte, nodes []Node, n, happy int, shareSize int64, eta func(id string) float64) (Plan, error) {
	if n < 1 || happy < 1 || happy > n || shareSize < 0 {
		return Plan{}, fmt.Errorf("%w: n=%d happy=%d shareSize=%d: need 1 <= happy <= n and shareSize >= 0",
			ErrBadParams, n, happy, shareSize)
	}
	ranked := Rank(si, nodes)
	type cand struct {
		i   int
		eta float64
	}
	var cs []cand
	seen := map[string]bool{}
	for i, nd := range ranked {
		if seen[nd.ID] || nd.Free < shareSize {
			continue
		}
		seen[nd.ID] = true
		cs = append(cs, cand{i, eta(nd.ID)})
	}
	// Speeds within a factor of two of the fastest known are the same
	// here (and so on by powers of two): measurements are noisy, and
	// nodes of about the same speed keep rendezvous order, so that a
	// uniform network is placed as by Place.
	fastest := math.Inf(1)
	var free float64 // mean part of their room the candidates have free
	for _, c := range cs {
		if c.eta > 0 {
			fastest = min(fastest, c.eta)
		}
		free += freePart(ranked[c.i]) / float64(len(cs))
	}
	short := func(nd Node) bool { return freePart(nd) < shortOfRoom*free }
	for i := range cs {
		switch {
		case short(ranked[cs[i].i]):
			cs[i].eta = math.Inf(1) // short of room: no preference
		case cs[i].eta > 0:
			cs[i].eta = math.Floor(math.Log2(cs[i].eta / fastest))
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(a.eta, b.eta) })
	first := map[int]bool{}
	for _, c := range cs[:min(happy, len(cs))] {
		first[c.i] = true
	}
	ordered := make([]Node, 0, len(ranked))
	for _, c := range cs[:min(happy, len(cs))] {
		ordered = append(ordered, ranked[c.i])
	}
	var last []Node
	for i, nd := range ranked {
		switch {
		case first[i]:
		case short(nd):
			last = append(last, nd)
		default:
			ordered = append(ordered, nd)
		}
	}
	return assign(append(ordered, last...), n, happy, shareSize)
}

// shortOfRoom is the fraction of the candidates' mean free part of
// their room below which PlaceBy gives a node no preference for its
// speed. A node preferred gets a share of every object, and must later
// be left out of enough objects to end as full as the others: with 7
// fast nodes, 6 slow ones and 10 shares an object, the fast ones must
// lose their preference by the time they have about 0.57 of the slow
// ones' free space, which 3/4 of the mean is; at 1/2 of it, they filled
// up with the slow ones still a quarter empty
// (TestPlaceByFairOverManyUploads).
const shortOfRoom = 0.75

// freePart is the part of a node's room that is free: 1 for a node that
// stores nothing (or does not say).
func freePart(nd Node) float64 {
	if nd.Used <= 0 {
		return 1
	}
	return float64(max(nd.Free, 0)) / float64(max(nd.Free, 0)+nd.Used)
}

// assign places n shares over nodes taken in the order given (see Place).
func assign(ranked []Node, n, happy int, shareSize int64) (Plan, error) {
	seen := make(map[string]struct{}, len(ranked))
	cands := make([]Node, 0, len(ranked))
	full := 0
	for _, nd := range ranked {
		if _, dup := seen[nd.ID]; dup {
			continue
		}
		seen[nd.ID] = struct{}{}
		if nd.Free < shareSize {
			full++
			continue
		}
		cands = append(cands, nd)
	}
	fail := &placeError{
		n: n, happy: happy, shareSize: shareSize,
		known: len(seen), full: full, usable: len(cands),
	}
	// Each usable node has room for one share and the first shares go to
	// distinct nodes, so the plan's happiness is min(n, usable).
	if min(n, len(cands)) < happy {
		fail.placed = n // the shortfall is nodes, not space
		return Plan{}, fail
	}

	// Zones as small integers, so that the loop below does no map lookups.
	zoneOf := make([]int, len(cands))
	zoneIdx := make(map[string]int)
	for i, nd := range cands {
		z, ok := zoneIdx[nd.Zone]
		if !ok {
			z = len(zoneIdx)
			zoneIdx[nd.Zone] = z
		}
		zoneOf[i] = z
	}
	held := make([]int, len(cands))     // shares assigned to cands[i]
	inZone := make([]int, len(zoneIdx)) // shares assigned per zone
	plan := Plan{Nodes: make([]string, 0, n)}
	for range n {
		best := -1
		for i, nd := range cands {
			if shareSize > 0 && (nd.Free-int64(held[i])*shareSize) < shareSize {
				continue // no room for another share
			}
			// Ties keep the better-ranked, earlier candidate.
			if best < 0 || held[i] < held[best] ||
				held[i] == held[best] && inZone[zoneOf[i]] < inZone[zoneOf[best]] {
				best = i
				if held[i] == 0 && inZone[zoneOf[i]] == 0 {
					break // nothing later can beat an empty node in an empty zone
				}
			}
		}
		if best < 0 {
			fail.placed = len(plan.Nodes)
			return Plan{}, fail
		}
		held[best]++
		inZone[zoneOf[best]]++
		plan.Nodes = append(plan.Nodes, cands[best].ID)
	}
	return plan, nil
}

// Exclude returns a copy of nodes without the nodes whose ID is one of ids,
// in the same order. Repair uses it to place new shares only on nodes that
// do not already hold one. It does not modify nodes.
func Exclude(nodes []Node, ids ...string) []Node {
	out := make([]Node, 0, len(nodes))
	for _, nd := range nodes {
		if !slices.Contains(ids, nd.ID) {
			out = append(out, nd)
		}
	}
	return out
}
