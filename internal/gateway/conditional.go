package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Condition is what a conditional write requires of the key's current
// version (S3's If-None-Match and If-Match on PUT). The check and the
// commit of the new version are one step at this gateway: writes of one
// key take its lock around them (never while the bytes upload). Two
// gateways racing can both pass their checks: the namespace log keeps
// the last writer.
type Condition struct {
	// IfNoneMatch: create only; the key must not exist.
	IfNoneMatch bool
	// IfMatch, if set, is the ETag (no quotes) the current version must
	// have; a missing key is ErrNoKey.
	IfMatch string
}

func (c Condition) set() bool { return c.IfNoneMatch || c.IfMatch != "" }

// ErrPrecondition means a conditional write's condition did not hold:
// nothing was written.
var ErrPrecondition = errors.New("gateway: precondition failed")

// keyLocks are the per-key locks of the gateway's writes of objects.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int
}

// lock takes the lock of one key (by bucket namespace and path) and
// returns its release.
func (l *keyLocks) lock(ns dag.NSID, p string) func() {
	k := string(ns[:]) + p
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	e := l.m[k]
	if e == nil {
		e = &keyLock{}
		l.m[k] = e
	}
	e.users++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.users--; e.users == 0 {
			delete(l.m, k)
		}
		l.mu.Unlock()
	}
}

// check tells whether cond holds for path p of b as this gateway's
// replica has it.
func (g *Gateway) check(b *bucket, p string, cond Condition) error {
	if !cond.set() {
		return nil
	}
	info, _, found, err := g.current(b, p)
	if err != nil {
		return err
	}
	switch {
	case cond.IfNoneMatch && found:
		return ErrPrecondition
	case cond.IfMatch != "" && !found:
		return ErrNoKey
	case cond.IfMatch != "" && cond.IfMatch != "*" && info.ETag != cond.IfMatch:
		return ErrPrecondition
	}
	return nil
}

// current is the object at path p of b, and its inline bytes, if there
// is one.
func (g *Gateway) current(b *bucket, p string) (ObjectInfo, []byte, bool, error) {
	st, err := g.db.Stat(b.ns, p)
	if errors.Is(err, namespace.ErrNotFound) {
		return ObjectInfo{}, nil, false, nil
	}
	if err != nil {
		return ObjectInfo{}, nil, false, err
	}
	if st.Type != dag.File {
		return ObjectInfo{}, nil, false, nil
	}
	raw, _, err := g.db.Content(b.ns, st.Data)
	if err != nil {
		return ObjectInfo{}, nil, false, err
	}
	info, inline, err := decodeRecord(raw)
	return info, inline, err == nil, err
}

// SetTags replaces an object's tags (none: removes them), keeping its
// bytes, ETag and time: the record is written again, under the key's
// lock, as the current version has it. A missing key is ErrNoKey.
func (g *Gateway) SetTags(ctx context.Context, bucketName, key string, tags map[string]string) (ObjectInfo, error) {
	return g.rewriteCurrent(ctx, bucketName, key, func(info *ObjectInfo) { info.Tags = tags })
}

// rewriteCurrent writes the current version's record of key again, as
// change leaves it, keeping its bytes: under the key's lock, as SetTags
// and SetACL need. A missing key is ErrNoKey.
func (g *Gateway) rewriteCurrent(ctx context.Context, bucketName, key string, change func(*ObjectInfo)) (ObjectInfo, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return ObjectInfo{}, err
	}
	p, err := keyPath(key)
	if err != nil {
		return ObjectInfo{}, ErrNoKey
	}
	unlock := g.keys.lock(b.ns, p)
	defer unlock()
	info, inline, found, err := g.current(b, p)
	if err != nil {
		return ObjectInfo{}, err
	}
	if !found {
		return ObjectInfo{}, ErrNoKey
	}
	change(&info)
	rec := encodeRecord(info, inline)
	var entry dag.Hash
	err = g.write(ctx, b, p, func(w *dag.Writer, a dag.Hash, heads []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		e, blocks := w.FileInline(a, heads, n, rec, dag.MaxSealed)
		entry = e.Hash()
		return e, blocks
	})
	info.Key, info.Version = key, entry
	return info, err
}

// writeObject commits an object record (info and inline bytes) for path
// p of b if cond holds, checking and committing under the key's lock; on
// a versioned bucket the version it supersedes is kept (versions.go) and
// info gets its version ID. It returns the entry and the grid objects of
// the version it replaced (for leases.go).
func (g *Gateway) writeObject(ctx context.Context, b *bucket, p string, cond Condition, info *ObjectInfo, inline []byte) (entry dag.Hash, old []string, err error) {
	unlock := g.keys.lock(b.ns, p)
	defer unlock()
	if err := g.check(b, p, cond); err != nil {
		return entry, nil, err
	}
	g.applyDefaultLock(b, info) // objectlock.go
	if mode := g.versioningOf(b); mode != "" {
		return g.writeVersioned(ctx, b, p, mode, info, inline)
	}
	info.VersionID = ""
	rec := encodeRecord(*info, inline)
	old = g.capsAt(b, p) // the grid objects the write replaces (leases.go)
	err = g.write(ctx, b, p, func(w *dag.Writer, a dag.Hash, heads []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		e, blocks := w.FileInline(a, heads, n, rec, dag.MaxSealed)
		entry = e.Hash()
		return e, blocks
	})
	return entry, old, err
}
