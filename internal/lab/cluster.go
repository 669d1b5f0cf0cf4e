package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsnode"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

// Cluster is a Quilt grid running in this process under a scenario's
// network: one real storage node (disk store, TLS, memberlist) per
// storage host of the scenario, whose gossip and node-to-node HTTPS go
// through a linkemu.Network with the scenario's links. Clients made by
// Client dial through the links of their own host.
type Cluster struct {
	Net      *linkemu.Network
	Scenario *scenario.Scenario
	Invite   identity.Invite
	// Nodes are the storage nodes, in scenario order.
	Nodes []*ClusterNode

	hosts map[string]string // scenario node name -> emulated host
}

// ClusterNode is one storage node of a Cluster.
type ClusterNode struct {
	Name, Host string
	Node       *node.Node
	// Rep and DB are its namespace replica and database (nil unless
	// ClusterOptions.Namespaces).
	Rep *namespace.Replica
	DB  *namespace.DB
	nn  *nsnode.Node // the node with its replica, if any
}

// ClusterOptions shape a Cluster.
type ClusterOptions struct {
	Dir string // data directories go under it (required)
	// Namespaces runs a namespace replica on every node, as quilt node
	// does; OnAdmit, if set, sees every record node i admits.
	Namespaces bool
	OnAdmit    func(node int, ns dag.NSID, raws [][]byte)
	// Gossip, if set, adjusts memberlist's timers (the default suits
	// the scenario's slowest link; see GossipFor).
	Gossip func(*memberlist.Config)
	// Fsync makes nodes fsync shares, as in production (the lab's
	// default is not to, so runs measure the network, not the disk).
	Fsync bool
	// Helper, if set, is the name of the storage node that also runs an
	// upload helper (quilt node --helper).
	Helper string
	Seed   int64
	Logger *slog.Logger
}

// GossipFor returns memberlist's LAN timers stretched so that the longest
// round trip of sc (with jitter) still fits in a probe: a slow link is not
// a dead node.
func GossipFor(sc *scenario.Scenario) func(*memberlist.Config) {
	var worst time.Duration
	for _, a := range sc.Nodes {
		for _, b := range sc.Nodes {
			if a.Name != b.Name {
				l, r := sc.Link(a.Name, b.Name), sc.Link(b.Name, a.Name)
				worst = max(worst, l.Delay+r.Delay+3*(l.Jitter+r.Jitter))
			}
		}
	}
	return func(c *memberlist.Config) {
		def := memberlist.DefaultLANConfig()
		c.ProbeInterval, c.ProbeTimeout = def.ProbeInterval, def.ProbeTimeout
		c.GossipInterval, c.SuspicionMult = def.GossipInterval, def.SuspicionMult
		c.PushPullInterval, c.TCPTimeout = def.PushPullInterval, def.TCPTimeout
		if t := 3 * worst; t > c.ProbeTimeout {
			c.ProbeTimeout = t
			c.ProbeInterval = max(c.ProbeInterval, 2*t)
			c.TCPTimeout = max(c.TCPTimeout, 4*t)
		}
	}
}

// HostOf is the emulated host ("ip:port") of the scenario's i-th node.
func HostOf(i int) string { return fmt.Sprintf("127.78.%d.%d:7946", i/250, i%250+1) }

