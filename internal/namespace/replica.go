package namespace

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
)

// gossipTag starts a namespace record on the gossip layer.
const gossipTag = 'N'

// maxGossip is the largest record broadcast on gossip; bigger ones are
// pushed to peers (see pushLarge) and anti-entropy repairs the rest
// (memberlist's messages are UDP datagrams).
const maxGossip = 1100

// tooLarge reports whether a record is too big for a gossip message.
func tooLarge(raw []byte) bool { return len(raw)+33 > maxGossip }

// ReplicaConfig configures a Replica. Zero values are the defaults.
type ReplicaConfig struct {
	DB *DB
	// SyncInterval is how often anti-entropy runs with one random peer;
	// default 5 s. It runs sooner when gossip brought an entry whose
	// references are still missing KickWait later.
	SyncInterval time.Duration
	// KickWait is how long a replica waits for missing references to
	// arrive by themselves before it syncs for them; default a fifth of
	// SyncInterval.
	KickWait time.Duration
	// RetransmitMult scales how many times each broadcast is sent
	// (memberlist's: mult × log(nodes+1)); default 4.
	RetransmitMult int
	// PushWait is how long records too big for gossip, written here by
	// a client, are gathered before they are pushed to the peers;
	// default 200 ms. Longer batches are fewer requests, signature
	// batches and commits at every peer: 4 KiB S3 PUTs on ten node
	// processes cost ~12% less CPU with 50 ms than with 20, and ~10% less
	// again with 200 (docs/benchmarks.md). The gateway that took a write
	// reads it at once; other replicas see it up to PushWait later.
	PushWait time.Duration
	// PushFanout is how many peers (at random) such records are pushed
	// to; default 16. The rest get them by anti-entropy.
	PushFanout int
	Logger     *slog.Logger
	// Clock times anti-entropy rounds, kick waits and push batches;
	// default the real clock (tests move a fake one by hand).
	Clock clock.Clock
}

// Stats counts a replica's traffic.
type Stats struct {
	Received  int64 // records received by gossip
	Admitted  int64 // records admitted (any source)
	Rejected  int64 // records refused: bad hash, signature, grant, revoked
	Dropped   int64 // gossip messages dropped (queue full, malformed)
	Syncs     int64 // anti-entropy exchanges completed
	SyncFails int64
	Pulled    int64 // records admitted by anti-entropy
	Pushed    int64 // records peers admitted from our pushes
	// PushedLarge counts records too big for gossip that peers admitted
	// from our direct pushes (see ReplicaConfig.PushFanout).
	PushedLarge int64
}

// Replica replicates a DB's namespaces with the other nodes of a grid:
// it broadcasts newly admitted entries on gossip (member.Messages) and
// runs anti-entropy with random peers. Install it in a node with
// node.Config{Messages: r, Mount: r.Mount}.
type Replica struct {
	cfg   ReplicaConfig
	db    *DB
	log   *slog.Logger
	queue *memberlist.TransmitLimitedQueue
	in    chan []byte
	kick  chan struct{}
	nodes atomic.Int64

	// Records too big for gossip that clients wrote here, waiting to be
	// pushed to the peers (see pushLarge).
	pushMu       sync.Mutex
	pending      map[dag.NSID][][]byte
	nPending     int
	pendingBytes int
	pushKick     chan struct{}
	pushedLarge  atomic.Int64

	missMu   sync.Mutex
	missing  map[dag.NSID]map[dag.Hash]bool // reported missing since the last look
	nMissing int
	overflow bool

	mu    sync.Mutex
	peers func() []Peer
	// ctx is cancelled by Close: it ends the loops and their requests.
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	received, admitted, rejected, dropped, syncs, syncFails, pulled, pushed atomic.Int64
}

var _ member.Messages = (*Replica)(nil)

