package cfs

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// LogEntry is one version of a path, as Log lists it.
type LogEntry struct {
	Hash    dag.Hash
	Time    dag.HLC
	Action  dag.Action
	By      string // "root", the grant's label, or the key's fingerprint
	Detail  string // size, link target, mode: what the action did
	Current bool   // the version the view shows
}

// Log lists every version of p, oldest first.
func (f *FS) Log(p string) ([]LogEntry, error) {
	p = namespace.Clean(p)
	vs, err := f.db.History(f.cap.NS, p)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: %s has no history", namespace.ErrNotFound, p)
	}
	var cur dag.Hash
	if info, err := f.db.Stat(f.cap.NS, p); err == nil {
		cur = info.Current
	}
	grants, _ := f.db.Grants(f.cap.NS)
	out := make([]LogEntry, 0, len(vs))
	for _, v := range vs {
		le := LogEntry{Hash: v.Hash, Time: v.Entry.Time, Action: v.Entry.Action, Current: v.Hash == cur,
			By: signerName(grants, v.Entry.Signer)}
		switch v.Entry.Action {
		case dag.Write:
			le.Detail = fmt.Sprintf("%d bytes", v.Entry.Size)
			if !v.Complete {
				le.Detail += " (incomplete)"
			}
		case dag.Revert, dag.Link:
			var t dag.Hash
			copy(t[:], v.Content)
			le.Detail = "-> " + t.Short()
		case dag.Slink:
			le.Detail = "-> " + string(v.Content)
		case dag.Mode:
			le.Detail = "-x"
			if len(v.Content) > 0 && v.Content[0] == 1 {
				le.Detail = "+x"
			}
		}
		out = append(out, le)
	}
	return out, nil
}

// signerName names the key behind an entry's signer.
func signerName(grants []namespace.Grant, signer dag.Hash) string {
	if signer.IsZero() {
		return "root"
	}
	for _, g := range grants {
		if g.Hash == signer {
			if g.Label != "" {
				return g.Label
			}
			return dag.Fingerprint(g.Key)
		}
	}
	return signer.Short()
}

// Revert restores the version of p whose hash starts with entry (at least
// 6 hex digits, as Log shows them).
func (f *FS) Revert(ctx context.Context, p, entry string) error {
	p = namespace.Clean(p)
	vs, err := f.db.History(f.cap.NS, p)
	if err != nil {
		return err
	}
	entry = strings.ToLower(entry)
	var target *namespace.Version
	if len(entry) >= 6 {
		for _, v := range vs {
			if strings.HasPrefix(v.Hash.String(), entry) {
				if target != nil {
					return fmt.Errorf("entry %q is ambiguous: give more digits", entry)
				}
				target = v
			}
		}
	}
	if target == nil {
		return fmt.Errorf("%s has no entry %q (at least 6 hex digits; see 'quilt cfs log %s')", p, entry, p)
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Pointer(dag.Revert, a, h, n, target.Hash), nil
	})
}

// Grant lets the key named by key (a public key, or the name of a key of
// this Home) write under directory dir, and returns it. The label names
// the key in keys and log (default: its fingerprint).
func (f *FS) Grant(ctx context.Context, key, dir, label string) (ed25519.PublicKey, error) {
	pub, err := f.opt.Home.ParsePub(key)
	if err != nil {
		return nil, err
	}
	dir = namespace.Clean(dir)
	anchor, err := f.dirEntry(dir)
	if err != nil {
		return nil, err
	}
	w, err := f.writer(ctx, dir)
	if err != nil {
		return nil, err
	}
	if label == "" {
		label = dag.Fingerprint(pub)
	}
	return pub, f.commit(ctx, w.GrantKey(anchor, label, pub).Encode())
}

