// Package repairer keeps a grid's objects whole without any read
// capability: every storage node runs one, which takes the verify
// capabilities of the node's repair registry (node.Node.Registered), and,
// for each object whose turn is its own (the highest rendezvous hash of
// the storage index among the live nodes), checks the object and
// rebuilds its missing and quarantined shares from any k good ones
// (object.Client.Repair), moving at most Budget bytes of shares a second.
// Under the same budget it moves the shares of a drained node away
// (drain.go), and, when its node has clearly more of its capacity in use
// than the grid, shares to emptier nodes (rebalance.go).
package repairer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Defaults of Config.
const (
	DefaultEvery  = time.Hour
	DefaultBudget = 4 << 20
)

// Config configures a repairer. Zero values are the defaults.
type Config struct {
	Node *node.Node // the node it runs on (required)
	// Every is how long between the starts of two passes over the
	// registry; default 1 h, negative: no passes but those asked for
	// (Pass).
	Every time.Duration
	// Budget is the most bytes of shares a second the repairer reads
	// and writes, together; default 4 MiB/s.
	Budget int64
	// LeaseTerm is the term of the lease the repairer gives the shares
	// it rebuilds (object.Options.LeaseTerm); default 90 days.
	LeaseTerm time.Duration
	Stall     time.Duration // object.Options.Stall; default 20 s
	// Spread is how far above the grid's used fraction of capacity the
	// node's must be before its passes move shares to emptier nodes
	// (rebalance.go); default 0.05 (5 points), negative: never.
	Spread float64
	// RebalanceMax bounds the bytes of shares one rebalancing pass sends
	// away; default 1 GiB.
	RebalanceMax int64
	// RebalanceMinAge is how long ago a share must have been stored for
	// rebalancing to move it: an object whose upload may still be under
	// way stays, so that a target chosen because it holds none of the
	// object's shares does not receive one of them from the uploader
	// too. Default 10 minutes; negative: none.
	RebalanceMinAge time.Duration
	Logger          *slog.Logger
}

// recheckAfter is how long a repair pass waits to check again an object
// that did not check clean, before it rebuilds anything.
const recheckAfter = 500 * time.Millisecond

// Result is what one pass did.
type Result struct {
	Objects  int // registered objects whose turn was this node's
	Repaired int // shares rebuilt
	Failed   int // objects that could not be repaired this pass
	// Deferred counts the objects left for a later pass because a node
	// that may hold their shares did not answer (suspect, not yet
	// declared dead).
	Deferred int
}

// Repairer is a running repairer.
type Repairer struct {
	cfg    Config
	node   *node.Node
	nc     *node.Client // the node's identity, learning members from the node
	bucket *node.Bucket
	moved  atomic.Int64
	obj    *object.Client
	log    *slog.Logger
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	rebalanceMu sync.Mutex // one rebalancing pass at a time
	rebalancing bool       // the last pass found the node above the grid
}

// New returns a repairer of the node, and starts its passes unless
// Config.Every is negative.
func New(cfg Config) (*Repairer, error) {
	if cfg.Node == nil {
		return nil, errors.New("repairer: a node is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	key, err := leaseKey(cfg.Node)
	if err != nil {
		return nil, err
	}
	r := &Repairer{cfg: cfg, node: cfg.Node, log: cfg.Logger.With("node", cfg.Node.ID().Short()), stop: make(chan struct{})}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	r.bucket = node.NewBucket(cfg.Budget)
	r.nc = cfg.Node.LocalClient()
	grid := meteredGrid{TrailerGrid: object.NodeGrid{Client: r.nc, MaxAge: time.Second}, r: r}
	r.obj = object.New(grid, object.Options{
		LeaseSecret: func(si sharefile.SI) []byte {
			m := hmac.New(sha256.New, key)
			m.Write(si[:])
			return m.Sum(nil)
		},
		LeaseTerm: cfg.LeaseTerm, Stall: cfg.Stall, Logger: r.log,
	})
	r.wg.Add(1)
	go r.drainLoop() // drain.go
	if cfg.Every >= 0 {
		every := cfg.Every
		if every == 0 {
			every = DefaultEvery
		}
		r.wg.Add(1)
		go r.loop(every)
	}
	return r, nil
}

// leaseKey loads or creates DIR/repair.key, the node's own key for the
// leases of the shares it rebuilds: a secret of this node's alone, so no
// other party can cancel them.
func leaseKey(n *node.Node) ([]byte, error) {
	path := filepath.Join(n.Dir(), "repair.key")
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("repairer: %s is not a key of 32 bytes in hex", path)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("repairer: %w", err)
	}
	k := make([]byte, 32)
	rand.Read(k)
	if err := atomicfile.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("repairer: %w", err)
	}
	return k, nil
}

