package dag

import (
	"crypto/ed25519"
	"fmt"
	"slices"
)

// Index is what a replica holds, as the rules need to see it. Every entry
// it returns was admitted by Check. Implementations need not be safe for
// concurrent use; Checker calls them from one goroutine.
type Index interface {
	Entry(h Hash) (*Entry, bool)
	Referrers(h Hash) []Hash    // admitted entries that list h among their Parents
	Revokes(grant Hash) []Hash  // admitted revoke entries of a grant
	SignedBy(grant Hash) []Hash // admitted entries signed by a grant's key
	Revoked() []Hash            // grants that have an admitted revoke
}

// MissingError says an entry cannot be checked yet: it refers to entries
// the replica does not hold. Fetch them and check again.
type MissingError struct{ Hashes []Hash }

func (e *MissingError) Error() string {
	return fmt.Sprintf("dag: %d referenced entries missing (first %s)", len(e.Hashes), e.Hashes[0].Short())
}

// Checker decides whether entries may enter a replica of namespace NS.
type Checker struct {
	NS    NSID
	Index Index
	// Waiting, if set, returns records not yet admitted (held for a missing
	// reference) that list h among their Parents. One that passes every
	// check once h is there acknowledges h as an admitted entry would.
	Waiting func(h Hash) []Record

	// Verified, if set, caches entries whose signature checked (by hash),
	// across calls.
	Verified map[Hash]bool

	memo map[Hash]bool // acked results, within one Check or Purge round
}

// verify checks an entry's signature, through the checker's cache and the
// process's (see sigCache).
func (c *Checker) verify(pub ed25519.PublicKey, e *Entry, h Hash) bool {
	if c.Verified != nil && c.Verified[h] {
		return true
	}
	k, keyed := newSigKey(c.NS, h, pub)
	ok := keyed && verifiedSigs.has(k)
	if !ok {
		sigChecks.Add(1)
		ok = verifySig(pub, e.signed(c.NS), e.Sig[:])
		if ok && keyed {
			verifiedSigs.add(k)
		}
	}
	if ok && c.Verified != nil {
		c.Verified[h] = true
	}
	return ok
}

// Check verifies an entry against what the replica holds: its references
// are present, its anchor is a directory, the signature is good, the
// signer's grant covers the anchor, a revoke outranks what it revokes, and
// no grant in the signer's chain is revoked unless the entry was
// acknowledged. It returns *MissingError when references are missing (a
// bad signature is refused first when the signer is known), or an error
// wrapping ErrMalformed, ErrBadSig, ErrForbidden or ErrRevoked.
func (c *Checker) Check(e *Entry) error {
	c.memo = map[Hash]bool{}
	return c.check(e, e.Hash(), false)
}

// check is Check; relaxed lets parents other than the anchor be missing
// (a held entry judged as an acknowledger: what it supersedes need not
// be here for its word to count).
func (c *Checker) check(e *Entry, h Hash, relaxed bool) error {
	if err := e.wellFormed(); err != nil {
		return err
	}
	var missing []Hash
	need := func(h Hash) {
		if _, ok := c.Index.Entry(h); !ok && !slices.Contains(missing, h) {
			missing = append(missing, h)
		}
	}
	for i, p := range e.Parents {
		if i == 0 || !relaxed {
			need(p)
		}
	}
	if !e.Signer.IsZero() {
		need(e.Signer)
	}
	if e.Action == Revoke {
		need(e.RefHash())
	}
	verified := false
	if !slices.Contains(missing, e.Signer) {
		pub, _, err := c.signer(e)
		if err != nil {
			return err
		}
		if !c.verify(pub, e, h) {
			return ErrBadSig
		}
		verified = true
	}
	if len(missing) > 0 {
		return &MissingError{missing}
	}
	if !e.IsRoot() {
		if a, _ := c.Index.Entry(e.Anchor()); a.Action != Mkdir {
			return fmt.Errorf("%w: anchor %s is a %s, not a directory", ErrMalformed, e.Anchor().Short(), a.Action)
		}
	}
	pub, auth, err := c.signer(e)
	if err != nil {
		return err
	}
	if !e.IsRoot() && !c.covers(c.scope(e.Signer), e.Anchor()) {
		return fmt.Errorf("%w: its grant does not cover this directory", ErrForbidden)
	}
	if e.Action == Revoke {
		t, _ := c.Index.Entry(e.RefHash())
		if t.Action != Grant {
			return fmt.Errorf("%w: a revoke names a grant, not a %s", ErrMalformed, t.Action)
		}
		if e.Anchor() != t.Anchor() {
			return fmt.Errorf("%w: a revoke hangs where its grant does", ErrMalformed)
		}
		if auth >= c.Authority(e.RefHash()) {
			return fmt.Errorf("%w: only a key of higher authority may revoke a grant", ErrForbidden)
		}
	}
	if !verified && !c.verify(pub, e, h) {
		return ErrBadSig
	}
	if c.revokedAt(e.Signer) >= 0 && !c.acked(h, e, map[Hash]bool{}) {
		return ErrRevoked
	}
	return nil
}

