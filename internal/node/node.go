// Package node runs a Quilt storage node: one share store on local disk,
// a member of the grid's gossip, and an HTTPS API (mutual TLS 1.3 with
// certificates of the grid) through which gateways and clients put, read,
// list and scrub shares and renew and cancel their leases; the node
// deletes the shares whose leases have all expired. Client talks to that
// API.
//
// A node's data directory holds everything it needs to restart:
//
//	DIR/node.key   its Ed25519 key (its node ID derives from it)
//	DIR/secret     the grid secret
//	DIR/invite     an invite to the grid through this node, then up to 8 other live members
//	DIR/peers      HTTPS addresses of members last seen, to rejoin
//	DIR/store/     the share store
package node

import (
	"context"
	"errors"
	"fmt"
	bolt "go.etcd.io/bbolt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/metrics"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Config configures a node. Zero values are the defaults.
type Config struct {
	Dir       string // data directory (required)
	Listen    string // HTTPS API host:port; port 0 picks one
	Gossip    string // gossip host:port; default: Listen's host, port 0
	Advertise string // API host:port others should use; default: the listening address
	Zone      string // failure domain (a building, a neighbourhood)
	Capacity  int64  // bytes of shares to store at most; 0: what the disk has
	NoSync    bool   // skip fsync (see sharestore.DiskOptions.NoSync)
	// CheckBlocks hashes every block of every upload on arrival (see
	// sharestore.DiskOptions.CheckBlocks).
	CheckBlocks bool
	// Join, if set, is an invite to an existing grid; if nil, the node
	// rejoins the grid in Dir, or starts a new one.
	Join    *identity.Invite
	WAN     bool   // memberlist's WAN timings, for slow links
	Version string // shown to other members

	Logger *slog.Logger
	// Store, if set, is used instead of a disk store in Dir/store (tests
	// put fault injection here).
	Store sharestore.Store
	// TuneGossip, if set, adjusts memberlist's configuration (tests use
	// short timers; the lab an emulated transport).
	TuneGossip func(*memberlist.Config)
	// Listener, if set, is used instead of listening on Listen (the lab
	// wraps it with link emulation).
	Listener net.Listener
	// Dial, if set, makes the node's connections to other nodes (the lab
	// emulates links there).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Messages, if set, broadcasts over gossip for a higher layer.
	Messages member.Messages
	// Reconnect is how often the node tries to reach members it saw
	// die, so the two sides of a healed partition find each other again
	// (as Serf's reconnect); default 30 s.
	Reconnect time.Duration
	// BodyStall is how long a share upload's body may make no progress
	// (no byte arrives) before the node aborts it and releases the space
	// it reserved for the share; default 60 s. Without it a peer that
	// announces a large share and then stalls would hold the space for
	// as long as it kept its connection open.
	BodyStall time.Duration
	// HeaderTimeout is how long a peer has to send a request's headers
	// (and to finish the TLS handshake) once it connects or reuses a
	// connection; default 10 s. IdleTimeout is how long an idle
	// connection is kept; default 2 min.
	HeaderTimeout, IdleTimeout time.Duration
	// LeaseSweep is how often the node deletes the shares whose leases
	// have all expired (see sharestore.Store.Expire); default 1 h,
	// negative: never. LeaseGrace is how long after its expiry a lease
	// still counts, so a renewal a little late still saves its share;
	// default 24 h, negative: none. Now is the clock leases are given
	// and swept by; default time.Now (tests move it).
	LeaseSweep, LeaseGrace time.Duration
	Now                    func() time.Time
	// Mount, if set, is called once the node is up; the handler it
	// returns serves the API paths the node does not (a higher layer's,
	// such as /v1/ns/).
	Mount func(n *Node) http.Handler
	// Helper says that Mount serves an upload helper (package
	// uphelper): the node says so in its gossip metadata
	// (member.Meta.Helper), for clients to find it.
	Helper bool
	// Metrics, if set, is a host:port where the node serves its
	// Prometheus metrics at /metrics over plain HTTP (port 0 picks
	// one): its API wants the grid's client certificates, which a
	// monitoring system does not have.
	Metrics string
	// ScrubEvery is how long the scheduled scrub takes to re-read and
	// re-hash every share once, spread evenly over the time (default 30
	// days; negative: never). ScrubRate bounds the bytes a second it
	// reads (default 4 MiB/s). A share found damaged is quarantined:
	// reads of it answer ErrCorrupt until a sound copy replaces it.
	ScrubEvery time.Duration
	ScrubRate  int64
}

// Node is a running storage node.
type Node struct {
	incoming incoming // share uploads under way (incoming.go)
	cfg      Config
	id       *identity.Identity
	secret   identity.Secret
	store    sharestore.Store
	registry *bolt.DB // the repair registry (registry.go)
	members  *member.List
	srv      *http.Server
	ln       net.Listener
	addr     string
	log      *slog.Logger
	client   *Client
	peers    *http.Client

	lonely []string // old peers to keep trying, while none has answered
	invite string   // the invite last written to DIR/invite

	stop    chan struct{}
	wg      sync.WaitGroup
	dirty   chan struct{}
	drain   drainState // drain.go
	closeMu sync.Mutex
	closed  bool

	reg        *prometheus.Registry
	metrics    *nodeMetrics
	metricsSrv *metrics.Server // nil unless Config.Metrics

	scrubRate *Bucket
	scrubM    *scrubMetrics
	quarMu    sync.Mutex
	quar      map[sharestore.Key]error // shares found damaged, not yet replaced
}

// Start starts a node: opens its store, listens, starts gossip and joins
// the grid. It returns when the node is serving.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Dir == "" {
		return nil, errors.New("node: a data directory is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	key, err := identity.LoadOrCreateKey(cfg.Dir)
	if err != nil {
		return nil, err
	}
	secret, seeds, rejoin, err := gridOf(cfg)
	if err != nil {
		return nil, err
	}
	id, err := identity.New(key, secret)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, id: id, secret: secret, log: cfg.Logger.With("node", id.ID.Short()),
		stop: make(chan struct{}), dirty: make(chan struct{}, 1)}
	n.initDrain()
	n.store = cfg.Store
	if n.store == nil {
		if n.store, err = sharestore.OpenDisk(filepath.Join(cfg.Dir, "store"), sharestore.DiskOptions{Capacity: cfg.Capacity, NoSync: cfg.NoSync, CheckBlocks: cfg.CheckBlocks}); err != nil {
			return nil, err
		}
	}
	n.ln = cfg.Listener
	if n.ln == nil {
		if n.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return nil, fmt.Errorf("node: listen on %s: %w", cfg.Listen, err)
		}
	}
	n.addr = cfg.Advertise
	if n.addr == "" {
		n.addr = n.ln.Addr().String()
	}
	gossip := cfg.Gossip
	if gossip == "" {
		host, _, _ := net.SplitHostPort(n.ln.Addr().String())
		gossip = net.JoinHostPort(host, "0")
	}
	n.members, err = member.Start(member.Config{
		Name: string(id.ID), Bind: gossip, Key: secret.Derive("quilt gossip v1"),
		Meta: n.meta, WAN: cfg.WAN, Logger: n.log, Tune: cfg.TuneGossip, Messages: cfg.Messages,
	})
	if err != nil {
		n.ln.Close()
		return nil, err
	}
	n.peers = &http.Client{Transport: id.NewTransport(n.resolve, cfg.Dial)}
	n.reg = metrics.NewRegistry()
	n.metrics = n.newMetrics(n.reg)
	n.newScrubMetrics(n.reg)
	n.scrubRate = NewBucket(cmpOr(cfg.ScrubRate, DefaultScrubRate))
	if cfg.Metrics != "" {
		if n.metricsSrv, err = metrics.Listen(cfg.Metrics, n.reg); err != nil {
			n.members.Shutdown()
			n.ln.Close()
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if err := n.openRegistry(); err != nil {
		n.closeRegistry()
		n.closeMetrics()
		n.members.Shutdown()
		n.ln.Close()
		return nil, err
	}
	handler := n.handler(nil)
	if cfg.Mount != nil {
		handler = n.handler(cfg.Mount(n))
	}
	n.srv = &http.Server{
		Handler:           handler,
		TLSConfig:         id.ServerTLS(),
		ReadHeaderTimeout: orDefault(cfg.HeaderTimeout, 10*time.Second),
		IdleTimeout:       orDefault(cfg.IdleTimeout, 2*time.Minute),
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go n.srv.Serve(identity.NewTLSListener(n.ln, n.srv.TLSConfig))
	// The join client dials as the node does (the lab's links).
	n.client = NewClientDial(identity.Invite{Secret: secret, Addrs: seeds}, id, cfg.Dial)
	switch {
	case len(seeds) > 0 && !rejoin:
		// An invite: joining is what was asked; failing to is an error.
		if err := n.join(ctx, seeds); err != nil {
			n.Kill()
			return nil, err
		}
	case len(seeds) > 0:
		// Back from our own data directory: we may be the first of the
		// grid back up. Try the old peers briefly, then serve alone and
		// keep trying in the background.
		jctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if err := n.join(jctx, seeds); err != nil {
			n.log.Warn("no old peer answered; serving alone until one does", "peers", len(seeds))
			n.lonely = seeds
		}
		cancel()
	}
	if err := n.writeFiles(); err != nil {
		n.Kill()
		return nil, err
	}
	n.wg.Add(3)
	go n.background()
	go n.sweepLeases()
	go n.scrubLoop()
	n.log.Info("node up", "id", id.ID, "addr", n.addr, "gossip", n.members.Addr(), "zone", cfg.Zone)
	return n, nil
}

// gridOf finds the grid secret and the addresses to join: from the invite,
// else from the data directory (rejoin), else a new grid.
func gridOf(cfg Config) (secret identity.Secret, seeds []string, rejoin bool, err error) {
	secretPath := filepath.Join(cfg.Dir, "secret")
	stored, err := os.ReadFile(secretPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return secret, nil, false, fmt.Errorf("node: %w", err)
	}
	if cfg.Join != nil {
		if len(stored) > 0 && strings.TrimSpace(string(stored)) != cfg.Join.Secret.String() {
			return secret, nil, false, fmt.Errorf("node: %s belongs to another grid: use a new data directory for this invite", cfg.Dir)
		}
		if err := writeFileAtomic(secretPath, []byte(cfg.Join.Secret.String()+"\n")); err != nil {
			return secret, nil, false, err
		}
		return cfg.Join.Secret, cfg.Join.Addrs, false, nil
	}
	if len(stored) > 0 {
		s, err := identity.ParseSecret(strings.TrimSpace(string(stored)))
		if err != nil {
			return s, nil, false, fmt.Errorf("node: %s: %w", secretPath, err)
		}
		peers, _ := os.ReadFile(filepath.Join(cfg.Dir, "peers"))
		return s, strings.Fields(string(peers)), true, nil
	}
	s, err := identity.NewSecret()
	if err != nil {
		return s, nil, false, err
	}
	return s, nil, false, writeFileAtomic(secretPath, []byte(s.String()+"\n"))
}

// join asks the nodes at seeds (HTTPS addresses) for the members' gossip
// addresses and joins them, retrying until ctx ends: seeds may still be
// starting.
func (n *Node) join(ctx context.Context, seeds []string) error {
	var last error
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		var gossip []string
		for _, s := range seeds {
			if s == n.addr {
				continue
			}
			ms, err := n.client.membersFrom(ctx, s)
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("join: no answer from the invite's node", "addr", s, "err", err)
				}
				last = err
				continue
			}
			for _, m := range ms {
				if m.State == member.Alive && m.ID != string(n.id.ID) {
					gossip = append(gossip, m.Gossip)
				}
			}
		}
		if len(gossip) > 0 {
			if _, err := n.members.Join(gossip); err == nil {
				return nil
			} else {
				last = err
			}
		} else if last == nil {
			// Only ourselves among the seeds (a restart of a lone node).
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: could not join the grid through %v: %v", seeds, last)
		case <-time.After(delay):
		}
	}
}

