package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
)

// hostileGrid is a grid of real `quilt node` processes whose share files
// the tests damage on disk, as a lying node or a failing disk would.
type hostileGrid struct {
	t    *testing.T
	bin  string
	base string
	env  []string
	dirs []string
	grid string
}

// startHostileGrid starts nodes `quilt node` processes on 127.0.0.1 and
// waits until the grid sees them all alive.
func startHostileGrid(t *testing.T, nodes int) *hostileGrid {
	g := &hostileGrid{t: t, bin: buildQuilt(t), base: t.TempDir()}
	g.env = append(os.Environ(), "QUILT_HOME="+filepath.Join(g.base, "home"), "QUILT_GRID=")
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			if p.Process != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	})
	start := func(i int, join string) string {
		dir := filepath.Join(g.base, fmt.Sprintf("node%d", i))
		g.dirs = append(g.dirs, dir)
		args := []string{"node", "--data", dir, "--listen", "127.0.0.1:0", "--log", "warn", "--cpus", "1"}
		if join != "" {
			args = append(args, "--join", join)
		}
		cmd := exec.Command(g.bin, args...)
		cmd.Env = g.env
		log, _ := os.Create(dir + ".log")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		return waitFile(t, filepath.Join(dir, "invite"), 30*time.Second)
	}
	first := start(0, "")
	inv, err := identity.ParseInvite(first)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < nodes; i++ {
		own, err := identity.ParseInvite(start(i, first))
		if err != nil {
			t.Fatal(err)
		}
		inv.Addrs = append(inv.Addrs, own.Addrs...)
	}
	g.grid = inv.String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, err := g.quilt("nodes")
		if err == nil && strings.Count(out, " alive ") == nodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grid did not form: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return g
}