// Moved returns the bytes of shares the repairer has read and written.
func (r *Repairer) Moved() int64 { return r.moved.Load() }

// Close stops the passes and waits for the one under way to stop.
func (r *Repairer) Close() {
	r.once.Do(func() { close(r.stop) })
	r.wg.Wait()
}

func (r *Repairer) loop(every time.Duration) {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.stop
		cancel()
	}()
	for {
		start := time.Now()
		res, err := r.Pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("repair pass", "err", err)
		} else if res.Repaired > 0 || res.Failed > 0 {
			r.log.Info("repair pass done", "objects", res.Objects, "repaired", res.Repaired, "failed", res.Failed)
		}
		reb, err := r.RebalancePass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("rebalance pass", "err", err)
		} else if reb.Moved > 0 || reb.Failed > 0 {
			r.log.Info("rebalance pass done", "moved", reb.Moved, "bytes", reb.Bytes, "failed", reb.Failed)
		}
		t := time.NewTimer(max(time.Until(start.Add(every)), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Responsible returns the live node whose turn it is to look after the
// object of storage index si: the one with the highest SHA-256 of the
// storage index and its ID (rendezvous hashing), so that each object has
// one repairer and a node's death moves only its own objects to others.
func Responsible(si sharefile.SI, live []string) string {
	var best string
	var bestScore [32]byte
	for _, id := range live {
		h := sha256.New()
		h.Write(si[:])
		h.Write([]byte(id))
		var s [32]byte
		copy(s[:], h.Sum(nil))
		if best == "" || string(s[:]) > string(bestScore[:]) {
			best, bestScore = id, s
		}
	}
	return best
}

// Pass checks every registered object whose turn is this node's, and
// repairs those that need it.
func (r *Repairer) Pass(ctx context.Context) (Result, error) {
	var res Result
	reg, err := r.node.Registered()
	if err != nil {
		return res, err
	}
	if reg == nil {
		reg = map[sharefile.SI]string{}
	}
	var live []string
	for _, m := range r.node.Members() {
		if m.State == member.Alive {
			live = append(live, m.ID)
		}
	}
	self := string(r.node.ID())
	if learnt := r.catchUp(ctx, live, reg); learnt > 0 {
		r.log.Info("repair registry: learnt entries from a peer", "entries", learnt)
	}
	for si, entry := range reg {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if Responsible(si, live) != self {
			continue
		}
		vc, err := codec.ParseVerifyCap(entry)
		if err != nil || vc.SI != si {
			r.log.Warn("repair registry: an entry is not the verify capability of its storage index", "si", hex.EncodeToString(si[:]), "err", err)
			continue
		}
		res.Objects++
		rep, err := r.obj.Check(ctx, vc, false)
		if err == nil && rep.Clean() {
			continue
		}
		// Look again a moment later before rebuilding anything: a share
		// that a drain or a rebalancing pass moved while the check asked
		// the nodes (the target asked before the copy landed, the source
		// after it removed its own) looks missing or damaged for that
		// moment, and would be rebuilt as a second copy.
		if err == nil {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(recheckAfter):
			}
			if rep, err = r.obj.Check(ctx, vc, false); err == nil && rep.Clean() {
				continue
			}
		}
		if err == nil && len(rep.Unreached) > 0 {
			// Its shares may be back in a moment: copying them
			// elsewhere now would only over-replicate. Wait for
			// gossip to decide.
			res.Deferred++
			r.log.Debug("repair deferred: a node did not answer", "si", hex.EncodeToString(si[:8]), "node", rep.Unreached[0].Node, "err", rep.Unreached[0].Err)
			continue
		}
		if rep != nil {
			r.log.Debug("repairing", "si", hex.EncodeToString(si[:8]), "good", rep.Good, "total", rep.Total, "copies", fmt.Sprint(rep.Copies), "err", err)
		}
		rep, err = r.obj.Repair(ctx, vc, false)
		if rep != nil {
			for _, s := range rep.Repaired {
				if s.Err == nil {
					res.Repaired++
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Failed++
			r.log.Warn("repair failed", "si", hex.EncodeToString(si[:8]), "err", err)
		}
	}
	return res, nil
}

// catchUp reads the registry of one other live node, chosen at random,
// and keeps the entries this node lacks (a node that was down when an
// object was stored, or joined since, learns of it so), adding them to
// reg. It returns how many it learnt; a peer that fails is tried again
// next pass.
func (r *Repairer) catchUp(ctx context.Context, live []string, reg map[sharefile.SI]string) int {
	self := string(r.node.ID())
	var peers []string
	for _, id := range live {
		if id != self {
			peers = append(peers, id)
		}
	}
	if len(peers) == 0 {
		return 0
	}
	peer := peers[mrand.IntN(len(peers))]
	// The client reaches nodes by ID once it has their addresses.
	if _, err := r.nc.Members(ctx, time.Second); err != nil {
		r.log.Debug("repair registry: members", "err", err)
		return 0
	}
	entries, err := r.nc.Registry(ctx, peer)
	if err != nil {
		r.log.Debug("repair registry: a peer's", "peer", peer, "err", err)
		return 0
	}
	var batch []node.RegistryEntry
	for _, e := range entries {
		vc, err := codec.ParseVerifyCap(e)
		if err != nil {
			continue
		}
		if _, ok := reg[vc.SI]; ok {
			continue
		}
		batch = append(batch, node.RegistryEntry{SI: vc.SI, Entry: vc.String()})
	}
	if err := r.node.RegisterMany(batch); err != nil {
		r.log.Warn("repair registry: keeping a peer's entries", "err", err)
		return 0
	}
	for _, e := range batch {
		reg[e.SI] = e.Entry
	}
	return len(batch)
}

// Register gives every live node of the grid an entry of its repair
// registry for the object: its verify capability, never a read
// capability, asking them all at once (RegisterAll of one). It returns
// how many nodes took it; an error only if none did.
func Register(ctx context.Context, c *node.Client, vc codec.VerifyCap) (int, error) {
	return RegisterAll(ctx, c, []codec.VerifyCap{vc})
}

// RegisterAll gives every live node of the grid an entry of its repair
// registry for each of the objects, as Register does for one, in
// batches of node.MaxRegistryBatch entries (one request and one
// transaction each), all nodes at once. It returns how many nodes took
// every entry; an error only if none did.
func RegisterAll(ctx context.Context, c *node.Client, vcs []codec.VerifyCap) (int, error) {
	if len(vcs) == 0 {
		return 0, nil
	}
	ms, err := c.Members(ctx, time.Second)
	if err != nil {
		return 0, err
	}
	entries := make([]node.RegistryEntry, len(vcs))
	for i, vc := range vcs {
		entries[i] = node.RegistryEntry{SI: vc.SI, Entry: vc.String()}
	}
	var ok int
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ms {
		if m.State != member.Alive {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			for rest := entries; len(rest) > 0 && err == nil; {
				n := min(len(rest), node.MaxRegistryBatch)
				err = c.RegisterMany(ctx, m.ID, rest[:n])
				rest = rest[n:]
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ok++
		}()
	}
	wg.Wait()
	if ok == 0 {
		return 0, fmt.Errorf("repairer: no node took the objects' registry entries: %w", errors.Join(errs...))
	}
	return ok, nil
}

// meteredGrid is the grid as the repairer sees it: every byte of share
// it reads or writes first waits for the budget.
type meteredGrid struct {
	object.TrailerGrid
	r *Repairer
}

func (g meteredGrid) PutShare(ctx context.Context, n string, key sharestore.Key, rd io.Reader, size int64, lease sharestore.Lease) error {
	return g.TrailerGrid.PutShare(ctx, n, key, &meter{ctx: ctx, r: rd, rep: g.r}, size, lease)
}

func (g meteredGrid) GetShare(ctx context.Context, n string, key sharestore.Key, off, length int64) (io.ReadCloser, error) {
	rc, err := g.TrailerGrid.GetShare(ctx, n, key, off, length)
	if err != nil {
		return nil, err
	}
	return readCloser{&meter{ctx: ctx, r: rc, rep: g.r}, rc}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// meter reads at most the bucket's burst at a time, each after paying
// for it.
type meter struct {
	ctx context.Context
	r   io.Reader
	rep *Repairer
}

func (m *meter) Read(p []byte) (int, error) {
	if len(p) > m.rep.bucket.Burst() {
		p = p[:m.rep.bucket.Burst()]
	}
	if err := m.rep.bucket.Wait(m.ctx, int64(len(p))); err != nil {
		return 0, err
	}
	k, err := m.r.Read(p)
	m.rep.moved.Add(int64(k))
	return k, err
}
