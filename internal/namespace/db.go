// Package namespace keeps namespaces on a replica and keeps replicas in
// step (layer 4). DB stores each namespace's log, the Merkle digests that
// anti-entropy compares, and — where the replica holds the read key — the
// materialised view: path → current state, with the names of a directory
// next to each other so listing a directory is an index scan. Replica adds
// replication: new entries go out on the gossip layer, and a periodic
// anti-entropy sync with a random peer exchanges what differs, so a node
// that was offline or partitioned converges. The rules themselves (what
// may enter a log, which version of a path is current) are package dag's.
package namespace

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	bolt "go.etcd.io/bbolt"
)

// Errors of the store.
var (
	ErrUnknown   = errors.New("namespace: unknown namespace")
	ErrNotFound  = errors.New("namespace: no such file or directory")
	ErrNoReadKey = errors.New("namespace: this replica does not hold the namespace's read key")
)

// Bucket names inside a namespace's bucket.
var (
	bRec  = []byte("rec")  // hash -> record
	bRef  = []byte("ref")  // parent|child -> nil
	bRev  = []byte("rev")  // grant|revoke -> nil
	bSig  = []byte("sig")  // signer grant|entry -> nil
	bWant = []byte("want") // block -> number of references
	bOwn  = []byte("own")  // block|entry -> nil: the writes whose chain a block is in
	bDig  = []byte("dig")  // 2-byte prefix -> xor(32) | count(8)
	bPath = []byte("path") // entry -> its path (replicas with the read key)
	bHist = []byte("hist") // path \0 entry -> nil
	bView = []byte("view") // dir \0 name -> encoded state
	bMeta = []byte("meta") // readkey, rules, root digest
	subs  = [][]byte{bRec, bRef, bRev, bSig, bWant, bOwn, bDig, bPath, bHist, bView, bMeta}
)

// poolMax bounds the records one namespace holds in memory while their
// references are fetched.
const poolMax = 20_000

// Options configure a DB.
type Options struct {
	// NoSync skips fsync on commit: faster, and a crash may lose the last
	// commits (anti-entropy brings them back from peers). Tests use it.
	NoSync bool
}

// DB is one replica's namespaces in one bbolt file. It is safe for
// concurrent use; writes are serialised.
type DB struct {
	db    *bolt.DB
	mu    sync.Mutex // serialises ingest and the pools
	pools map[dag.NSID]*dag.Pool
	clock dag.Clock
	notes *notifier

	qmu        sync.Mutex // the group-commit queue
	queue      []*ingestReq
	committing bool
	// OnAdmit, if set, is called after each commit with the records it
	// admitted (watchers use it). It runs in the ingesting goroutine.
	OnAdmit func(ns dag.NSID, raws [][]byte)
}

// OpenDB opens (creating if need be) the database at path.
func OpenDB(path string, opts Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: opts.NoSync, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("namespace: open %s: %w", path, err)
	}
	return &DB{db: db, pools: map[dag.NSID]*dag.Pool{}, notes: newNotifier()}, nil
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Clock is the replica's hybrid logical clock; it observes every entry
// admitted, so local entries are later than what the replica has seen.
func (d *DB) Clock() *dag.Clock { return &d.clock }

// Namespaces lists the namespaces the replica holds.
func (d *DB) Namespaces() []dag.NSID {
	var out []dag.NSID
	d.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if len(name) == 32 {
				out = append(out, dag.NSID(name))
			}
			return nil
		})
	})
	return out
}

// Open makes sure the replica holds namespace ns (empty until entries
// arrive). If key is not nil the replica keeps its view, under rules; a
// key given for a namespace that already has entries builds the view
// from the log.
func (d *DB) Open(ns dag.NSID, key *dag.ReadKey, rules dag.Rules) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(ns[:])
		if err != nil {
			return err
		}
		for _, s := range subs {
			if _, err := b.CreateBucketIfNotExists(s); err != nil {
				return err
			}
		}
		if key == nil {
			return nil
		}
		meta := b.Bucket(bMeta)
		if old := meta.Get([]byte("readkey")); old != nil && string(old) == string(key[:]) && meta.Get([]byte("rules"))[0] == byte(rules) {
			return nil
		}
		meta.Put([]byte("readkey"), key[:])
		meta.Put([]byte("rules"), []byte{byte(rules)})
		return rebuildView(newTxLog(tx, ns))
	})
}

