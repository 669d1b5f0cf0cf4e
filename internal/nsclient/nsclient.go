// Package nsclient is how a front end reads, writes, watches and syncs
// namespaces through the grid (layer 4, above namespace): it keeps the
// front end's own replica (a namespace.DB) in step with one live node,
// commits new entries to both, and moves to another node when one fails.
// The gateway and the config filesystem (internal/cfs) use it, so a
// namespace is written one way whatever the protocol in front.
//
// # Retry policy
//
// One policy for every call that talks to a node (Sync, Commit, Write):
//
//   - A call makes at most Config.Attempts attempts (default 3), each
//     through one node. The node of the last success is reused; a node
//     that fails an attempt is dropped, and the next attempt picks another
//     live member (those that failed in the last minute are tried last).
//   - An attempt fails, and the next one runs, on any transport or HTTP
//     error, on a node that refuses a record, and on a node that still
//     lacks references after being brought up to date.
//   - When a node takes records but reports references Missing (it holds
//     them in memory only), the attempt syncs this replica with that node
//     (anti-entropy, both ways) and offers the records again: the attempt
//     succeeds if the node then stores them.
//   - Nothing is retried once ctx is done, and a record this replica
//     refuses (ErrRefused) is never sent: every replica would refuse it.
//
// After the last attempt the error wraps ErrNoGrid. Records a Commit
// admitted locally stay in the replica even then: the next Sync pushes
// them to the grid.
//
// # Concurrency
//
// A Client is safe for concurrent use; calls do not serialise each other
// (the DB serialises its own writes, and concurrent commits share its
// fsyncs). Every call that talks to a node blocks until it is done or
// ctx ends; ReadFile only reads the local replica and never blocks on
// the network.
package nsclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
)

// Errors of the client.
var (
	// ErrNoGrid means no node took the change or answered, after every
	// attempt of the retry policy.
	ErrNoGrid = errors.New("nsclient: no node of the grid answered")
	// ErrRefused means this replica refused a record the caller made (a
	// bad signature, no grant, a revoked key): no node would take it.
	ErrRefused = errors.New("nsclient: record refused")
)

// Config configures a Client.
type Config struct {
	// DB is the front end's replica (required). The caller opens the
	// namespaces it uses in it (DB.Open) and closes it after the Client's
	// last call.
	DB *namespace.DB
	// Nodes reaches the grid (required).
	Nodes *node.Client
	// Attempts is how many nodes one call tries; default 3.
	Attempts int
	// MembersMaxAge is how old a list of members may be before it is
	// fetched again; default 10 s.
	MembersMaxAge time.Duration
	// ProbeTimeout bounds the request that checks a candidate node
	// answers; default 5 s.
	ProbeTimeout time.Duration
	// Order, if set, orders the live members before they are tried (the
	// CLI puts the nodes its invite names first, the others shuffled). By
	// default they are tried in the order the grid lists them, so clients
	// of one grid tend to use the same node and read each other's writes
	// at once. Members that failed lately go last whatever Order says.
	Order func([]member.Member) []member.Member
}

// Client reads and writes namespaces through a local replica and the
// grid's nodes.
type Client struct {
	cfg   Config
	nodes *picker
}

// picker chooses the node a client talks to; clients made by WithDB
// share it.
type picker struct {
	mu     sync.Mutex
	peer   *namespace.HTTPPeer
	failed map[string]time.Time // node base URL -> when it last failed
}

// New makes a client. It does not talk to the grid until a call needs it.
func New(cfg Config) *Client {
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.MembersMaxAge <= 0 {
		cfg.MembersMaxAge = 10 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 5 * time.Second
	}
	return &Client{cfg: cfg, nodes: &picker{failed: map[string]time.Time{}}}
}

// WithDB returns a client over another replica (db) that shares this
// client's choice of node: a long-running command that closes its replica
// while idle reopens it without searching the grid again.
func (c *Client) WithDB(db *namespace.DB) *Client {
	cfg := c.cfg
	cfg.DB = db
	return &Client{cfg: cfg, nodes: c.nodes}
}

// DB is the client's replica.
func (c *Client) DB() *namespace.DB { return c.cfg.DB }

// Nodes is the client of the grid's nodes.
func (c *Client) Nodes() *node.Client { return c.cfg.Nodes }

// failedFor is how long a node that failed is tried after the others.
const failedFor = time.Minute

