package namespace

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/dag"
	bolt "go.etcd.io/bbolt"
)

// txLog is one namespace inside one bbolt transaction: a dag.Store, plus
// the view maintenance for the paths its changes touched.
type txLog struct {
	ns    dag.NSID
	b     *bolt.Bucket
	cache map[dag.Hash]*dag.Entry
	dirty map[string]bool // paths whose view must be recomputed
	key   *dag.ReadKey
	rules dag.Rules
	// level1 is set once the namespace's 256 first-level digests are
	// known to be kept (see digest).
	level1 bool
}

var _ dag.Store = (*txLog)(nil)

func newTxLog(tx *bolt.Tx, ns dag.NSID) *txLog {
	l := &txLog{ns: ns, b: tx.Bucket(ns[:]), cache: map[dag.Hash]*dag.Entry{}, dirty: map[string]bool{}}
	if k := l.b.Bucket(bMeta).Get([]byte("readkey")); len(k) == 32 {
		l.key = new(dag.ReadKey)
		copy(l.key[:], k)
		l.rules = dag.Rules(l.b.Bucket(bMeta).Get([]byte("rules"))[0])
	}
	return l
}

func pair(a, b dag.Hash) []byte { return append(append(make([]byte, 0, 64), a[:]...), b[:]...) }

// scan lists the second halves of the pair keys that start with a.
func (l *txLog) scan(bucket []byte, a dag.Hash) []dag.Hash {
	var out []dag.Hash
	c := l.b.Bucket(bucket).Cursor()
	for k, _ := c.Seek(a[:]); k != nil && bytes.HasPrefix(k, a[:]); k, _ = c.Next() {
		out = append(out, dag.Hash(k[32:]))
	}
	return out
}

func (l *txLog) Entry(h dag.Hash) (*dag.Entry, bool) {
	if e, ok := l.cache[h]; ok {
		return e, e != nil
	}
	raw := l.b.Bucket(bRec).Get(h[:])
	if raw == nil {
		return nil, false
	}
	r, err := dag.Decode(slices.Clone(raw))
	if err != nil || r.Entry == nil {
		return nil, false
	}
	l.cache[h] = r.Entry
	return r.Entry, true
}

func (l *txLog) block(h dag.Hash) (*dag.Block, bool) {
	raw := l.b.Bucket(bRec).Get(h[:])
	if raw == nil {
		return nil, false
	}
	r, err := dag.Decode(slices.Clone(raw))
	return r.Block, err == nil && r.Block != nil
}

func (l *txLog) Referrers(h dag.Hash) []dag.Hash { return l.scan(bRef, h) }
func (l *txLog) Revokes(g dag.Hash) []dag.Hash   { return l.scan(bRev, g) }
func (l *txLog) SignedBy(g dag.Hash) []dag.Hash  { return l.scan(bSig, g) }
func (l *txLog) Has(h dag.Hash) bool             { return l.b.Bucket(bRec).Get(h[:]) != nil }

func (l *txLog) BlockWanted(h dag.Hash) bool { return l.b.Bucket(bWant).Get(h[:]) != nil }

func (l *txLog) want(h dag.Hash, delta int) uint64 {
	w := l.b.Bucket(bWant)
	n := uint64(0)
	if v := w.Get(h[:]); v != nil {
		n = binary.BigEndian.Uint64(v)
	}
	n = uint64(int64(n) + int64(delta))
	if n == 0 {
		w.Delete(h[:])
	} else {
		w.Put(h[:], binary.BigEndian.AppendUint64(nil, n))
	}
	return n
}

// digest adds or removes h from its Merkle leaf (2-byte prefix), its
// first-level range (1-byte prefix) and the root. The first level is kept
// so that a sync's first question costs 256 reads, not a scan of every
// leaf; a log made before it was kept gets it built on its first change.
func (l *txLog) digest(h dag.Hash, sign int) error {
	dig := l.b.Bucket(bDig)
	if err := l.keepLevel1(dig); err != nil {
		return err
	}
	for _, k := range [][]byte{h[:2], h[:1]} {
		g := decodeDigest(dig.Get(k))
		g.add(h, sign)
		if err := dig.Put(slices.Clone(k), encodeDigest(g)); err != nil {
			return err
		}
	}
	meta := l.b.Bucket(bMeta)
	root := decodeDigest(meta.Get([]byte("root")))
	root.add(h, sign)
	return meta.Put([]byte("root"), encodeDigest(root))
}

// metaLevel1 in a namespace's meta bucket says its dig bucket holds the
// first-level digests (1-byte keys) beside the leaves (2-byte keys).
var metaLevel1 = []byte("dig1")

// keepLevel1 builds the first-level digests from the leaves, once.
func (l *txLog) keepLevel1(dig *bolt.Bucket) error {
	if l.level1 {
		return nil
	}
	meta := l.b.Bucket(bMeta)
	if meta.Get(metaLevel1) == nil {
		var lv [256]Digest
		c := dig.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) == 2 {
				lv[k[0]].merge(decodeDigest(v))
			}
		}
		for i, g := range lv {
			if err := dig.Put([]byte{byte(i)}, encodeDigest(g)); err != nil {
				return err
			}
		}
		if err := meta.Put(metaLevel1, []byte{1}); err != nil {
			return err
		}
	}
	l.level1 = true
	return nil
}

