package dag

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"
)

// world is a namespace with its root writer and a log.
type world struct {
	t    *testing.T
	ns   NSID
	root *Writer
	key  ReadKey
	log  *Log
	pool *Pool
	now  time.Time
}

func newWorld(t *testing.T) *world {
	ns, priv, err := NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := NewReadKey()
	w := &world{t: t, ns: ns, key: key, log: NewLog(), now: time.UnixMilli(1_700_000_000_000)}
	w.root = w.writer(priv, Hash{})
	w.pool = &Pool{NS: ns}
	return w
}

// writer makes a writer whose clock only moves when the test says so.
func (w *world) writer(priv ed25519.PrivateKey, grant Hash) *Writer {
	return &Writer{NS: w.ns, Key: priv, Grant: grant, Read: w.key, Clock: &Clock{Now: func() time.Time { return w.now }}}
}

// add ingests entries (and blocks) and fails the test on refusal.
func (w *world) add(e *Entry, blocks ...*Block) Hash {
	w.t.Helper()
	if err := w.offer(e, blocks...); err != nil {
		w.t.Fatal(err)
	}
	return e.Hash()
}

// offer ingests and returns the first refusal or a missing reference.
func (w *world) offer(e *Entry, blocks ...*Block) error {
	raws := [][]byte{e.Encode()}
	for _, b := range blocks {
		raws = append(raws, b.Encode())
	}
	var first error
	for _, raw := range raws {
		r, err := Decode(raw)
		if err != nil {
			return err
		}
		out, err := w.pool.Ingest(w.log, r)
		switch {
		case err != nil:
			return err
		case first != nil:
		case len(out.Rejected) > 0:
			first = out.Rejected[0]
		case len(out.Missing) > 0 && !w.log.Has(e.Hash()):
			first = &MissingError{out.Missing}
		}
	}
	return first
}