// quilt runs a quilt command against the grid and returns its standard
// output, standard error and error (an *exec.ExitError for a non-zero
// exit).
func (g *hostileGrid) quilt(args ...string) (string, string, error) {
	cmd := exec.Command(g.bin, append(args, "--grid", g.grid)...)
	cmd.Env = g.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// put stores data with 2-of-5 in segments of segment and returns its
// read capability.
func (g *hostileGrid) put(data []byte, segment string) codec.ReadCap {
	g.t.Helper()
	file := filepath.Join(g.base, fmt.Sprintf("in-%d", time.Now().UnixNano()))
	if err := os.WriteFile(file, data, 0o600); err != nil {
		g.t.Fatal(err)
	}
	out, errOut, err := g.quilt("put", "--k", "2", "--n", "5", "--happy", "5", "--segment-size", segment, file)
	if err != nil {
		g.t.Fatalf("put: %v\n%s", err, errOut)
	}
	rc, err := codec.ParseReadCap(strings.TrimSpace(out))
	if err != nil {
		g.t.Fatalf("put printed %q: %v", out, err)
	}
	return rc
}

// get reads the object whole, failing the test unless it is data.
func (g *hostileGrid) mustGet(rc codec.ReadCap, data []byte) {
	g.t.Helper()
	out, errOut, err := g.quilt("get", rc.String())
	if err != nil {
		g.t.Fatalf("get: %v\n%s", err, errOut)
	}
	if out != string(data) {
		g.t.Fatalf("get returned %d different bytes, want %d", len(out), len(data))
	}
}

// shareFile finds the file holding a share of the object on some node:
// the node's index and the file's path.
func (g *hostileGrid) shareFile(rc codec.ReadCap, share int) (int, string) {
	g.t.Helper()
	si := rc.Key.StorageIndex()
	for i, dir := range g.dirs {
		p := filepath.Join(dir, "store", "shares", hex.EncodeToString(si[:1]), fmt.Sprintf("%x.%d", si[:], share))
		if _, err := os.Stat(p); err == nil {
			return i, p
		}
	}
	g.t.Fatalf("share %d is on no node", share)
	return -1, ""
}

// recordSize is the node's record before the share bytes in a share
// file (see sharestore), and shareLenAt where in it the share's length is.
const (
	recordSize = 128
	shareLenAt = 76
)

// editShare rewrites bytes of a stored share in place: fn gets the share
// bytes (without the node's record) to change.
func (g *hostileGrid) editShare(path string, fn func(share []byte)) {
	g.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatal(err)
	}
	n := binary.BigEndian.Uint64(b[shareLenAt:])
	fn(b[recordSize : recordSize+n])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// forgeSegmentCount adds 2^59 to a share's segment count in its trailer:
// 32 more bytes of hashes per segment make the same trailer length under
// 64-bit wrap-around, so the trailer's own length check passes.
func forgeSegmentCount(share []byte) {
	tl := int(binary.BigEndian.Uint32(share[len(share)-8:]))
	t := share[len(share)-tl:]
	binary.BigEndian.PutUint64(t, binary.BigEndian.Uint64(t)+1<<59)
}

// Real nodes, real files damaged on disk: what a lying node or a failing
// disk does to the grid's readers and checkers.
func TestHostileProcesses(t *testing.T) {
	g := startHostileGrid(t, 5)

	// A share whose trailer declares 2^59 more segments: every read of
	// the object once crashed the reader. Both read paths: the quick
	// one of a one-segment object (its data shares, whole), and the
	// usual one (trailers from every node first).
	t.Run("ForgedSegmentCount", func(t *testing.T) {
		small := make([]byte, 10_000)
		rand.Read(small)
		big := make([]byte, 300_000)
		rand.Read(big)
		for _, c := range []struct {
			name    string
			data    []byte
			segment string
		}{{"one segment", small, "64KiB"}, {"five segments", big, "64KiB"}} {
			rc := g.put(c.data, c.segment)
			for _, share := range []int{0, 1} {
				_, path := g.shareFile(rc, share)
				g.editShare(path, forgeSegmentCount)
			}
			g.mustGet(rc, c.data)
			// Again: the damage is on disk, not a passing fault.
			g.mustGet(rc, c.data)
		}
	})

	// A damaged share is found by check --verify (exit status 1, the
	// share named), rebuilt in place by check --repair, and then the
	// bytes on that node's disk are the share's again.
	t.Run("RepairInPlace", func(t *testing.T) {
		data := make([]byte, 300_000)
		rand.Read(data)
		rc := g.put(data, "64KiB")
		vcap := rc.Verify().String()
		for _, c := range []struct {
			name  string
			share int
			off   int
		}{
			{"flipped block byte", 2, 64 + 1000},
			{"damaged header", 3, 10}, // the segment size
		} {
			_, path := g.shareFile(rc, c.share)
			var orig []byte
			g.editShare(path, func(sh []byte) {
				orig = bytes.Clone(sh)
				sh[c.off] ^= 0x40
			})
			out, errOut, err := g.quilt("check", "--verify", vcap)
			if err == nil {
				t.Fatalf("%s: check --verify exited 0:\n%s", c.name, out)
			}
			if !hasLine(out, fmt.Sprintf("share %2d", c.share), "BAD") {
				t.Fatalf("%s: check --verify does not name share %d as bad:\n%s%s", c.name, c.share, out, errOut)
			}
			out, errOut, err = g.quilt("check", "--repair", vcap)
			if err != nil {
				t.Fatalf("%s: check --repair: %v\n%s%s", c.name, err, out, errOut)
			}
			if !hasLine(out, fmt.Sprintf("share %2d", c.share), "rebuilt") {
				t.Fatalf("%s: check --repair does not say it rebuilt share %d:\n%s", c.name, c.share, out)
			}
			if out, errOut, err := g.quilt("check", "--verify", vcap); err != nil {
				t.Fatalf("%s: check --verify after repair: %v\n%s%s", c.name, err, out, errOut)
			}
			_, now := g.shareFile(rc, c.share)
			if now != path {
				t.Fatalf("%s: share %d moved from %s to %s", c.name, c.share, path, now)
			}
			g.editShare(path, func(sh []byte) {
				if !bytes.Equal(sh, orig) {
					t.Fatalf("%s: share %d on disk after repair differs from the share put", c.name, c.share)
				}
			})
			g.mustGet(rc, data)
		}
	})
}

// hasLine reports whether some line of out contains every one of parts.
func hasLine(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}
