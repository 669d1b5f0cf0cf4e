package namespace_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsnode"
)

// member is one node of the emulated grid with its namespace replica.
type gridNode struct {
	host string // its name on the emulated network
	dir  string
	n    *node.Node
	rep  *namespace.Replica
	db   *namespace.DB
	nn   *nsnode.Node
}

// emuGrid is N nodes in this process whose gossip and node-to-node HTTPS
// run over an emulated network.
type emuGrid struct {
	t    testing.TB
	tune func(*memberlist.Config) // gossip timers; default: fast, for tests
	// onAdmit, if set, sees every record a node admits (benchmarks time
	// arrivals with it).
	onAdmit func(node int, raws [][]byte)
	net     *linkemu.Network
	nodes   []*gridNode
	invite  identity.Invite
	ns      dag.NSID
	key     dag.ReadKey
	root    *dag.Writer
	rootH   dag.Hash
}

func testLogger() *slog.Logger {
	if os.Getenv("QUILT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// emuOpts configure an emulated grid.
type emuOpts struct {
	link    linkemu.Link
	tune    func(*memberlist.Config)
	onAdmit func(node int, raws [][]byte)
}

func newEmuGrid(t testing.TB, n int, o emuOpts) *emuGrid {
	g := &emuGrid{t: t, net: linkemu.New(1), tune: o.tune, onAdmit: o.onAdmit}
	g.net.SetDefault(o.link)
	ns, priv, err := dag.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	g.ns, g.key = ns, must(dag.NewReadKey())
	g.root = &dag.Writer{NS: ns, Key: priv, Read: g.key}
	for i := range n {
		g.nodes = append(g.nodes, &gridNode{host: fmt.Sprintf("127.77.%d.%d:7946", i/200, i%200+1), dir: t.TempDir()})
		g.start(i)
	}
	t.Cleanup(func() {
		for _, m := range g.nodes {
			g.stop(m, false)
		}
	})
	g.waitMembers(n, 60*time.Second)
	return g
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func (g *emuGrid) start(i int) {
	m := g.nodes[i]
	tr, err := g.net.Transport(m.host)
	if err != nil {
		g.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	g.net.Register(m.host, ln.Addr().String())
	cfg := node.Config{Dir: m.dir, Listener: ln, Version: "test", Logger: testLogger(), NoSync: true,
		Dial: g.net.Dialer(m.host), Reconnect: time.Second,
		TuneGossip: func(c *memberlist.Config) {
			c.Transport = tr
			if g.tune != nil {
				g.tune(c)
				return
			}
			c.ProbeInterval = 200 * time.Millisecond
			c.ProbeTimeout = 150 * time.Millisecond
			c.GossipInterval = 50 * time.Millisecond
			c.SuspicionMult = 3
			c.PushPullInterval = 5 * time.Second
			c.TCPTimeout = time.Second
		}}
	if i > 0 && g.nodes[0].n != nil {
		inv := g.invite
		cfg.Join = &inv
	}
	if m.n != nil || fileExists(filepath.Join(m.dir, "secret")) {
		cfg.Join = nil // a restart: rejoin from the data directory
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := nsnode.Start(ctx, nsnode.Config{Node: cfg, SyncInterval: time.Second, Prepare: func(db *namespace.DB) error {
		if g.onAdmit != nil {
			db.OnAdmit = func(_ dag.NSID, raws [][]byte) { g.onAdmit(i, raws) }
		}
		return db.Open(g.ns, &g.key, dag.ConfigRules)
	}})
	if err != nil {
		g.t.Fatalf("start node %d: %v", i, err)
	}
	m.n, m.rep, m.db, m.nn = n.Node, n.Replica, n.DB, n
	if i == 0 && g.invite.Addrs == nil {
		g.invite = n.Invite()
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func (g *emuGrid) stop(m *gridNode, kill bool) {
	if m.n == nil {
		return
	}
	if kill {
		m.nn.Kill()
	} else {
		m.nn.Close()
	}
	m.n = nil
}

func (g *emuGrid) waitMembers(want int, limit time.Duration) {
	g.t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ok := true
		for _, m := range g.nodes {
			if m.n == nil {
				continue
			}
			live := 0
			for _, mm := range m.n.Members() {
				if mm.State == "alive" {
					live++
				}
			}
			if live != want {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	g.t.Fatalf("members did not all see %d alive within %s", want, limit)
}

// bootstrap writes, at node 0, the root and two directories, and waits
// until every node has them.
func (g *emuGrid) bootstrap() {
	root := g.root.Root()
	g.rootH = root.Hash()
	etc := g.root.Entry(dag.Mkdir, g.rootH, nil, "etc", nil)
	srv := g.root.Entry(dag.Mkdir, g.rootH, nil, "srv", nil)
	if _, err := g.nodes[0].rep.Append(g.ns, [][]byte{root.Encode(), etc.Encode(), srv.Encode()}, false); err != nil {
		g.t.Fatal(err)
	}
	g.converge(60 * time.Second)
}

// write makes one random change at node i, as a client there would: it
// reads that replica's view for the anchor and the heads it replaces.
func (g *emuGrid) write(rng *rand.Rand, i int, tag string) dag.Hash {
	g.t.Helper()
	m := g.nodes[i]
	dirs := []string{"/", "/etc", "/srv"}
	dir := dirs[rng.IntN(len(dirs))]
	anchor := g.rootH
	if dir != "/" {
		info, err := m.db.Stat(g.ns, dir)
		if err != nil {
			g.t.Fatalf("node %d: stat %s: %v", i, dir, err)
		}
		anchor = info.Current
	}
	name := fmt.Sprint("f", rng.IntN(40))
	heads, err := m.db.Heads(g.ns, dir+"/"+name)
	if err != nil {
		g.t.Fatal(err)
	}
	e := g.root.Entry(dag.Write, anchor, heads, name, []byte(tag))
	res, err := m.rep.Append(g.ns, [][]byte{e.Encode()}, false)
	if err != nil || len(res.Admitted) != 1 {
		g.t.Fatalf("node %d: append: %v %+v", i, err, res)
	}
	return e.Hash()
}

// view summarises one replica's view.
func (g *emuGrid) view(m *gridNode) string {
	var out []string
	for _, dir := range []string{"/", "/etc", "/srv"} {
		items, err := m.db.List(g.ns, dir, "", 0)
		if err != nil {
			return err.Error()
		}
		for _, it := range items {
			out = append(out, it.Path+"="+it.Current.Short())
		}
	}
	return fmt.Sprint(len(out), out)
}

// converge waits until every running node holds the same log and shows
// the same view, and returns how long it took.
func (g *emuGrid) converge(limit time.Duration) time.Duration {
	g.t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		var first *gridNode
		same := true
		for _, m := range g.nodes {
			if m.n == nil {
				continue
			}
			if first == nil {
				first = m
				continue
			}
			if m.db.Root(g.ns) != first.db.Root(g.ns) {
				same = false
				break
			}
		}
		if same {
			v := ""
			for _, m := range g.nodes {
				if m.n == nil {
					continue
				}
				if got := g.view(m); v == "" {
					v = got
				} else if got != v {
					g.t.Fatalf("equal logs, different views:\n%s\n%s", v, got)
				}
			}
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	counts := map[uint64]int{}
	for _, m := range g.nodes {
		if m.n != nil {
			counts[m.db.Count(g.ns)]++
		}
	}
	g.t.Fatalf("no convergence within %s; record counts (count: nodes) %v", limit, counts)
	return 0
}

// TestGridConvergence: 30 nodes over an emulated network. Writes at
// random nodes converge everywhere on a clean LAN and with 20% datagram
// loss; a partition into halves with writes on both sides converges after
// healing; a node killed and restarted from its data directory catches up.
func TestGridConvergence(t *testing.T) {
	if testing.Short() {
		t.Skip("30-node scenario")
	}
	const N = 30
	g := newEmuGrid(t, N, emuOpts{link: linkemu.Link{Delay: time.Millisecond}})
	rng := rand.New(rand.NewPCG(3, 3))
	g.bootstrap()

	t.Run("500 writes at random nodes", func(t *testing.T) {
		for i := range 500 {
			g.write(rng, rng.IntN(N), fmt.Sprint("lan ", i))
		}
		t.Logf("converged %v after the last write", g.converge(120*time.Second))
	})

	t.Run("20% datagram loss", func(t *testing.T) {
		g.net.SetDefault(linkemu.Link{Delay: time.Millisecond, Jitter: time.Millisecond, Loss: 0.2, Reorder: 0.05})
		for i := range 200 {
			g.write(rng, rng.IntN(N), fmt.Sprint("lossy ", i))
		}
		t.Logf("converged %v after the last write", g.converge(120*time.Second))
		st := g.net.Stats()
		if st.DroppedLoss == 0 {
			t.Fatal("no datagram was lost: the test did not test loss")
		}
		var pulled int64
		for _, m := range g.nodes {
			pulled += m.rep.Stats().Pulled
		}
		t.Logf("datagrams lost %d of %d; records repaired by anti-entropy %d", st.DroppedLoss, st.DatagramsSent, pulled)
		g.net.SetDefault(linkemu.Link{Delay: time.Millisecond})
	})

	t.Run("partition into halves, writes on both sides, heal", func(t *testing.T) {
		var a, b []string
		for i, m := range g.nodes {
			if i < N/2 {
				a = append(a, m.host)
			} else {
				b = append(b, m.host)
			}
		}
		g.net.Partition(a, b)
		for i := range 100 {
			side := rng.IntN(N / 2)
			if i%2 == 1 {
				side += N / 2
			}
			g.write(rng, side, fmt.Sprint("partitioned ", i))
		}
		time.Sleep(2 * time.Second)
		if g.nodes[0].db.Root(g.ns) == g.nodes[N-1].db.Root(g.ns) {
			t.Fatal("the two sides agree while partitioned: the partition let traffic through")
		}
		g.net.Heal()
		t.Logf("converged %v after healing", g.converge(180*time.Second))
	})

	t.Run("restarted node catches up", func(t *testing.T) {
		m := g.nodes[7]
		g.stop(m, true)
		before := g.nodes[0].db.Count(g.ns)
		for range 50 {
			i := rng.IntN(N)
			for i == 7 {
				i = rng.IntN(N)
			}
			g.write(rng, i, "while 7 was down")
		}
		g.start(7)
		if got := m.db.Count(g.ns); got < before {
			t.Fatalf("node restarted with %d records, had at least %d: the log was not kept", got, before)
		}
		t.Logf("converged %v after restart", g.converge(120*time.Second))
		// What it caught up came through replication, not a stale copy.
		if st := m.rep.Stats(); st.Admitted == 0 {
			t.Fatal("restarted node admitted nothing, yet holds what was written while it was down")
		}
	})
	var rejected int64
	for _, m := range g.nodes {
		rejected += m.rep.Stats().Rejected
	}
	if rejected != 0 {
		t.Errorf("%d valid records were refused", rejected)
	}
}
