package tahoe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

var (
	// ErrExited is returned when a node exits while Start waits for the
	// grid to come up.
	ErrExited = errors.New("tahoe: node exited")
	// ErrNotReady is returned when the grid is not up within
	// Options.StartTimeout.
	ErrNotReady = errors.New("tahoe: grid not ready in time")
	// ErrOptions is returned by Start for options it cannot run.
	ErrOptions = errors.New("tahoe: invalid options")
	// ErrWebAPI is returned by Put and Get when the client's web API
	// answers with an error status.
	ErrWebAPI = errors.New("tahoe: web API error")
)

// DefaultStartTimeout is how long Start waits for the grid by default.
const DefaultStartTimeout = 120 * time.Second

// Options describe a grid. The zero value of every field but Tahoe and Dir
// means its default.
type Options struct {
	Tahoe string // path of the tahoe program (see EnsureVenv); nodes run with the Python its #! line names
	Dir   string // working directory for node directories and logs; created if need be

	Storage int // storage nodes; default 10
	K       int // shares needed to read a file; default 3
	N       int // shares written per file; default 10
	Happy   int // servers an upload must reach (shares.happy); default 7

	// Net, if set, puts each storage node behind a linkemu Proxy with the
	// link ClientHost -> StorageHosts[i] (replies StorageHosts[i] ->
	// ClientHost), so that the client reaches it only through the link.
	Net *linkemu.Network
	// ClientHost is the client's host on Net; default "tahoe-client".
	ClientHost string
	// StorageHosts are the storage nodes' hosts on Net, one per node;
	// default "tahoe-storage0", "tahoe-storage1", ...
	StorageHosts []string

	// StartTimeout bounds how long Start waits for the introducer and then
	// for the client to see every storage node; default
	// DefaultStartTimeout.
	StartTimeout time.Duration

	// Foolscap makes every node use Foolscap for storage instead of the
	// HTTPS storage protocol that Tahoe-LAFS 1.19+ prefers (and whose
	// requests time out after 60 s, which a slow uplink shared by ten
	// servers can exceed). The paper's Tahoe-LAFS spoke only Foolscap.
	Foolscap bool

	Log io.Writer // progress lines; nil for none
}

// withDefaults returns opt with its defaults filled in, or an error
// wrapping ErrOptions.
func (opt Options) withDefaults() (Options, error) {
	if opt.Tahoe == "" || opt.Dir == "" {
		return opt, fmt.Errorf("%w: Tahoe and Dir are required", ErrOptions)
	}
	if opt.Storage == 0 {
		opt.Storage = 10
	}
	if opt.K == 0 {
		opt.K = 3
	}
	if opt.N == 0 {
		opt.N = 10
	}
	if opt.Happy == 0 {
		opt.Happy = 7
	}
	if opt.StartTimeout == 0 {
		opt.StartTimeout = DefaultStartTimeout
	}
	if opt.Storage < 1 || opt.K < 1 || opt.K > opt.N || opt.N > 256 || opt.Happy < opt.K || opt.Happy > opt.N {
		return opt, fmt.Errorf("%w: need 1 <= K <= Happy <= N <= 256 and Storage >= 1 (K=%d Happy=%d N=%d Storage=%d)",
			ErrOptions, opt.K, opt.Happy, opt.N, opt.Storage)
	}
	if opt.Happy > opt.Storage {
		return opt, fmt.Errorf("%w: Happy %d > Storage %d: no upload could succeed", ErrOptions, opt.Happy, opt.Storage)
	}
	if opt.Net != nil {
		if opt.ClientHost == "" {
			opt.ClientHost = "tahoe-client"
		}
		if opt.StorageHosts == nil {
			for i := range opt.Storage {
				opt.StorageHosts = append(opt.StorageHosts, fmt.Sprintf("tahoe-storage%d", i))
			}
		}
		if len(opt.StorageHosts) != opt.Storage {
			return opt, fmt.Errorf("%w: %d StorageHosts for %d storage nodes", ErrOptions, len(opt.StorageHosts), opt.Storage)
		}
	}
	return opt, nil
}