// signer finds the key that must have signed e and its authority.
func (c *Checker) signer(e *Entry) (ed25519.PublicKey, int, error) {
	if e.Signer.IsZero() {
		return c.NS.PublicKey(), 0, nil
	}
	g, _ := c.Index.Entry(e.Signer)
	if g.Action != Grant {
		return nil, 0, fmt.Errorf("%w: signer %s is a %s, not a grant", ErrMalformed, e.Signer.Short(), g.Action)
	}
	return ed25519.PublicKey(g.Ref), c.Authority(e.Signer), nil
}

// Authority is the rank of a signer: 0 for the root key, and for a grant
// one more than the depth of the directory it hangs from. Lower is higher.
func (c *Checker) Authority(grant Hash) int {
	if grant.IsZero() {
		return 0
	}
	g, ok := c.Index.Entry(grant)
	if !ok {
		return 1 << 30
	}
	return c.depth(g.Anchor()) + 1
}

// SignerKey is the public key behind a signer, as a string (empty if the
// grant is unknown).
func (c *Checker) SignerKey(grant Hash) string {
	if grant.IsZero() {
		return string(c.NS[:])
	}
	if g, ok := c.Index.Entry(grant); ok {
		return string(g.Ref)
	}
	return ""
}

// scope is the directory a signer may write under (zero: everywhere).
func (c *Checker) scope(grant Hash) Hash {
	if grant.IsZero() {
		return Hash{}
	}
	g, _ := c.Index.Entry(grant)
	return g.Anchor()
}

// depth counts the directories above dir.
func (c *Checker) depth(dir Hash) int {
	d := 0
	for e, ok := c.Index.Entry(dir); ok && !e.IsRoot(); e, ok = c.Index.Entry(e.Anchor()) {
		d++
	}
	return d
}

// covers reports whether dir is scope or under it (any dir is under zero).
func (c *Checker) covers(scope, dir Hash) bool {
	if scope.IsZero() {
		return true
	}
	for i := 0; i < 1<<16; i++ {
		if dir == scope {
			return true
		}
		e, ok := c.Index.Entry(dir)
		if !ok || e.IsRoot() {
			return false
		}
		dir = e.Anchor()
	}
	return false
}

// revokedAt returns the authority of the highest revoked grant in the
// chain from signer up to the root key, or -1 if none is revoked.
func (c *Checker) revokedAt(signer Hash) int {
	at := -1
	for g, n := signer, 0; !g.IsZero() && n < 1<<16; n++ {
		if len(c.Index.Revokes(g)) > 0 {
			at = c.Authority(g)
		}
		e, ok := c.Index.Entry(g)
		if !ok {
			break
		}
		g = e.Signer
	}
	return at
}

// valid reports whether an admitted entry stands: its signer's chain is
// not revoked, or it is acknowledged.
func (c *Checker) valid(h Hash, e *Entry, seen map[Hash]bool) bool {
	return c.revokedAt(e.Signer) < 0 || c.acked(h, e, seen)
}

