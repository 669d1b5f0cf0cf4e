package dag

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"testing"
)

// replica is a second replica of w's namespace: its own log and pool,
// holding copies of the entries given.
func (w *world) replica(t *testing.T, es ...*Entry) *world {
	t.Helper()
	r := &world{t: t, ns: w.ns, key: w.key, log: NewLog(), pool: &Pool{NS: w.ns}, now: w.now}
	for _, e := range es {
		r.add(e)
	}
	return r
}

// One process's replicas check a signature once: an entry signed here is
// not checked at all, one from elsewhere once for all replicas; a changed
// copy of a checked entry is checked, and refused.
func TestSignatureCache(t *testing.T) {
	w := newWorld(t)
	rootE := w.root.Root()
	root := w.add(rootE)

	// Signed by a writer of this process: no replica checks it.
	before := sigChecks.Load()
	mine := w.root.Entry(Write, root, nil, "mine", []byte("1"))
	w.add(mine)
	w.replica(t, rootE, mine)
	if n := sigChecks.Load() - before; n != 0 {
		t.Errorf("entry signed in this process: %d signature checks, want 0", n)
	}

	// Signed elsewhere (not through a Writer): checked by the first
	// replica, not by the second.
	pub, grantPriv := newKey(t)
	g := w.root.GrantKey(root, "bob", pub)
	w.add(g)
	theirs := &Entry{Action: Write, Parents: []Hash{root}, Time: w.root.Clock.Next(), Signer: g.Hash(), Sealed: w.key.Seal("theirs", []byte("2"))}
	copy(theirs.Sig[:], ed25519.Sign(grantPriv, theirs.signed(w.ns)))
	before = sigChecks.Load()
	w.add(theirs)
	if n := sigChecks.Load() - before; n != 1 {
		t.Errorf("first replica: %d signature checks, want 1", n)
	}
	before = sigChecks.Load()
	w.replica(t, rootE, g, theirs)
	if n := sigChecks.Load() - before; n != 0 {
		t.Errorf("second replica: %d signature checks, want 0", n)
	}

	// A copy with its signature changed is another entry: checked, and
	// refused, at either replica.
	bad := *theirs
	bad.Sig[0] ^= 1
	before = sigChecks.Load()
	if err := w.replica(t, rootE, g).offer(&bad); !errors.Is(err, ErrBadSig) {
		t.Fatalf("changed signature: %v, want ErrBadSig", err)
	}
	if n := sigChecks.Load() - before; n != 1 {
		t.Errorf("changed signature: %d signature checks, want 1", n)
	}
	// The same body signed by another key that claims the grant: refused.
	_, other := newKey(t)
	forged := *theirs
	copy(forged.Sig[:], ed25519.Sign(other, forged.signed(w.ns)))
	if err := w.replica(t, rootE, g).offer(&forged); !errors.Is(err, ErrBadSig) {
		t.Fatalf("forged signature: %v, want ErrBadSig", err)
	}
}

// The cache keeps two generations: a key survives one turnover, not two.
func TestSignatureCacheBounded(t *testing.T) {
	var c sigCache
	k := sigKey{h: Hash{1}}
	c.add(k)
	for i := range sigCacheGen {
		c.add(sigKey{h: Hash{2, byte(i), byte(i >> 8)}})
	}
	if !c.has(k) {
		t.Fatal("key lost after one generation")
	}
	for i := range sigCacheGen {
		c.add(sigKey{h: Hash{3, byte(i), byte(i >> 8)}})
	}
	if c.has(k) {
		t.Fatal("key kept after two generations")
	}
	if len(c.cur)+len(c.old) > 2*sigCacheGen {
		t.Fatalf("%d keys kept", len(c.cur)+len(c.old))
	}
}

// FileInline keeps content up to its threshold in the entry, as long as
// the sealed entry stays within MaxSealed; past either, blocks; sealedLen
// is exactly what Seal makes.
func TestFileInline(t *testing.T) {
	w := newWorld(t)
	root := w.add(w.root.Root())
	for _, c := range []struct {
		size, inline int
		blocks       bool
	}{
		{100, InlineMax, false},
		{4096, InlineMax, true},
		{4096, 4096, false},
		{4097, 4096, true},
		{MaxSealed, MaxSealed, true}, // name, nonce and tag push it past MaxSealed
		{MaxSealed - sealNonce - sealTag - 1 - len("f"), MaxSealed, false},
	} {
		content := make([]byte, c.size)
		e, bs := w.root.FileInline(root, nil, "f", content, c.inline)
		if (len(bs) > 0) != c.blocks {
			t.Errorf("%d bytes, inline up to %d: %d blocks", c.size, c.inline, len(bs))
		}
		if got, want := len(w.key.Seal("f", content)), sealedLen("f", content); got != want {
			t.Errorf("sealedLen %d, Seal made %d", want, got)
		}
		if _, err := Decode(e.Encode()); err != nil {
			t.Errorf("%d bytes, inline up to %d: %v", c.size, c.inline, err)
		}
		w.add(e, bs...)
	}
}