// Result says what an Ingest did.
type Result struct {
	Admitted [][]byte   // encodings of the records admitted (to forward)
	Purged   int        // entries a revoke made invalid
	Missing  []dag.Hash // references to fetch
	Rejected []error    // records refused, and why
}

// Ingest offers records (encodings) to namespace ns, creating it if the
// replica did not hold it. Records are admitted in any order; ones that
// wait for references stay in memory. Concurrent calls are committed
// together (group commit): the first caller commits its records and
// whatever the others queued meanwhile in one transaction, so a burst of
// writes costs one fsync, and a lone write waits for nothing.
func (d *DB) Ingest(ns dag.NSID, raws [][]byte) (Result, error) {
	if d.holdsAll(ns, raws) {
		// Gossip brings most records several times: a batch of only
		// such costs a read, not a write transaction and its fsync.
		return Result{}, nil
	}
	// Decoded, and signatures checked in a batch, before the group
	// commit and outside its lock.
	req := &ingestReq{ns: ns, recs: make([]decoded, len(raws)), done: make(chan struct{})}
	for i, raw := range raws {
		req.recs[i].r, req.recs[i].err = dag.Decode(raw)
	}
	d.verifyBatch(ns, req.recs)
	d.qmu.Lock()
	d.queue = append(d.queue, req)
	if d.committing {
		d.qmu.Unlock()
		<-req.done
	} else {
		d.committing = true
		for len(d.queue) > 0 {
			batch := d.queue
			d.queue = nil
			d.qmu.Unlock()
			d.commit(batch)
			d.qmu.Lock()
		}
		d.committing = false
		d.qmu.Unlock()
	}
	if req.err != nil {
		return Result{}, req.err
	}
	if len(req.res.Admitted) > 0 {
		d.notes.notify(ns)
		if d.OnAdmit != nil {
			d.OnAdmit(ns, req.res.Admitted)
		}
	}
	return req.res, nil
}

// holdsAll reports whether the replica holds every one of raws already.
func (d *DB) holdsAll(ns dag.NSID, raws [][]byte) bool {
	all := len(raws) > 0
	d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(ns[:])
		if b == nil {
			all = false
			return nil
		}
		rec := b.Bucket(bRec)
		for _, raw := range raws {
			if h := dag.RawHash(raw); rec.Get(h[:]) == nil {
				all = false
				return nil
			}
		}
		return nil
	})
	return all
}

// verifyBatch checks the signatures of a batch of records together (see
// dag.VerifyBatch): the commit's own checks then find them done. A push
// or an exchange brings tens of entries at a time, and a signature
// checked in a batch costs ~0.6 of one checked alone.
func (d *DB) verifyBatch(ns dag.NSID, recs []decoded) {
	var entries []dag.Record
	for _, rec := range recs {
		if rec.err == nil && rec.r.Entry != nil {
			entries = append(entries, rec.r)
		}
	}
	if len(entries) < dag.BatchMin {
		return
	}
	d.db.View(func(tx *bolt.Tx) error {
		var entry func(dag.Hash) (*dag.Entry, bool)
		if tx.Bucket(ns[:]) != nil {
			entry = newTxLog(tx, ns).Entry
		}
		dag.VerifyBatch(ns, entry, entries)
		return nil
	})
}

// decoded is one record of an Ingest call, decoded (or why not).
type decoded struct {
	r   dag.Record
	err error
}

// ingestReq is one Ingest call waiting for its group commit.
type ingestReq struct {
	ns   dag.NSID
	recs []decoded
	res  Result
	err  error
	done chan struct{}
}