// Peer returns the node the client talks to, choosing a live one that
// answers if it has none: the members in Config.Order (those that failed
// in the last minute last), each probed with one request.
func (c *Client) Peer(ctx context.Context) (*namespace.HTTPPeer, error) {
	pk := c.nodes
	pk.mu.Lock()
	p := pk.peer
	pk.mu.Unlock()
	if p != nil {
		return p, nil
	}
	ms, err := c.cfg.Nodes.Members(ctx, c.cfg.MembersMaxAge)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoGrid, err)
	}
	var live []member.Member
	for _, m := range ms {
		if m.State == member.Alive {
			live = append(live, m)
		}
	}
	if c.cfg.Order != nil {
		live = c.cfg.Order(live)
	}
	// Stable: the recently failed last, the order kept otherwise.
	pk.mu.Lock()
	now := time.Now()
	var fresh, stale []member.Member
	for _, m := range live {
		if t, ok := pk.failed["https://"+m.ID]; ok && now.Sub(t) < failedFor {
			stale = append(stale, m)
		} else {
			delete(pk.failed, "https://"+m.ID)
			fresh = append(fresh, m)
		}
	}
	pk.mu.Unlock()
	var last error = errors.New("no member is alive")
	for _, m := range append(fresh, stale...) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cand := &namespace.HTTPPeer{Client: c.cfg.Nodes.HTTP(), Base: "https://" + m.ID}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.ProbeTimeout)
		_, err := cand.Namespaces(pctx)
		cancel()
		if err != nil {
			last = err
			pk.mu.Lock()
			pk.failed[cand.Base] = time.Now()
			pk.mu.Unlock()
			continue
		}
		pk.mu.Lock()
		if pk.peer == nil {
			pk.peer = cand
		}
		p = pk.peer
		pk.mu.Unlock()
		return p, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrNoGrid, last)
}

// Drop makes the client choose another node next time, if p is still
// the one it uses.
func (c *Client) Drop(p *namespace.HTTPPeer) {
	pk := c.nodes
	pk.mu.Lock()
	if pk.peer == p {
		pk.peer = nil
	}
	pk.failed[p.Base] = time.Now()
	pk.mu.Unlock()
}

// attempt runs f with a node, up to Config.Attempts times, dropping the
// node after each failure. f's error is returned as is when ctx ended,
// wrapped in ErrNoGrid after the last attempt.
func (c *Client) attempt(ctx context.Context, f func(p *namespace.HTTPPeer) error) error {
	var err error
	for try := 0; try < c.cfg.Attempts; try++ {
		var p *namespace.HTTPPeer
		if p, err = c.Peer(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		if err = f(p); err == nil {
			return nil
		}
		c.Drop(p)
		if ctx.Err() != nil {
			return err
		}
	}
	if errors.Is(err, ErrNoGrid) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrNoGrid, err)
}

// Sync brings the replica's copy of ns and a node's into step (both ways:
// what this replica holds that the node lacks is pushed). It follows the
// retry policy.
func (c *Client) Sync(ctx context.Context, ns dag.NSID) error {
	return c.attempt(ctx, func(p *namespace.HTTPPeer) error {
		_, err := namespace.Sync(ctx, c.cfg.DB, ns, p, true)
		return err
	})
}

// Commit admits records (encodings of entries and blocks) to the replica
// and sends them to a node, which gossips them; it returns when both hold
// them. The local admission and the send run side by side, so a commit
// waits for the slower fsync, not both. A record the replica refuses is
// ErrRefused; a node that cannot store them is retried as the package
// doc says.
func (c *Client) Commit(ctx context.Context, ns dag.NSID, recs [][]byte) error {
	localc := make(chan error, 1)
	go func() { localc <- c.ingest(ns, recs) }()
	local := sync.OnceValue(func() error { return <-localc })
	err := c.attempt(ctx, func(p *namespace.HTTPPeer) error {
		if err := local(); err != nil && errors.Is(err, ErrRefused) {
			// No node would take it either: stop at once.
			return nil
		}
		pr, err := p.Put(ctx, ns, recs, false)
		if err == nil && len(pr.Rejected) == 0 && pr.Missing > 0 {
			// The node holds them in memory only: it lacks what they
			// refer to. Bring it up to date from this replica (which
			// holds them now), then it must store them.
			if err := local(); err != nil {
				return nil
			}
			if _, err = namespace.Sync(ctx, c.cfg.DB, ns, p, true); err == nil {
				pr, err = p.Put(ctx, ns, recs, false)
			}
		}
		switch {
		case err != nil:
			return err
		case len(pr.Rejected) > 0:
			return fmt.Errorf("the node refused the change: %s", pr.Rejected[0])
		case pr.Missing > 0:
			return errors.New("the node could not store the entry (it lacks what it refers to)")
		}
		return nil
	})
	if lerr := local(); lerr != nil {
		return lerr
	}
	return err
}