// StartCluster starts a grid under sc and waits until every node sees
// every other alive.
func StartCluster(ctx context.Context, sc *scenario.Scenario, opt ClusterOptions) (*Cluster, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.Gossip == nil {
		opt.Gossip = GossipFor(sc)
	}
	c := &Cluster{Net: linkemu.New(opt.Seed), Scenario: sc, hosts: map[string]string{}}
	for i, n := range sc.Nodes {
		c.hosts[n.Name] = HostOf(i)
	}
	sc.Apply(c.Net, c.Host)
	storage := sc.Role("storage")
	if len(storage) == 0 {
		return nil, fmt.Errorf("lab: scenario %s has no storage nodes", sc.Name)
	}
	for i, sn := range storage {
		cn, err := c.startNode(ctx, i, sn, opt)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("lab: start node %s: %w", sn.Name, err)
		}
		c.Nodes = append(c.Nodes, cn)
		if i == 0 {
			c.Invite = cn.Node.Invite()
		}
	}
	if err := c.waitAlive(ctx, len(c.Nodes), 2*time.Minute); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) startNode(ctx context.Context, i int, sn scenario.Node, opt ClusterOptions) (*ClusterNode, error) {
	host := c.Host(sn.Name)
	dir := filepath.Join(opt.Dir, sn.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	tr, err := c.Net.Transport(host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tr.Shutdown()
		return nil, err
	}
	c.Net.Register(host, ln.Addr().String())
	cn := &ClusterNode{Name: sn.Name, Host: host}
	cfg := node.Config{Dir: dir, Listener: ln, Zone: sn.Zone, Capacity: sn.Capacity, NoSync: !opt.Fsync,
		Version: "lab", Logger: opt.Logger, Dial: c.Net.Dialer(host),
		TuneGossip: func(mc *memberlist.Config) {
			mc.Transport = tr
			opt.Gossip(mc)
		}}
	if i > 0 {
		inv := c.Invite
		cfg.Join = &inv
	}
	if opt.Namespaces {
		var helper func(*node.Node) http.Handler
		if sn.Name == opt.Helper {
			helper = uphelper.Mount(uphelper.NodeConfig{Logger: opt.Logger})
		}
		nn, err := nsnode.Start(ctx, nsnode.Config{Node: cfg, Helper: helper, Prepare: func(db *namespace.DB) error {
			if opt.OnAdmit != nil {
				db.OnAdmit = func(ns dag.NSID, raws [][]byte) { opt.OnAdmit(i, ns, raws) }
			}
			return nil
		}})
		if err != nil {
			tr.Shutdown()
			return nil, err
		}
		cn.Node, cn.Rep, cn.DB, cn.nn = nn.Node, nn.Replica, nn.DB, nn
		return cn, nil
	}
	if sn.Name == opt.Helper {
		cfg.Mount = uphelper.Mount(uphelper.NodeConfig{Logger: opt.Logger})
	}
	n, err := node.Start(ctx, cfg)
	if err != nil {
		tr.Shutdown()
		return nil, err
	}
	cn.Node = n
	return cn, nil
}

// waitAlive waits until every node sees want members alive.
func (c *Cluster) waitAlive(ctx context.Context, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for _, cn := range c.Nodes {
			live := 0
			for _, m := range cn.Node.Members() {
				if m.State == "alive" {
					live++
				}
			}
			if live != want {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: the %d nodes did not all see each other alive within %s", want, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Host is the emulated host of the scenario node called name.
func (c *Cluster) Host(name string) string { return c.hosts[name] }

// Client returns a node client and an object client of the grid, at the
// scenario node called name: every connection they make goes through
// that host's links.
func (c *Cluster) Client(name string) (*node.Client, *object.Client, error) {
	return c.ClientWith(name, nil)
}

// ClientWith is Client whose object client's options tune adjusts (if
// not nil).
func (c *Cluster) ClientWith(name string, tune func(*object.Options)) (*node.Client, *object.Client, error) {
	host, ok := c.hosts[name]
	if !ok {
		return nil, nil, fmt.Errorf("lab: scenario %s has no node %q", c.Scenario.Name, name)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	id, err := identity.New(key, c.Invite.Secret)
	if err != nil {
		return nil, nil, err
	}
	nc := node.NewClientDial(c.Invite, id, c.Net.Dialer(host))
	lease := make([]byte, 32)
	rand.Read(lease)
	opt := object.Options{
		LeaseSecret: func(si sharefile.SI) []byte { return append(append([]byte(nil), lease...), si[:]...) },
		Stall:       time.Minute,
	}
	if tune != nil {
		tune(&opt)
	}
	oc := object.New(object.NodeGrid{Client: nc}, opt)
	return nc, oc, nil
}

// Close stops every node.
func (c *Cluster) Close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, cn := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cn.nn != nil {
				errs[i] = cn.nn.Close()
				return
			}
			errs[i] = cn.Node.Close()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// startWithGateway starts a cluster under sc with namespace replicas and
// opens a gateway at the scenario node at (its connections take that
// host's links), with its state under work. The caller closes both.
func startWithGateway(ctx context.Context, env *Env, sc *scenario.Scenario, work, at string, gossip func(*memberlist.Config)) (*Cluster, *gateway.Gateway, error) {
	env.logf("starting %d Quilt nodes", len(sc.Role("storage")))
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: filepath.Join(work, "quilt"), Seed: env.Seed, Namespaces: true, Gossip: gossip})
	if err != nil {
		return nil, nil, err
	}
	nc, oc, err := cl.Client(at)
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	gw, err := gateway.Open(ctx, gateway.Config{Dir: filepath.Join(work, "gateway"), Nodes: nc, Objects: oc, NoSync: true})
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, gw, nil
}
