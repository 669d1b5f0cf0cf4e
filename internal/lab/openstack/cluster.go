package openstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

var (
	// ErrNotReady is returned when the cluster is not up within
	// Options.StartTimeout.
	ErrNotReady = errors.New("openstack: cluster not ready in time")
	// ErrNoMemcached is returned when no memcached program is found:
	// TempAuth keeps its tokens in memcached.
	ErrNoMemcached = errors.New("openstack: no memcached program (TempAuth keeps tokens in memcached; apt-get install memcached)")
	// ErrNoEatMyData is returned for Options.NoSync when no eatmydata
	// program is found.
	ErrNoEatMyData = errors.New("openstack: NoSync needs the eatmydata program (apt-get install eatmydata)")
	// ErrOptions is returned by Start for options it cannot run.
	ErrOptions = errors.New("openstack: invalid options")
)

// DefaultStartTimeout is how long Start waits for the cluster by default.
const DefaultStartTimeout = 2 * time.Minute

// Options describe a cluster. The zero value of every field but Venv and
// Dir means its default.
type Options struct {
	Venv *Venv  // holds Swift (see EnsureVenv)
	Dir  string // configuration, rings, data and logs; created if need be

	Objects int // object servers, one device and one replica each; default 3

	// Net, if set, puts object server i behind a linkemu Proxy with the
	// link ProxyHost -> StorageHosts[i] (replies the other way): the
	// object ring names the Proxy, so the proxy server reaches object
	// servers only through the links.
	Net *linkemu.Network
	// ProxyHost is the proxy server's host on Net; default "swift-proxy".
	ProxyHost string
	// StorageHosts are the object servers' hosts on Net, one per server;
	// default "swift-storage0", ...
	StorageHosts []string

	// NoSync runs the servers under eatmydata, which turns their fsync
	// and fdatasync calls into no-ops, as the lab's Quilt nodes do not
	// fsync either: then both measure the network, not the disk.
	NoSync bool

	Memcached    string        // path of memcached; default: found in PATH
	StartTimeout time.Duration // default DefaultStartTimeout
	Log          io.Writer     // progress lines; nil for none
}

// Cluster is a running Swift cluster (see the package documentation).
// Close ends it.
type Cluster struct {
	// User and Key are the TempAuth credentials of swift-bench's account
	// (User is "account:user", as swift-bench's -U takes it).
	User, Key string

	opt     Options
	layout  Layout
	procs   []*process
	proxies []*linkemu.Proxy

	closeOnce sync.Once
	closeErr  error
}

// AuthURL is the TempAuth v1.0 URL of the proxy server.
func (c *Cluster) AuthURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/auth/v1.0", c.layout.ProxyPort)
}