func (n *Node) meta() member.Meta {
	u := n.store.Usage()
	m := member.Meta{ID: string(n.id.ID), Addr: n.addr, Zone: n.cfg.Zone,
		Capacity: u.Capacity, Used: u.Used, Free: u.Free, Version: n.cfg.Version, Helper: n.cfg.Helper}
	if n.Draining() {
		m.Draining, m.Free = true, 0 // placement gives it no new shares
	}
	return m
}

// UsageChanged tells the node that its store's usage changed behind its
// API (a share its repairer moved away), so that its gossip metadata says
// so within a second or so.
func (n *Node) UsageChanged() { n.usageChanged() }

// usageChanged schedules a metadata update.
func (n *Node) usageChanged() {
	select {
	case n.dirty <- struct{}{}:
	default:
	}
}

// background re-announces usage when it changes (at most once a second)
// and keeps DIR/peers fresh.
func (n *Node) background() {
	defer n.wg.Done()
	peers := time.NewTicker(30 * time.Second)
	defer peers.Stop()
	every := n.cfg.Reconnect
	if every <= 0 {
		every = 30 * time.Second
	}
	reconnect := time.NewTicker(every)
	defer reconnect.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-reconnect.C:
			var dead []string
			for _, m := range n.members.Members() {
				if m.State == member.Dead && m.Gossip != "" {
					dead = append(dead, m.Gossip)
				}
			}
			if len(dead) > 0 {
				if k, err := n.members.Join(dead); err == nil {
					n.log.Info("reached members that had died", "count", k)
				}
			}
			// Back from the data directory with no old peer answering
			// at start: keep asking them. Not only while alone: two
			// nodes that came back together may have found only each
			// other, and the rest of the grid sees them as dead.
			if n.lonely != nil {
				jctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if n.join(jctx, n.lonely) == nil {
					n.log.Info("rejoined the grid")
					n.lonely = nil
				}
				cancel()
			}
		case <-n.dirty:
			if err := n.members.Update(5 * time.Second); err != nil {
				n.log.Debug("metadata update", "err", err)
			}
			select {
			case <-n.stop:
				return
			case <-time.After(time.Second):
			}
		case <-peers.C:
			n.writePeers()
		}
	}
}