func mustDecode(t *testing.T, raw []byte) Record {
	t.Helper()
	r, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func (w *world) tree(rules Rules) *Tree { return BuildTree(w.log, w.ns, w.key, rules) }

func TestEncodeDecode(t *testing.T) {
	w := newWorld(t)
	root := w.root.Root()
	e := w.root.Entry(Write, root.Hash(), []Hash{{1}, {2}}, "resolv.conf", []byte("nameserver 10.0.0.1\n"))
	raw := e.Encode()
	if len(raw) > 400 {
		t.Errorf("small write encodes to %d bytes, want one gossip message", len(raw))
	}
	big := w.root.Entry(Write, root.Hash(), nil, string(bytes.Repeat([]byte("n"), MaxName)), make([]byte, InlineMax))
	if n := len(big.Encode()); n > 1024 {
		t.Errorf("longest name with most inline content encodes to %d bytes, over 1 KB", n)
	}
	r := mustDecode(t, raw)
	if r.Hash != e.Hash() || !bytes.Equal(r.Entry.Encode(), raw) {
		t.Fatal("decode(encode(e)) != e")
	}
	name, content, err := w.key.Open(r.Entry.Sealed)
	if err != nil || name != "resolv.conf" || string(content) != "nameserver 10.0.0.1\n" {
		t.Fatalf("open: %q %q %v", name, content, err)
	}
	if _, _, err := (ReadKey{9}).Open(r.Entry.Sealed); !errors.Is(err, ErrBadKey) {
		t.Errorf("another key opened the entry: %v", err)
	}
	for i := 0; i < len(raw); i++ {
		if _, err := Decode(raw[:i]); err == nil {
			t.Fatalf("truncated at %d decoded", i)
		}
	}
	if _, err := Decode(append(raw, 0)); err == nil {
		t.Error("trailing byte decoded")
	}
	// The size written the long way (a uvarint of two bytes where one
	// will do) decodes to the same entry, under another hash: refused.
	sizeAt := 4 + 32*len(e.Parents) + 8
	if raw[sizeAt] >= 0x80 {
		t.Fatalf("size %d does not fit one byte", e.Size)
	}
	long := append(append(append([]byte{}, raw[:sizeAt]...), raw[sizeAt]|0x80, 0), raw[sizeAt+1:]...)
	if _, err := Decode(long); !errors.Is(err, ErrMalformed) {
		t.Errorf("entry with an overlong size decoded: %v", err)
	}
	_, blocks := w.root.File(root.Hash(), nil, "big", make([]byte, 3000))
	if len(blocks) != 4 {
		t.Fatalf("3000 bytes in %d blocks", len(blocks))
	}
	for _, b := range blocks {
		if rb := mustDecode(t, b.Encode()); rb.Block == nil || rb.Hash != b.Hash() {
			t.Fatal("block did not round-trip")
		}
	}
}

// TestRejects: every way an entry can be bad is refused with its reason.
func TestRejects(t *testing.T) {
	w := newWorld(t)
	root := w.add(w.root.Root())
	etc := w.add(w.root.Entry(Mkdir, root, nil, "etc", nil))
	home := w.add(w.root.Entry(Mkdir, root, nil, "home", nil))
	pub, priv := newKey(t)
	g := w.add(w.root.GrantKey(etc, "alice", pub))
	alice := w.writer(priv, g)
	w.add(alice.Entry(Write, etc, nil, "hosts", []byte("ok")))

	_, otherPriv := newKey(t)
	forged := (&Writer{NS: w.ns, Key: otherPriv, Read: w.key}).Entry(Write, root, nil, "x", []byte("forged"))
	corrupt := w.root.Entry(Write, root, nil, "y", []byte("fine"))
	corrupt.Sealed[len(corrupt.Sealed)-1] ^= 1
	otherNS := newWorld(t)
	replay := (&Writer{NS: otherNS.ns, Key: priv, Grant: g, Read: w.key}).Entry(Write, etc, nil, "z", nil)

	cases := []struct {
		name string
		e    *Entry
		want error
	}{
		{"forged signature", forged, ErrBadSig},
		{"corrupted entry", corrupt, ErrBadSig},
		{"signed for another namespace", replay, ErrBadSig},
		{"outside the granted path", alice.Entry(Write, home, nil, "evil", nil), ErrForbidden},
		{"grant outside own scope", alice.GrantKey(root, "mallory", pub), ErrForbidden},
		{"revoke of equal authority", alice.RevokeGrant(etc, g, nil), ErrForbidden},
		{"root entry by a granted key", alice.Sign(&Entry{Action: Mkdir, Sealed: w.key.Seal("", nil)}), ErrMalformed},
		{"anchor not a directory", alice.Entry(Write, g, nil, "f", nil), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := w.offer(c.e)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if w.log.Has(c.e.Hash()) {
				t.Fatal("refused entry is in the log")
			}
		})
	}

	// Revoked: alice's later entries are refused; her unacknowledged
	// earlier ones are purged; acknowledged ones stay.
	kept := w.add(alice.Entry(Write, etc, nil, "kept", []byte("1")))
	dropped := w.add(alice.Entry(Write, etc, nil, "dropped", []byte("2")))
	w.add(w.root.RevokeGrant(etc, g, []Hash{kept}))
	if err := w.offer(alice.Entry(Write, etc, nil, "after", nil)); !errors.Is(err, ErrRevoked) {
		t.Fatalf("entry by a revoked key: %v", err)
	}
	if w.log.Has(dropped) || !w.log.Has(kept) {
		t.Fatalf("after revoke: dropped present=%v kept present=%v", w.log.Has(dropped), w.log.Has(kept))
	}
	tr := w.tree(ConfigRules)
	if _, ok := tr.Paths["/etc/kept"]; !ok {
		t.Error("acknowledged file gone from the view")
	}
	if _, ok := tr.Paths["/etc/dropped"]; ok {
		t.Error("unacknowledged file of a revoked key still in the view")
	}

	// Missing references are not refusals.
	orphan := w.root.Entry(Write, Hash{7}, nil, "o", nil)
	var miss *MissingError
	if err := w.offer(orphan); !errors.As(err, &miss) || miss.Hashes[0] != (Hash{7}) {
		t.Fatalf("entry with unknown anchor: %v", err)
	}
}

