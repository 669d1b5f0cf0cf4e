package dag

import (
	"crypto/ed25519"
	"errors"
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