// Grid is a running Tahoe-LAFS grid: an introducer, storage nodes and one
// client node, each a `tahoe run` process listening on 127.0.0.1. Its
// methods are safe for concurrent use; Close ends it.
type Grid struct {
	opt     Options
	python  string // interpreter of opt.Tahoe
	web     string // base URL of the client's web API
	http    *http.Client
	proxies []*linkemu.Proxy
	furl    string     // the introducer's
	client  nodeConfig // the client node's configuration

	mu    sync.Mutex // guards procs (EnableSFTP replaces the client's)
	procs []*process
	// deadline ends Start's waiting (Options.StartTimeout).
	deadline time.Time

	closeOnce sync.Once
	closeErr  error
}

// Start starts the introducer, then the storage nodes and the client, in
// node directories under opt.Dir (introducer, storage0..., client; each
// node's output in NAME.log beside its directory), and waits, at most
// opt.StartTimeout, until the client is connected to every storage node.
// With opt.Net, storage node i listens on a loopback port of its own but
// announces the address of a Proxy on the link ClientHost ->
// StorageHosts[i], so all the client's storage traffic (Foolscap and
// HTTPS alike, see the package doc) takes that link. The introducer is
// reached directly. If Start fails, it stops everything it started. ctx
// bounds the start only: the grid runs until Close.
func Start(ctx context.Context, opt Options) (_ *Grid, err error) {
	opt, err = opt.withDefaults()
	if err != nil {
		return nil, err
	}
	python, err := interpreter(opt.Tahoe)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
	}
	ports, release, err := freePorts(2 + opt.Storage)
	if err != nil {
		return nil, err
	}
	defer release()
	introPort, webPort, tubPorts := ports[0], ports[1], ports[2:]
	g := &Grid{
		opt:    opt,
		python: python,
		web:    fmt.Sprintf("http://127.0.0.1:%d", webPort),
		// Not http.DefaultTransport: no proxy from the environment.
		http: &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		}},
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	// The proxies bind their ports while the nodes' ports are still held,
	// so that none of them can pick a node's port.
	if opt.Net != nil {
		for i := range opt.Storage {
			p, err := opt.Net.Proxy("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", tubPorts[i]), opt.ClientHost, opt.StorageHosts[i])
			if err != nil {
				return nil, fmt.Errorf("tahoe: proxy for storage%d: %w", i, err)
			}
			g.proxies = append(g.proxies, p)
		}
	}
	release()
	t0 := time.Now()
	g.deadline = t0.Add(opt.StartTimeout)

	intro := nodeConfig{Role: introducerRole, Nickname: "introducer", TubPort: introPort}
	if err := g.run(intro, "introducer", ""); err != nil {
		return nil, err
	}
	furl, err := g.waitFURL(ctx, filepath.Join(opt.Dir, "introducer", "private", "introducer.furl"))
	if err != nil {
		return nil, err
	}
	g.logf("introducer up after %.1fs", time.Since(t0).Seconds())
	g.furl = furl

	for i := range opt.Storage {
		c := nodeConfig{Role: storageRole, Nickname: fmt.Sprintf("storage%d", i), TubPort: tubPorts[i], Foolscap: opt.Foolscap}
		if opt.Net != nil {
			c.Location = g.proxies[i].Addr()
		}
		if err := g.run(c, c.Nickname, furl); err != nil {
			return nil, err
		}
	}
	g.client = nodeConfig{Role: clientRole, Nickname: "client", WebPort: webPort, K: opt.K, N: opt.N, Happy: opt.Happy, Foolscap: opt.Foolscap}
	if err := g.run(g.client, "client", furl); err != nil {
		return nil, err
	}
	if err := g.waitConnected(ctx); err != nil {
		return nil, err
	}
	g.logf("client connected to %d storage nodes after %.1fs (web API %s, proxies: %t)",
		opt.Storage, time.Since(t0).Seconds(), g.web, opt.Net != nil)
	return g, nil
}

// WebURL is the base URL of the client node's web API, such as
// "http://127.0.0.1:41234".
func (g *Grid) WebURL() string { return g.web }

// ProxyAddrs returns the addresses the storage nodes announce when the
// grid runs behind Options.Net (one per node, in order), else nil.
func (g *Grid) ProxyAddrs() []string {
	var a []string
	for _, p := range g.proxies {
		a = append(a, p.Addr())
	}
	return a
}

