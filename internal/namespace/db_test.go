package namespace

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	bolt "go.etcd.io/bbolt"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/dag"
)

// scenario writes a random namespace: directories, files inline and in
// blocks, deletes, modes, reverts, a second writer and a revocation.
type scenario struct {
	ns   dag.NSID
	key  dag.ReadKey
	recs [][]byte
}

func newScenario(t testing.TB, seed uint64, ops int) *scenario {
	rng := mrand.New(mrand.NewPCG(seed, 7))
	ns, priv, err := dag.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := dag.NewReadKey()
	s := &scenario{ns: ns, key: key}
	ref, pool := dag.NewLog(), &dag.Pool{NS: ns}
	root := &dag.Writer{NS: ns, Key: priv, Read: key}
	emit := func(e *dag.Entry, blocks []*dag.Block) dag.Hash {
		for _, raw := range append([][]byte{e.Encode()}, encodeBlocks(blocks)...) {
			s.recs = append(s.recs, raw)
			r, _ := dag.Decode(raw)
			pool.Ingest(ref, r)
		}
		return e.Hash()
	}
	rootH := emit(root.Root(), nil)
	dirs := map[string]dag.Hash{"/": rootH}
	dirNames := []string{"/"}
	pub, apriv, _ := ed25519.GenerateKey(rand.Reader)
	etc := emit(root.Entry(dag.Mkdir, rootH, nil, "etc", nil), nil)
	dirs["/etc"] = etc
	dirNames = append(dirNames, "/etc")
	g := emit(root.GrantKey(etc, "alice", pub), nil)
	alice := &dag.Writer{NS: ns, Key: apriv, Grant: g, Read: key}
	versions := map[string][]dag.Hash{}
	for i := 0; i < ops; i++ {
		w := root
		dir := dirNames[rng.IntN(len(dirNames))]
		if strings.HasPrefix(dir, "/etc") && rng.IntN(2) == 0 {
			w = alice
		}
		name := fmt.Sprint("f", rng.IntN(6))
		p := strings.TrimSuffix(dir, "/") + "/" + name
		prev := versions[p]
		if rng.IntN(4) == 0 && len(prev) > 0 {
			prev = prev[:1] // a stale view: a conflict
		}
		var e *dag.Entry
		var blocks []*dag.Block
		switch k := rng.IntN(12); {
		case k == 0 && len(dirNames) < 8 && versions[p] == nil:
			e = w.Entry(dag.Mkdir, dirs[dir], nil, name, nil)
			dirs[p] = e.Hash()
			dirNames = append(dirNames, p)
		case k == 1:
			e = w.Entry(dag.Delete, dirs[dir], prev, name, nil)
		case k == 2:
			e = w.Entry(dag.Mode, dirs[dir], prev, name, []byte{1})
		case k == 3 && len(versions[p]) > 0:
			t := versions[p][0]
			e = w.Entry(dag.Revert, dirs[dir], prev, name, t[:])
		case k < 6:
			e, blocks = w.File(dirs[dir], prev, name, bytes.Repeat([]byte{byte(i)}, 600+rng.IntN(3000)))
		case k == 11 && i > ops/2 && w == alice:
			emit(root.RevokeGrant(etc, g, ref.SignedBy(g)[:1]), nil)
			continue
		default:
			e = w.Entry(dag.Write, dirs[dir], prev, name, []byte(fmt.Sprint("v", i)))
		}
		versions[p] = append([]dag.Hash{emit(e, blocks)}, versions[p]...)
	}
	return s
}

func encodeBlocks(bs []*dag.Block) [][]byte {
	var out [][]byte
	for _, b := range bs {
		out = append(out, b.Encode())
	}
	return out
}

// reference builds the expected tree with package dag's in-memory log.
func (s *scenario) reference(t testing.TB, rules dag.Rules) (*dag.Tree, *dag.Log) {
	l, pool := dag.NewLog(), &dag.Pool{NS: s.ns}
	byHash := map[dag.Hash][]byte{}
	var missing []dag.Hash
	ingest := func(raw []byte) {
		r, _ := dag.Decode(raw)
		byHash[r.Hash] = raw
		out, err := pool.Ingest(l, r)
		if err != nil {
			t.Fatal(err)
		}
		missing = append(missing, out.Missing...)
	}
	for _, raw := range s.recs {
		ingest(raw)
	}
	for round := 0; len(missing) > 0 && round < 50; round++ {
		ask := missing
		missing = nil
		for _, h := range ask {
			if raw, ok := byHash[h]; ok {
				ingest(raw)
			}
		}
	}
	return dag.BuildTree(l, s.ns, s.key, rules), l
}