// Start writes the configuration under opt.Dir, builds the rings, starts
// memcached, the account, container and object servers and the proxy
// server, and waits (at most opt.StartTimeout) until a container can be
// made and deleted through the proxy. If Start fails, it stops
// everything it started. ctx bounds the start only.
func Start(ctx context.Context, opt Options) (_ *Cluster, err error) {
	if opt.Venv == nil || opt.Dir == "" {
		return nil, fmt.Errorf("%w: Venv and Dir are required", ErrOptions)
	}
	if opt.Objects == 0 {
		opt.Objects = 3
	}
	if opt.StartTimeout == 0 {
		opt.StartTimeout = DefaultStartTimeout
	}
	if opt.Net != nil {
		if opt.ProxyHost == "" {
			opt.ProxyHost = "swift-proxy"
		}
		if opt.StorageHosts == nil {
			for i := range opt.Objects {
				opt.StorageHosts = append(opt.StorageHosts, fmt.Sprintf("swift-storage%d", i))
			}
		}
		if len(opt.StorageHosts) != opt.Objects {
			return nil, fmt.Errorf("%w: %d StorageHosts for %d object servers", ErrOptions, len(opt.StorageHosts), opt.Objects)
		}
	}
	if opt.Memcached == "" {
		p, err := exec.LookPath("memcached")
		if err != nil {
			return nil, ErrNoMemcached
		}
		opt.Memcached = p
	}
	var wrap []string
	if opt.NoSync {
		p, err := exec.LookPath("eatmydata")
		if err != nil {
			return nil, ErrNoEatMyData
		}
		wrap = []string{p}
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("openstack: %w", err)
	}
	key := make([]byte, 12)
	rand.Read(key)
	c := &Cluster{opt: opt}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	ports, release, err := freePorts(4 + opt.Objects)
	if err != nil {
		return nil, err
	}
	defer release()
	l := Layout{Dir: opt.Dir, User: u.Username, ProxyPort: ports[0], MemcachePort: ports[1], AccountPort: ports[2], ContainerPort: ports[3],
		ObjectPorts: ports[4:], BenchAccount: "bench", BenchUser: "tester", Key: hex.EncodeToString(key)}
	l.ObjectRingPorts = l.ObjectPorts
	if opt.Net != nil {
		// The proxies bind while the servers' ports are still held, so
		// that none of them can take a server's port.
		l.ObjectRingPorts = nil
		for i, p := range l.ObjectPorts {
			px, err := opt.Net.Proxy("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", p), opt.ProxyHost, opt.StorageHosts[i])
			if err != nil {
				return nil, fmt.Errorf("openstack: proxy for object server %d: %w", i, err)
			}
			c.proxies = append(c.proxies, px)
			_, port, err := net.SplitHostPort(px.Addr())
			if err != nil {
				return nil, fmt.Errorf("openstack: proxy for object server %d: %w", i, err)
			}
			n, _ := strconv.Atoi(port)
			l.ObjectRingPorts = append(l.ObjectRingPorts, n)
		}
	}
	c.layout, c.User, c.Key = l, l.BenchAccount+":"+l.BenchUser, l.Key
	if err := c.writeLayout(ctx); err != nil {
		return nil, err
	}
	release()

	t0 := time.Now()
	logDir := filepath.Join(opt.Dir, "log")
	mc, err := startProcess("memcached", filepath.Join(logDir, "memcached.log"), opt.Memcached,
		"-l", "127.0.0.1", "-p", fmt.Sprint(l.MemcachePort), "-U", "0", "-m", "64", "-u", u.Username)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, mc)
	for _, s := range l.Servers() {
		// -v: warnings and errors also to stderr, that is to the log
		// file (else they go to syslog, which this machine may not run).
		argv := append(append([]string(nil), wrap...), opt.Venv.Bin(s.Program), filepath.Join(l.SwiftDir(), s.Conf), "-v")
		p, err := startProcess(s.Name, filepath.Join(logDir, s.Name+".log"), argv...)
		if err != nil {
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	if err := c.waitReady(ctx, t0.Add(opt.StartTimeout)); err != nil {
		return nil, err
	}
	c.logf("Swift %s up after %.1fs: proxy %s, %d object servers (as many replicas), links emulated: %t, fsync: %t",
		SwiftVersion, time.Since(t0).Seconds(), c.AuthURL(), opt.Objects, opt.Net != nil, !opt.NoSync)
	return c, nil
}

// writeLayout writes the configuration files, makes the devices and
// builds the rings.
func (c *Cluster) writeLayout(ctx context.Context) error {
	l := c.layout
	files, err := l.Files()
	if err != nil {
		return err
	}
	cmds, err := l.RingCommands()
	if err != nil {
		return err
	}
	for _, d := range []string{l.SwiftDir(), filepath.Join(l.Dir, "log")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("openstack: %w", err)
		}
	}
	for _, s := range l.Servers() {
		if s.Device != "" {
			if err := os.MkdirAll(filepath.Join(l.Devices(), s.Device), 0o755); err != nil {
				return fmt.Errorf("openstack: %w", err)
			}
		}
	}
	if err := checkXattr(l.Devices()); err != nil {
		return err
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(l.SwiftDir(), name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("openstack: %w", err)
		}
	}
	for _, args := range cmds {
		full := append([]string{c.opt.Venv.Bin("swift-ring-builder")}, args...)
		full[1] = filepath.Join(l.SwiftDir(), args[0])
		if out, err := runBounded(ctx, time.Minute, full[0], full[1:]...); err != nil {
			return fmt.Errorf("%w\n%s", err, tail(out))
		}
	}
	return nil
}

// checkXattr makes sure dir's file system keeps user extended
// attributes, where Swift's object server keeps objects' metadata.
func checkXattr(dir string) error {
	p := filepath.Join(dir, ".xattr-check")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return fmt.Errorf("openstack: %w", err)
	}
	defer os.Remove(p)
	if err := syscall.Setxattr(p, "user.quilt.check", []byte("1"), 0); err != nil {
		return fmt.Errorf("openstack: the file system of %s has no user extended attributes, which Swift needs (use ext4, xfs or tmpfs): %w", dir, err)
	}
	return nil
}

// waitReady waits until every server listens, then until a container
// can be made and deleted through the proxy (auth, account, container
// and memcached all working).
func (c *Cluster) waitReady(ctx context.Context, deadline time.Time) error {
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	var last error
	for {
		for _, p := range c.procs {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if last = c.ready(ctx, hc); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %v (logs in %s)", ErrNotReady, last, filepath.Join(c.opt.Dir, "log"))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("openstack: waiting for the cluster: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) ready(ctx context.Context, hc *http.Client) error {
	for _, s := range c.layout.Servers() {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port), time.Second)
		if err != nil {
			return fmt.Errorf("%s not listening yet", s.Name)
		}
		conn.Close()
	}
	do := func(method, url string, hdr ...string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	resp, err := do("GET", c.AuthURL(), "X-Auth-User", c.User, "X-Auth-Key", c.Key)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("auth: %s", resp.Status)
	}
	tok, url := resp.Header.Get("X-Auth-Token"), resp.Header.Get("X-Storage-Url")
	for _, m := range []string{"PUT", "DELETE"} {
		resp, err := do(m, url+"/quilt-lab-ready", "X-Auth-Token", tok)
		if err != nil {
			return err
		}
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s container: %s", m, resp.Status)
		}
	}
	return nil
}

// Close stops every server (SIGTERM to its process group, SIGKILL after a
// few seconds) and closes the links' proxies. It removes nothing: the
// caller owns Options.Dir. Later calls return the first one's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(c.procs))
		for i, p := range c.procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = p.stop()
			}()
		}
		wg.Wait()
		for _, p := range c.proxies {
			errs = append(errs, p.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opt.Log != nil {
		fmt.Fprintf(c.opt.Log, "openstack: "+format+"\n", args...)
	}
}

// freePorts returns k distinct free loopback TCP ports, held by listeners
// until release is called (release may be called more than once).
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
			return nil, nil, fmt.Errorf("openstack: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}