// TestConflictRules: one case per rule, each decided by that rule alone.
func TestConflictRules(t *testing.T) {
	type setup struct {
		w          *world
		root, etc  Hash
		alice, bob *Writer
	}
	mk := func(t *testing.T) setup {
		w := newWorld(t)
		s := setup{w: w}
		s.root = w.add(w.root.Root())
		s.etc = w.add(w.root.Entry(Mkdir, s.root, nil, "etc", nil))
		apub, apriv := newKey(t)
		bpub, bpriv := newKey(t)
		s.alice = w.writer(apriv, w.add(w.root.GrantKey(s.etc, "alice", apub)))
		s.bob = w.writer(bpriv, w.add(w.root.GrantKey(s.etc, "bob", bpub)))
		return s
	}
	content := func(s setup, rules Rules, p string) string {
		st, ok := s.w.tree(rules).Paths[p]
		if !ok {
			return "<absent>"
		}
		return string(st.Data.Content)
	}
	t.Run("config: incomplete write ignored", func(t *testing.T) {
		s := mk(t)
		v1 := s.w.add(s.alice.Entry(Write, s.etc, nil, "f", []byte("small")))
		big, blocks := s.alice.File(s.etc, []Hash{v1}, "f", bytes.Repeat([]byte("B"), 5000))
		s.w.add(big, blocks[0]) // the rest of the chain has not arrived
		if got := content(s, ConfigRules, "/etc/f"); got != "small" {
			t.Fatalf("with blocks missing: %q, want the complete earlier version", got)
		}
		s.w.add(big, blocks[1:]...)
		if got := content(s, ConfigRules, "/etc/f"); len(got) != 0 || s.w.tree(ConfigRules).Paths["/etc/f"].Current != big.Hash() {
			t.Fatal("complete write not current")
		}
	})
	t.Run("config: higher authority wins", func(t *testing.T) {
		s := mk(t)
		// alice's and bob's both concurrent with root's; root (authority 0)
		// beats both whatever the hashes.
		s.w.add(s.alice.Entry(Write, s.etc, nil, "f", []byte("alice")))
		s.w.add(s.w.root.Entry(Write, s.etc, nil, "f", []byte("root")))
		s.w.add(s.bob.Entry(Write, s.etc, nil, "f", []byte("bob")))
		if got := content(s, ConfigRules, "/etc/f"); got != "root" {
			t.Fatalf("got %q, want root's", got)
		}
	})
	t.Run("config: more contributors win", func(t *testing.T) {
		s := mk(t)
		base := s.w.add(s.alice.Entry(Write, s.etc, nil, "f", []byte("base")))
		// Branch 1: alice then bob (2 signers); branch 2: alice twice (1).
		a1 := s.w.add(s.alice.Entry(Write, s.etc, nil, "g", []byte("x"))) // unrelated path
		_ = a1
		b := s.w.add(s.bob.Entry(Write, s.etc, []Hash{base}, "f", []byte("two")))
		_ = b
		s.w.add(s.alice.Entry(Write, s.etc, []Hash{base}, "f", []byte("one")))
		// Whatever the hashes, the branch base->bob has two contributors,
		// base->alice one.
		if got := content(s, ConfigRules, "/etc/f"); got != "two" {
			t.Fatalf("got %q, want the two-contributor branch", got)
		}
	})
	t.Run("config: higher hash breaks ties", func(t *testing.T) {
		s := mk(t)
		x := s.alice.Entry(Write, s.etc, nil, "f", []byte("x"))
		y := s.bob.Entry(Write, s.etc, nil, "f", []byte("y"))
		s.w.add(x)
		s.w.add(y)
		want := "x"
		if xh, yh := x.Hash(), y.Hash(); bytes.Compare(yh[:], xh[:]) > 0 {
			want = "y"
		}
		if got := content(s, ConfigRules, "/etc/f"); got != want {
			t.Fatalf("got %q, want %q (higher hash)", got, want)
		}
	})
	// Object namespaces are flat: keys (with their '/') in the root.
	flat := func(t *testing.T) (setup, *Writer, *Writer) {
		s := mk(t)
		apub, apriv := newKey(t)
		bpub, bpriv := newKey(t)
		a := s.w.writer(apriv, s.w.add(s.w.root.GrantKey(s.root, "alice", apub)))
		b := s.w.writer(bpriv, s.w.add(s.w.root.GrantKey(s.root, "bob", bpub)))
		return s, a, b
	}
	t.Run("object: last writer wins", func(t *testing.T) {
		s, alice, bob := flat(t)
		late := alice.Entry(Write, s.root, nil, "photos/2026/a.jpg", []byte("late"))
		s.w.now = s.w.now.Add(-time.Minute)
		early := bob.Entry(Write, s.root, nil, "photos/2026/a.jpg", []byte("early"))
		s.w.add(early)
		s.w.add(late)
		if got := content(s, ObjectRules, "/photos/2026/a.jpg"); got != "late" {
			t.Fatalf("got %q, want the later write", got)
		}
	})
	t.Run("object: authority before time", func(t *testing.T) {
		s, alice, _ := flat(t)
		s.w.add(s.w.root.Entry(Write, s.root, nil, "k", []byte("root")))
		s.w.now = s.w.now.Add(time.Hour)
		s.w.add(alice.Entry(Write, s.root, nil, "k", []byte("alice, later")))
		if got := content(s, ObjectRules, "/k"); got != "root" {
			t.Fatalf("got %q, want root's", got)
		}
	})
	t.Run("object: keys are flat and kept as given", func(t *testing.T) {
		s, alice, _ := flat(t)
		for _, k := range []string{"a//b", "../x", "dir/", "/lead"} {
			s.w.add(alice.Entry(Write, s.root, nil, k, []byte(k)))
		}
		tr := s.w.tree(ObjectRules)
		for _, k := range []string{"a//b", "../x", "dir/", "/lead"} {
			if st, ok := tr.Paths["/"+k]; !ok || string(st.Data.Content) != k {
				t.Errorf("key %q not kept as given", k)
			}
		}
	})
	t.Run("supersede beats everything", func(t *testing.T) {
		s := mk(t)
		r := s.w.add(s.w.root.Entry(Write, s.etc, nil, "f", []byte("root")))
		s.w.add(s.alice.Entry(Write, s.etc, []Hash{r}, "f", []byte("alice saw root's")))
		if got := content(s, ConfigRules, "/etc/f"); got != "alice saw root's" {
			t.Fatalf("got %q: a later version that saw the earlier one must replace it", got)
		}
	})
}

