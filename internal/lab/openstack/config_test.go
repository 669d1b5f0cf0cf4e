package openstack

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func testLayout() Layout {
	return Layout{Dir: "/x", User: "lab", ProxyPort: 8080, MemcachePort: 11211, AccountPort: 6202, ContainerPort: 6201,
		ObjectPorts: []int{6200, 6210, 6220}, ObjectRingPorts: []int{7200, 7210, 7220},
		BenchAccount: "bench", BenchUser: "tester", Key: "k3y"}
}

// section returns the lines of [name] in an INI file, without blank ones.
func section(t *testing.T, file, name string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	in := false
	for _, line := range strings.Split(file, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = line == "["+name+"]"
			continue
		}
		if in && line != "" {
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("[%s]: line %q is not key = value", name, line)
			}
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if len(kv) == 0 {
		t.Fatalf("no section [%s] in\n%s", name, file)
	}
	return kv
}

// TestLayoutFiles: every server's file says where it listens, where its
// devices and the rings are, and does not check mounts; the proxy's
// pipeline authenticates with TempAuth, keeping tokens in the layout's
// memcached, and knows swift-bench's user.
func TestLayoutFiles(t *testing.T) {
	l := testLayout()
	files, err := l.Files()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"swift.conf", "proxy-server.conf", "account-server.conf", "container-server.conf",
		"object-server-0.conf", "object-server-1.conf", "object-server-2.conf"}
	if len(files) != len(want) {
		t.Errorf("%d files, want %d", len(files), len(want))
	}
	sw := section(t, files["swift.conf"], "swift-hash")
	if sw["swift_hash_path_suffix"] == "" {
		t.Error("swift.conf has no hash path suffix")
	}
	if p := section(t, files["swift.conf"], "storage-policy:0"); p["default"] != "yes" {
		t.Errorf("storage policy 0: %v", p)
	}
	for _, s := range l.Servers() {
		if s.Name == "proxy" {
			continue
		}
		d := section(t, files[s.Conf], "DEFAULT")
		for k, v := range map[string]string{"bind_ip": "127.0.0.1", "mount_check": "false", "devices": "/x/srv",
			"swift_dir": "/x/etc", "user": "lab", "workers": "0"} {
			if d[k] != v {
				t.Errorf("%s: %s = %q, want %q", s.Conf, k, d[k], v)
			}
		}
		if d["bind_port"] != itoa(s.Port) {
			t.Errorf("%s: bind_port %s, want %d", s.Conf, d["bind_port"], s.Port)
		}
	}
	if d := section(t, files["object-server-1.conf"], "DEFAULT"); d["bind_port"] != "6210" {
		t.Errorf("object server 1 listens on %s, want its own port 6210 (the ring names the link's 7210)", d["bind_port"])
	}
	p := files["proxy-server.conf"]
	if d := section(t, p, "DEFAULT"); d["bind_port"] != "8080" {
		t.Errorf("proxy bind_port %s", d["bind_port"])
	}
	pipe := strings.Fields(section(t, p, "pipeline:main")["pipeline"])
	if pipe[len(pipe)-1] != "proxy-server" || !contains(pipe, "tempauth") || !contains(pipe, "cache") {
		t.Errorf("proxy pipeline %v", pipe)
	}
	for _, f := range pipe[:len(pipe)-1] {
		section(t, p, "filter:"+f) // every filter is defined
	}
	if v := section(t, p, "filter:tempauth")["user_bench_tester"]; v != "k3y .admin" {
		t.Errorf("tempauth user line %q", v)
	}
	if v := section(t, p, "filter:cache")["memcache_servers"]; v != "127.0.0.1:11211" {
		t.Errorf("memcache_servers %q", v)
	}
}

// TestRingCommands: the object ring has a replica per object server at
// the ports the ring is to name, 2^10 partitions, a zone each; account
// and container rings one replica.
func TestRingCommands(t *testing.T) {
	cmds, err := testLayout().RingCommands()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"object.builder", "create", "10", "3", "1"},
		{"object.builder", "add", "r1z1-127.0.0.1:7200/obj0", "100"},
		{"object.builder", "add", "r1z2-127.0.0.1:7210/obj1", "100"},
		{"object.builder", "add", "r1z3-127.0.0.1:7220/obj2", "100"},
		{"object.builder", "rebalance"},
		{"account.builder", "create", "10", "1", "1"},
		{"account.builder", "add", "r1z1-127.0.0.1:6202/acct", "100"},
		{"account.builder", "rebalance"},
		{"container.builder", "create", "10", "1", "1"},
		{"container.builder", "add", "r1z1-127.0.0.1:6201/cont", "100"},
		{"container.builder", "rebalance"},
	}
	if !reflect.DeepEqual(cmds, want) {
		t.Errorf("ring commands\n%v\nwant\n%v", cmds, want)
	}
}

// TestLayoutInvalid: a layout that cannot work is ErrLayout, not config
// files Swift would reject later.
func TestLayoutInvalid(t *testing.T) {
	for name, edit := range map[string]func(*Layout){
		"no dir":            func(l *Layout) { l.Dir = "" },
		"no object servers": func(l *Layout) { l.ObjectPorts, l.ObjectRingPorts = nil, nil },
		"ring ports differ": func(l *Layout) { l.ObjectRingPorts = l.ObjectRingPorts[:2] },
		"bad port":          func(l *Layout) { l.AccountPort = 70000 },
		"underscore user":   func(l *Layout) { l.BenchUser = "a_b" },
		"no key":            func(l *Layout) { l.Key = "" },
	} {
		l := testLayout()
		edit(&l)
		if _, err := l.Files(); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: Files: %v", name, err)
		}
		if _, err := l.RingCommands(); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: RingCommands: %v", name, err)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func itoa(n int) string { return strconv.Itoa(n) }
