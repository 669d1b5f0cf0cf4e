package lab

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/zeebo/blake3"
)

// convergenceNodes is the size of the BaseFS paper's cluster.
const convergenceNodes = 30

// convCase is one network condition of the convergence sweep: the link
// every pair of nodes gets, and a host limit for every node.
type convCase struct {
	sweep string // "delay", "loss", "reorder", "bandwidth"
	label string
	x     float64 // the swept value, for plots
	link  linkemu.Link
	host  linkemu.HostLimit
}

// convergenceCases follows the BaseFS paper's figures: delay with a
// standard deviation of 20% of its mean, datagram loss with 25%
// correlation, reordering, and bandwidth limited on every node's
// interface down to 32 kbit/s.
func convergenceCases(quick bool) []convCase {
	var cs []convCase
	delays := []int{0, 10, 20, 40, 80, 160, 320, 640, 1280, 2560}
	losses := []int{0, 10, 20, 30, 40, 50, 60, 70, 80}
	reorders := []int{0, 25, 50, 75}
	kbits := []int{1024, 512, 256, 128, 64, 32}
	if quick {
		delays, losses, reorders, kbits = []int{0, 80, 640, 1280}, []int{0, 20, 50, 80}, []int{0, 50}, []int{256, 32}
	}
	for _, ms := range delays {
		d := time.Duration(ms) * time.Millisecond
		cs = append(cs, convCase{"delay", fmt.Sprintf("%d ms ± 20%%", ms), float64(ms), linkemu.Link{Delay: d, Jitter: d / 5}, linkemu.HostLimit{}})
	}
	for _, p := range losses {
		cs = append(cs, convCase{"loss", fmt.Sprintf("%d%%, 25%% correlation", p), float64(p),
			linkemu.Link{Delay: time.Millisecond, Loss: float64(p) / 100, LossCorr: 0.25}, linkemu.HostLimit{}})
	}
	for _, p := range reorders {
		cs = append(cs, convCase{"reorder", fmt.Sprintf("%d%% of datagrams, 10 ms delay", p), float64(p),
			linkemu.Link{Delay: 10 * time.Millisecond, Jitter: 2 * time.Millisecond, Reorder: float64(p) / 100}, linkemu.HostLimit{}})
	}
	for _, k := range kbits {
		rate := int64(k) * 1000 / 8
		cs = append(cs, convCase{"bandwidth", fmt.Sprintf("%d kbit/s per node", k), float64(k),
			linkemu.Link{Delay: time.Millisecond}, linkemu.HostLimit{Up: rate, Down: rate}})
	}
	return cs
}

