package scenario

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// ErrNotFound is returned by Builtin for a name that is not built in, and
// by Load for a name that is neither built in nor a readable file.
var ErrNotFound = errors.New("scenario: no such built-in scenario")

var builtins = map[string]func() *Scenario{
	"azure":   azure,
	"kreonet": kreonet,
	"lan":     lan,
	"qmpsu":   qmpsu,
}

// Names returns the names of the built-in scenarios, sorted.
func Names() []string { return slices.Sorted(maps.Keys(builtins)) }

// Builtin returns a new copy of the built-in scenario of that name:
//
//   - qmpsu: the QMPSU wireless community mesh of Guifi.net in Barcelona
//     (Selimi et al., "Tahoe-LAFS on community network clouds", §4.1 and
//     §5.1): storage nodes s01..s10, each in its own building (zone), and
//     the clients best (the baseline) and worst (set 1).
//   - azure: 20 Azure VMs in West Europe (same paper, §4.2, Table I),
//     storage nodes s01..s20, a client local inside the cluster and a
//     client remote in the community network.
//   - kreonet: the central region of the Swift storage cloud over KREONET
//     (Experiment II): a gateway proxy, where swift-bench ran, and storage
//     nodes s01..s10, all at 1 Gbit/s and 0.25 ms. The experiment's added
//     latency, 0 to 50 ms, is AddDelay(RoleGateway, RoleStorage, d).
//   - lan: storage nodes s01..s10 and a client on perfect links.
//
// The figures and how links are derived from them are documented beside
// each scenario's code.
func Builtin(name string) (*Scenario, error) {
	f, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (built in: %s)", ErrNotFound, name, strings.Join(Names(), ", "))
	}
	return f(), nil
}

// figure is what is known of a node's network: its throughput and its
// round-trip time to the rest of the network.
type figure struct {
	name string
	bw   int64 // bytes/s
	rtt  time.Duration
}

// mbit is x Mbit/s in bytes/s.
func mbit(x float64) int64 { return int64(math.Round(x * 1e6 / 8)) }

// ms is x milliseconds.
func ms(x float64) time.Duration { return time.Duration(math.Round(x * 1e6)) }

// figures builds figures from (throughput Mbit/s, RTT ms) pairs.
func figures(names []string, mbits, rtts []float64) []figure {
	f := make([]figure, len(names))
	for i := range names {
		f[i] = figure{names[i], mbit(mbits[i]), ms(rtts[i])}
	}
	return f
}

// meshLink is the link between two nodes known by their figures: the
// smaller throughput, and half the mean of their RTTs one way (so the
// pair's RTT is the mean of the nodes' RTTs), with a jitter of 10% of the
// delay and no loss.
func meshLink(a, b figure) linkemu.Link {
	d := (a.rtt + b.rtt) / 4
	return linkemu.Link{Delay: d, Jitter: d / 10, Bandwidth: min(a.bw, b.bw)}
}

// mesh adds the rules, both directions, between every two of nodes.
func (s *Scenario) mesh(nodes []figure, link func(a, b figure) linkemu.Link) {
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			l := link(a, b)
			s.Rules = append(s.Rules, Rule{a.name, b.name, l}, Rule{b.name, a.name, l})
		}
	}
}

// QMPSU. The paper (§4.1.1, Figs. 9 and 10) gives, over the mesh's nodes,
// the throughput to the gateway, mean 17.4 Mbit/s, lower quartile 4.7, and
// the RTT to the gateway, mean 9.2 ms, upper quartile 14.3; it takes these
// as estimates for any pair of nodes. Ten nodes with those statistics
// (quartiles with linear interpolation, as numpy's default):
//
//	node  Mbit/s  RTT ms
//	s01    69.8     2.0
//	s02    33.5     3.2
//	s03    21.7     2.6
//	s04    15.3     5.2
//	s05    11.2     4.0
//	s06     8.2    13.6
//	s07     6.0     7.4
//	s08     4.3    17.0
//	s09     2.8    14.5
//	s10     1.2    22.5
//	mean   17.40    9.20   (paper 17.4, 9.2)
//	Q1      4.725          (paper 4.7, +0.5%)
//	Q3             14.275  (paper 14.3, -0.2%)
//
// The throughputs are a lognormal (σ ≈ 1.2) at the deciles' midpoints,
// scaled to the mean and rounded. No lognormal has an upper quartile 1.55
// times its mean (at most 1.26), so the RTTs are explicit: six nodes one or
// two hops from the gateway (2 to 7.4 ms) and four three or more hops away
// (13.6 to 22.5 ms), as the paper's RTT follows the hop count (mean 2.53
// hops, upper quartile 3.4). The nodes are sorted by throughput, as in
// Fig. 8, and the RTT mostly grows along it.
//
// The clients of §5.1: best, the baseline, has the figures of the best
// node (69.8 Mbit/s, 2.0 ms); worst, set 1, "the farthest node in the
// network", those of the worst (1.2 Mbit/s, 22.5 ms). Every link, between
// storage nodes and clients alike, is meshLink of its two ends.
var qmpsuFigures = figures(
	[]string{"s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10", "best", "worst"},
	[]float64{69.8, 33.5, 21.7, 15.3, 11.2, 8.2, 6.0, 4.3, 2.8, 1.2, 69.8, 1.2},
	[]float64{2.0, 3.2, 2.6, 5.2, 4.0, 13.6, 7.4, 17.0, 14.5, 22.5, 2.0, 22.5},
)

