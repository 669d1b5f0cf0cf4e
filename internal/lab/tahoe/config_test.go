package tahoe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// parseCfg reads tahoe.cfg text as Tahoe's configparser would: sections,
// "key = value" lines, comments. It fails the test on anything else or on
// a key set twice.
func parseCfg(t *testing.T, text string) map[string]string {
	t.Helper()
	kv := make(map[string]string)
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("line %d %q: not key = value in a section", i+1, line)
			}
			key := section + "." + strings.TrimSpace(k)
			if _, dup := kv[key]; dup {
				t.Fatalf("line %d: %s set twice", i+1, key)
			}
			kv[key] = strings.TrimSpace(v)
		}
	}
	return kv
}

func TestTahoeCfg(t *testing.T) {
	tests := []struct {
		name string
		c    nodeConfig
		want map[string]string // "section.key" -> value; "" must be present and empty
		none []string          // keys that must be absent
	}{
		{
			name: "introducer",
			c:    nodeConfig{Role: introducerRole, Nickname: "introducer", TubPort: 4001},
			want: map[string]string{
				"node.nickname":     "introducer",
				"node.tub.port":     "tcp:4001:interface=127.0.0.1",
				"node.tub.location": "tcp:127.0.0.1:4001",
				"node.web.port":     "",
			},
			none: []string{"client.helper.furl", "storage.enabled", "client.shares.needed"},
		},
		{
			name: "storage behind a proxy",
			c:    nodeConfig{Role: storageRole, Nickname: "storage3", TubPort: 4002, Location: "127.0.0.1:5002"},
			want: map[string]string{
				"node.nickname":          "storage3",
				"node.tub.port":          "tcp:4002:interface=127.0.0.1",
				"node.tub.location":      "tcp:127.0.0.1:5002",
				"node.web.port":          "",
				"node.reveal-IP-address": "true",
				"storage.enabled":        "true",
				"storage.reserved_space": "0",
				"helper.enabled":         "false",
			},
			none: []string{"client.shares.needed"},
		},
		{
			name: "storage direct",
			c:    nodeConfig{Role: storageRole, Nickname: "storage0", TubPort: 4003},
			want: map[string]string{"node.tub.location": "tcp:127.0.0.1:4003", "storage.enabled": "true"},
		},
		{
			name: "client",
			c:    nodeConfig{Role: clientRole, Nickname: "client", WebPort: 4004, K: 3, N: 10, Happy: 7},
			want: map[string]string{
				"node.web.port":        "tcp:4004:interface=127.0.0.1",
				"node.tub.port":        "disabled",
				"node.tub.location":    "disabled",
				"client.shares.needed": "3",
				"client.shares.total":  "10",
				"client.shares.happy":  "7",
				"storage.enabled":      "false",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := parseCfg(t, tt.c.tahoeCfg())
			for k, v := range tt.want {
				got, ok := kv[k]
				if !ok {
					t.Errorf("%s missing", k)
				} else if got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			for _, k := range tt.none {
				if _, ok := kv[k]; ok {
					t.Errorf("%s present, want absent", k)
				}
			}
			for k, v := range kv {
				if strings.Contains(v, "tor:") || strings.Contains(v, "i2p:") {
					t.Errorf("%s = %q names Tor or I2P", k, v)
				}
			}
		})
	}
}

func TestWriteNode(t *testing.T) {
	const furl = "pb://abcdef@tcp:127.0.0.1:4001/swiss"
	for _, tt := range []struct {
		c       nodeConfig
		tac     string
		yamlFor bool
	}{
		{nodeConfig{Role: introducerRole, TubPort: 1}, "tahoe-introducer.tac", false},
		{nodeConfig{Role: storageRole, TubPort: 2}, "tahoe-client.tac", true},
		{nodeConfig{Role: clientRole, WebPort: 3, K: 1, N: 2, Happy: 2}, "tahoe-client.tac", true},
	} {
		dir := filepath.Join(t.TempDir(), "node")
		if err := writeNode(dir, tt.c, furl); err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(filepath.Join(dir, "tahoe.cfg"))
		if err != nil || string(cfg) != tt.c.tahoeCfg() {
			t.Errorf("role %d: tahoe.cfg: %v", tt.c.Role, err)
		}
		// `tahoe run` knows a node's role by its .tac file's name.
		if _, err := os.Stat(filepath.Join(dir, tt.tac)); err != nil {
			t.Errorf("role %d: %v", tt.c.Role, err)
		}
		y, err := os.ReadFile(filepath.Join(dir, "private", "introducers.yaml"))
		switch {
		case tt.yamlFor && (err != nil || !strings.Contains(string(y), "furl: '"+furl+"'")):
			t.Errorf("role %d: introducers.yaml %q, %v", tt.c.Role, y, err)
		case !tt.yamlFor && err == nil:
			t.Errorf("role %d: introducer has an introducers.yaml", tt.c.Role)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	opt, err := Options{Tahoe: "tahoe", Dir: "d", Net: linkemu.New(1)}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if opt.Storage != 10 || opt.K != 3 || opt.N != 10 || opt.Happy != 7 || opt.StartTimeout != DefaultStartTimeout {
		t.Errorf("defaults: %+v", opt)
	}
	if opt.ClientHost == "" || len(opt.StorageHosts) != 10 || opt.StorageHosts[0] == opt.StorageHosts[1] {
		t.Errorf("hosts: %q %q", opt.ClientHost, opt.StorageHosts)
	}
	for _, bad := range []Options{
		{Dir: "d"},
		{Tahoe: "tahoe"},
		{Tahoe: "tahoe", Dir: "d", K: 4, N: 3},
		{Tahoe: "tahoe", Dir: "d", Happy: 2},   // Happy < K
		{Tahoe: "tahoe", Dir: "d", Storage: 5}, // Happy 7 > 5 nodes
		{Tahoe: "tahoe", Dir: "d", Net: linkemu.New(1), StorageHosts: []string{"a"}},
	} {
		if _, err := bad.withDefaults(); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: err %v, want ErrOptions", bad, err)
		}
	}
}

func TestFreePorts(t *testing.T) {
	ports, release, err := freePorts(12)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	seen := make(map[int]bool)
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: not distinct and positive", ports)
		}
		seen[p] = true
	}
	release()
	release() // twice is fine
}

// TestFoolscapConfig: Foolscap forces force_foolscap in both the client
// and the storage sections, and only then.
func TestFoolscapConfig(t *testing.T) {
	for _, fs := range []bool{false, true} {
		for _, r := range []role{storageRole, clientRole} {
			cfg := nodeConfig{Role: r, TubPort: 1, WebPort: 2, K: 3, N: 10, Happy: 7, Foolscap: fs}.tahoeCfg()
			want := 0
			if fs {
				want = 2
			}
			if got := strings.Count(cfg, "force_foolscap = true"); got != want {
				t.Errorf("role %v Foolscap %v: force_foolscap %d times, want %d:\n%s", r, fs, got, want, cfg)
			}
		}
	}
}
