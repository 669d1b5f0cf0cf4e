package openstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// testLog turns Options.Log lines into test log lines.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// TestClusterBehindLinks runs real OpenStack Swift and swift-bench: a
// cluster whose object servers sit behind emulated links, measured with
// no delay and with 50 ms one way. With 50 ms each PUT, GET and DELETE
// takes at least one round trip to an object server, so 10 workers can
// do at most 100 a second, and GETs are slower than without delay. It needs python3,
// memcached and, the first time, PyPI, so it runs only with
// QUILT_OPENSTACK=1; SWIFT_VENV picks the venv.
func TestClusterBehindLinks(t *testing.T) {
	if os.Getenv("QUILT_OPENSTACK") != "1" {
		t.Skip("set QUILT_OPENSTACK=1 to run OpenStack Swift (needs python3, memcached, and PyPI the first time)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	v, err := EnsureVenv(ctx, os.Getenv("SWIFT_VENV"))
	if err != nil {
		t.Fatal(err)
	}
	network := linkemu.New(1)
	dir := t.TempDir()
	c, err := Start(ctx, Options{Venv: v, Dir: dir, Net: network, NoSync: true, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	const conc = 10
	bench := func(delay time.Duration) BenchResult {
		for i := range 3 {
			h := fmt.Sprintf("swift-storage%d", i)
			network.SetLink("swift-proxy", h, linkemu.Link{Delay: delay})
			network.SetLink(h, "swift-proxy", linkemu.Link{Delay: delay})
		}
		r, out, err := RunBench(ctx, v.Bin("swift-bench"), BenchConfig{AuthURL: c.AuthURL(), User: c.User, Key: c.Key,
			Concurrency: conc, Objects: 30, Gets: 60, Size: 4096, Container: fmt.Sprintf("test-%d", delay.Milliseconds())}, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("added %v: PUT %.1f/s GET %.1f/s DEL %.1f/s", delay, r.Put.Rate, r.Get.Rate, r.Del.Rate)
		if r.Failures() != 0 {
			t.Errorf("added %v: %d failures:\n%s", delay, r.Failures(), out)
		}
		return r
	}
	fast := bench(0)
	streams := network.Stats().StreamsOpened
	slow := bench(50 * time.Millisecond)
	if n := network.Stats().StreamsOpened - streams; n == 0 {
		t.Error("no stream went through the emulated links")
	}
	for _, p := range []struct {
		name string
		slow Phase
	}{{"PUT", slow.Put}, {"GET", slow.Get}, {"DEL", slow.Del}} {
		if limit := conc / 0.1; p.slow.Rate > limit*1.05 {
			t.Errorf("%s: %.1f/s with 50 ms to the object servers, more than %d workers can do (%.0f/s): the links are bypassed",
				p.name, p.slow.Rate, conc, limit)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "log", "proxy.log")); err == nil && len(b) > 0 {
		t.Logf("proxy server's log (last lines):\n%s", tail(b))
	}
	// A GET is the proxy asking the object servers (the account and
	// container are cached), so it is where the delay shows most.
	if slow.Get.Rate >= fast.Get.Rate {
		t.Errorf("GET: %.1f/s with 50 ms, not below %.1f/s with none", slow.Get.Rate, fast.Get.Rate)
	}
}

// TestStartOptions: options Start cannot run are ErrOptions, before
// anything starts.
func TestStartOptions(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]Options{
		"no venv": {Dir: t.TempDir()},
		"no dir":  {Venv: &Venv{Dir: t.TempDir()}},
		"hosts":   {Venv: &Venv{Dir: t.TempDir()}, Dir: t.TempDir(), Net: linkemu.New(1), StorageHosts: []string{"a"}},
	} {
		if c, err := Start(ctx, opt); !errors.Is(err, ErrOptions) {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStartWithoutSwift: a venv without Swift fails at the first program
// Start runs (swift-ring-builder), naming it, before any server starts.
func TestStartWithoutSwift(t *testing.T) {
	_, err := Start(context.Background(), Options{Venv: &Venv{Dir: t.TempDir()}, Dir: t.TempDir(), Memcached: "/bin/true"})
	if err == nil || !strings.Contains(err.Error(), "swift-ring-builder") {
		t.Fatalf("Start without Swift: %v", err)
	}
	t.Log(err)
}
