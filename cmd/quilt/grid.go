package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/metrics"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

const checkBlocksHelp = "hash every block of every share on arrival and refuse damaged ones at once (costs CPU on every byte stored); by default a node checks each upload's header, length and hash tree, and the blocks are checked by every reader and by scrub"

const noSyncHelp = "do not fsync shares: faster, but a power loss may lose shares stored in the last seconds (a crashed process still never leaves a partial share); Tahoe-LAFS storage servers work this way"

func runNode(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "drain" {
		return runNodeDrain(ctx, args[1:])
	}
	fs := newFlagSet("node", "Usage: quilt node --data DIR [flags]\n\nRuns a storage node until interrupted. The first node of a grid (no --join)\nwrites an invite to DIR/invite; give it to the next nodes and to clients.\n\nquilt node drain NODE-ID moves a node's shares to the others (see quilt node drain -h).")
	data := fs.String("data", "", "data directory: key, grid secret, shares (required)")
	listen := fs.String("listen", "127.0.0.1:7700", "HTTPS API address (host:port; port 0 picks one)")
	gossip := fs.String("gossip", "", "gossip address, UDP and TCP (default: the API host, port+1)")
	advertise := fs.String("advertise", "", "API address other nodes and clients should use (default: --listen)")
	join := fs.String("join", "", "invite of the grid to join (quilt://SECRET@host:port,...); without it a new grid starts, or the grid in --data is rejoined")
	zone := fs.String("zone", "", "failure domain of this node (building, neighbourhood); shares spread over zones")
	capacity := fs.String("capacity", "0", "most bytes of shares to store, e.g. 50GiB (0: what the disk has)")
	wan := fs.Bool("wan", false, "gossip timings for slow, lossy links")
	noSync := fs.Bool("no-fsync", false, noSyncHelp)
	checkBlocks := fs.Bool("check-blocks", false, checkBlocksHelp)
	logLevel := fs.String("log", "info", "log level: debug, info, warn, error")
	syncEvery := fs.Duration("ns-sync", 5*time.Second, "how often namespaces are compared with a random peer (anti-entropy)")
	joinTimeout := fs.Duration("join-timeout", 2*time.Minute, "with --join: give up (exit 1) when no node of the invite has answered for this long; 0: keep trying for ever (every failure is logged)")
	leaseSweep := fs.Duration("lease-sweep", time.Hour, "how often to delete the shares whose leases have all expired (negative: never)")
	leaseGrace := fs.Duration("lease-grace", 24*time.Hour, "how long after its expiry a lease still keeps its share, so a late renewal still saves it (0: none)")
	cpus := fs.Int("cpus", 0, "most CPUs the node uses at once (0: all); when several nodes share a machine, 1 each spends less CPU on handing work between threads")
	reconnect := fs.Duration("reconnect", 30*time.Second, "how often to try reaching members seen dead, and the old peers when none answered at start, so a healed partition or a restarted node rejoins")
	metricsAddr := fs.String("metrics", "", metricsHelp)
	bodyStall := fs.Duration("body-stall", 60*time.Second, "how long a share upload's body may deliver no byte before the upload fails and its space is released")
	scrubEvery := fs.Duration("scrub-every", node.DefaultScrubEvery, "how long the scrub takes to re-read and re-hash every share once, spread evenly; a damaged share is quarantined until repaired (negative: never)")
	scrubRate := fs.String("scrub-rate", "4MiB", "most bytes a second the scrub reads")
	repairEvery := fs.Duration("repair-every", repairer.DefaultEvery, "how often to check the objects of the repair registry whose turn is this node's, and rebuild their missing and damaged shares (negative: never)")
	repairBudget := fs.String("repair-budget", "4MiB", "most bytes of shares a second repair reads and writes")
	rebalance := fs.Bool("rebalance", true, "at each repair pass, move shares to emptier nodes while this node's used fraction of its capacity is clearly above the grid's, under --repair-budget (false: never)")
	rebalanceSpread := fs.Float64("rebalance-spread", repairer.DefaultSpread, "how far above the grid's used fraction of capacity this node's must be (0.05: 5 points) before it rebalances; it goes on until within a tenth of that")
	rebalanceMax := fs.String("rebalance-max", "1GiB", "most bytes of shares one rebalancing pass moves away")
	rebalanceMinAge := fs.Duration("rebalance-min-age", repairer.DefaultRebalanceMinAge, "rebalancing leaves the shares stored more recently than this where they are (their object's upload may still be under way)")
	helperOn := fs.Bool("helper", false, "also serve an upload helper: clients with slow uplinks send it an object's ciphertext once and it erasure-codes and places the shares from this node's links (it never sees keys; docs/grid.md, \"Upload helper\")")
	helperUploads := fs.Int("helper-uploads", uphelper.DefaultUploads, "with --helper: most uploads the helper runs at once (each holds a few segments per share and at most 16 MiB of lagging shares in memory, nothing on disk); more are refused and go direct")
	addConfigFlag(fs)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	if *data == "" {
		fs.Usage()
		return errUsage
	}
	if *cpus < 0 {
		return fmt.Errorf("--cpus %d: want 0 (all) or more", *cpus)
	}
	if *reconnect <= 0 {
		return fmt.Errorf("--reconnect %v: want a positive duration", *reconnect)
	}
	if *bodyStall <= 0 {
		return fmt.Errorf("--body-stall %v: want a positive duration", *bodyStall)
	}
	if *cpus > 0 {
		runtime.GOMAXPROCS(*cpus)
	}
	cap, err := parseSize(*capacity)
	if err != nil {
		return err
	}
	srate, err := parseSize(*scrubRate)
	if err != nil || srate <= 0 {
		return fmt.Errorf("--scrub-rate %q: want a positive size a second, e.g. 4MiB", *scrubRate)
	}
	rbudget, err := parseSize(*repairBudget)
	if err != nil || rbudget <= 0 {
		return fmt.Errorf("--repair-budget %q: want a positive size a second, e.g. 4MiB", *repairBudget)
	}
	if *rebalanceSpread <= 0 || *rebalanceSpread >= 1 {
		return fmt.Errorf("--rebalance-spread %v: want a fraction between 0 and 1, e.g. 0.05", *rebalanceSpread)
	}
	spread := *rebalanceSpread
	if !*rebalance {
		spread = -1
	}
	rmax, err := parseSize(*rebalanceMax)
	if err != nil || rmax <= 0 {
		return fmt.Errorf("--rebalance-max %q: want a positive size, e.g. 1GiB", *rebalanceMax)
	}
	release, err := lockDir(*data)
	if err != nil {
		return err
	}
	defer release()
	cfg := node.Config{Dir: *data, Listen: *listen, Gossip: *gossip, Advertise: *advertise,
		Zone: *zone, Capacity: cap, WAN: *wan, NoSync: *noSync, CheckBlocks: *checkBlocks, Version: version, Logger: newLogger(*logLevel),
		Reconnect: *reconnect, Metrics: *metricsAddr, BodyStall: *bodyStall,
		LeaseSweep: *leaseSweep, LeaseGrace: graceFlag(*leaseGrace),
		ScrubEvery: *scrubEvery, ScrubRate: srate}
	if cfg.ScrubEvery == 0 {
		cfg.ScrubEvery = -1
	}
	if cfg.Gossip == "" {
		cfg.Gossip, err = nextPort(*listen)
		if err != nil {
			return err
		}
	}
	if *join != "" {
		inv, err := identity.ParseInvite(*join)
		if err != nil {
			return err
		}
		cfg.Join = &inv
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	if cfg.Join != nil {
		cancel()
		startCtx, cancel = context.WithCancel(ctx)
		if *joinTimeout > 0 {
			startCtx, cancel = context.WithTimeout(ctx, *joinTimeout)
		}
	}
	var helper func(*node.Node) http.Handler
	if *helperOn {
		helper = uphelper.Mount(uphelper.NodeConfig{Uploads: *helperUploads, Logger: cfg.Logger})
	}
	n, err := startDaemon(startCtx, cfg, *syncEvery, helper)
	cancel()
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	if err != nil {
		return err
	}
	// The repairer also moves the shares of a drained node, so it runs
	// even with repair passes off.
	every := *repairEvery
	if every <= 0 {
		every = -1
	}
	rep, err := repairer.New(repairer.Config{Node: n.Node, Every: every, Budget: rbudget,
		Spread: spread, RebalanceMax: rmax, RebalanceMinAge: graceFlag(*rebalanceMinAge), Logger: cfg.Logger})
	if err != nil {
		n.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "quilt node %s serving on %s (gossip %s)\ninvite: %s\n", n.ID(), n.Addr(), n.GossipAddr(), n.Invite())
	if u := n.MetricsURL(); u != "" {
		fmt.Fprintf(os.Stderr, "metrics: %s\n", u)
	}
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "leaving the grid")
	if rep != nil {
		rep.Close()
	}
	return n.Close()
}

