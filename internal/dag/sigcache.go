package dag

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"

	"github.com/hdevalence/ed25519consensus"
)

// sigKey names one signature check: an entry (its hash covers its body,
// signer and signature) in a namespace (which the signature covers), under
// a public key.
type sigKey struct {
	ns  NSID
	h   Hash
	pub [ed25519.PublicKeySize]byte
}

// sigCache remembers, for the whole process, signature checks that
// passed. Several replicas often live in one process (quilt up runs ten
// storage nodes and a gateway in one), and each used to verify every
// entry again: an Ed25519 check costs ~110 µs here, as much as the rest
// of admitting a small entry. A writer's own entries go in when it signs
// them. Only passes are kept, under a key that a changed entry, another
// namespace or another key cannot match (short of a BLAKE3 collision),
// so the cache can skip work but never admit what would fail.
//
// It holds at most two generations of sigCacheGen keys (~4 MB): an entry
// is re-verified by the replicas of a process within seconds, so older
// keys are worth little.
type sigCache struct {
	mu       sync.Mutex
	cur, old map[sigKey]struct{}
}

const sigCacheGen = 1 << 14

var verifiedSigs sigCache

// sigChecks counts the Ed25519 checks actually made (for tests).
var sigChecks atomic.Int64

func (c *sigCache) has(k sigKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.cur[k]
	if !ok {
		_, ok = c.old[k]
	}
	return ok
}

func (c *sigCache) add(k sigKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || len(c.cur) >= sigCacheGen {
		c.old, c.cur = c.cur, make(map[sigKey]struct{}, sigCacheGen)
	}
	c.cur[k] = struct{}{}
}

func newSigKey(ns NSID, h Hash, pub ed25519.PublicKey) (sigKey, bool) {
	k := sigKey{ns: ns, h: h}
	if len(pub) != len(k.pub) {
		return k, false
	}
	copy(k.pub[:], pub)
	return k, true
}

// BatchMin is the fewest unchecked signatures VerifyBatch checks
// together: a batch of one costs more than a single check, and from about
// eight on a signature in a batch costs ~0.6 of one checked alone.
const BatchMin = 4

// sigBatches counts the batches VerifyBatch checked (for tests).
var sigBatches atomic.Int64

// VerifyBatch checks, in one batch, the signatures of the entries among
// recs whose signing key it can find (the root key, or the key of a grant
// that the replica holds or recs bring) and that no check in this process has
// passed yet (entry, if not nil, looks up what the replica holds). If
// they all pass, it remembers them as the process's other
// checks do, so that a Checker admitting these entries finds each
// signature done; if any fails, it remembers none, and the Checker checks
// each alone, as without it. It decides nothing: a Checker still checks
// everything else, including that the key it finds is the one that must
// have signed. It returns how many signatures it found good.
//
// A replica that receives entries in batches (a push from a peer, an
// anti-entropy exchange) calls it before ingesting them. Batch and single
// checks follow the same rules (ZIP 215: the cofactored equation,
// non-canonical point encodings accepted, a canonical s required), so a
// signature is good or bad whichever way it is checked, and replicas
// agree on every entry.
func VerifyBatch(ns NSID, entry func(Hash) (*Entry, bool), recs []Record) int {
	var grants map[Hash]*Entry
	for _, r := range recs {
		if r.Entry != nil && r.Entry.Action == Grant {
			if grants == nil {
				grants = map[Hash]*Entry{}
			}
			grants[r.Hash] = r.Entry
		}
	}
	var keys []sigKey
	var bv ed25519consensus.BatchVerifier
	for _, r := range recs {
		e := r.Entry
		if e == nil {
			continue
		}
		var pub ed25519.PublicKey
		if e.Signer.IsZero() {
			pub = ns.PublicKey()
		} else if g := grants[e.Signer]; g != nil {
			pub = g.Ref
		} else if g, ok := lookup(entry, e.Signer); ok && g.Action == Grant {
			pub = g.Ref
		} else {
			continue // its signer is not here yet: checked when it is
		}
		k, ok := newSigKey(ns, r.Hash, pub)
		if !ok || verifiedSigs.has(k) {
			continue
		}
		if keys == nil {
			bv = ed25519consensus.NewPreallocatedBatchVerifier(len(recs))
		}
		bv.Add(pub, e.signed(ns), e.Sig[:])
		keys = append(keys, k)
	}
	if len(keys) < BatchMin {
		return 0
	}
	sigBatches.Add(1)
	if !bv.Verify() {
		return 0
	}
	for _, k := range keys {
		verifiedSigs.add(k)
	}
	return len(keys)
}

func lookup(entry func(Hash) (*Entry, bool), h Hash) (*Entry, bool) {
	if entry == nil {
		return nil, false
	}
	return entry(h)
}

// verifySig is the single signature check: ZIP 215's rules, as
// VerifyBatch's (see there).
func verifySig(pub ed25519.PublicKey, msg, sig []byte) bool {
	return ed25519consensus.Verify(pub, msg, sig)
}