// Close stops every process Start started (SIGTERM to its process group,
// SIGKILL after a few seconds) and closes the proxies. It removes nothing:
// the caller owns Options.Dir. Later calls return the first one's result.
func (g *Grid) Close() error {
	g.closeOnce.Do(func() {
		var wg sync.WaitGroup
		procs := g.processes()
		errs := make([]error, len(procs))
		for i, p := range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = p.stop()
			}()
		}
		wg.Wait()
		for _, p := range g.proxies {
			errs = append(errs, p.Close())
		}
		g.http.CloseIdleConnections()
		g.closeErr = errors.Join(errs...)
		g.logf("grid stopped")
	})
	return g.closeErr
}

// run writes the node directory of c under Dir/name and starts it.
func (g *Grid) run(c nodeConfig, name, furl string) error {
	dir := filepath.Join(g.opt.Dir, name)
	if err := writeNode(dir, c, furl); err != nil {
		return err
	}
	p, err := startProcess(g.python, name, dir, filepath.Join(g.opt.Dir, name+".log"))
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	return nil
}

// processes returns the running nodes' processes.
func (g *Grid) processes() []*process {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*process(nil), g.procs...)
}

// pollEvery is how often Start checks whether the grid is up.
const pollEvery = 250 * time.Millisecond

// poll calls check every pollEvery until it reports done or fails, a node
// exits, ctx ends, or g.deadline passes.
func (g *Grid) poll(ctx context.Context, what string, check func() (bool, error)) error {
	deadline := time.NewTimer(time.Until(g.deadline))
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		for _, p := range g.processes() {
			if err := p.exited(); err != nil {
				return fmt.Errorf("%w (waiting for %s)", err, what)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tahoe: waiting for %s: %w", what, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("%w: %s within %v (logs in %s)", ErrNotReady, what, g.opt.StartTimeout, g.opt.Dir)
		case <-tick.C:
		}
	}
}

// waitFURL waits until the introducer has written its fURL to path and
// returns it.
func (g *Grid) waitFURL(ctx context.Context, path string) (string, error) {
	var furl string
	err := g.poll(ctx, "the introducer's fURL", func() (bool, error) {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false, nil // not (completely) written yet
		}
		furl = strings.TrimSpace(string(b))
		return strings.HasPrefix(furl, "pb://"), nil
	})
	return furl, err
}

// waitConnected waits until the client's web API lists every storage node
// as connected.
func (g *Grid) waitConnected(ctx context.Context) error {
	n := 0
	err := g.poll(ctx, "the client to connect to the storage nodes", func() (bool, error) {
		var err error
		n, err = g.Connected(ctx)
		return err == nil && n >= g.opt.Storage, nil
	})
	if errors.Is(err, ErrNotReady) {
		err = fmt.Errorf("%w (%d of %d storage nodes connected)", err, n, g.opt.Storage)
	}
	return err
}

// Connected returns how many storage nodes the client node reports as
// connected (its welcome page's JSON, /?t=json).
func (g *Grid) Connected(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.web+"/?t=json", nil)
	if err != nil {
		return 0, fmt.Errorf("tahoe: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tahoe: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: GET /?t=json: %s", ErrWebAPI, resp.Status)
	}
	var welcome struct {
		Servers []struct {
			Status string `json:"connection_status"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&welcome); err != nil {
		return 0, fmt.Errorf("tahoe: GET /?t=json: %w", err)
	}
	n := 0
	for _, s := range welcome.Servers {
		// "connected" for HTTPS storage servers, "Connected to
		// tcp:... via tcp" for Foolscap ones.
		if strings.HasPrefix(strings.ToLower(s.Status), "connected") {
			n++
		}
	}
	return n, nil
}

func (g *Grid) logf(format string, args ...any) {
	if g.opt.Log != nil {
		fmt.Fprintf(g.opt.Log, "tahoe: "+format+"\n", args...)
	}
}

// freePorts returns k distinct free loopback TCP ports, held by listeners
// until release is called (release may be called more than once). Another
// program may take one between release and the node binding it; the node
// then fails to start and Start reports it.
func freePorts(k int) (ports []int, release func(), err error) {
	var lns []net.Listener
	release = func() {
		for _, ln := range lns {
			ln.Close()
		}
		lns = nil
	}
	for range k {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("tahoe: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}
