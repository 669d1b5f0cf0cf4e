package dag

import (
	"crypto/ed25519"
	"sync"
	"sync/atomic"
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