// graceFlag turns --lease-grace into node.Config.LeaseGrace, whose zero
// is the default: 0 on the command line means none.
func graceFlag(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// nextPort returns host:port+1 for an API address, or host:0 when the API
// port is chosen by the system.
func nextPort(hostport string) (string, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", fmt.Errorf("bad address %q: %w", hostport, err)
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		return "", fmt.Errorf("bad port in %q", hostport)
	}
	if p == 0 {
		return net.JoinHostPort(host, "0"), nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1)), nil
}

func runUp(ctx context.Context, args []string) error {
	fs := newFlagSet("up", "Usage: quilt up [flags]\n\nRuns a whole grid on this machine until interrupted, writes its invite to\nDIR/invite and makes it the default grid of the client commands\n($QUILT_HOME/config.json). Started again with the same DIR, it brings the\nsame grid back with its data.")
	nodes := fs.Int("nodes", 10, "how many storage nodes")
	dir := fs.String("dir", filepath.Join(home(), "grid"), "data directory of the grid (one folder per node)")
	host := fs.String("host", "127.0.0.1", "address the nodes listen on")
	port := fs.Int("port", 7700, "first port: node i serves its API on port+2i and gossips on port+2i+1 (0: any free ports)")
	capacity := fs.String("capacity", "0", "capacity of each node, e.g. 10GiB (0: what the disk has)")
	zones := fs.Int("zones", 0, "spread the nodes over this many zones (0: no zones)")
	noSync := fs.Bool("no-fsync", false, noSyncHelp)
	checkBlocks := fs.Bool("check-blocks", false, checkBlocksHelp)
	logLevel := fs.String("log", "warn", "log level: debug, info, warn, error")
	s3addr := fs.String("s3", "", "S3 endpoint of the grid's gateway (default: host, port+2·nodes; \"off\": none)")
	var s3tls s3TLSFlags
	s3tls.register(fs)
	swiftAddr := fs.String("swift", "", "Swift endpoint of the grid's gateway, region RegionOne (default: host, port+2·nodes+1; \"off\": none)")
	sftpAddr := fs.String("sftp", "", "SFTP address of the grid's gateway (default: host, port+2·nodes+2; \"off\": none; none without S3)")
	nbdAddr := fs.String("nbd", "", "NBD address of the grid's block volumes (default: host, port+4·nodes+5; \"off\": none; none without S3)")
	nbdTLS := fs.String("nbd-tls", "auto", nbdTLSHelp)
	davAddr := fs.String("webdav", "", "WebDAV address of the grid's gateway (default: host, port+4·nodes+4, after the metrics ports; \"off\": none; none without S3)")
	metricsHost := fs.String("metrics", "127.0.0.1", upMetricsHelp)
	s3BodyTimeout := s3BodyTimeoutFlag(fs)
	s3Domain := s3DomainFlag(fs)
	s3BlockPub := s3BlockPublicFlag(fs)
	s3InsecureSSEC := s3InsecureSSECFlag(fs)
	s3LifecycleEvery := s3LifecycleFlag(fs)
	upHelper := fs.Bool("helper", false, "every node also serves an upload helper (quilt node --helper)")
	uploadHelper.register(fs, "upload-helper")
	addConfigFlag(fs)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	if *nodes < 1 {
		fs.Usage()
		return errUsage
	}
	if err := checkS3BodyTimeout(*s3BodyTimeout); err != nil {
		return err
	}
	if err := checkNBDTLSMode(*nbdTLS); err != nil {
		return err
	}
	cap, err := parseSize(*capacity)
	if err != nil {
		return err
	}
	release, err := lockDir(*dir)
	if err != nil {
		return err
	}
	defer release()
	invitePath := filepath.Join(*dir, "invite")
	os.Remove(invitePath) // written again once the grid is up
	log := newLogger(*logLevel)
	started := make([]*daemon, *nodes)
	stopAll := func() {
		var wg sync.WaitGroup
		for _, n := range started {
			if n != nil {
				wg.Add(1)
				go func() { defer wg.Done(); n.Close() }()
			}
		}
		wg.Wait()
	}
	defer stopAll()
	var inv identity.Invite
	for i := range *nodes {
		cfg := node.Config{
			Dir:      filepath.Join(*dir, fmt.Sprintf("node-%02d", i+1)),
			Listen:   net.JoinHostPort(*host, "0"),
			Gossip:   net.JoinHostPort(*host, "0"),
			Capacity: cap, NoSync: *noSync, CheckBlocks: *checkBlocks, Version: version, Logger: log,
		}
		if *port != 0 {
			cfg.Listen = net.JoinHostPort(*host, strconv.Itoa(*port+2*i))
			cfg.Gossip = net.JoinHostPort(*host, strconv.Itoa(*port+2*i+1))
		}
		if *zones > 0 {
			cfg.Zone = fmt.Sprintf("zone-%d", i%*zones+1)
		}
		cfg.Metrics = upMetricsAddr(*metricsHost, *port, *nodes, i)
		if i > 0 {
			j := inv
			cfg.Join = &j
		}
		rel, err := lockDir(cfg.Dir)
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		defer rel()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		var helper func(*node.Node) http.Handler
		if *upHelper {
			helper = uphelper.Mount(uphelper.NodeConfig{Logger: cfg.Logger})
		}
		n, err := startDaemon(sctx, cfg, 5*time.Second, helper)
		cancel()
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		started[i] = n
		if i == 0 {
			inv = n.Invite()
		} else {
			inv.Addrs = append(inv.Addrs, n.Addr())
		}
	}
	// Wait until the first node sees everyone, so the first put can use
	// the whole grid.
	deadline := time.Now().Add(30 * time.Second)
	for len(started[0].Members()) < *nodes && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := writeFileAtomic(invitePath, []byte(inv.String()+"\n"), 0o600); err != nil {
		return err
	}
	cfg := clientConfig{Grid: inv.String()}
	if *s3addr != "off" {
		cfg.Gateway = filepath.Join(*dir, "gateway")
		if abs, err := filepath.Abs(cfg.Gateway); err == nil {
			cfg.Gateway = abs
		}
	}
	if err := saveConfig(cfg); err != nil {
		return fmt.Errorf("writing the client config: %w", err)
	}
	s3msg, gatewayMetrics := "", ""
	if *s3addr != "off" {
		addr := *s3addr
		if addr == "" {
			addr = net.JoinHostPort(*host, "0")
			if *port != 0 {
				addr = net.JoinHostPort(*host, strconv.Itoa(*port+2**nodes))
			}
		}
		gf := gridFlags{grid: inv.String(), stall: 20 * time.Second, log: *logLevel}
		sess, err := gf.connect()
		if err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		svc, err := startS3(sctx, sess, filepath.Join(*dir, "gateway"), addr, s3tls,
			s3.Options{Region: "us-east-1", BodyTimeout: *s3BodyTimeout, Domain: *s3Domain, AllowInsecureSSEC: *s3InsecureSSEC, LifecycleEvery: lifecycleInterval(*s3LifecycleEvery), BlockPublicAccess: blockPublic(*s3BlockPub), Logger: log})
		cancel()
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
		defer svc.Close()
		if a := upMetricsAddr(*metricsHost, *port, *nodes, *nodes); a != "" {
			ms, err := metrics.Listen(a, svc.reg)
			if err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			defer ms.Close()
			gatewayMetrics = ms.URL()
		}
		env := filepath.Join(*dir, "gateway", "s3.env")
		s3msg = fmt.Sprintf("S3:    %s  access key %s  secret %s\n       . %s; aws s3 mb s3://photos; aws s3 cp FILE s3://photos/\n",
			svc.url, svc.admin.ID, svc.admin.Secret, env)
		if note := svc.tlsNote(); note != "" {
			s3msg += "       " + strings.ReplaceAll(strings.TrimSuffix(note, "\n"), "\n", "\n       ") + "\n"
		}
		if *swiftAddr != "off" {
			sw, err := upSwift(ctx, svc, filepath.Join(*dir, "gateway"), *host, *port, *nodes, *swiftAddr, log)
			if err != nil {
				return err
			}
			defer sw.Close()
			s3msg += sw.banner(filepath.Join(*dir, "gateway", "swift.env"))
		}
		if *sftpAddr != "off" {
			addr := *sftpAddr
			if addr == "" {
				addr = net.JoinHostPort(*host, "0")
				if *port != 0 {
					addr = net.JoinHostPort(*host, strconv.Itoa(*port+2**nodes+2))
				}
			}
			ssvc, err := startSFTP(ctx, svc.gw, filepath.Join(*dir, "gateway"), addr, log)
			if err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			defer ssvc.Close()
			s3msg += sftpHint(ssvc)
		}
		if *davAddr != "off" {
			addr := *davAddr
			if addr == "" {
				addr = net.JoinHostPort(*host, "0")
				if *port != 0 {
					addr = net.JoinHostPort(*host, strconv.Itoa(*port+4**nodes+4))
				}
			}
			dsvc, err := startWebDAV(ctx, svc.gw, sess.nodes, filepath.Join(*dir, "gateway"), addr, log)
			if err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			defer dsvc.Close()
			s3msg += webdavHint(dsvc)
		}
		if *nbdAddr != "off" {
			addr := *nbdAddr
			if addr == "" {
				addr = net.JoinHostPort(*host, "0")
				if *port != 0 {
					addr = net.JoinHostPort(*host, strconv.Itoa(*port+4**nodes+5))
				}
			}
			ns, err := startUpNBD(ctx, sess, svc.gw, filepath.Join(*dir, "gateway"), addr, *nbdTLS)
			if err != nil {
				return fmt.Errorf("gateway: %w", err)
			}
			defer ns.Close()
			s3msg += nbdHint(ns)
		}
	}
	fmt.Fprintf(os.Stderr, `quilt grid of %d nodes is up (data in %s)
invite: %s
(saved in %s and as the default grid in %s)

try:  quilt nodes
      quilt put FILE          # prints a capability
      quilt get CAP -o COPY
      quilt cfs bootstrap NAME  # a configuration filesystem
%s%sstop with Ctrl-C
`, *nodes, *dir, inv, invitePath, configPath(), s3msg, upMetricsMessage(*dir, started, gatewayMetrics))
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "\nstopping the grid")
	return nil
}

func runNodes(ctx context.Context, args []string) error {
	fs := newFlagSet("nodes", "Usage: quilt nodes [flags]\n\nLists the grid's members as a node sees them: ID, address, zone, state\n(alive, suspect, dead, left), used and free space.")
	var g gridFlags
	g.register(fs)
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
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tZONE\tSTATE\tUSED\tFREE")
	alive := 0
	for _, m := range ms {
		zone := m.Zone
		if zone == "" {
			zone = "-"
		}
		if m.State == member.Alive {
			alive++
		}
		state := m.State
		if m.Draining {
			state += ",draining"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.ID, m.Addr, zone, state, human(m.Used), human(m.Free))
	}
	tw.Flush()
	fmt.Fprintf(os.Stderr, "%d nodes, %d alive\n", len(ms), alive)
	if alive == 0 {
		return fmt.Errorf("no node is alive")
	}
	return nil
}
