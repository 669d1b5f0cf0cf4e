package namespace

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Peer is another replica, as anti-entropy needs it. HTTPPeer talks to a
// node; DB.AsPeer is a local one (tests).
type Peer interface {
	Namespaces(ctx context.Context) ([]dag.NSID, error)
	Root(ctx context.Context, ns dag.NSID) (Digest, error)
	// Digests returns, for each prefix of 0 or 1 bytes, the digests of
	// the 256 ranges under it.
	Digests(ctx context.Context, ns dag.NSID, prefixes [][]byte) ([][256]Digest, error)
	Hashes(ctx context.Context, ns dag.NSID, leaves [][2]byte) ([]dag.Hash, error)
	Get(ctx context.Context, ns dag.NSID, hashes []dag.Hash) ([][]byte, error)
	// Put offers records; the peer ingests them (and does not gossip them
	// when fromSync is set: they are old news to the grid).
	Put(ctx context.Context, ns dag.NSID, raws [][]byte, fromSync bool) (PutResult, error)
}

// WaitPeer is a Peer that can also long-poll for a change: Wait returns
// the peer's root of ns once it differs from seen, or when timeout ends
// (then it may equal seen). HTTPPeer and DB.AsPeer are ones; package
// namespace/peertest is the suite both pass.
type WaitPeer interface {
	Peer
	Wait(ctx context.Context, ns dag.NSID, seen Digest, timeout time.Duration) (Digest, error)
}

// PutResult is what a peer says of records offered to it.
type PutResult struct {
	Admitted int      `json:"admitted"`
	Rejected []string `json:"rejected,omitempty"`
	Missing  int      `json:"missing,omitempty"`
}

// SyncStats counts what one sync exchanged.
type SyncStats struct {
	Rounds   int // requests made
	Pulled   int // records we admitted
	Pushed   int // records the peer admitted
	Rejected int // records we refused
}

// batch is how many records one request carries.
const batch = 1024

// Sync is one anti-entropy exchange of namespace ns with a peer, as
// BaseFS §3.2.2: compare the roots of the two Merkle trees; where they
// differ, compare the 256 ranges below, then the 256 leaves below each
// differing range; list the records of differing leaves; pull what we
// lack, push what the peer lacks. Only what differs crosses the link.
// push false makes it a pull only (a client that only reads).
func Sync(ctx context.Context, db *DB, ns dag.NSID, p Peer, push bool) (SyncStats, error) {
	var st SyncStats
	remote, err := p.Root(ctx, ns)
	st.Rounds++
	if err != nil {
		return st, err
	}
	if remote == db.Root(ns) {
		return st, nil
	}
	rtop, err := p.Digests(ctx, ns, [][]byte{nil})
	st.Rounds++
	if err != nil {
		return st, err
	}
	ltop, _ := db.Digests(ns, nil)
	var diff [][]byte
	for i := range 256 {
		if rtop[0][i] != ltop[i] {
			diff = append(diff, []byte{byte(i)})
		}
	}
	var leaves [][2]byte
	for len(diff) > 0 {
		n := min(len(diff), 64)
		rds, err := p.Digests(ctx, ns, diff[:n])
		st.Rounds++
		if err != nil {
			return st, err
		}
		if len(rds) != n {
			return st, fmt.Errorf("namespace: peer answered %d digests for %d ranges", len(rds), n)
		}
		for i, pre := range diff[:n] {
			lds, _ := db.Digests(ns, pre)
			for j := range 256 {
				if rds[i][j] != lds[j] {
					leaves = append(leaves, [2]byte{pre[0], byte(j)})
				}
			}
		}
		diff = diff[n:]
	}
	var theirs []dag.Hash
	for rest := leaves; len(rest) > 0; {
		n := min(len(rest), 4096)
		hs, err := p.Hashes(ctx, ns, rest[:n])
		st.Rounds++
		if err != nil {
			return st, err
		}
		theirs = append(theirs, hs...)
		rest = rest[n:]
	}
	ours := db.Hashes(ns, leaves)
	cmpH := func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) }
	slices.SortFunc(theirs, cmpH)
	slices.SortFunc(ours, cmpH)
	want, give := diffSorted(theirs, ours), diffSorted(ours, theirs)
	// Pull, then fetch what the pulled records refer to and we lack.
	for round := 0; len(want) > 0 && round < 16; round++ {
		var missing []dag.Hash
		for len(want) > 0 {
			n := min(len(want), batch)
			raws, err := p.Get(ctx, ns, want[:n])
			st.Rounds++
			if err != nil {
				return st, err
			}
			res, err := db.Ingest(ns, raws)
			if err != nil {
				return st, err
			}
			st.Pulled += len(res.Admitted)
			st.Rejected += len(res.Rejected)
			missing = append(missing, res.Missing...)
			want = want[n:]
		}
		want = dedupe(missing)
	}
	if !push {
		return st, nil
	}
	for len(give) > 0 {
		n := min(len(give), batch)
		res, err := p.Put(ctx, ns, db.Get(ns, give[:n]), true)
		st.Rounds++
		if err != nil {
			return st, err
		}
		st.Pushed += res.Admitted
		give = give[n:]
	}
	return st, nil
}

