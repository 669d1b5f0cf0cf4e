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
	// reference) that list h among their Parents: those whose signature
	// checks acknowledge h too.
	Waiting func(h Hash) []Record
}

// Check verifies an entry against what the replica holds: its references
// are present, its anchor is a directory, the signature is good, the
// signer's grant covers the anchor, a revoke outranks what it revokes, and
// no grant in the signer's chain is revoked unless the entry was
// acknowledged. It returns *MissingError when references are missing, or
// an error wrapping ErrMalformed, ErrBadSig, ErrForbidden or ErrRevoked.
func (c *Checker) Check(e *Entry) error {
	if err := e.wellFormed(); err != nil {
		return err
	}
	var missing []Hash
	need := func(h Hash) {
		if _, ok := c.Index.Entry(h); !ok && !slices.Contains(missing, h) {
			missing = append(missing, h)
		}
	}
	for _, p := range e.Parents {
		need(p)
	}
	if !e.Signer.IsZero() {
		need(e.Signer)
	}
	if e.Action == Revoke {
		need(e.RefHash())
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
	if !ed25519.Verify(pub, e.signed(c.NS), e.Sig[:]) {
		return ErrBadSig
	}
	if c.revoked(e.Signer) && !c.acked(e.Hash(), map[Hash]bool{}) {
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

// revoked reports whether a grant in the chain from signer up to the root
// key has an admitted revoke.
func (c *Checker) revoked(signer Hash) bool {
	for g := signer; !g.IsZero(); {
		if len(c.Index.Revokes(g)) > 0 {
			return true
		}
		e, ok := c.Index.Entry(g)
		if !ok {
			return false
		}
		g = e.Signer
	}
	return false
}

// acked reports whether an entry that is valid on its own account (not
// revoked, or acked itself) lists h among its parents.
func (c *Checker) acked(h Hash, seen map[Hash]bool) bool {
	if seen[h] {
		return false
	}
	seen[h] = true
	for _, r := range c.Index.Referrers(h) {
		e, _ := c.Index.Entry(r)
		if e != nil && (!c.revoked(e.Signer) || c.acked(r, seen)) {
			return true
		}
	}
	if c.Waiting != nil {
		for _, r := range c.Waiting(h) {
			if c.signatureOK(r.Entry) && (!c.revoked(r.Entry.Signer) || c.acked(r.Hash, seen)) {
				return true
			}
		}
	}
	return false
}

// signatureOK checks the signature of an entry not yet admitted, if its
// signer is known.
func (c *Checker) signatureOK(e *Entry) bool {
	pub := c.NS.PublicKey()
	if !e.Signer.IsZero() {
		g, ok := c.Index.Entry(e.Signer)
		if !ok || g.Action != Grant {
			return false
		}
		pub = g.Ref
	}
	return ed25519.Verify(pub, e.signed(c.NS), e.Sig[:])
}

// Purge lists the admitted entries that a newly admitted revoke makes
// invalid: those signed under the revoked grant (directly or through
// grants it made) that nothing valid acknowledges. The caller removes
// them; they are rejected if they come again unacknowledged.
func (c *Checker) Purge(revoke *Entry) []Hash {
	var cands []Hash
	grants := []Hash{revoke.RefHash()}
	for len(grants) > 0 {
		g := grants[len(grants)-1]
		grants = grants[:len(grants)-1]
		for _, h := range c.Index.SignedBy(g) {
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
		for _, h := range cands {
			e, ok := c.Index.Entry(h)
			if ok && c.revoked(e.Signer) && !c.acked(h, map[Hash]bool{}) {
				gone[h], changed = true, true
			}
		}
	}
	out := make([]Hash, 0, len(gone))
	for _, h := range cands {
		if gone[h] {
			out = append(out, h)
			delete(gone, h)
		}
	}
	return out
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

func (w without) Revokes(g Hash) []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.Revokes(g)), func(r Hash) bool { return w.gone[r] })
}

func (w without) Referrers(h Hash) []Hash {
	return slices.DeleteFunc(slices.Clone(w.Index.Referrers(h)), func(r Hash) bool { return w.gone[r] })
}