// walk lists every path the DB's view shows, with its state.
func walk(t testing.TB, d *DB, ns dag.NSID) map[string]string {
	out := map[string]string{}
	var rec func(dir string)
	rec = func(dir string) {
		items, err := d.List(ns, dir, "", 0)
		if err != nil {
			t.Fatalf("ls %s: %v", dir, err)
		}
		for _, it := range items {
			out[it.Path] = fmt.Sprintf("%s:%s:%s:%v:%d", it.Type, it.Current.Short(), it.Data.Short(), it.Exec, it.Size)
			if it.Type == dag.Dir {
				rec(it.Path)
			}
		}
	}
	rec("/")
	return out
}

func treeSummary(tr *dag.Tree) map[string]string {
	out := map[string]string{}
	for p, st := range tr.Paths {
		if p == "/" {
			continue
		}
		var data dag.Hash
		if st.Data != nil {
			data = st.Data.Hash
		}
		out[p] = fmt.Sprintf("%s:%s:%s:%v:%d", st.Type, st.Current.Short(), data.Short(), st.Exec, st.Size)
	}
	return out
}

func openDB(t testing.TB, dir string) *DB {
	d, err := OpenDB(filepath.Join(dir, "ns.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMaterialisedView: the view kept incrementally in bbolt, fed records
// in random batches and orders, equals the view built from scratch; it
// survives a restart without replaying the log; a replica without the
// read key holds the same log.
func TestMaterialisedView(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newScenario(t, seed, 150)
			want, ref := s.reference(t, dag.ConfigRules)
			dir := t.TempDir()
			d := openDB(t, dir)
			if err := d.Open(s.ns, &s.key, dag.ConfigRules); err != nil {
				t.Fatal(err)
			}
			blind := openDB(t, t.TempDir()) // no read key
			defer blind.Close()
			rng := mrand.New(mrand.NewPCG(seed, 1))
			order := slices.Clone(s.recs)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for len(order) > 0 {
				n := min(len(order), 1+rng.IntN(20))
				for _, db := range []*DB{d, blind} {
					res, err := db.Ingest(s.ns, order[:n])
					if err != nil {
						t.Fatal(err)
					}
					// Answer missing references as a peer would.
					for round := 0; len(res.Missing) > 0 && round < 20; round++ {
						if res, err = db.Ingest(s.ns, getAll(ref, res.Missing)); err != nil {
							t.Fatal(err)
						}
					}
				}
				order = order[n:]
			}
			if got, exp := d.Count(s.ns), uint64(ref.Len()); got != exp {
				t.Fatalf("DB holds %d records, reference %d", got, exp)
			}
			if d.Root(s.ns) != blind.Root(s.ns) {
				t.Fatal("replica without the read key holds a different log")
			}
			check := func(d *DB) {
				got, exp := walk(t, d, s.ns), treeSummary(want)
				if fmt.Sprint(got) != fmt.Sprint(exp) {
					t.Fatalf("view differs:\n got %v\nwant %v", got, exp)
				}
			}
			check(d)
			d.Close()
			d = openDB(t, dir) // restart: the view is on disk
			defer d.Close()
			check(d)
			// A key given late builds the view from the log.
			if err := blind.Open(s.ns, &s.key, dag.ConfigRules); err != nil {
				t.Fatal(err)
			}
			check(blind)
			for p, st := range want.Paths {
				if st.Type != dag.File {
					continue
				}
				info, err := d.Stat(s.ns, p)
				if err != nil {
					t.Fatal(err)
				}
				content, _, err := d.Content(s.ns, info.Data)
				if err != nil || uint64(len(content)) != st.Size {
					t.Fatalf("%s: %d bytes (%v), want %d", p, len(content), err, st.Size)
				}
			}
		})
	}
}

// getAll is what a peer holding ref answers for hashes.
func getAll(ref *dag.Log, hs []dag.Hash) [][]byte {
	var out [][]byte
	for _, h := range hs {
		if e, ok := ref.Entry(h); ok {
			out = append(out, e.Encode())
		} else if b, ok := ref.Block(h); ok {
			out = append(out, b.Encode())
		}
	}
	return out
}