// runConvergence starts 30 nodes with namespace replicas, then for each
// network condition makes writes at random nodes and times each until all
// 30 have admitted it.
func runConvergence(ctx context.Context, env *Env) error {
	if env.Scenario.Name != "lan" {
		return fmt.Errorf("lab: convergence runs its own %d nodes and sweeps their links; --scenario does not apply", convergenceNodes)
	}
	sc := scenario.LAN(convergenceNodes)
	work, err := env.workDir("convergence")
	if err != nil {
		return err
	}
	adm := newAdmissions(convergenceNodes)
	cases := convergenceCases(env.Quick)
	// Gossip timers fit the slowest case, so no node is declared dead
	// while the network is merely slow; broadcasts go out at memberlist's
	// LAN gossip interval whatever the timers.
	worst := sc.Clone()
	worst.Default = linkemu.Link{Delay: 2560 * time.Millisecond, Jitter: 512 * time.Millisecond}
	env.logf("starting %d nodes with namespace replicas", convergenceNodes)
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: filepath.Join(work, "nodes"), Seed: env.Seed,
		Namespaces: true, OnAdmit: adm.onAdmit, Gossip: GossipFor(worst)})
	if err != nil {
		return err
	}
	defer cl.Close()

	// A configuration namespace, as quilt cfs makes: a root and one
	// directory, on every node.
	ns, priv, err := dag.NewNamespace()
	if err != nil {
		return err
	}
	key, err := dag.NewReadKey()
	if err != nil {
		return err
	}
	for _, n := range cl.Nodes {
		if err := n.DB.Open(ns, &key, dag.ConfigRules); err != nil {
			return err
		}
	}
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	etc := w.Entry(dag.Mkdir, root.Hash(), nil, "etc", nil)
	if err := commitEverywhere(ctx, cl, ns, [][]byte{root.Encode(), etc.Encode()}, adm); err != nil {
		return err
	}

	writes := 20
	limit := 5 * time.Minute
	if env.Quick {
		writes, limit = 5, 2*time.Minute
	}
	tab := &report.Table{Title: fmt.Sprintf("convergence: time for one write to reach all %d nodes (%d writes per case, at random nodes)", convergenceNodes, writes),
		Columns: []string{"sweep", "condition", "median", "p90", "max", "reached all", "datagrams sent", "lost", "queue drops"}}
	rng := rand.New(rand.NewPCG(uint64(env.Seed), 7))
	type line struct{ x, y, lo, hi []float64 }
	plots := map[string]*line{}
	for _, c := range cases {
		cond := sc.Clone()
		cond.Default = c.link
		for i := range cond.Nodes {
			cond.Nodes[i].Up, cond.Nodes[i].Down = c.host.Up, c.host.Down
		}
		cond.Apply(cl.Net, cl.Host)
		before := cl.Net.Stats()
		var lat []float64
		for i := range writes {
			at := cl.Nodes[rng.IntN(len(cl.Nodes))]
			heads, _ := at.DB.Heads(ns, fmt.Sprintf("/etc/f%d", i%7))
			info, err := at.DB.Stat(ns, "/etc")
			if err != nil {
				return err
			}
			e := w.Entry(dag.Write, info.Current, heads, fmt.Sprintf("f%d", i%7), fmt.Appendf(nil, "%s %d", c.label, i))
			d, err := timeWrite(ctx, at, ns, e, limit, adm)
			if err != nil {
				return err
			}
			if d < 0 {
				continue // counted in "reached all"
			}
			lat = append(lat, d.Seconds())
		}
		after := cl.Net.Stats()
		slices.Sort(lat)
		med, p90, mx := pct(lat, 0.5), pct(lat, 0.9), pct(lat, 1)
		env.logf("%-9s %-28s median %6.2fs  p90 %6.2fs  max %6.2fs  reached all %d/%d", c.sweep, c.label, med, p90, mx, len(lat), writes)
		tab.Add(c.sweep, c.label, sec(med), sec(p90), sec(mx), fmt.Sprintf("%d/%d", len(lat), writes),
			after.DatagramsSent-before.DatagramsSent, after.DroppedLoss-before.DroppedLoss, after.DroppedQueue-before.DroppedQueue)
		l := plots[c.sweep]
		if l == nil {
			l = &line{}
			plots[c.sweep] = l
		}
		if len(lat) > 0 {
			q1, m, q3 := report.Quartiles(lat)
			l.x, l.y, l.lo, l.hi = append(l.x, c.x), append(l.y, m), append(l.lo, q1), append(l.hi, q3)
		}
	}
	tab.Notes = append(tab.Notes,
		fmt.Sprintf("%d nodes in one process, each a storage node with a namespace replica (gossip broadcast plus Merkle anti-entropy with a random peer every 2.5–7.5 s); every link of every pair has the condition.", convergenceNodes),
		fmt.Sprintf("A write that had not reached every node after %s counts as not reaching all.", limit))
	if _, _, err := report.Write(env.Out, "convergence", tab); err != nil {
		return err
	}
	for _, sw := range []struct{ name, xlabel string }{
		{"delay", "mean one-way delay (ms), sd 20%"}, {"loss", "datagram loss (%), 25% correlation"},
		{"reorder", "reordered datagrams (%)"}, {"bandwidth", "bandwidth per node (kbit/s)"},
	} {
		l := plots[sw.name]
		if l == nil || len(l.x) == 0 {
			continue
		}
		p := &report.Plot{Title: "Convergence of one write over 30 nodes vs " + sw.name, XLabel: sw.xlabel, YLabel: "seconds to reach all (median, quartiles)",
			Series: []report.Series{{Name: "quilt", X: l.x, Y: l.y, YErrLow: l.lo, YErrHigh: l.hi}}}
		if sw.name == "bandwidth" {
			p.LogX = true
		}
		if err := p.Save(filepath.Join(env.Out, "convergence-"+sw.name+".png")); err != nil {
			return err
		}
	}
	return nil
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// pct is the p-quantile (nearest rank) of sorted xs; NaN-free 0 when empty.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(p*float64(len(xs)-1)+0.5))]
}

// admissions counts, per record, the nodes that have admitted it, and
// closes the record's channel (see expect) once all n have.
type admissions struct {
	n     int
	mu    sync.Mutex
	count map[dag.Hash]int
	done  map[dag.Hash]chan struct{}
}

func newAdmissions(n int) *admissions {
	return &admissions{n: n, count: map[dag.Hash]int{}, done: map[dag.Hash]chan struct{}{}}
}

// onAdmit is a ClusterOptions.OnAdmit.
func (a *admissions) onAdmit(_ int, _ dag.NSID, raws [][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, raw := range raws {
		h := dag.Hash(blake3.Sum256(raw))
		if a.count[h]++; a.count[h] == a.n {
			if ch := a.done[h]; ch != nil {
				close(ch)
			}
		}
	}
}

// expect returns a channel closed when every node has admitted the
// record with hash h; call it before the record is written.
func (a *admissions) expect(h dag.Hash) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.done[h] = ch
	return ch
}

// timeWrite appends e at node at and waits until every node has it;
// -1 if not within limit.
func timeWrite(ctx context.Context, at *ClusterNode, ns dag.NSID, e *dag.Entry, limit time.Duration, adm *admissions) (time.Duration, error) {
	ch := adm.expect(e.Hash())
	start := time.Now()
	if _, err := at.Rep.Append(ns, [][]byte{e.Encode()}, false); err != nil {
		return 0, err
	}
	select {
	case <-ch:
		return time.Since(start), nil
	case <-time.After(limit):
		return -1, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// commitEverywhere appends recs at the first node and waits until every
// node has them all.
func commitEverywhere(ctx context.Context, cl *Cluster, ns dag.NSID, recs [][]byte, adm *admissions) error {
	var chs []chan struct{}
	for _, r := range recs {
		chs = append(chs, adm.expect(dag.Hash(blake3.Sum256(r))))
	}
	if _, err := cl.Nodes[0].Rep.Append(ns, recs, false); err != nil {
		return err
	}
	for _, ch := range chs {
		select {
		case <-ch:
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("lab: the namespace's first records did not reach all nodes within 2 minutes")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