// diffSorted returns the hashes in a that are not in b (both sorted).
func diffSorted(a, b []dag.Hash) []dag.Hash {
	var out []dag.Hash
	j := 0
	for _, h := range a {
		for j < len(b) && bytes.Compare(b[j][:], h[:]) < 0 {
			j++
		}
		if j < len(b) && b[j] == h {
			continue
		}
		out = append(out, h)
	}
	return out
}

func dedupe(hs []dag.Hash) []dag.Hash {
	slices.SortFunc(hs, func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(hs)
}

// AsPeer makes a DB a Peer (tests, and a replica syncing two local DBs).
func (d *DB) AsPeer() WaitPeer { return localPeer{d} }

type localPeer struct{ d *DB }

func (l localPeer) Namespaces(context.Context) ([]dag.NSID, error) { return l.d.Namespaces(), nil }
func (l localPeer) Root(_ context.Context, ns dag.NSID) (Digest, error) {
	return l.d.Root(ns), nil
}
func (l localPeer) Digests(_ context.Context, ns dag.NSID, prefixes [][]byte) ([][256]Digest, error) {
	out := make([][256]Digest, len(prefixes))
	for i, p := range prefixes {
		var err error
		if out[i], err = l.d.Digests(ns, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Hashes and Get answer what is asked twice once, as the HTTP API does.
func (l localPeer) Hashes(_ context.Context, ns dag.NSID, leaves [][2]byte) ([]dag.Hash, error) {
	return l.d.Hashes(ns, firsts(leaves)), nil
}
func (l localPeer) Get(_ context.Context, ns dag.NSID, hs []dag.Hash) ([][]byte, error) {
	return l.d.Get(ns, firsts(hs)), nil
}

// firsts returns xs without repeats, in the order of their first
// occurrence.
func firsts[T comparable](xs []T) []T {
	seen := make(map[T]bool, len(xs))
	out := make([]T, 0, len(xs))
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
func (l localPeer) Put(_ context.Context, ns dag.NSID, raws [][]byte, _ bool) (PutResult, error) {
	res, err := l.d.Ingest(ns, raws)
	return putResult(res), err
}

func (l localPeer) Wait(ctx context.Context, ns dag.NSID, seen Digest, timeout time.Duration) (Digest, error) {
	return l.d.Wait(ctx, ns, seen, timeout), nil
}

func putResult(res Result) PutResult {
	out := PutResult{Admitted: len(res.Admitted), Missing: len(res.Missing)}
	for _, e := range res.Rejected {
		out.Rejected = append(out.Rejected, e.Error())
	}
	return out
}