// NewReplica makes a replica of cfg.DB; it starts work when mounted.
func NewReplica(cfg ReplicaConfig) *Replica {
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = 5 * time.Second
	}
	if cfg.KickWait <= 0 {
		cfg.KickWait = cfg.SyncInterval / 5
	}
	if cfg.RetransmitMult <= 0 {
		cfg.RetransmitMult = 4
	}
	if cfg.PushWait <= 0 {
		cfg.PushWait = 200 * time.Millisecond
	}
	if cfg.PushFanout <= 0 {
		cfg.PushFanout = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Clock = clock.Or(cfg.Clock)
	r := &Replica{cfg: cfg, db: cfg.DB, log: cfg.Logger, in: make(chan []byte, 8192),
		kick: make(chan struct{}, 1), pushKick: make(chan struct{}, 1)}
	r.ctx, r.stop = context.WithCancel(context.Background())
	r.nodes.Store(1)
	r.queue = &memberlist.TransmitLimitedQueue{NumNodes: func() int { return int(r.nodes.Load()) }, RetransmitMult: cfg.RetransmitMult}
	return r
}

// DB is the replica's store.
func (r *Replica) DB() *DB { return r.db }

// Mount starts replication among node n's peers and returns the API
// handler (see API) for the node to serve.
func (r *Replica) Mount(n *node.Node) http.Handler {
	self := string(n.ID())
	r.Start(func() []Peer {
		var out []Peer
		ms := n.Members()
		live := 0
		for _, m := range ms {
			if m.State == member.Alive || m.State == member.Suspect {
				live++
				if m.ID != self {
					out = append(out, HTTPPeer{Client: n.PeerClient(), Base: "https://" + m.ID})
				}
			}
		}
		r.nodes.Store(int64(max(live, 1)))
		return out
	})
	return r.Handler()
}

// Handler is the replica's HTTP API.
func (r *Replica) Handler() http.Handler { return API(r.db, r.Append) }

// Start starts the gossip receiver and anti-entropy with the peers that
// peers lists (called each round).
func (r *Replica) Start(peers func() []Peer) {
	r.mu.Lock()
	r.peers = peers
	r.mu.Unlock()
	r.wg.Add(3)
	go r.receive()
	go r.antiEntropy()
	go r.pushLarge()
}

// Close stops replication (it does not close the DB).
func (r *Replica) Close() {
	r.stop()
	r.wg.Wait()
}

// Stats returns the counters.
func (r *Replica) Stats() Stats {
	return Stats{Received: r.received.Load(), Admitted: r.admitted.Load(), Rejected: r.rejected.Load(),
		Dropped: r.dropped.Load(), Syncs: r.syncs.Load(), SyncFails: r.syncFails.Load(),
		Pulled: r.pulled.Load(), Pushed: r.pushed.Load(), PushedLarge: r.pushedLarge.Load()}
}

// Append admits records written here (or sent by a client) and, unless
// they came from another replica's anti-entropy, broadcasts the admitted
// ones.
func (r *Replica) Append(ns dag.NSID, raws [][]byte, fromSync bool) (Result, error) {
	res, err := r.db.Ingest(ns, raws)
	if err != nil {
		return res, err
	}
	r.account(ns, res)
	if !fromSync {
		r.broadcast(ns, res.Admitted)
	}
	return res, nil
}

// maxPending and maxPendingBytes bound the records waiting to be pushed;
// past them records are left to anti-entropy.
const (
	maxPending      = 4096
	maxPendingBytes = 16 << 20
)

// pushBytes bounds one push request (the API takes up to maxBody).
const pushBytes = 8 << 20

// pushChunk is how many of raws (at least one) go in one push request:
// at most batch records and pushBytes bytes.
func pushChunk(raws [][]byte) int {
	n, size := 0, 0
	for n < len(raws) && n < batch && (n == 0 || size+len(raws[n]) <= pushBytes) {
		size += len(raws[n])
		n++
	}
	return n
}

// queuePush queues admitted records too big for gossip (broadcast picks
// them) to be pushed to the peers.
func (r *Replica) queuePush(ns dag.NSID, raws [][]byte) {
	r.pushMu.Lock()
	for _, raw := range raws {
		if r.nPending >= maxPending || r.pendingBytes+len(raw) > maxPendingBytes {
			continue
		}
		if r.pending == nil {
			r.pending = map[dag.NSID][][]byte{}
		}
		r.pending[ns] = append(r.pending[ns], raw)
		r.nPending++
		r.pendingBytes += len(raw)
	}
	r.pushMu.Unlock()
	select {
	case r.pushKick <- struct{}{}:
	default:
	}
}