// acked reports whether entry h (e), whose signer's chain has a revoked
// grant, is acknowledged: listed among the parents of a valid entry whose
// signer outranks the highest revoked grant of e's chain and may write
// where e hangs (an ack, the revoke itself, or a later version written by
// such a key); or, for a grant, used to sign an entry that stands.
func (c *Checker) acked(h Hash, e *Entry, seen map[Hash]bool) bool {
	if v, ok := c.memo[h]; ok {
		return v
	}
	if seen[h] {
		return false
	}
	seen[h] = true
	threshold := c.revokedAt(e.Signer)
	outranks := func(a *Entry) bool {
		return c.Authority(a.Signer) < threshold && (e.IsRoot() || c.covers(c.scope(a.Signer), e.Anchor()))
	}
	result := false
	for _, r := range c.Index.Referrers(h) {
		a, ok := c.Index.Entry(r)
		if !ok {
			continue
		}
		// An outranking entry that stands acknowledges h; so does an
		// entry kept by acknowledgement, for its history stays whole.
		if (outranks(a) && c.valid(r, a, seen)) || (c.revokedAt(a.Signer) >= 0 && c.acked(r, a, seen)) {
			result = true
			break
		}
	}
	if !result && e.Action == Grant {
		// A grant stays while an entry signed under it, or a revoke of
		// it, stands.
		for _, s := range append(slices.Clone(c.Index.SignedBy(h)), c.Index.Revokes(h)...) {
			if a, ok := c.Index.Entry(s); ok && c.valid(s, a, seen) {
				result = true
				break
			}
		}
	}
	if !result && c.Waiting != nil {
		over := &Checker{NS: c.NS, Index: with{c.Index, h, e}, Waiting: c.Waiting, Verified: c.Verified}
		for _, r := range c.Waiting(h) {
			over.memo = map[Hash]bool{}
			if over.check(r.Entry, r.Hash, true) == nil && (outranks(r.Entry) || over.revokedAt(r.Entry.Signer) >= 0) {
				result = true
				break
			}
		}
	}
	if c.memo != nil {
		c.memo[h] = result
	}
	return result
}

// Purge lists the admitted entries that revocations make invalid: those
// signed under a revoked grant (directly or through grants its key made)
// that nothing acknowledges. Call it after admitting a revoke; the caller
// removes them, and they are refused if they come again unacknowledged.
func (c *Checker) Purge() []Hash {
	var cands []Hash
	seen := map[Hash]bool{}
	grants := slices.Clone(c.Index.Revoked())
	for len(grants) > 0 {
		g := grants[len(grants)-1]
		grants = grants[:len(grants)-1]
		for _, h := range c.Index.SignedBy(g) {
			if seen[h] {
				continue
			}
			seen[h] = true
			cands = append(cands, h)
			if e, ok := c.Index.Entry(h); ok && e.Action == Grant {
				grants = append(grants, h)
			}
		}
	}
	gone := map[Hash]bool{}
	idx := c.Index
	c.Index = without{idx, gone}
	defer func() { c.Index = idx }()
	for changed := true; changed; {
		changed = false
		c.memo = map[Hash]bool{}
		for _, h := range cands {
			if gone[h] {
				continue
			}
			if e, ok := c.Index.Entry(h); ok && !c.valid(h, e, map[Hash]bool{}) {
				gone[h], changed = true, true
			}
		}
	}
	out := make([]Hash, 0, len(gone))
	for _, h := range cands {
		if gone[h] {
			out = append(out, h)
		}
	}
	return out
}

// with adds one entry to an index (a held entry, as if admitted).
type with struct {
	Index
	h Hash
	e *Entry
}

func (w with) Entry(h Hash) (*Entry, bool) {
	if h == w.h {
		return w.e, true
	}
	return w.Index.Entry(h)
}

// without hides some entries of an index.
type without struct {
	Index
	gone map[Hash]bool
}

func (w without) Entry(h Hash) (*Entry, bool) {
	if w.gone[h] {
		return nil, false
	}
	return w.Index.Entry(h)
}

func (w without) Revoked() []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.Revoked()), func(g Hash) bool { return len(w.Revokes(g)) == 0 })
}

func (w without) SignedBy(g Hash) []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.SignedBy(g)), func(r Hash) bool { return w.gone[r] })
}

func (w without) Revokes(g Hash) []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.Revokes(g)), func(r Hash) bool { return w.gone[r] })
}

func (w without) Referrers(h Hash) []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.Referrers(h)), func(r Hash) bool { return w.gone[r] })
}