// ingest admits records to the replica: every one must be admitted (or
// held already), none may wait for references.
func (c *Client) ingest(ns dag.NSID, recs [][]byte) error {
	res, err := c.cfg.DB.Ingest(ns, recs)
	if err != nil {
		return err
	}
	if len(res.Rejected) > 0 {
		return fmt.Errorf("%w: %w", ErrRefused, res.Rejected[0])
	}
	if len(res.Missing) > 0 {
		return fmt.Errorf("%w: %d record(s) refer to entries this replica does not hold", ErrRefused, len(res.Missing))
	}
	return nil
}

// MakeFunc makes the entry (and its blocks) that changes one path, from
// the writer, the entry of the directory it hangs from (its anchor), the
// path's current versions (which it replaces) and its name in that
// directory.
type MakeFunc func(w *dag.Writer, anchor dag.Hash, heads []dag.Hash, name string) (*dag.Entry, []*dag.Block)

// Write appends one entry for path p of w.NS (made by mk) that replaces
// the path's current versions, and commits it. rules say which directory
// an entry hangs from (every path of an object namespace hangs from "/").
// In an object namespace p is used as given (a key may hold "//" or
// ".."); a configuration path must be clean (namespace.Clean). The
// parent directory must exist in the replica. w.Clock should be the
// replica's (DB.Clock): the entry is then later than what it replaces.
func (c *Client) Write(ctx context.Context, w *dag.Writer, rules dag.Rules, p string, mk MakeFunc) error {
	if p == "/" || !strings.HasPrefix(p, "/") {
		return fmt.Errorf("nsclient: %q cannot be written (a path starts with / and is not the root)", p)
	}
	if rules == dag.ConfigRules && namespace.Clean(p) != p {
		return fmt.Errorf("nsclient: %q is not a clean path (%s)", p, namespace.Clean(p))
	}
	db := c.cfg.DB
	dir := dag.ParentDir(p, rules)
	info, err := db.Stat(w.NS, dir)
	if err != nil {
		return fmt.Errorf("nsclient: %s: %w", dir, err)
	}
	if info.Type != dag.Dir {
		return fmt.Errorf("nsclient: %s is a %s, not a directory", dir, info.Type)
	}
	heads, err := db.Heads(w.NS, p)
	if err != nil {
		return err
	}
	for _, h := range heads { // be later than what it replaces
		if v, err := db.Version(w.NS, h); err == nil {
			db.Clock().Observe(v.Entry.Time)
		}
	}
	name := p[len(dir)+1:]
	if dir == "/" {
		name = p[1:]
	}
	e, blocks := mk(w, info.Data, heads, name)
	recs := [][]byte{e.Encode()}
	for _, b := range blocks {
		recs = append(recs, b.Encode())
	}
	return c.Commit(ctx, w.NS, recs)
}

// ReadFile returns the content of file p of ns as the replica holds it:
// nil, without error, if p is absent or not a file. Content kept in a
// grid object comes back as the object's read capability, with isObject
// set. It does not talk to the grid.
func (c *Client) ReadFile(ns dag.NSID, p string) (content []byte, isObject bool, err error) {
	info, err := c.cfg.DB.Stat(ns, p)
	if errors.Is(err, namespace.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if info.Type != dag.File {
		return nil, false, nil
	}
	return c.cfg.DB.Content(ns, info.Data)
}

// Wait blocks until the node's copy of ns differs from seen (a long poll
// of at most timeout) and returns the node's digest, which may be seen
// still when the poll timed out or ended early. It does not retry: a
// node that fails is dropped and the error returned, and the next call
// picks another.
func (c *Client) Wait(ctx context.Context, ns dag.NSID, seen namespace.Digest, timeout time.Duration) (namespace.Digest, error) {
	p, err := c.Peer(ctx)
	if err != nil {
		return namespace.Digest{}, err
	}
	d, err := p.Wait(ctx, ns, seen, timeout)
	if err != nil && ctx.Err() == nil {
		c.Drop(p)
	}
	return d, err
}