// pushLarge sends records too big for gossip, gathered for PushWait, to
// up to PushFanout random peers at once, one request per peer and
// namespace. It is how such a record reaches the other replicas in
// milliseconds rather than in rounds of anti-entropy, without the digest
// exchange a sync needs; the peers do not push it on (it reaches them
// as a push, like anti-entropy's), and anti-entropy brings it to any
// peer a push missed.
func (r *Replica) pushLarge() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.pushKick:
		}
		if !r.sleep(r.cfg.PushWait) {
			return
		}
		r.pushMu.Lock()
		pending := r.pending
		r.pending, r.nPending, r.pendingBytes = nil, 0, 0
		r.pushMu.Unlock()
		r.mu.Lock()
		peersFn := r.peers
		r.mu.Unlock()
		if len(pending) == 0 || peersFn == nil {
			continue
		}
		peers := peersFn()
		rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		peers = peers[:min(len(peers), r.cfg.PushFanout)]
		// The same requests go to every peer: framed once.
		type chunk struct {
			ns   dag.NSID
			raws [][]byte
			body []byte
		}
		var chunks []chunk
		for ns, raws := range pending {
			for len(raws) > 0 {
				n := pushChunk(raws)
				chunks = append(chunks, chunk{ns, raws[:n], frame(raws[:n])})
				raws = raws[n:]
			}
		}
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		var wg sync.WaitGroup
		for _, p := range peers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				failed := map[dag.NSID]bool{}
				for _, c := range chunks {
					if ctx.Err() != nil {
						return
					}
					if failed[c.ns] {
						continue
					}
					var res PutResult
					var err error
					if fp, ok := p.(FramedPutter); ok {
						res, err = fp.PutFramed(ctx, c.ns, c.body, true)
					} else {
						res, err = p.Put(ctx, c.ns, c.raws, true)
					}
					if err != nil {
						r.log.Debug("push", "err", err)
						failed[c.ns] = true // anti-entropy will bring it
						continue
					}
					r.pushedLarge.Add(int64(res.Admitted))
				}
			}()
		}
		wg.Wait()
		cancel()
	}
}

func (r *Replica) account(ns dag.NSID, res Result) {
	r.admitted.Add(int64(len(res.Admitted)))
	r.rejected.Add(int64(len(res.Rejected)))
	for _, err := range res.Rejected {
		r.log.Debug("record refused", "err", err)
	}
	if len(res.Missing) > 0 {
		r.missMu.Lock()
		if r.nMissing+len(res.Missing) > maxMissing {
			r.overflow = true // the next kick syncs without looking
		} else {
			if r.missing == nil {
				r.missing = map[dag.NSID]map[dag.Hash]bool{}
			}
			m := r.missing[ns]
			if m == nil {
				m = map[dag.Hash]bool{}
				r.missing[ns] = m
			}
			for _, h := range res.Missing {
				if !m[h] {
					m[h] = true
					r.nMissing++
				}
			}
		}
		r.missMu.Unlock()
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *Replica) broadcast(ns dag.NSID, raws [][]byte) {
	var large [][]byte
	for _, raw := range raws {
		if tooLarge(raw) {
			large = append(large, raw)
			continue
		}
		msg := make([]byte, 0, 33+len(raw))
		msg = append(append(append(msg, gossipTag), ns[:]...), raw...)
		r.queue.QueueBroadcast(broadcast(msg))
	}
	if len(large) > 0 {
		r.queuePush(ns, large)
	}
}

// NotifyMsg implements member.Messages: a record broadcast by a peer.
func (r *Replica) NotifyMsg(b []byte) {
	if len(b) < 34 || b[0] != gossipTag {
		r.dropped.Add(1)
		return
	}
	select {
	case r.in <- append([]byte(nil), b...):
	default:
		r.dropped.Add(1) // anti-entropy will bring it
	}
}

// GetBroadcasts implements member.Messages.
func (r *Replica) GetBroadcasts(overhead, limit int) [][]byte {
	return r.queue.GetBroadcasts(overhead, limit)
}

// receive admits gossiped records in batches (one transaction each) and
// forwards what was new.
func (r *Replica) receive() {
	defer r.wg.Done()
	for {
		var msgs [][]byte
		select {
		case <-r.ctx.Done():
			return
		case m := <-r.in:
			msgs = append(msgs, m)
		}
	drain:
		for len(msgs) < 512 {
			select {
			case m := <-r.in:
				msgs = append(msgs, m)
			default:
				break drain
			}
		}
		r.received.Add(int64(len(msgs)))
		byNS := map[dag.NSID][][]byte{}
		for _, m := range msgs {
			ns := dag.NSID(m[1:33])
			byNS[ns] = append(byNS[ns], m[33:])
		}
		for ns, raws := range byNS {
			if _, err := r.Append(ns, raws, false); err != nil {
				r.log.Error("gossip ingest", "err", err)
			}
		}
	}
}

// antiEntropy syncs with one random peer every interval (with jitter),
// or soon after gossip brought entries whose references are missing.
func (r *Replica) antiEntropy() {
	defer r.wg.Done()
	interval := func() time.Duration { return r.cfg.SyncInterval/2 + rand.N(r.cfg.SyncInterval) }
	// The periodic sync keeps its own deadline, which kicks do not move:
	// a stream of kicks that resolve by themselves must not starve it.
	clk := r.cfg.Clock
	due := clk.Now().Add(interval())
	for {
		t := clk.NewTimer(clk.Until(due))
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-r.kick:
			t.Stop()
			// Records gossiped one by one arrive in any order: an entry
			// often comes a moment before its blocks. Sync only if
			// something reported missing is still absent after a
			// while (or the periodic sync is due); under a stream of
			// writes, syncing at every such moment costs more than the
			// writes.
			if !r.sleep(r.cfg.KickWait) {
				return
			}
			if !r.stillMissing() && clk.Now().Before(due) {
				continue
			}
		}
		r.forgetMissing() // the sync brings whatever is missing
		due = clk.Now().Add(interval())
		r.SyncOnce(r.ctx)
	}
}