func qmpsu() *Scenario {
	s := &Scenario{
		Name:        "qmpsu",
		Description: "QMPSU wireless community mesh (Guifi.net, Barcelona), after Selimi et al. §4.1 and §5.1: 10 storage nodes in 10 buildings; clients best (baseline) and worst (set 1)",
	}
	for _, f := range qmpsuFigures {
		// A node's throughput is its radio's: all its links share it.
		n := Node{Name: f.name, Role: RoleClient, Up: f.bw, Down: f.bw}
		if strings.HasPrefix(f.name, "s") {
			n.Role, n.Zone = RoleStorage, "z"+f.name[1:]
		}
		s.Nodes = append(s.Nodes, n)
	}
	s.mesh(qmpsuFigures, meshLink)
	return s
}

// Azure. Table I: 20 VMs, 220-230 Mbit/s and an RTT of 1-2 ms between
// them. Each VM gets a throughput and an RTT spread evenly over those
// ranges in an order that mixes them (VM i, from 0: 220 + 0.5·(7i mod 20)
// Mbit/s, 1 + 0.05·((13i+3) mod 20) ms), and the links between them are
// meshLink, so every pair is within the table's ranges:
//
//	node  Mbit/s  RTT ms    node  Mbit/s  RTT ms
//	s01   220.0   1.15      s11   225.0   1.65
//	s02   223.5   1.80      s12   228.5   1.30
//	s03   227.0   1.45      s13   222.0   1.95
//	s04   220.5   1.10      s14   225.5   1.60
//	s05   224.0   1.75      s15   229.0   1.25
//	s06   227.5   1.40      s16   222.5   1.90
//	s07   221.0   1.05      s17   226.0   1.55
//	s08   224.5   1.70      s18   229.5   1.20
//	s09   228.0   1.35      s19   223.0   1.85
//	s10   221.5   1.00      s20   226.5   1.50
//	local 225.0   1.50
//
// The local client (§5.2's baseline) is one more VM of the cluster. The
// remote client (set 1) is a community-network node: the table gives
// 7-8 Mbit/s from it, so its link to a VM of throughput t has
// 7 + (t-220)/10 Mbit/s; the paper gives no RTT to the data centre, so it
// is the QMPSU nodes' mean RTT to the Internet, 56.3 ms (§4.1.1), plus
// half the VM's RTT inside the cluster. Jitter is 10% of the delay.
var azureFigures = figures(
	[]string{"s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10",
		"s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19", "s20", "local"},
	[]float64{220, 223.5, 227, 220.5, 224, 227.5, 221, 224.5, 228, 221.5,
		225, 228.5, 222, 225.5, 229, 222.5, 226, 229.5, 223, 226.5, 225},
	[]float64{1.15, 1.80, 1.45, 1.10, 1.75, 1.40, 1.05, 1.70, 1.35, 1.00,
		1.65, 1.30, 1.95, 1.60, 1.25, 1.90, 1.55, 1.20, 1.85, 1.50, 1.50},
)

// azureInternet is the RTT from the community network to the data centre.
const azureInternet = 56300 * time.Microsecond

// azureRemoteLink is the link between the remote client and VM x.
func azureRemoteLink(x figure) linkemu.Link {
	d := azureInternet/2 + x.rtt/4
	return linkemu.Link{Delay: d, Jitter: d / 10, Bandwidth: mbit(7) + (x.bw-mbit(220))/10}
}

func azure() *Scenario {
	s := &Scenario{
		Name:        "azure",
		Description: "Microsoft Azure West Europe, 20 A1 VMs, after Selimi et al. §4.2 Table I: client local in the cluster (baseline), client remote in the community network (set 1)",
	}
	for _, f := range azureFigures {
		role := RoleStorage
		if f.name == "local" {
			role = RoleClient
		}
		s.Nodes = append(s.Nodes, Node{Name: f.name, Role: role})
	}
	s.Nodes = append(s.Nodes, Node{Name: "remote", Role: RoleClient})
	s.mesh(azureFigures, meshLink)
	for _, x := range azureFigures {
		l := azureRemoteLink(x)
		s.Rules = append(s.Rules, Rule{"remote", x.name, l}, Rule{x.name, "remote", l})
	}
	return s
}

// KREONET, Experiment II: swift-bench runs on the proxy, whose storage
// nodes are in the same region (the RTT between Seoul and Daejeon is under
// 3 ms); Swift kept 3 replicas, and Quilt's equivalent is 3-of-10
// erasure-coded shares, hence 10 storage nodes. Each object server had two
// 6 TB disks. Links are 1 Gbit/s and 0.25 ms one way, without jitter or
// loss, as tc added only a fixed delay.
func kreonet() *Scenario {
	s := &Scenario{
		Name:        "kreonet",
		Description: "KREONET central region, after the Swift storage cloud's Experiment II: a proxy (gateway, where swift-bench runs) and 10 storage nodes, as Quilt stores 3-of-10 erasure-coded shares where Swift kept 3 replicas; experiments add 0-50 ms between gateway and storage",
		Nodes:       []Node{{Name: "proxy", Role: RoleGateway}},
		Default:     linkemu.Link{Delay: 250 * time.Microsecond, Bandwidth: mbit(1000)},
	}
	for i := 1; i <= 10; i++ {
		s.Nodes = append(s.Nodes, Node{Name: fmt.Sprintf("s%02d", i), Role: RoleStorage, Capacity: 12e12})
	}
	return s
}

// lan is one machine's loopback, for tests and baselines.
func lan() *Scenario { return LAN(10) }

// LAN is a scenario of n storage nodes and a client on perfect links.
func LAN(n int) *Scenario {
	s := &Scenario{
		Name:        "lan",
		Description: fmt.Sprintf("perfect links: %d storage nodes and a client", n),
	}
	for i := 1; i <= n; i++ {
		s.Nodes = append(s.Nodes, Node{Name: fmt.Sprintf("s%02d", i), Role: RoleStorage})
	}
	s.Nodes = append(s.Nodes, Node{Name: "client", Role: RoleClient})
	return s
}