// writePeers keeps DIR/peers (the other live members) and DIR/invite up
// to date.
func (n *Node) writePeers() error {
	var addrs []string
	for _, m := range n.members.Alive() {
		if m.ID != string(n.id.ID) {
			addrs = append(addrs, m.Addr)
		}
	}
	if len(addrs) > 0 {
		writeFileAtomic(filepath.Join(n.cfg.Dir, "peers"), []byte(strings.Join(addrs, "\n")+"\n"))
	}
	if inv := n.fileInvite(addrs).String() + "\n"; inv != n.invite {
		if err := writeFileAtomic(filepath.Join(n.cfg.Dir, "invite"), []byte(inv)); err != nil {
			return err
		}
		n.invite = inv
	}
	return nil
}

// inviteOthers is how many other members' addresses DIR/invite names.
const inviteOthers = 8

// fileInvite is the invite kept in DIR/invite: this node's address first,
// then those of up to inviteOthers other live members (sorted), so that a
// client or node given it still reaches the grid when this node is down.
func (n *Node) fileInvite(others []string) identity.Invite {
	inv := n.Invite()
	others = slices.Clone(others)
	slices.Sort(others)
	for _, a := range others {
		if len(inv.Addrs) > inviteOthers {
			break
		}
		if a != "" && !slices.Contains(inv.Addrs, a) {
			inv.Addrs = append(inv.Addrs, a)
		}
	}
	return inv
}