// commit admits a batch of requests in one transaction and wakes their
// callers.
func (d *DB) commit(batch []*ingestReq) {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.db.Update(func(tx *bolt.Tx) error {
		logs := map[dag.NSID]*txLog{}
		created := map[dag.NSID]bool{}
		admitted := map[dag.NSID]int{}
		for _, req := range batch {
			ns := req.ns
			pool := d.pools[ns]
			if pool == nil {
				pool = &dag.Pool{NS: ns, Max: poolMax}
				d.pools[ns] = pool
			}
			l := logs[ns]
			if l == nil {
				if tx.Bucket(ns[:]) == nil {
					b, err := tx.CreateBucket(ns[:])
					if err != nil {
						return err
					}
					for _, s := range subs {
						if _, err := b.CreateBucket(s); err != nil {
							return err
						}
					}
					created[ns] = true
				}
				l = newTxLog(tx, ns)
				logs[ns] = l
			}
			res := &req.res
			for _, rec := range req.recs {
				r, err := rec.r, rec.err
				if err != nil {
					res.Rejected = append(res.Rejected, err)
					continue
				}
				out, err := pool.Ingest(l, r)
				if err != nil {
					return err
				}
				for _, a := range out.Admitted {
					res.Admitted = append(res.Admitted, slices.Clone(a.Raw))
					if a.Entry != nil {
						d.clock.Observe(a.Entry.Time)
					}
				}
				admitted[ns] += len(out.Admitted)
				res.Purged += len(out.Purged)
				res.Missing = append(res.Missing, out.Missing...)
				res.Rejected = append(res.Rejected, out.Rejected...)
			}
			// What one record lacked, a later one of the same batch may
			// have brought (an entry's blocks after it): only report what
			// is still missing, so no one syncs for nothing.
			res.Missing = slices.DeleteFunc(res.Missing, l.Has)
		}
		for ns, l := range logs {
			if err := l.updateView(); err != nil {
				return err
			}
			// A namespace exists here once something of it is admitted:
			// junk sent for made-up namespaces leaves nothing behind.
			if created[ns] && admitted[ns] == 0 {
				if err := tx.DeleteBucket(ns[:]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for _, req := range batch {
		if err != nil {
			req.res, req.err = Result{}, fmt.Errorf("namespace: ingest: %w", err)
		}
		close(req.done)
	}
}

// Get returns the records with the given hashes that the replica holds.
func (d *DB) Get(ns dag.NSID, hashes []dag.Hash) [][]byte {
	var out [][]byte
	d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(ns[:])
		if b == nil {
			return nil
		}
		rec := b.Bucket(bRec)
		for _, h := range hashes {
			if v := rec.Get(h[:]); v != nil {
				out = append(out, slices.Clone(v))
			}
		}
		return nil
	})
	return out
}

// Digest summarises a set of records: the XOR of their hashes and their
// number. Two replicas with equal digests of a range hold the same records
// there (short of a deliberate collision, which only hides records a
// forger made).
type Digest struct {
	Xor   dag.Hash
	Count uint64
}

func (g *Digest) add(h dag.Hash, sign int) {
	for i := range g.Xor {
		g.Xor[i] ^= h[i]
	}
	g.Count = uint64(int64(g.Count) + int64(sign))
}

func (g *Digest) merge(o Digest) {
	for i := range g.Xor {
		g.Xor[i] ^= o.Xor[i]
	}
	g.Count += o.Count
}

// Digests returns the digests of the 256 ranges under a prefix of 0 or 1
// bytes (index i is the range prefix+i); the Merkle tree anti-entropy
// walks has 65,536 leaves, one per two-byte prefix.
func (d *DB) Digests(ns dag.NSID, prefix []byte) ([256]Digest, error) {
	var out [256]Digest
	if len(prefix) > 1 {
		return out, fmt.Errorf("namespace: digest prefix of %d bytes", len(prefix))
	}
	err := d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(ns[:])
		if b == nil {
			return nil
		}
		dig := b.Bucket(bDig)
		if len(prefix) == 0 && b.Bucket(bMeta).Get(metaLevel1) != nil {
			for i := range out {
				out[i] = decodeDigest(dig.Get([]byte{byte(i)}))
			}
			return nil
		}
		c := dig.Cursor()
		for k, v := c.Seek(prefix); k != nil && (len(prefix) == 0 || k[0] == prefix[0]); k, v = c.Next() {
			if len(k) != 2 {
				continue // a first-level digest
			}
			g := decodeDigest(v)
			if len(prefix) == 0 {
				out[k[0]].merge(g)
			} else {
				out[k[1]].merge(g)
			}
		}
		return nil
	})
	return out, err
}

// Root is the digest of the whole log.
func (d *DB) Root(ns dag.NSID) Digest {
	var g Digest
	d.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(ns[:]); b != nil {
			if v := b.Bucket(bMeta).Get([]byte("root")); v != nil {
				g = decodeDigest(v)
			}
		}
		return nil
	})
	return g
}

