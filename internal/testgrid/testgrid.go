// Package testgrid runs a grid of real storage nodes inside one test
// process: real TLS, real memberlist gossip on loopback, real disk stores
// in temporary directories. Nodes can be killed, restarted, and given
// faulty stores (a liar that corrupts what it serves, a slow disk), so
// scenario tests exercise the same code as production.
package testgrid

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsnode"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

// Options shape a test grid.
type Options struct {
	Nodes int
	// Zone returns node i's zone; default "".
	Zone func(i int) string
	// Capacity returns node i's capacity; default 0 (the disk's).
	Capacity func(i int) int64
	// Wrap, if set, may replace node i's store (fault injection).
	Wrap func(i int, s sharestore.Store) sharestore.Store
	// CheckBlocks makes the nodes hash every block on arrival
	// (node.Config.CheckBlocks).
	CheckBlocks bool
	// Net, if set, carries the nodes' API traffic (shares, listings,
	// node to node and from clients made by ObjectsAt) through emulated
	// links: node i is the host Host(i) of Net, whose limits the test
	// sets (Net.SetHost, SetLink). Gossip stays on loopback.
	Net *linkemu.Network
	// Helper, if set, says which nodes run an upload helper (package
	// uphelper), as quilt node --helper does: node i runs the handler
	// Helper(i) returns (nil: none). HelperMount is the usual one.
	Helper func(i int) func(n *node.Node) http.Handler
}

// HelperMount is the upload helper of a test node: uphelper.Mount with
// a 5 s stall.
func HelperMount() func(n *node.Node) http.Handler {
	return uphelper.Mount(uphelper.NodeConfig{Stall: 5 * time.Second, Logger: logger()})
}

// Host is the emulated host of node i when Options.Net is set.
func Host(i int) string { return fmt.Sprintf("127.79.%d.%d:7700", i/250, i%250+1) }

// Grid is a running test grid.
type Grid struct {
	t     testing.TB
	opt   Options
	Nodes []*node.Node // nil where killed
	// Replicas are the nodes' namespace replicas (nil where killed).
	Replicas []*namespace.Replica
	Dirs     []string
	Invite   identity.Invite
	addrs    [][2]string // API and gossip address of each node, kept for restarts
	nsNodes  []*nsnode.Node
}

// FastGossip shortens memberlist's timers so failures are noticed within
// about a second on loopback.
func FastGossip(c *memberlist.Config) {
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.SuspicionMult = 2
	c.PushPullInterval = 2 * time.Second
	c.TCPTimeout = time.Second
}

