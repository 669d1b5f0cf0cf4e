package openstack

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLayout is returned for a Layout that cannot make a cluster.
var ErrLayout = errors.New("openstack: invalid layout")

// PartPower is the object ring's partition power: 2^10 = 1024 partitions,
// as the paper's object servers had.
const PartPower = 10

// Layout is where a cluster's servers listen and keep their data: all the
// input of its configuration files and rings, which [Layout.Files] and
// [Layout.RingCommands] derive from it without touching the disk.
type Layout struct {
	Dir  string // swift_dir is Dir/etc, the devices Dir/srv/DEVICE, logs Dir/log
	User string // the user the servers run as (they switch to it when started as root)

	ProxyPort, MemcachePort      int
	AccountPort, ContainerPort   int
	ObjectPorts                  []int  // where object server i listens
	ObjectRingPorts              []int  // the port the object ring names for server i (a link's proxy, or ObjectPorts[i])
	BenchAccount, BenchUser, Key string // the TempAuth user: BenchAccount:BenchUser with password Key
}

// check returns an error wrapping ErrLayout if l is incomplete.
func (l Layout) check() error {
	switch {
	case l.Dir == "" || l.User == "":
		return fmt.Errorf("%w: Dir and User are required", ErrLayout)
	case len(l.ObjectPorts) == 0 || len(l.ObjectPorts) != len(l.ObjectRingPorts):
		return fmt.Errorf("%w: %d object ports and %d ring ports", ErrLayout, len(l.ObjectPorts), len(l.ObjectRingPorts))
	case l.BenchAccount == "" || l.BenchUser == "" || l.Key == "":
		return fmt.Errorf("%w: no TempAuth user", ErrLayout)
	case strings.ContainsAny(l.BenchAccount+l.BenchUser, ":_ \n") || strings.ContainsAny(l.Key, " \n"):
		return fmt.Errorf("%w: TempAuth account, user and key must not contain ':', '_', spaces or newlines", ErrLayout)
	}
	for _, p := range append([]int{l.ProxyPort, l.MemcachePort, l.AccountPort, l.ContainerPort}, append(l.ObjectPorts, l.ObjectRingPorts...)...) {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("%w: port %d", ErrLayout, p)
		}
	}
	return nil
}

// SwiftDir is the directory of swift.conf, the rings and the servers'
// configuration files.
func (l Layout) SwiftDir() string { return filepath.Join(l.Dir, "etc") }

// Devices is the devices directory every server shares (each has its own
// device in it).
func (l Layout) Devices() string { return filepath.Join(l.Dir, "srv") }

// ObjectDevice is the device name of object server i.
func ObjectDevice(i int) string { return "obj" + strconv.Itoa(i) }

// Server is one Swift server of a layout: its program and configuration.
type Server struct {
	Name    string // "proxy", "account", "container", "object0", ...
	Program string // the venv program that runs it, e.g. "swift-object-server"
	Conf    string // its configuration file, relative to SwiftDir
	Port    int    // where it listens
	Device  string // its device under Devices ("" for the proxy)
}

// Servers lists the servers of l, storage servers first, the proxy last.
func (l Layout) Servers() []Server {
	s := []Server{
		{Name: "account", Program: "swift-account-server", Conf: "account-server.conf", Port: l.AccountPort, Device: "acct"},
		{Name: "container", Program: "swift-container-server", Conf: "container-server.conf", Port: l.ContainerPort, Device: "cont"},
	}
	for i, p := range l.ObjectPorts {
		s = append(s, Server{Name: fmt.Sprintf("object%d", i), Program: "swift-object-server",
			Conf: fmt.Sprintf("object-server-%d.conf", i), Port: p, Device: ObjectDevice(i)})
	}
	return append(s, Server{Name: "proxy", Program: "swift-proxy-server", Conf: "proxy-server.conf", Port: l.ProxyPort})
}

// Files returns the configuration files of l, by path relative to
// SwiftDir: swift.conf (hash prefix and suffix, one storage policy), and
// one paste-deploy file per server.
func (l Layout) Files() (map[string]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	f := map[string]string{"swift.conf": `[swift-hash]
swift_hash_path_prefix = quilt-lab
swift_hash_path_suffix = quilt-lab

[storage-policy:0]
name = gold
default = yes
`}
	common := func(port int) string {
		// workers = 0: each server is one process, no forked workers;
		// the machine has few cores and the paper's load is 10 clients.
		return fmt.Sprintf(`[DEFAULT]
bind_ip = 127.0.0.1
bind_port = %d
workers = 0
user = %s
swift_dir = %s
devices = %s
mount_check = false
log_level = WARNING
`, port, l.User, l.SwiftDir(), l.Devices())
	}
	for _, s := range l.Servers() {
		var app string
		switch {
		case s.Name == "proxy":
			continue
		case s.Name == "account":
			app = "account"
		case s.Name == "container":
			app = "container"
		default:
			app = "object"
		}
		f[s.Conf] = common(s.Port) + fmt.Sprintf(`log_name = %s

[pipeline:main]
pipeline = %s-server

[app:%s-server]
use = egg:swift#%s
`, s.Name, app, app, app)
	}
	f["proxy-server.conf"] = fmt.Sprintf(`[DEFAULT]
bind_ip = 127.0.0.1
bind_port = %d
workers = 0
user = %s
swift_dir = %s
log_name = proxy
log_level = WARNING

[pipeline:main]
pipeline = catch_errors healthcheck proxy-logging cache tempauth proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:tempauth]
use = egg:swift#tempauth
user_%s_%s = %s .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:%d

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging
`, l.ProxyPort, l.User, l.SwiftDir(), l.BenchAccount, l.BenchUser, l.Key, l.MemcachePort)
	return f, nil
}

// RingCommands returns the swift-ring-builder invocations (arguments
// only, to run in SwiftDir) that build l's rings: the object ring with
// one replica per object server, one device each, in a zone each, at the
// ports the ring names; the account and container rings with one replica
// on their one server.
func (l Layout) RingCommands() ([][]string, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	pp := strconv.Itoa(PartPower)
	cmds := [][]string{{"object.builder", "create", pp, strconv.Itoa(len(l.ObjectPorts)), "1"}}
	for i, p := range l.ObjectRingPorts {
		cmds = append(cmds, []string{"object.builder", "add", fmt.Sprintf("r1z%d-127.0.0.1:%d/%s", i+1, p, ObjectDevice(i)), "100"})
	}
	cmds = append(cmds, []string{"object.builder", "rebalance"})
	for _, s := range []struct {
		ring, dev string
		port      int
	}{{"account", "acct", l.AccountPort}, {"container", "cont", l.ContainerPort}} {
		cmds = append(cmds,
			[]string{s.ring + ".builder", "create", pp, "1", "1"},
			[]string{s.ring + ".builder", "add", fmt.Sprintf("r1z1-127.0.0.1:%d/%s", s.port, s.dev), "100"},
			[]string{s.ring + ".builder", "rebalance"})
	}
	return cmds, nil
}