func (n *Node) writeFiles() error {
	return n.writePeers()
}

// writeFileAtomic replaces a file of the data directory durably: after a
// crash it holds the old content or the new.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

// ID returns the node's ID.
func (n *Node) ID() identity.NodeID { return n.id.ID }

// resolve finds a member's API address by its ID.
func (n *Node) resolve(id identity.NodeID) (string, bool) {
	for _, m := range n.members.Members() {
		if m.ID == string(id) && m.Addr != "" {
			return m.Addr, true
		}
	}
	return "", false
}

// PeerClient is an HTTP client for the other nodes' APIs, addressed as
// https://<node-id>/..., with mutual TLS pinned to that ID (through the
// Dial of Config, if set).
func (n *Node) PeerClient() *http.Client { return n.peers }

// Addr returns the HTTPS address of the node's API.
func (n *Node) Addr() string { return n.addr }

// GossipAddr returns the host:port the node gossips on.
func (n *Node) GossipAddr() string { return n.members.Addr() }

// Invite returns an invite to the grid through this node.
func (n *Node) Invite() identity.Invite {
	return identity.Invite{Secret: n.secret, Addrs: []string{n.addr}}
}

// Members returns the grid's members as this node sees them.
func (n *Node) Members() []member.Member { return n.members.Members() }

// LocalClient returns a new client of the grid with the node's identity
// and dialer, which learns the members from the node itself (up as long
// as the node is), for a higher layer working on the node's behalf (a
// repairer).
func (n *Node) LocalClient() *Client { return NewClientDial(n.Invite(), n.id, n.cfg.Dial) }

// Zone returns the node's zone (Config.Zone).
func (n *Node) Zone() string { return n.cfg.Zone }

// Dir returns the node's data directory.
func (n *Node) Dir() string { return n.cfg.Dir }

// Store returns the node's share store.
func (n *Node) Store() sharestore.Store { return n.store }

// Close leaves the grid politely and stops serving.
func (n *Node) Close() error {
	if !n.markClosed() {
		return nil
	}
	n.members.Leave(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := n.srv.Shutdown(ctx)
	n.wg.Wait()
	n.closeMetrics()
	n.closeRegistry()
	return err
}

// closeMetrics stops serving /metrics, if the node does.
func (n *Node) closeMetrics() {
	if n.metricsSrv != nil {
		n.metricsSrv.Close()
	}
}

// Registry returns the registry of the node's Prometheus metrics, for a
// higher layer to add its own (or a test to gather them).
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// MetricsURL returns the address of the node's /metrics page, or "" when
// it serves none (Config.Metrics).
func (n *Node) MetricsURL() string {
	if n.metricsSrv == nil {
		return ""
	}
	return n.metricsSrv.URL()
}

// Kill stops the node at once, as a crash or a pulled cable would: open
// connections are cut, no one is told.
func (n *Node) Kill() {
	if !n.markClosed() {
		return
	}
	n.members.Shutdown()
	n.srv.Close()
	n.ln.Close()
	n.wg.Wait()
	n.closeMetrics()
	n.closeRegistry()
}

func (n *Node) markClosed() bool {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return false
	}
	n.closed = true
	close(n.stop)
	return true
}

// cmpOr returns v unless it is zero or less, then def.
func cmpOr(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// orDefault returns d unless it is zero or less, then def.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