func logger() *slog.Logger {
	level := slog.LevelWarn + 100
	if os.Getenv("QUILT_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// New starts a grid and waits until every node sees every other alive.
// The grid is stopped when the test ends.
func New(t testing.TB, opt Options) *Grid {
	t.Helper()
	g := &Grid{t: t, opt: opt, Nodes: make([]*node.Node, opt.Nodes), Dirs: make([]string, opt.Nodes),
		addrs: make([][2]string, opt.Nodes), Replicas: make([]*namespace.Replica, opt.Nodes),
		nsNodes: make([]*nsnode.Node, opt.Nodes)}
	t.Cleanup(g.Stop)
	for i := range opt.Nodes {
		g.Dirs[i] = t.TempDir()
		g.start(i, i > 0)
	}
	g.WaitAlive(opt.Nodes)
	return g
}

func (g *Grid) start(i int, join bool) {
	g.t.Helper()
	cfg := node.Config{
		Dir: g.Dirs[i], Listen: "127.0.0.1:0", Version: "test",
		Logger: logger(), TuneGossip: FastGossip, CheckBlocks: g.opt.CheckBlocks,
	}
	if a := g.addrs[i]; a[0] != "" { // a restart: same addresses, as a real node
		cfg.Listen, cfg.Gossip = a[0], a[1]
	}
	if g.opt.Net != nil {
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			g.t.Fatalf("node %d: %v", i, err)
		}
		g.opt.Net.Register(Host(i), ln.Addr().String())
		cfg.Listener, cfg.Dial = ln, g.opt.Net.Dialer(Host(i))
	}
	if g.opt.Zone != nil {
		cfg.Zone = g.opt.Zone(i)
	}
	if g.opt.Capacity != nil {
		cfg.Capacity = g.opt.Capacity(i)
	}
	if g.opt.Wrap != nil {
		s, err := sharestore.OpenDisk(g.Dirs[i]+"/store", sharestore.DiskOptions{Capacity: cfg.Capacity, CheckBlocks: cfg.CheckBlocks})
		if err != nil {
			g.t.Fatal(err)
		}
		cfg.Store = g.opt.Wrap(i, s)
	}
	if join {
		inv := g.liveInvite()
		cfg.Join = &inv
	}
	// Every node replicates namespaces, as quilt node does.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc := nsnode.Config{Node: cfg, SyncInterval: time.Second, NoSyncLog: true}
	if g.opt.Helper != nil {
		nc.Helper = g.opt.Helper(i)
	}
	nn, err := nsnode.Start(ctx, nc)
	if err != nil {
		g.t.Fatalf("start node %d: %v", i, err)
	}
	n := nn.Node
	g.Nodes[i], g.Replicas[i], g.nsNodes[i] = n, nn.Replica, nn
	g.addrs[i] = [2]string{n.Addr(), n.GossipAddr()}
	if i == 0 && !join {
		g.Invite = n.Invite()
	}
}

// liveInvite is an invite through every node that is up.
func (g *Grid) liveInvite() identity.Invite {
	inv := identity.Invite{Secret: g.Invite.Secret}
	for _, n := range g.Nodes {
		if n != nil {
			inv.Addrs = append(inv.Addrs, n.Addr())
		}
	}
	return inv
}

// WaitAlive waits until every running node sees want members live.
func (g *Grid) WaitAlive(want int) {
	g.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, n := range g.Nodes {
			if n != nil && len(alive(n.Members())) != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for i, n := range g.Nodes {
				if n != nil {
					g.t.Logf("node %d sees %d alive", i, len(alive(n.Members())))
				}
			}
			g.t.Fatalf("grid did not converge on %d alive members", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive returns the members memberlist counts live: alive or suspect.
func alive(ms []member.Member) []member.Member {
	var out []member.Member
	for _, m := range ms {
		if m.State == member.Alive || m.State == member.Suspect {
			out = append(out, m)
		}
	}
	return out
}

// Kill stops node i abruptly, as a crash.
func (g *Grid) Kill(i int) {
	if g.Nodes[i] != nil {
		g.nsNodes[i].Kill()
		g.Nodes[i], g.Replicas[i], g.nsNodes[i] = nil, nil, nil
	}
}

// Restart starts node i again from its data directory and addresses, and
// waits until every node sees it alive.
func (g *Grid) Restart(i int) {
	g.t.Helper()
	g.start(i, true)
	up := 0
	for _, n := range g.Nodes {
		if n != nil {
			up++
		}
	}
	g.WaitAlive(up)
}

// Add starts a new node that joins the grid, waits until every node
// sees it alive, and returns its index. Options.Zone and Capacity are
// asked for its index too.
func (g *Grid) Add() int {
	g.t.Helper()
	i := len(g.Nodes)
	g.Nodes = append(g.Nodes, nil)
	g.Replicas = append(g.Replicas, nil)
	g.nsNodes = append(g.nsNodes, nil)
	g.Dirs = append(g.Dirs, g.t.TempDir())
	g.addrs = append(g.addrs, [2]string{})
	g.start(i, true)
	up := 0
	for _, n := range g.Nodes {
		if n != nil {
			up++
		}
	}
	g.WaitAlive(up)
	return i
}

// Stop stops every node.
func (g *Grid) Stop() {
	for i := range g.Nodes {
		g.Kill(i)
	}
}

// NodeClient returns a new client of the grid with a fresh identity,
// joining through every node that is up.
func (g *Grid) NodeClient() *node.Client {
	g.t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	id, err := identity.New(key, g.Invite.Secret)
	if err != nil {
		g.t.Fatal(err)
	}
	return node.NewClient(g.liveInvite(), id)
}

// NodeClientAt is NodeClient whose connections go through the links of
// host of Options.Net (which must be set).
func (g *Grid) NodeClientAt(host string) *node.Client {
	g.t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	id, err := identity.New(key, g.Invite.Secret)
	if err != nil {
		g.t.Fatal(err)
	}
	return node.NewClientDial(g.liveInvite(), id, g.opt.Net.Dialer(host))
}

// ObjectsAt is Objects for a client at host of Options.Net (which must
// be set): every connection it makes goes through that host's links.
func (g *Grid) ObjectsAt(host string, opt object.Options) *object.Client {
	if opt.LeaseSecret == nil {
		opt.LeaseSecret = func(si sharefile.SI) []byte { return append([]byte("test lease "), si[:]...) }
	}
	if opt.Stall == 0 {
		opt.Stall = 5 * time.Second
	}
	return object.New(object.NodeGrid{Client: g.NodeClientAt(host), MaxAge: 100 * time.Millisecond}, opt)
}

// Objects returns an object client of the grid.
func (g *Grid) Objects(opt object.Options) *object.Client {
	if opt.LeaseSecret == nil {
		opt.LeaseSecret = func(si sharefile.SI) []byte { return append([]byte("test lease "), si[:]...) }
	}
	if opt.Stall == 0 {
		opt.Stall = 5 * time.Second
	}
	return object.New(object.NodeGrid{Client: g.NodeClient(), MaxAge: 100 * time.Millisecond}, opt)
}