// Revoke withdraws every live grant of the key named by key (a public
// key, a key of this Home, or a granted key's fingerprint or label) and
// returns how many. What the key wrote, and what keys it granted wrote,
// that the view shows now is acknowledged first (BaseFS's ack), so it
// stays; the key's later entries, and any not acknowledged, are purged by
// every replica. A directory that cannot be listed aborts the revoke:
// acknowledging less than is shown would let the purge drop visible
// entries.
func (f *FS) Revoke(ctx context.Context, key string) (int, error) {
	grants, err := f.db.Grants(f.cap.NS)
	if err != nil {
		return 0, fmt.Errorf("revoke: reading the grants: %w", err)
	}
	pub, err := f.opt.Home.ParsePub(key)
	if err != nil {
		for _, g := range grants {
			if dag.Fingerprint(g.Key) == key || g.Label == key {
				pub = g.Key
			}
		}
		if pub == nil {
			return 0, err
		}
	}
	// What each signer wrote that the view shows: the current entry of
	// every path, and the entry holding its data.
	shown := map[dag.Hash][]dag.Hash{}
	var walk func(dir string) error
	walk = func(dir string) error {
		items, err := revokeList(f.db, f.cap.NS, dir)
		if err != nil {
			return fmt.Errorf("revoke: listing %s: %w (nothing revoked)", dir, err)
		}
		for _, it := range items {
			for _, h := range []dag.Hash{it.Current, it.Data} {
				if v, err := f.db.Version(f.cap.NS, h); err == nil {
					shown[v.Entry.Signer] = append(shown[v.Entry.Signer], h)
				}
			}
			if it.Type == dag.Dir {
				if err := walk(it.Path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return 0, err
	}
	entry := func(h dag.Hash) *dag.Entry {
		raws := f.db.Get(f.cap.NS, []dag.Hash{h})
		if len(raws) == 0 {
			return nil
		}
		r, err := dag.Decode(raws[0])
		if err != nil {
			return nil
		}
		return r.Entry
	}
	n := 0
	for _, g := range grants {
		if g.Revoked || !bytes.Equal(g.Key, pub) {
			continue
		}
		ge := entry(g.Hash)
		if ge == nil {
			continue
		}
		// The grant and the grants its key made, transitively: what they
		// signed and the view shows is acknowledged.
		chain := map[dag.Hash]bool{g.Hash: true}
		for grew := true; grew; {
			grew = false
			for _, sub := range grants {
				if e := entry(sub.Hash); e != nil && chain[e.Signer] && !chain[sub.Hash] {
					chain[sub.Hash], grew = true, true
				}
			}
		}
		var ack []dag.Hash
		for s := range chain {
			ack = append(ack, shown[s]...)
		}
		slices.SortFunc(ack, func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) })
		ack = slices.Compact(ack)
		// The revoker needs a grant over the granted directory (or the
		// root key).
		w, err := f.writer(ctx, path.Dir(g.Dir+"/x"))
		if err != nil {
			return n, err
		}
		// Acknowledgements go first (63 parents per entry), then the
		// revoke: a node must see them before it purges.
		var recs [][]byte
		const per = dag.MaxParents - 1
		anchor := ge.Anchor()
		for len(ack) > per {
			recs = append(recs, w.Ack(anchor, ack[:per]).Encode())
			ack = ack[per:]
		}
		recs = append(recs, w.RevokeGrant(anchor, g.Hash, ack).Encode())
		if err := f.commit(ctx, recs...); err != nil {
			return n, err
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("key %s has no grant to revoke", dag.Fingerprint(pub))
	}
	return n, nil
}

// revokeList lists a directory for Revoke's walk; a test replaces it to
// make the walk fail part way.
var revokeList = func(db *namespace.DB, ns dag.NSID, dir string) ([]namespace.Info, error) {
	return db.List(ns, dir, "", 0)
}

// KeyInfo is a key that may write, or could.
type KeyInfo struct {
	Fingerprint string
	Label       string // "root" for the root key
	Dir         string // where it may write
	State       string // "root key", "granted" or "revoked"
	Key         ed25519.PublicKey
}

// Keys lists the root key, then every grant.
func (f *FS) Keys() ([]KeyInfo, error) {
	grants, err := f.db.Grants(f.cap.NS)
	if err != nil {
		return nil, err
	}
	root := f.cap.NS.PublicKey()
	out := []KeyInfo{{Fingerprint: dag.Fingerprint(root), Label: "root", Dir: "/", State: "root key", Key: root}}
	for _, g := range grants {
		state := "granted"
		if g.Revoked {
			state = "revoked"
		}
		out = append(out, KeyInfo{Fingerprint: dag.Fingerprint(g.Key), Label: g.Label, Dir: g.Dir, State: state, Key: g.Key})
	}
	return out, nil
}

// MemberInfo is a node of the grid and how its copy of the namespace
// compares with this replica's.
type MemberInfo struct {
	member.Member
	// Records is how many records the node holds (-1: not asked or no
	// answer).
	Records int64
	// Log is "same as here", "differs", "no answer", or "" for a node
	// that is not alive.
	Log string
}

// Members lists the grid's nodes, asking each live one for its root of
// the namespace (5 s each at most).
func (f *FS) Members(ctx context.Context) ([]MemberInfo, error) {
	ms, err := f.opt.Nodes.Members(ctx, 0)
	if err != nil {
		return nil, err
	}
	mine := f.db.Root(f.cap.NS)
	out := make([]MemberInfo, 0, len(ms))
	for _, m := range ms {
		mi := MemberInfo{Member: m, Records: -1}
		if m.State == member.Alive {
			p := namespace.HTTPPeer{Client: f.opt.Nodes.HTTP(), Base: "https://" + m.ID}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if r, err := p.Root(cctx, f.cap.NS); err == nil {
				mi.Records = int64(r.Count)
				mi.Log = "same as here"
				if r != mine {
					mi.Log = "differs"
				}
			} else {
				mi.Log = "no answer"
			}
			cancel()
		}
		out = append(out, mi)
	}
	return out, nil
}