// TestPathActions: revert, mode, links, delete and history.
func TestPathActions(t *testing.T) {
	w := newWorld(t)
	root := w.add(w.root.Root())
	etc := w.add(w.root.Entry(Mkdir, root, nil, "etc", nil))
	v1 := w.add(w.root.Entry(Write, etc, nil, "run.sh", []byte("v1")))
	m := w.add(w.root.Entry(Mode, etc, []Hash{v1}, "run.sh", []byte{1}))
	v2 := w.add(w.root.Entry(Write, etc, []Hash{m}, "run.sh", []byte("v2")))
	st := w.tree(ConfigRules).Paths["/etc/run.sh"]
	if string(st.Data.Content) != "v2" || !st.Exec {
		t.Fatalf("after write over +x: %q exec=%v", st.Data.Content, st.Exec)
	}
	rv := w.add(w.root.Pointer(Revert, etc, []Hash{v2}, "run.sh", v1))
	if st := w.tree(ConfigRules).Paths["/etc/run.sh"]; string(st.Data.Content) != "v1" || st.Current != rv {
		t.Fatalf("revert: %q", st.Data.Content)
	}
	w.add(w.root.Pointer(Link, root, nil, "hard", v2))
	w.add(w.root.Entry(Slink, root, nil, "soft", []byte("/etc/run.sh")))
	tr := w.tree(ConfigRules)
	if st := tr.Paths["/hard"]; st.Type != File || string(st.Data.Content) != "v2" {
		t.Fatalf("hard link: %+v", st)
	}
	if st := tr.Paths["/soft"]; st.Type != Symlink || st.Target != "/etc/run.sh" {
		t.Fatalf("symlink: %+v", st)
	}
	if got := len(tr.Versions["/etc/run.sh"]); got != 4 {
		t.Fatalf("history has %d versions, want 4", got)
	}
	mkEtc, _ := w.log.Entry(etc)
	_ = mkEtc
	w.add(w.root.Entry(Delete, root, []Hash{etc}, "etc", nil))
	tr = w.tree(ConfigRules)
	if _, ok := tr.Paths["/etc/run.sh"]; ok {
		t.Fatal("file under a deleted directory still shows")
	}
	if got := tr.Children("/"); fmt.Sprint(got) != "[hard soft]" {
		t.Fatalf("ls /: %v", got)
	}
}

// TestOrderIndependence: replicas that receive the same records in any
// order, with duplicates, hold the same log and show the same tree.
func TestOrderIndependence(t *testing.T) {
	for seed := uint64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { orderProperty(t, seed) })
	}
}