// TestObjectKeys: in an object namespace keys are flat, kept as given
// ("a//b", "../x"), listed in byte order, and a prefix is a range scan.
func TestObjectKeys(t *testing.T) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	d := openDB(t, t.TempDir())
	defer d.Close()
	if err := d.Open(ns, &key, dag.ObjectRules); err != nil {
		t.Fatal(err)
	}
	root := w.Root()
	keys := []string{"photos/2026/b.jpg", "a//b", "../x", "photos/2026/a.jpg", "photos-old", "photos/", "z", "/lead"}
	recs := [][]byte{root.Encode()}
	for _, k := range keys {
		recs = append(recs, w.Entry(dag.Write, root.Hash(), nil, k, []byte(k)).Encode())
	}
	if res, err := d.Ingest(ns, recs); err != nil || len(res.Admitted) != len(recs) {
		t.Fatalf("ingest: %v %+v", err, res)
	}
	var got []string
	d.Scan(ns, "/", "", func(it Info) bool { got = append(got, it.Name); return true })
	want := slices.Clone(keys)
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keys in order %q, want %q", got, want)
	}
	var photos []string
	d.Scan(ns, "/", "photos/", func(it Info) bool {
		if !strings.HasPrefix(it.Name, "photos/") {
			return false
		}
		photos = append(photos, it.Name)
		return true
	})
	if fmt.Sprint(photos) != "[photos/ photos/2026/a.jpg photos/2026/b.jpg]" {
		t.Fatalf("prefix scan from photos/: %q", photos)
	}
	for _, k := range keys {
		info, err := d.Stat(ns, "/"+k)
		if err != nil || info.Name != k {
			t.Fatalf("stat %q: %+v %v", k, info, err)
		}
	}
}

// objectNamespace makes an object namespace, its root writer, its root
// entry (not yet ingested) and a DB that holds its read key.
func objectNamespace(t *testing.T) (dag.NSID, *dag.Writer, *dag.Entry, *DB) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	d := openDB(t, t.TempDir())
	t.Cleanup(func() { d.Close() })
	d.Open(ns, &key, dag.ObjectRules)
	return ns, w, w.Root(), d
}

// TestGroupCommit: concurrent ingests are all admitted (committed
// together), each caller getting its own result.
func TestGroupCommit(t *testing.T) {
	ns, w, root, d := objectNamespace(t)
	if _, err := d.Ingest(ns, [][]byte{root.Encode()}); err != nil {
		t.Fatal(err)
	}
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		e := w.Entry(dag.Write, root.Hash(), nil, fmt.Sprint("k", i), []byte{byte(i)})
		go func() {
			res, err := d.Ingest(ns, [][]byte{e.Encode()})
			if err == nil && (len(res.Admitted) != 1 || dag.Hash(blake3Sum(res.Admitted[0])) != e.Hash()) {
				err = fmt.Errorf("result of another caller: %d admitted", len(res.Admitted))
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := d.Count(ns); got != n+1 {
		t.Fatalf("%d records, want %d", got, n+1)
	}
}

// Records the replica holds already are not committed again: a batch of
// only such writes nothing; one with a new record among them admits just
// that one.
func TestIngestDuplicates(t *testing.T) {
	ns, w, root, d := objectNamespace(t)
	e, blocks := w.File(root.Hash(), nil, "k", bytes.Repeat([]byte("x"), 3000))
	recs := append([][]byte{root.Encode(), e.Encode()}, encodeBlocks(blocks)...)
	if res, err := d.Ingest(ns, recs); err != nil || len(res.Admitted) != len(recs) {
		t.Fatalf("first ingest: %d of %d admitted, %v", len(res.Admitted), len(recs), err)
	}
	writes := pageWrites(d)
	res, err := d.Ingest(ns, recs)
	if err != nil || len(res.Admitted)+len(res.Rejected)+len(res.Missing) != 0 {
		t.Fatalf("again: %+v, %v", res, err)
	}
	if got := pageWrites(d); got != writes {
		t.Fatalf("a batch of records held already wrote %d pages", got-writes)
	}
	next := w.Entry(dag.Write, root.Hash(), []dag.Hash{e.Hash()}, "k", []byte("y"))
	res, err = d.Ingest(ns, append(recs, next.Encode()))
	if err != nil || len(res.Admitted) != 1 || dag.Hash(blake3Sum(res.Admitted[0])) != next.Hash() {
		t.Fatalf("held records and a new one: %d admitted, %v", len(res.Admitted), err)
	}
	if got := pageWrites(d); got == writes {
		t.Fatal("a new record was admitted without a write")
	}
	// Junk for a namespace never seen is still judged (and refused).
	if res, err := d.Ingest(dag.NSID{9}, [][]byte{{0xff}}); err != nil || len(res.Rejected) != 1 {
		t.Fatalf("junk: %+v, %v", res, err)
	}
}

// pageWrites is how many page writes d's transactions have made.
func pageWrites(d *DB) int64 {
	st := d.db.Stats().TxStats
	return st.GetWrite()
}

func blake3Sum(b []byte) [32]byte {
	r, _ := dag.Decode(b)
	return r.Hash
}

// TestBatchBringsBlocks: an entry and its blocks sent together leave
// nothing missing, whichever comes first; the blocks alone, without the
// entry that wants them, are held, and the entry alone reports them.
func TestBatchBringsBlocks(t *testing.T) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	body := bytes.Repeat([]byte("block content "), 400) // several 1 KiB blocks
	e, blocks := w.File(root.Hash(), nil, "big", body)
	if len(blocks) < 2 {
		t.Fatalf("%d blocks for %d bytes; the test needs a chain", len(blocks), len(body))
	}
	var bl [][]byte
	for _, b := range blocks {
		bl = append(bl, b.Encode())
	}
	for _, order := range []string{"entry first", "blocks first"} {
		d := openDB(t, t.TempDir())
		if err := d.Open(ns, &key, dag.ConfigRules); err != nil {
			t.Fatal(err)
		}
		recs := append([][]byte{root.Encode(), e.Encode()}, bl...)
		if order == "blocks first" {
			recs = append(append([][]byte{root.Encode()}, bl...), e.Encode())
		}
		res, err := d.Ingest(ns, recs)
		if err != nil || len(res.Admitted) != len(recs) || len(res.Missing) != 0 {
			t.Errorf("%s: %v, admitted %d of %d, missing %v", order, err, len(res.Admitted), len(recs), res.Missing)
		}
		info, err := d.Stat(ns, "/big")
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := d.Content(ns, info.Data)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: content %d bytes, %v", order, len(got), err)
		}
		d.Close()
	}
	d := openDB(t, t.TempDir())
	defer d.Close()
	d.Open(ns, &key, dag.ConfigRules)
	res, err := d.Ingest(ns, [][]byte{root.Encode(), e.Encode()})
	if err != nil || len(res.Missing) == 0 {
		t.Errorf("entry without its blocks: %v, missing %v", err, res.Missing)
	}
}