// signedBy makes n write entries under root, signed (not through a
// Writer, so no check of this process has passed them) with priv for the
// grant g.
func (w *world) signedBy(n int, tag string, root, g Hash, priv ed25519.PrivateKey) []*Entry {
	var es []*Entry
	for i := range n {
		e := &Entry{Action: Write, Parents: []Hash{root}, Time: w.root.Clock.Next(), Signer: g,
			Sealed: w.key.Seal(fmt.Sprintf("%s%d", tag, i), []byte("x"))}
		copy(e.Sig[:], ed25519.Sign(priv, e.signed(w.ns)))
		es = append(es, e)
	}
	return es
}

// grantedWorld is a namespace whose root grants a key (bob's, whose
// private key it returns) write access to the top directory.
func grantedWorld(t *testing.T) (w *world, root Hash, g *Entry, priv ed25519.PrivateKey) {
	w = newWorld(t)
	root = w.add(w.root.Root())
	pub, priv := newKey(t)
	g = w.root.GrantKey(root, "bob", pub)
	w.add(g)
	return w, root, g, priv
}

func records(t *testing.T, es []*Entry) []Record {
	t.Helper()
	var rs []Record
	for _, e := range es {
		r, err := Decode(e.Encode())
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// Entries that arrive together have their signatures checked in one
// batch, and the replica's own checks then find them done. One bad
// signature spoils the batch: then every entry is checked alone, the bad
// one refused and the rest admitted. A batch too small, or whose signer
// is not known, is left to the single checks.
func TestVerifyBatch(t *testing.T) {
	w, root, g, priv := grantedWorld(t)

	es := w.signedBy(6, "a", root, g.Hash(), priv)
	checks, batches := sigChecks.Load(), sigBatches.Load()
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, es)); n != 6 {
		t.Fatalf("a good batch of 6: %d found good", n)
	}
	for _, e := range es {
		w.add(e)
	}
	if n := sigChecks.Load() - checks; n != 0 {
		t.Errorf("entries checked in a batch: %d checked again alone", n)
	}
	if n := sigBatches.Load() - batches; n != 1 {
		t.Errorf("%d batches checked, want 1", n)
	}
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, es)); n != 0 || sigBatches.Load()-batches != 1 {
		t.Errorf("the same batch again: %d checked, want none", n)
	}

	es = w.signedBy(6, "b", root, g.Hash(), priv)
	es[3].Sig[5] ^= 1
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, es)); n != 0 {
		t.Fatalf("a batch with a bad signature: %d found good", n)
	}
	checks = sigChecks.Load()
	for i, e := range es {
		err := w.offer(e)
		if i == 3 && !errors.Is(err, ErrBadSig) {
			t.Errorf("the bad signature: %v, want ErrBadSig", err)
		} else if i != 3 && err != nil {
			t.Errorf("good entry %d of a spoilt batch: %v", i, err)
		}
	}
	if n := sigChecks.Load() - checks; n != 6 {
		t.Errorf("after a spoilt batch: %d single checks, want 6", n)
	}

	batches = sigBatches.Load()
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, w.signedBy(BatchMin-1, "c", root, g.Hash(), priv))); n != 0 || sigBatches.Load() != batches {
		t.Errorf("a batch below %d: %d checked in %d batches", BatchMin, n, sigBatches.Load()-batches)
	}
	// Signed for a grant this replica does not hold: left for later.
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, w.signedBy(6, "d", root, Hash{7}, priv))); n != 0 || sigBatches.Load() != batches {
		t.Errorf("unknown signer: %d checked in %d batches", n, sigBatches.Load()-batches)
	}
	// The grant arriving in the same batch is enough.
	pub2, priv2 := newKey(t)
	g2 := w.root.GrantKey(root, "carol", pub2)
	withGrant := append([]*Entry{g2}, w.signedBy(5, "e", root, g2.Hash(), priv2)...)
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, withGrant)); n != 5 {
		t.Errorf("entries with their grant in the batch: %d found good, want 5 (the grant is signed here)", n)
	}
}

// A signature whose s is not reduced (s + ℓ: the same point, another
// encoding) is refused alone and spoils a batch: single and batch checks
// follow the same rules.
func TestSignatureMalleability(t *testing.T) {
	w, root, g, priv := grantedWorld(t)
	es := w.signedBy(5, "m", root, g.Hash(), priv)
	// ℓ = 2^252 + 27742317777372353535851937790883648493, little-endian.
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	be := slices.Clone(es[0].Sig[32:])
	slices.Reverse(be)
	s := new(big.Int).SetBytes(be)
	s.Add(s, l)
	b := s.FillBytes(make([]byte, 32))
	slices.Reverse(b)
	copy(es[0].Sig[32:], b)
	if n := VerifyBatch(w.ns, w.log.Entry, records(t, es)); n != 0 {
		t.Errorf("batch with an unreduced s: %d found good", n)
	}
	if err := w.offer(es[0]); !errors.Is(err, ErrBadSig) {
		t.Errorf("unreduced s alone: %v, want ErrBadSig", err)
	}
}