func orderProperty(t *testing.T, seed uint64) {
	rng := mrand.New(mrand.NewPCG(seed, 99))
	w := newWorld(t)
	var recs [][]byte
	emit := func(e *Entry, blocks []*Block) Hash {
		recs = append(recs, e.Encode())
		for _, b := range blocks {
			recs = append(recs, b.Encode())
		}
		if err := w.offer(e, blocks...); err != nil {
			var miss *MissingError
			if !errors.As(err, &miss) && !errors.Is(err, ErrRevoked) {
				t.Fatal(err)
			}
		}
		return e.Hash()
	}
	root := emit(w.root.Root(), nil)
	etc := emit(w.root.Entry(Mkdir, root, nil, "etc", nil), nil)
	dirs := map[string][]Hash{"/": {root}, "/etc": {etc}}
	apub, apriv := newKey(t)
	bpub, bpriv := newKey(t)
	ga := emit(w.root.GrantKey(etc, "alice", apub), nil)
	writers := []*Writer{w.root, w.writer(apriv, ga), w.writer(bpriv, emit(w.root.GrantKey(root, "bob", bpub), nil))}
	versions := map[string][]Hash{}
	names := []string{"a", "b", "c"}
	revoked := false
	for i := 0; i < 120; i++ {
		w.now = w.now.Add(time.Duration(rng.IntN(2000)-500) * time.Millisecond)
		wr := writers[rng.IntN(len(writers))]
		dir := "/etc"
		if wr != writers[1] && rng.IntN(3) == 0 {
			dir = "/"
		}
		anchor := dirs[dir][rng.IntN(len(dirs[dir]))]
		name := names[rng.IntN(len(names))]
		p := dir + "/" + name
		if dir == "/" {
			p = "/" + name
		}
		var prev []Hash
		for _, v := range versions[p] {
			if rng.IntN(2) == 0 {
				prev = append(prev, v)
			}
		}
		var e *Entry
		var blocks []*Block
		switch k := rng.IntN(10); {
		case k < 4:
			e, blocks = wr.File(anchor, prev, name, bytes.Repeat([]byte{byte(i)}, rng.IntN(2)*rng.IntN(3000)+1))
			if len(blocks) > 1 && rng.IntN(3) == 0 {
				blocks = blocks[:len(blocks)-1] // never completed
			}
		case k == 4:
			e = wr.Entry(Delete, anchor, prev, name, nil)
		case k == 5:
			e = wr.Entry(Mode, anchor, prev, name, []byte{byte(rng.IntN(2))})
		case k == 6 && len(versions[p]) > 0:
			target := versions[p][rng.IntN(len(versions[p]))]
			e = wr.Pointer(Revert, anchor, prev, name, target)
		case k == 7 && dir == "/" && name == "c":
			e = wr.Entry(Mkdir, anchor, prev, name, nil)
			dirs["/c"] = append(dirs["/c"], e.Hash())
		case k == 8 && !revoked && i > 60:
			// Root revokes alice, acknowledging some of her entries.
			var ack []Hash
			for _, h := range w.log.SignedBy(ga) {
				if rng.IntN(2) == 0 {
					ack = append(ack, h)
				}
			}
			emit(w.root.RevokeGrant(etc, ga, ack), nil)
			revoked = true
			continue
		default:
			e = wr.Entry(Write, anchor, prev, name, []byte(fmt.Sprint("w", i)))
		}
		versions[p] = append(versions[p], emit(e, blocks))
	}
	byHash := map[Hash][]byte{}
	for _, raw := range recs {
		byHash[mustDecode(t, raw).Hash] = raw
	}
	// replay ingests records in order into a fresh replica, then answers
	// its missing references as a peer holding all records would.
	replay := func(order [][]byte) *Log {
		l, pool := NewLog(), &Pool{NS: w.ns}
		var missing []Hash
		for _, raw := range order {
			r := mustDecode(t, raw)
			out, err := pool.Ingest(l, r)
			if err != nil {
				t.Fatal(err)
			}
			missing = append(missing, out.Missing...)
		}
		// What a peer would answer when asked for missing references.
		for round := 0; len(missing) > 0 && round < 50; round++ {
			ask := missing
			missing = nil
			for _, h := range ask {
				if raw, ok := byHash[h]; ok {
					out, err := pool.Ingest(l, mustDecode(t, raw))
					if err != nil {
						t.Fatal(err)
					}
					missing = append(missing, out.Missing...)
				}
			}
		}
		return l
	}
	ref := replay(recs)
	want := BuildTree(ref, w.ns, w.key, ConfigRules)
	wantObj := BuildTree(ref, w.ns, w.key, ObjectRules)
	wantHashes := ref.Hashes()
	for perm := 0; perm < 4; perm++ {
		order := append([][]byte(nil), recs...)
		for d := 0; d < len(recs)/5; d++ { // duplicates
			order = append(order, recs[rng.IntN(len(recs))])
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		l := replay(order)
		if got := l.Hashes(); fmt.Sprint(got) != fmt.Sprint(wantHashes) {
			gotSet := map[Hash]bool{}
			for _, h := range got {
				gotSet[h] = true
			}
			for _, h := range wantHashes {
				if !gotSet[h] {
					if e, ok := ref.Entry(h); ok {
						var why []string
						for _, p := range e.Parents {
							if !l.Has(p) {
								why = append(why, "parent "+p.Short())
							}
						}
						if !e.Signer.IsZero() && !l.Has(e.Signer) {
							why = append(why, "signer")
						}
						t.Logf("missing %s %s signer %s parents %d: %v", h.Short(), e.Action, e.Signer.Short(), len(e.Parents), why)
					} else {
						t.Logf("missing block %s", h.Short())
					}
				}
			}
			wantSet := map[Hash]bool{}
			for _, h := range wantHashes {
				wantSet[h] = true
			}
			for _, h := range got {
				if !wantSet[h] {
					if e, ok := l.Entry(h); ok {
						var refs []string
						for _, r := range l.Referrers(h) {
							re, _ := l.Entry(r)
							refs = append(refs, fmt.Sprintf("%s by %s (%s)", r.Short(), re.Signer.Short(), re.Action))
						}
						t.Logf("extra %s %s signer %s anchor %s; referrers %v", h.Short(), e.Action, e.Signer.Short(), e.Anchor().Short(), refs)
					} else {
						t.Logf("extra block %s", h.Short())
					}
				}
			}
			t.Fatalf("permutation %d: log has %d records, want %d", perm, len(got), len(wantHashes))
		}
		for _, rules := range []Rules{ConfigRules, ObjectRules} {
			exp := want
			if rules == ObjectRules {
				exp = wantObj
			}
			got := BuildTree(l, w.ns, w.key, rules)
			if a, b := summary(got), summary(exp); a != b {
				t.Fatalf("permutation %d rules %d: views differ\n got %s\nwant %s", perm, rules, a, b)
			}
		}
	}
	if len(want.Paths) < 3 {
		t.Fatalf("scenario too thin: %d paths", len(want.Paths))
	}
}

func summary(t *Tree) string {
	var b bytes.Buffer
	for _, p := range sortedKeys(t.Paths) {
		st := t.Paths[p]
		data := ""
		if st.Data != nil {
			data = st.Data.Hash.Short()
		}
		fmt.Fprintf(&b, "%s:%s:%s:%s:%v:%s;", p, st.Type, st.Current.Short(), data, st.Exec, st.Target)
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestRevocationAttacks: a revoked key cannot get new entries in through
// another key's "acknowledgement", whatever the order; what a revoked key
// kept (acknowledged) stays whole, sub-grants included, so a fresh replica
// can sync it; a key granting itself twice is still one contributor.
func TestRevocationAttacks(t *testing.T) {
	setup := func(t *testing.T) (*world, Hash, Hash, Hash, *Writer, *Writer, Hash) {
		w := newWorld(t)
		root := w.add(w.root.Root())
		etc := w.add(w.root.Entry(Mkdir, root, nil, "etc", nil))
		tmp := w.add(w.root.Entry(Mkdir, root, nil, "tmp", nil))
		apub, apriv := newKey(t)
		cpub, cpriv := newKey(t)
		ga := w.add(w.root.GrantKey(etc, "alice", apub))
		gc := w.add(w.root.GrantKey(tmp, "carol", cpub))
		return w, root, etc, tmp, w.writer(apriv, ga), w.writer(cpriv, gc), ga
	}
	t.Run("ack by a key that does not outrank", func(t *testing.T) {
		w, _, etc, tmp, alice, carol, ga := setup(t)
		w.add(w.root.RevokeGrant(etc, ga, nil))
		x := alice.Entry(Write, etc, nil, "hosts", []byte("evil after revoke"))
		y := carol.Entry(Write, tmp, []Hash{x.Hash()}, "junk", nil)
		// y first: it waits for x; then x.
		if err := w.offer(y); err == nil {
			t.Fatal("y admitted before x")
		}
		if err := w.offer(x); !errors.Is(err, ErrRevoked) {
			t.Fatalf("revoked write acknowledged by an outranked key: %v", err)
		}
	})
	t.Run("held acknowledger outside its grant", func(t *testing.T) {
		w, _, etc, _, alice, carol, ga := setup(t)
		w.add(w.root.RevokeGrant(etc, ga, nil))
		x := alice.Entry(Write, etc, nil, "hosts", []byte("evil"))
		y := carol.Entry(Write, etc, []Hash{x.Hash(), {9}}, "hosts", nil)
		w.offer(y)
		if err := w.offer(x); !errors.Is(err, ErrRevoked) {
			t.Fatalf("revoked write let in by a held entry outside its signer's grant: %v", err)
		}
	})
	t.Run("kept entries keep their sub-grant and history", func(t *testing.T) {
		w, _, etc, _, alice, _, ga := setup(t)
		dpub, dpriv := newKey(t)
		sub := w.add(alice.Entry(Mkdir, etc, nil, "sub", nil))
		g2 := w.add(alice.GrantKey(sub, "dave", dpub))
		dave := w.writer(dpriv, g2)
		v1 := w.add(dave.Entry(Write, sub, nil, "f", []byte("1")))
		x := w.add(dave.Entry(Write, sub, []Hash{v1}, "f", []byte("2")))
		w.add(w.root.RevokeGrant(etc, ga, []Hash{x}))
		for _, h := range []Hash{sub, g2, v1, x} {
			if !w.log.Has(h) {
				t.Fatalf("%s purged though what depends on it was acknowledged", h.Short())
			}
		}
		// A fresh replica receiving this log in reverse order admits all
		// of it.
		var raws [][]byte
		w.log.Each(func(h Hash, e *Entry) { raws = append(raws, e.Encode()) })
		fresh, pool := NewLog(), &Pool{NS: w.ns}
		for round := 0; round < len(raws); round++ {
			for i := len(raws) - 1; i >= 0; i-- {
				pool.Ingest(fresh, mustDecode(t, raws[i]))
			}
		}
		if fresh.Len() != w.log.Len() {
			t.Fatalf("fresh replica holds %d of %d records", fresh.Len(), w.log.Len())
		}
		if st := BuildTree(fresh, w.ns, w.key, ConfigRules).Paths["/etc/sub/f"]; st.Current != x {
			t.Fatal("acknowledged file not current on the fresh replica")
		}
		if err := w.offer(dave.Entry(Write, sub, []Hash{x}, "f", []byte("3"))); !errors.Is(err, ErrRevoked) {
			t.Fatalf("write under a sub-grant of a revoked key: %v", err)
		}
	})
	t.Run("a key granted twice is one contributor", func(t *testing.T) {
		w, _, etc, _, alice, _, _ := setup(t)
		bpub, bpriv := newKey(t)
		bob := w.writer(bpriv, w.add(w.root.GrantKey(etc, "bob", bpub)))
		again := w.writer(alice.Key, w.add(alice.GrantKey(etc, "alice again", alice.Key.Public().(ed25519.PublicKey))))
		base := w.add(w.root.Entry(Write, etc, nil, "f", []byte("base")))
		// alice's branch: two versions under two grants of her one key.
		a1 := w.add(alice.Entry(Write, etc, []Hash{base}, "f", []byte("a1")))
		w.add(again.Entry(Write, etc, []Hash{a1}, "f", []byte("alice")))
		w.add(bob.Entry(Write, etc, []Hash{base}, "f", []byte("bob")))
		// Both branches: root + one key. A tie on contributors: the hash
		// decides, so run both outcomes' expectations from the hashes.
		st := w.tree(ConfigRules).Paths["/etc/f"]
		vs := w.tree(ConfigRules).Versions["/etc/f"]
		var heads []*Version
		for _, v := range vs {
			if string(v.Content) == "alice" || string(v.Content) == "bob" {
				heads = append(heads, v)
			}
		}
		want := heads[0]
		if bytes.Compare(heads[1].Hash[:], heads[0].Hash[:]) > 0 {
			want = heads[1]
		}
		if st.Current != want.Hash {
			t.Fatalf("current %s, want %s (higher hash): a self-grant bought an extra contributor", st.Current.Short(), want.Hash.Short())
		}
	})
}