// TestFirstLevelDigests: the 256 first-level digests a sync asks first
// agree with the leaves under them, as records come and go, and a log
// written before they were kept (simulated by removing them) is answered
// from its leaves until its next change builds them.
func TestFirstLevelDigests(t *testing.T) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	dir := t.TempDir()
	d := openDB(t, dir)
	if err := d.Open(ns, &key, dag.ConfigRules); err != nil {
		t.Fatal(err)
	}
	root := w.Root()
	recs := [][]byte{root.Encode()}
	for i := range 600 {
		recs = append(recs, w.Entry(dag.Write, root.Hash(), nil, fmt.Sprint("f", i), []byte{byte(i)}).Encode())
	}
	if _, err := d.Ingest(ns, recs); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		top, err := d.Digests(ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sum Digest
		for p := range 256 {
			leaves, err := d.Digests(ns, []byte{byte(p)})
			if err != nil {
				t.Fatal(err)
			}
			var g Digest
			for _, l := range leaves {
				g.merge(l)
			}
			if g != top[p] {
				t.Fatalf("%s: first-level digest %02x is %+v, its leaves make %+v", when, p, top[p], g)
			}
			sum.merge(g)
		}
		if sum != d.Root(ns) {
			t.Fatalf("%s: the first level adds up to %+v, the root is %+v", when, sum, d.Root(ns))
		}
	}
	check("after 601 records")
	// As a log from before: no first level.
	d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(ns[:])
		b.Bucket(bMeta).Delete(metaLevel1)
		for i := range 256 {
			b.Bucket(bDig).Delete([]byte{byte(i)})
		}
		return nil
	})
	check("without a first level")
	if _, err := d.Ingest(ns, [][]byte{w.Entry(dag.Write, root.Hash(), nil, "late", []byte("x")).Encode()}); err != nil {
		t.Fatal(err)
	}
	check("after the first level was rebuilt")
	d.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(ns[:]).Bucket(bMeta).Get(metaLevel1) == nil {
			t.Error("the first level was not rebuilt on a change")
		}
		return nil
	})
	d.Close()
}