// Hashes lists the records in the leaves with the given 2-byte prefixes.
func (d *DB) Hashes(ns dag.NSID, prefixes [][2]byte) []dag.Hash {
	var out []dag.Hash
	d.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(ns[:])
		if b == nil {
			return nil
		}
		c := b.Bucket(bRec).Cursor()
		for _, p := range prefixes {
			for k, _ := c.Seek(p[:]); k != nil && k[0] == p[0] && k[1] == p[1]; k, _ = c.Next() {
				out = append(out, dag.Hash(k))
			}
		}
		return nil
	})
	return out
}

// All lists every record of ns (a watcher compares lists to find what
// arrived, whoever brought it).
func (d *DB) All(ns dag.NSID) []dag.Hash {
	var out []dag.Hash
	d.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(ns[:]); b != nil {
			b.Bucket(bRec).ForEach(func(k, _ []byte) error {
				out = append(out, dag.Hash(k))
				return nil
			})
		}
		return nil
	})
	return out
}

// Wait blocks until namespace ns changes after root or the timeout ends,
// and returns its root digest.
func (d *DB) Wait(ctx context.Context, ns dag.NSID, root Digest, timeout time.Duration) Digest {
	ch := d.notes.wait(ns)
	defer d.notes.cancel(ns, ch)
	if r := d.Root(ns); r != root {
		return r
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
	return d.Root(ns)
}

// digestLen is the size of an encoded Digest.
const digestLen = 32 + 8

func encodeDigest(g Digest) []byte { return appendDigest(nil, g) }

// appendDigest appends g's encoding to b.
func appendDigest(b []byte, g Digest) []byte {
	return binary.BigEndian.AppendUint64(append(b, g.Xor[:]...), g.Count)
}

func decodeDigest(v []byte) Digest {
	var g Digest
	if len(v) == 40 {
		copy(g.Xor[:], v)
		g.Count = binary.BigEndian.Uint64(v[32:])
	}
	return g
}

// notifier wakes waiters when a namespace changes.
type notifier struct {
	mu sync.Mutex
	w  map[dag.NSID]map[chan struct{}]bool
}

func newNotifier() *notifier { return &notifier{w: map[dag.NSID]map[chan struct{}]bool{}} }

func (n *notifier) wait(ns dag.NSID) chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.w[ns] == nil {
		n.w[ns] = map[chan struct{}]bool{}
	}
	n.w[ns][ch] = true
	n.mu.Unlock()
	return ch
}

func (n *notifier) cancel(ns dag.NSID, ch chan struct{}) {
	n.mu.Lock()
	delete(n.w[ns], ch)
	n.mu.Unlock()
}

func (n *notifier) notify(ns dag.NSID) {
	n.mu.Lock()
	for ch := range n.w[ns] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	n.mu.Unlock()
}