func (l *txLog) Admit(r dag.Record) error {
	if err := l.b.Bucket(bRec).Put(r.Hash[:], r.Raw); err != nil {
		return err
	}
	if err := l.digest(r.Hash, 1); err != nil {
		return err
	}
	if b := r.Block; b != nil {
		owners := l.scan(bOwn, r.Hash)
		if !b.Next.IsZero() {
			l.want(b.Next, 1)
		}
		for _, o := range owners {
			if !b.Next.IsZero() {
				l.b.Bucket(bOwn).Put(pair(b.Next, o), nil)
			}
			l.touch(o)
		}
		return nil
	}
	e := r.Entry
	l.cache[r.Hash] = e
	for _, p := range e.Parents {
		l.b.Bucket(bRef).Put(pair(p, r.Hash), nil)
	}
	if e.Action == dag.Revoke {
		l.b.Bucket(bRev).Put(pair(e.RefHash(), r.Hash), nil)
	}
	l.b.Bucket(bSig).Put(pair(e.Signer, r.Hash), nil)
	if e.Kind == dag.Blocks {
		first := e.RefHash()
		l.want(first, 1)
		// Every block of the chain already here gets this owner too.
		for h, n := first, 0; !h.IsZero() && n < 1<<20; n++ {
			l.b.Bucket(bOwn).Put(pair(h, r.Hash), nil)
			blk, ok := l.block(h)
			if !ok {
				break
			}
			h = blk.Next
		}
	}
	if l.key != nil {
		l.place(r.Hash, e)
	}
	return nil
}

func (l *txLog) Remove(hs []dag.Hash) error {
	for _, h := range hs {
		e, ok := l.Entry(h)
		if !ok {
			continue
		}
		l.touch(h)
		for _, r := range l.Referrers(h) {
			l.touch(r) // a revert or link that pointed at h
		}
		l.b.Bucket(bRec).Delete(h[:])
		l.digest(h, -1)
		l.cache[h] = nil
		for _, p := range e.Parents {
			l.b.Bucket(bRef).Delete(pair(p, h))
		}
		if e.Action == dag.Revoke {
			l.b.Bucket(bRev).Delete(pair(e.RefHash(), h))
		}
		l.b.Bucket(bSig).Delete(pair(e.Signer, h))
		if e.Kind == dag.Blocks {
			// Drop the chain when nothing else refers to it.
			for b := e.RefHash(); !b.IsZero(); {
				if l.want(b, -1) > 0 {
					break
				}
				blk, ok := l.block(b)
				if !ok {
					break
				}
				l.b.Bucket(bRec).Delete(b[:])
				for _, o := range l.scan(bOwn, b) {
					l.b.Bucket(bOwn).Delete(pair(b, o))
				}
				l.digest(b, -1)
				b = blk.Next
			}
		}
		if p := l.b.Bucket(bPath).Get(h[:]); p != nil {
			l.b.Bucket(bHist).Delete(histKey(string(p), h))
		}
	}
	return nil
}

// --- the materialised view (replicas with the read key) ---

func histKey(p string, h dag.Hash) []byte { return append(append([]byte(p), 0), h[:]...) }

// viewKey is dir \0 name, so a directory's children are adjacent and in
// byte order of their names; the root is the key "\0" alone.
func viewKey(p string, rules dag.Rules) []byte {
	if p == "/" {
		return []byte{0}
	}
	dir := dag.ParentDir(p, rules)
	return append(append([]byte(strings.TrimSuffix(dir, "/")), 0), baseName(p, dir)...)
}

// baseName is the last name of p, in directory dir.
func baseName(p, dir string) string {
	if dir == "/" {
		return p[1:]
	}
	return p[len(dir)+1:]
}

// norm is how a path given by a caller is looked up: cleaned in a config
// namespace; as given (a key may hold "//" or "..") in an object one.
func (l *txLog) norm(p string) string {
	if l.rules == dag.ObjectRules {
		if !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		return p
	}
	return Clean(p)
}

// place records the path of a newly admitted entry and marks it dirty.
func (l *txLog) place(h dag.Hash, e *dag.Entry) {
	name, _, err := l.key.Open(e.Sealed)
	if err != nil {
		return // not sealed under our key: not part of our view
	}
	var p string
	switch {
	case e.IsRoot():
		p = "/"
	case e.Action == dag.Grant || e.Action == dag.Revoke || e.Action == dag.Ack:
		return
	default:
		dir := l.b.Bucket(bPath).Get(e.Anchor().Bytes())
		if dir == nil {
			return
		}
		var ok bool
		if p, ok = dag.JoinName(string(dir), name, l.rules); !ok {
			return
		}
	}
	l.b.Bucket(bPath).Put(h[:], []byte(p))
	l.b.Bucket(bHist).Put(histKey(p, h), nil)
	l.dirty[p] = true
}

