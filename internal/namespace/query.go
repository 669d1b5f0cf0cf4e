package namespace

import (
	"bytes"
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/dag"
	bolt "go.etcd.io/bbolt"
)

// Info is what the view shows of one path.
type Info struct {
	Path    string
	Name    string
	Type    dag.Type
	Exec    bool
	Size    uint64
	Time    dag.HLC
	Current dag.Hash // the entry that decided the path
	Data    dag.Hash // for a file: the write whose content it shows; for a directory: its mkdir (what entries under it hang from)
	Target  string   // for a symlink
}

// view runs f on namespace ns's view in a read transaction.
func (d *DB) view(ns dag.NSID, f func(l *txLog) error) error {
	return d.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(ns[:]) == nil {
			return fmt.Errorf("%w %s", ErrUnknown, ns)
		}
		l := newTxLog(tx, ns)
		if l.key == nil {
			return ErrNoReadKey
		}
		return f(l)
	})
}

// Clean makes p an absolute, clean path.
func Clean(p string) string { return path.Clean("/" + p) }

// lookup reads a view row and checks every directory above it shows.
func (l *txLog) lookup(p string) (Info, bool) {
	p = l.norm(p)
	view := l.b.Bucket(bView)
	r, ok := decodeState(view.Get(viewKey(p, l.rules)))
	if !ok {
		return Info{}, false
	}
	for d := dag.ParentDir(p, l.rules); d != ""; d = dag.ParentDir(d, l.rules) {
		dr, ok := decodeState(view.Get(viewKey(d, l.rules)))
		if !ok || dr.Type != dag.Dir {
			return Info{}, false
		}
	}
	name := ""
	if p != "/" {
		name = baseName(p, dag.ParentDir(p, l.rules))
	}
	return Info{Path: p, Name: name, Type: r.Type, Exec: r.Exec, Size: r.Size, Time: r.Time,
		Current: r.Current, Data: r.Data, Target: r.Target}, true
}

// Stat returns what the view shows at p.
func (d *DB) Stat(ns dag.NSID, p string) (Info, error) {
	var info Info
	err := d.view(ns, func(l *txLog) error {
		var ok bool
		if info, ok = l.lookup(p); !ok {
			return fmt.Errorf("%w: %s", ErrNotFound, Clean(p))
		}
		return nil
	})
	return info, err
}

// List returns up to limit entries of directory dir whose names sort after
// after (all if limit <= 0), in name order: one index scan.
func (d *DB) List(ns dag.NSID, dir string, after string, limit int) ([]Info, error) {
	var out []Info
	err := d.Scan(ns, dir, after, func(it Info) bool {
		if it.Name == after {
			return true
		}
		out = append(out, it)
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// Scan calls f for the entries of directory dir whose names sort at or
// after from, in byte order of names, until f returns false.
// In an object namespace dir is "/" and the names are the keys, so a key
// prefix is a range: start at the prefix, stop when names leave it.
func (d *DB) Scan(ns dag.NSID, dir string, from string, f func(Info) bool) error {
	return d.view(ns, func(l *txLog) error {
		dir = l.norm(dir)
		info, ok := l.lookup(dir)
		if !ok {
			return fmt.Errorf("%w: %s", ErrNotFound, dir)
		}
		if info.Type != dag.Dir {
			f(info)
			return nil
		}
		prefix := append([]byte(strings.TrimSuffix(dir, "/")), 0)
		c := l.b.Bucket(bView).Cursor()
		k, v := c.Seek(append(slices.Clone(prefix), from...))
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			name := string(k[len(prefix):])
			if name == "" {
				continue
			}
			r, ok := decodeState(v)
			if !ok {
				continue
			}
			p, _ := dag.JoinName(dir, name, l.rules)
			if !f(Info{Path: p, Name: name, Type: r.Type, Exec: r.Exec,
				Size: r.Size, Time: r.Time, Current: r.Current, Data: r.Data, Target: r.Target}) {
				break
			}
		}
		return nil
	})
}

// Version is one entry of a path's history.
type Version = dag.Version

// History lists every version of p, oldest first (by time, then hash).
func (d *DB) History(ns dag.NSID, p string) ([]*Version, error) {
	var out []*Version
	err := d.view(ns, func(l *txLog) error {
		out = l.versions(l.norm(p))
		slices.SortFunc(out, func(a, b *Version) int {
			if c := cmp.Compare(a.Entry.Time, b.Entry.Time); c != 0 {
				return c
			}
			return bytes.Compare(a.Hash[:], b.Hash[:])
		})
		return nil
	})
	return out, err
}

// Heads lists the versions of p that no other version supersedes: what a
// new version of p must name as its parents to replace them all.
func (d *DB) Heads(ns dag.NSID, p string) ([]dag.Hash, error) {
	var out []dag.Hash
	err := d.view(ns, func(l *txLog) error {
		vs := l.versions(l.norm(p))
		sup := map[dag.Hash]bool{}
		for _, v := range vs {
			for _, s := range v.Entry.Supersedes() {
				sup[s] = true
			}
		}
		for _, v := range vs {
			if !sup[v.Hash] {
				out = append(out, v.Hash)
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) })
	return out, err
}

// Content returns a file's content: inline or reassembled from its blocks.
// For content in a grid object it returns the object's read capability and
// isObject.
func (d *DB) Content(ns dag.NSID, data dag.Hash) (content []byte, isObject bool, err error) {
	err = d.view(ns, func(l *txLog) error {
		v := l.version(data)
		if v == nil {
			return fmt.Errorf("%w: entry %s", ErrNotFound, data.Short())
		}
		switch v.Entry.Kind {
		case dag.Inline:
			content = v.Content
		case dag.Object:
			content, isObject = v.Content, true
		case dag.Blocks:
			for h := v.Entry.RefHash(); !h.IsZero(); {
				b, ok := l.block(h)
				if !ok {
					return fmt.Errorf("%w: a block of %s has not arrived", ErrNotFound, v.Path)
				}
				_, part, err := l.key.Open(b.Sealed)
				if err != nil {
					return err
				}
				content = append(content, part...)
				h = b.Next
			}
		}
		return nil
	})
	return content, isObject, err
}

// Version returns one entry, opened.
func (d *DB) Version(ns dag.NSID, h dag.Hash) (*Version, error) {
	var v *Version
	err := d.view(ns, func(l *txLog) error {
		if v = l.version(h); v == nil {
			return fmt.Errorf("%w: entry %s", ErrNotFound, h.Short())
		}
		return nil
	})
	return v, err
}

// Grant is a key granted write permission.
type Grant struct {
	Hash    dag.Hash // the grant entry (what the key signs as)
	Label   string
	Key     []byte // the public key
	Dir     string // the directory it may write under
	Revoked bool
}

// Grants lists every grant in the namespace.
func (d *DB) Grants(ns dag.NSID) ([]Grant, error) {
	var out []Grant
	err := d.view(ns, func(l *txLog) error {
		c := l.b.Bucket(bRec).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			e, ok := l.Entry(dag.Hash(k))
			if !ok || e.Action != dag.Grant {
				continue
			}
			label, _, _ := l.key.Open(e.Sealed)
			dir := l.b.Bucket(bPath).Get(e.Anchor().Bytes())
			out = append(out, Grant{Hash: dag.Hash(k), Label: label, Key: e.Ref, Dir: string(dir),
				Revoked: len(l.Revokes(dag.Hash(k))) > 0})
		}
		return nil
	})
	return out, err
}

// Count is the number of records (entries and blocks) in ns.
func (d *DB) Count(ns dag.NSID) uint64 { return d.Root(ns).Count }