// sleep waits for d, or until the replica is closed (then it returns
// false).
func (r *Replica) sleep(d time.Duration) bool {
	t := r.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// maxMissing bounds the references a replica remembers as missing
// between syncs; past it, the next kick syncs without looking.
const maxMissing = 4096

// forgetMissing takes the references reported missing since the last
// look (and whether there were more than it kept), forgetting them.
func (r *Replica) forgetMissing() (map[dag.NSID]map[dag.Hash]bool, bool) {
	r.missMu.Lock()
	defer r.missMu.Unlock()
	missing, overflow := r.missing, r.overflow
	r.missing, r.nMissing, r.overflow = nil, 0, false
	return missing, overflow
}

// stillMissing reports whether any reference reported missing since the
// last look is still absent, and forgets them all.
func (r *Replica) stillMissing() bool {
	missing, overflow := r.forgetMissing()
	if overflow {
		return true
	}
	for ns, m := range missing {
		hs := make([]dag.Hash, 0, len(m))
		for h := range m {
			hs = append(hs, h)
		}
		if len(r.db.Get(ns, hs)) < len(hs) {
			return true
		}
	}
	return false
}

// SyncOnce runs anti-entropy with one random peer for every namespace
// either side holds.
func (r *Replica) SyncOnce(ctx context.Context) {
	r.mu.Lock()
	peersFn := r.peers
	r.mu.Unlock()
	if peersFn == nil {
		return
	}
	peers := peersFn()
	if len(peers) == 0 {
		return
	}
	p := peers[rand.IntN(len(peers))]
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	theirs, err := p.Namespaces(ctx)
	if err != nil {
		r.syncFails.Add(1)
		r.log.Debug("anti-entropy", "err", err)
		return
	}
	all := map[dag.NSID]bool{}
	for _, ns := range append(r.db.Namespaces(), theirs...) {
		all[ns] = true
	}
	for ns := range all {
		st, err := Sync(ctx, r.db, ns, p, true)
		r.pulled.Add(int64(st.Pulled))
		r.pushed.Add(int64(st.Pushed))
		r.rejected.Add(int64(st.Rejected))
		r.admitted.Add(int64(st.Pulled))
		if err != nil {
			r.syncFails.Add(1)
			r.log.Debug("anti-entropy", "ns", ns, "err", err)
			if ctx.Err() != nil {
				return
			}
			continue
		}
	}
	r.syncs.Add(1)
}

// broadcast is one queued gossip message.
type broadcast []byte

func (b broadcast) Invalidates(memberlist.Broadcast) bool { return false }

// UniqueBroadcast tells memberlist that every record is distinct, so
// queueing one does not scan the whole queue for ones it replaces.
func (b broadcast) UniqueBroadcast() {}
func (b broadcast) Message() []byte  { return b }
func (b broadcast) Finished()        {}
