package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quilt-grid/quilt/internal/member"
)

// buildVersion is the version of this build when -ldflags did not set
// main.version: the module's version for `go install ...@vX`, else
// "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// versionLine says which quilt this is: the version, and the commit it
// was built from where the build recorded it (go build records it in a
// git checkout unless -buildvcs=false).
func versionLine() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, bi)
}

// versionOf is versionLine for a version and build information (nil:
// none).
func versionOf(version string, bi *debug.BuildInfo) string {
	s := "quilt " + version
	if bi == nil {
		return s
	}
	var rev, at string
	modified := false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified {
			rev += " (modified)"
		}
		parts = append(parts, "commit "+rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	parts = append(parts, bi.GoVersion)
	return s + " (" + strings.Join(parts, ", ") + ")"
}

func runVersion(ctx context.Context, args []string) error {
	fs := newFlagSet("version", "Usage: quilt version\n\nPrints the version of quilt, the commit it was built from and the Go\nversion (as does quilt --version).")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	fmt.Println(versionLine())
	return nil
}

// gridStatus is what quilt status reports, also as JSON (--json).
type gridStatus struct {
	// Verdict is healthy (every member alive), degraded (some member
	// suspect or dead, but at least k alive) or critical (fewer than k
	// alive: objects may not read).
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	// Nodes counts the members by state: alive, suspect, dead, left.
	Nodes map[string]int `json:"nodes"`
	Zones []zoneStatus   `json:"zones"`
	// Down lists the members that are suspect or dead.
	Down []member.Member `json:"down"`
	// Used and Free sum the space of the members alive or suspect;
	// Capacity is 0 when one of them has no limit but its disk's.
	Used     int64 `json:"used"`
	Free     int64 `json:"free"`
	Capacity int64 `json:"capacity"`
	// Happy is the --happy of uploads with the default parameters, and
	// Uploads whether as many nodes are alive.
	Happy   int  `json:"happy"`
	Uploads bool `json:"uploads"`
	// ObjectsAtRisk is not known yet: it needs a census of every node's
	// shares (quilt check CAP checks one object). Always null.
	ObjectsAtRisk *int `json:"objects_at_risk"`
}

// zoneStatus counts one zone's members by state.
type zoneStatus struct {
	Zone  string         `json:"zone"`
	Nodes map[string]int `json:"nodes"`
}

// defaultK and defaultHappy are the k and --happy of quilt put's
// defaults (3-of-10, happy 7).
const defaultK, defaultHappy = 3, 7

// summarize judges the grid's health from its members as one node sees
// them.
func summarize(ms []member.Member) gridStatus {
	st := gridStatus{Nodes: map[string]int{member.Alive: 0, member.Suspect: 0, member.Dead: 0, member.Left: 0},
		Down: []member.Member{}, Happy: defaultHappy}
	zones := map[string]map[string]int{}
	unlimited := false
	for _, m := range ms {
		st.Nodes[m.State]++
		z := zones[m.Zone]
		if z == nil {
			z = map[string]int{member.Alive: 0, member.Suspect: 0, member.Dead: 0, member.Left: 0}
			zones[m.Zone] = z
		}
		z[m.State]++
		switch m.State {
		case member.Suspect, member.Dead:
			st.Down = append(st.Down, m)
		}
		if m.State == member.Alive || m.State == member.Suspect {
			st.Used += m.Used
			st.Free += m.Free
			st.Capacity += m.Capacity
			unlimited = unlimited || m.Capacity == 0
		}
	}
	if unlimited {
		st.Capacity = 0
	}
	for z, n := range zones {
		st.Zones = append(st.Zones, zoneStatus{Zone: z, Nodes: n})
	}
	sort.Slice(st.Zones, func(i, j int) bool { return st.Zones[i].Zone < st.Zones[j].Zone })
	alive, down := st.Nodes[member.Alive], len(st.Down)
	st.Uploads = alive >= defaultHappy
	switch {
	case alive < defaultK:
		st.Verdict = "critical"
		st.Reason = fmt.Sprintf("%d nodes alive, fewer than the %d shares a 3-of-10 object needs: objects may not read", alive, defaultK)
	case down > 0:
		st.Verdict = "degraded"
		st.Reason = fmt.Sprintf("%d of %d nodes suspect or dead: objects with shares there have fewer copies until they come back or are repaired", down, alive+down)
	default:
		st.Verdict = "healthy"
		st.Reason = fmt.Sprintf("all %d nodes alive", alive)
	}
	return st
}

// print writes the status as one screen of text.
func (st gridStatus) print(w io.Writer) {
	fmt.Fprintf(w, "grid %s: %s\n\n", strings.ToUpper(st.Verdict), st.Reason)
	fmt.Fprintf(w, "nodes: %d alive, %d suspect, %d dead, %d left\n", st.Nodes[member.Alive], st.Nodes[member.Suspect], st.Nodes[member.Dead], st.Nodes[member.Left])
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  ZONE\tALIVE\tSUSPECT\tDEAD\tLEFT")
	for _, z := range st.Zones {
		name := z.Zone
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\n", name, z.Nodes[member.Alive], z.Nodes[member.Suspect], z.Nodes[member.Dead], z.Nodes[member.Left])
	}
	tw.Flush()
	if len(st.Down) > 0 {
		fmt.Fprintln(w, "down:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, m := range st.Down {
			zone := m.Zone
			if zone == "" {
				zone = "-"
			}
			since := ""
			if !m.Since.IsZero() {
				since = "for " + time.Since(m.Since).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", m.ID, m.Addr, zone, m.State, since)
		}
		tw.Flush()
	}
	capacity := "no limit but the disks'"
	if st.Capacity > 0 {
		capacity = human(st.Capacity)
	}
	fmt.Fprintf(w, "space: %s used, %s free (capacity %s; nodes alive or suspect)\n", human(st.Used), human(st.Free), capacity)
	if st.Uploads {
		fmt.Fprintf(w, "uploads: %d nodes alive, at least --happy %d\n", st.Nodes[member.Alive], st.Happy)
	} else {
		fmt.Fprintf(w, "uploads: only %d nodes alive: uploads with the default --happy %d fail (pass a lower --happy and --n)\n", st.Nodes[member.Alive], st.Happy)
	}
	fmt.Fprintln(w, "objects at risk: not known yet (quilt check CAP checks one object)")
}

// errNotHealthy is quilt status's error when the verdict is not healthy,
// so that its exit status says so.
var errNotHealthy = errors.New("the grid is not healthy")

func runStatus(ctx context.Context, args []string) error {
	fs := newFlagSet("status", "Usage: quilt status [--json] [flags]\n\nSays on one screen whether the grid is healthy, as a node sees it: nodes by\nstate (alive, suspect, dead, left) and zone, the space used and free, and a\nverdict: healthy, degraded (some node suspect or dead) or critical (fewer\nnodes alive than the 3 shares an object needs). Exits 0 when healthy, 1\notherwise.")
	var g gridFlags
	g.register(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	ms, err := s.nodes.Members(ctx, 0)
	if err != nil {
		return err
	}
	s.rememberPeers(ms)
	st := summarize(ms)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else {
		st.print(os.Stdout)
	}
	if st.Verdict != "healthy" {
		return fmt.Errorf("%w: %s", errNotHealthy, st.Verdict)
	}
	return nil
}

const metricsHelp = "serve Prometheus metrics at http://ADDR/metrics over plain HTTP (host:port; port 0 picks one; default: none). Bind it where only the monitoring system reaches"

const upMetricsHelp = "host where each node and the gateway serve Prometheus metrics over plain HTTP: node i on port+2·nodes+3+i, the gateway on port+3·nodes+3 (after S3, Swift and SFTP) (any free port with --port 0); \"off\": none"

// upMetricsAddr is where quilt up's node i (i == nodes: the gateway)
// serves its metrics, or "" for none.
func upMetricsAddr(host string, port, nodes, i int) string {
	if host == "off" || host == "" {
		return ""
	}
	if port == 0 {
		return net.JoinHostPort(host, "0")
	}
	return net.JoinHostPort(host, strconv.Itoa(port+2*nodes+3+i))
}

// upMetricsMessage lists quilt up's metrics pages and writes a
// Prometheus scrape configuration for them to DIR/prometheus.yml; "" when
// no process serves metrics.
func upMetricsMessage(dir string, nodes []*daemon, gateway string) string {
	var targets, urls []string
	for _, n := range nodes {
		if n != nil && n.MetricsURL() != "" {
			urls = append(urls, n.MetricsURL())
		}
	}
	if gateway != "" {
		urls = append(urls, gateway)
	}
	if len(urls) == 0 {
		return ""
	}
	for _, u := range urls {
		targets = append(targets, fmt.Sprintf("%q", strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/metrics")))
	}
	yml := "# Prometheus scrape configuration of the grid quilt up runs\nscrape_configs:\n  - job_name: quilt\n    static_configs:\n      - targets: [" + strings.Join(targets, ", ") + "]\n"
	path := filepath.Join(dir, "prometheus.yml")
	if err := writeFileAtomic(path, []byte(yml), 0o644); err != nil {
		path = "(not written: " + err.Error() + ")"
	}
	msg := fmt.Sprintf("metrics: %s … %s\n       (scrape configuration in %s)\n", urls[0], urls[len(urls)-1], path)
	if len(urls) == 1 {
		msg = fmt.Sprintf("metrics: %s\n", urls[0])
	}
	return msg
}
