// Package placement decides which storage nodes hold the shares of an
// object.
//
// It is a pure function of its inputs: the object's storage index and a
// snapshot of the live nodes (ID, zone, free bytes). It does no I/O, keeps
// no state, and is safe for concurrent use. Every node of a grid that sees
// the same nodes computes the same placement, so a downloader can find
// shares by asking the best-ranked nodes first.
//
// [Rank] orders nodes by weighted rendezvous hashing of the storage index:
// each node scores -weight/ln(u), where u is a uniform value in (0,1)
// derived from SHA-256 of the storage index and the node ID, and the
// weight is the node's free space. A node with twice the free space is
// first choice for about twice as many objects, and adding or removing a
// node moves only the objects whose ranking it enters or leaves.
//
// [Place] assigns the n shares of an object to nodes in rank order, spread
// over as many distinct nodes and zones as possible, skipping nodes that
// are too full for a share. It fails with [ErrUnhappy] rather than produce
// a plan on fewer than happy distinct nodes (Tahoe-LAFS's
// "servers of happiness").
//
// A 3-of-10 upload that needs at least 7 distinct nodes:
//
//	plan, err := placement.Place(si, nodes, 10, 7, shareSize)
//	if errors.Is(err, placement.ErrUnhappy) {
//		return err // the message says how many nodes were known, full and usable
//	}
//	for shnum, id := range plan.Nodes {
//		// send share shnum to node id
//	}
//
// [PlaceBy] does the same with estimates of how soon each node takes a
// share: the happy soonest go first (zone spread still first), the rest
// in rank order, so slow nodes keep receiving the shares an upload
// completes after its acknowledgement; a node short of room (by the
// part of it free, [Node.Used]) loses its preference, so the grid fills
// as a whole.
//
// Repair places replacement shares only on nodes that do not hold one:
//
//	plan, err := placement.Place(si, placement.Exclude(nodes, holders...), missing, 1, shareSize)
package placement
