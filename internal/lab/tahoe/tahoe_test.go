package tahoe

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestGridBehindLinks runs real Tahoe-LAFS: a 10-storage-node grid whose
// client reaches every storage node over a 1 MB/s link with 5 ms delay,
// then the same grid without emulation. It needs python3 and, the first
// time, PyPI, so it runs only with QUILT_TAHOE=1. TAHOE_VENV picks the venv
// as in bench/tahoe/compare.sh.
func TestGridBehindLinks(t *testing.T) {
	if os.Getenv("QUILT_TAHOE") != "1" {
		t.Skip("set QUILT_TAHOE=1 to run Tahoe-LAFS (needs python3, and PyPI the first time)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	bin, err := EnsureVenv(ctx, os.Getenv("TAHOE_VENV"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tahoe %s at %s (%.1fs)", Version, bin, time.Since(t0).Seconds())

	const (
		size    = 4 << 20
		storage = 10
		bw      = 1_000_000 // bytes/s on each client -> storage link
		delay   = 5 * time.Millisecond
	)
	network := linkemu.New(1)
	client := "tahoe-client"
	var hosts []string
	for i := range storage {
		h := fmt.Sprintf("tahoe-storage%d", i)
		hosts = append(hosts, h)
		network.SetLink(client, h, linkemu.Link{Bandwidth: bw, Delay: delay})
		network.SetLink(h, client, linkemu.Link{Delay: delay})
	}
	emuPut, emuGet := putGet(t, ctx, Options{
		Tahoe: bin, Dir: filepath.Join(t.TempDir(), "emulated"), Storage: storage,
		Net: network, ClientHost: client, StorageHosts: hosts,
	}, network, size)

	// What the links imply: N/K times the file, spread over N links.
	floor := time.Duration(size * 10 / 3 / storage * int64(time.Second) / bw)
	t.Logf("links imply an upload of at least %v", floor.Round(time.Millisecond))
	if emuPut <= time.Second {
		t.Errorf("upload over 1 MB/s links took %v, want > 1s: not all storage traffic went through the proxies", emuPut)
	}

	directPut, directGet := putGet(t, ctx, Options{
		Tahoe: bin, Dir: filepath.Join(t.TempDir(), "direct"), Storage: storage,
	}, nil, size)
	mbps := func(d time.Duration) float64 { return size / 1e6 / d.Seconds() }
	t.Logf("4 MiB put: %v (%.2f MB/s) behind links, %v (%.2f MB/s) direct",
		emuPut.Round(time.Millisecond), mbps(emuPut), directPut.Round(time.Millisecond), mbps(directPut))
	t.Logf("4 MiB get: %v (%.2f MB/s) behind links, %v (%.2f MB/s) direct",
		emuGet.Round(time.Millisecond), mbps(emuGet), directGet.Round(time.Millisecond), mbps(directGet))
}

// TestStartFails stops Start half way, by its context and by
// Options.StartTimeout, and checks that every node it started has gone.
func TestStartFails(t *testing.T) {
	if os.Getenv("QUILT_TAHOE") != "1" {
		t.Skip("set QUILT_TAHOE=1 to run Tahoe-LAFS (needs python3, and PyPI the first time)")
	}
	bin, err := EnsureVenv(context.Background(), os.Getenv("TAHOE_VENV"))
	if err != nil {
		t.Fatal(err)
	}
	// 4s is long enough for the introducer and the nodes to start, too
	// short for the client to connect to them all.
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		startFails(t, ctx, Options{Tahoe: bin}, context.DeadlineExceeded)
	})
	t.Run("StartTimeout", func(t *testing.T) {
		startFails(t, context.Background(), Options{Tahoe: bin, StartTimeout: 4 * time.Second}, ErrNotReady)
	})
}

func startFails(t *testing.T, ctx context.Context, opt Options, want error) {
	opt.Dir = t.TempDir()
	opt.Log = testLog{t}
	g, err := Start(ctx, opt)
	if err == nil {
		g.Close()
		t.Skip("the grid came up within 4s: nothing to stop")
	}
	if !errors.Is(err, want) {
		t.Fatalf("Start: %v, want %v", err, want)
	}
	t.Log(err)
	// `tahoe run` writes its PID to NODEDIR/running.process and removes it
	// when it shuts down cleanly.
	pidfiles, _ := filepath.Glob(filepath.Join(opt.Dir, "*", "running.process"))
	for _, f := range pidfiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var pid int
		fmt.Sscan(string(b), &pid)
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			t.Errorf("%s: process %d still runs", f, pid)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(opt.Dir, "*.log"))
	if len(logs) < 2 {
		t.Errorf("only %d node logs: Start stopped before starting nodes (%v)", len(logs), logs)
	}
	t.Logf("%d nodes started and stopped, %d left a PID file", len(logs), len(pidfiles))
}

// putGet starts a grid with opt, puts size random bytes (streamed, of
// unknown length), gets them back and compares, stops the grid, and
// returns the times of the put and the get. With network it checks that the client's connections
// went through it.
func putGet(t *testing.T, ctx context.Context, opt Options, network *linkemu.Network, size int) (put, get time.Duration) {
	t.Helper()
	opt.Log = testLog{t}
	g, err := Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	// Stopped on return, so that two grids never share the CPU; the
	// cleanup covers t.Fatal.
	t.Cleanup(func() { g.Close() })
	defer func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()
	data := make([]byte, size)
	rand.Read(data) // fresh bytes: convergent encryption would skip a known file

	var before linkemu.Stats
	if network != nil {
		before = network.Stats()
	}
	t0 := time.Now()
	cap, err := g.Put(ctx, struct{ io.Reader }{bytes.NewReader(data)}) // hides the length: chunked
	put = time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("put %d bytes in %v: %s", size, put.Round(time.Millisecond), cap)
	if network != nil {
		after := network.Stats()
		t.Logf("linkemu streams opened: %d after start, %d after the put", before.StreamsOpened, after.StreamsOpened)
		if after.StreamsOpened == 0 {
			t.Errorf("no linkemu stream opened: the client bypassed the proxies")
		}
	}

	var out bytes.Buffer
	t0 = time.Now()
	n, err := g.Get(ctx, cap, &out)
	get = time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(size) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("got %d bytes back, not the %d put", n, size)
	}
	t.Logf("got them back in %v, identical", get.Round(time.Millisecond))
	return put, get
}