// touch marks dirty the path of an entry.
func (l *txLog) touch(h dag.Hash) {
	if p := l.b.Bucket(bPath).Get(h[:]); p != nil {
		l.dirty[string(p)] = true
	}
}

// version opens an admitted entry as a dag.Version.
func (l *txLog) version(h dag.Hash) *dag.Version {
	e, ok := l.Entry(h)
	if !ok || l.key == nil {
		return nil
	}
	p := l.b.Bucket(bPath).Get(h[:])
	if p == nil {
		return nil
	}
	_, content, err := l.key.Open(e.Sealed)
	if err != nil {
		return nil
	}
	c := dag.Checker{NS: l.ns, Index: l}
	return &dag.Version{Hash: h, Entry: e, Path: string(p), Content: content,
		Authority: c.Authority(e.Signer), SignerKey: c.SignerKey(e.Signer), Complete: l.complete(e)}
}

func (l *txLog) complete(e *dag.Entry) bool {
	if e.Kind != dag.Blocks {
		return true
	}
	for h := e.RefHash(); !h.IsZero(); {
		b, ok := l.block(h)
		if !ok {
			return false
		}
		h = b.Next
	}
	return true
}

// versions lists the versions of a path.
func (l *txLog) versions(p string) []*dag.Version {
	var out []*dag.Version
	prefix := append([]byte(p), 0)
	c := l.b.Bucket(bHist).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+32; k, _ = c.Next() {
		if v := l.version(dag.Hash(k[len(prefix):])); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// updateView recomputes the view rows of the dirty paths.
func (l *txLog) updateView() error {
	if l.key == nil {
		return nil
	}
	view := l.b.Bucket(bView)
	for p := range l.dirty {
		w := dag.Resolve(l.versions(p), l.rules)
		if w == nil {
			view.Delete(viewKey(p, l.rules))
			continue
		}
		st := dag.StateOf(w, l.version)
		if st.Type == dag.Absent {
			view.Delete(viewKey(p, l.rules))
			continue
		}
		if err := view.Put(viewKey(p, l.rules), encodeState(st)); err != nil {
			return err
		}
	}
	clear(l.dirty)
	return nil
}

// rebuildView recomputes the whole view (a read key was just given).
func rebuildView(l *txLog) error {
	if l.key == nil {
		return nil
	}
	for _, name := range [][]byte{bPath, bHist, bView} {
		l.b.DeleteBucket(name)
		l.b.CreateBucket(name)
	}
	// Directories first: an entry's path needs its anchor's. Walk from the
	// roots down the referrer index.
	var roots []dag.Hash
	l.b.Bucket(bRec).ForEach(func(k, _ []byte) error {
		if e, ok := l.Entry(dag.Hash(k)); ok && e.IsRoot() {
			roots = append(roots, dag.Hash(k))
		}
		return nil
	})
	seen := map[dag.Hash]bool{}
	for len(roots) > 0 {
		h := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[h] {
			continue
		}
		seen[h] = true
		e, _ := l.Entry(h)
		l.place(h, e)
		for _, r := range l.Referrers(h) {
			if c, ok := l.Entry(r); ok && c.Anchor() == h {
				roots = append(roots, r)
			}
		}
	}
	return l.updateView()
}

// encodeState is a view row: type, exec, size, time, current, data, target.
func encodeState(st dag.State) []byte {
	b := []byte{byte(st.Type), 0}
	if st.Exec {
		b[1] = 1
	}
	b = binary.AppendUvarint(b, st.Size)
	b = binary.BigEndian.AppendUint64(b, uint64(st.Time))
	b = append(b, st.Current[:]...)
	var data dag.Hash
	if st.Data != nil {
		data = st.Data.Hash
	}
	b = append(b, data[:]...)
	return append(b, st.Target...)
}

// row is a decoded view row.
type row struct {
	Type    dag.Type
	Exec    bool
	Size    uint64
	Time    dag.HLC
	Current dag.Hash
	Data    dag.Hash
	Target  string
}

func decodeState(v []byte) (row, bool) {
	var r row
	if len(v) < 2 {
		return r, false
	}
	r.Type, r.Exec = dag.Type(v[0]), v[1] == 1
	size, n := binary.Uvarint(v[2:])
	if n <= 0 || len(v) < 2+n+8+64 {
		return r, false
	}
	r.Size = size
	v = v[2+n:]
	r.Time = dag.HLC(binary.BigEndian.Uint64(v))
	copy(r.Current[:], v[8:40])
	copy(r.Data[:], v[40:72])
	r.Target = string(v[72:])
	return r, true
}

// Revoked lists the grants with an admitted revoke.
func (l *txLog) Revoked() []dag.Hash {
	var out []dag.Hash
	c := l.b.Bucket(bRev).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if g := dag.Hash(k[:32]); len(out) == 0 || out[len(out)-1] != g {
			out = append(out, g)
		}
	}
	return out
}
