package main

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/identity"
)

// buildQuilt builds the quilt binary once for the process tests.
func buildQuilt(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "quilt")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// waitFile waits for a file to appear and returns its contents.
func waitFile(t testing.TB, path string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The end-to-end check with real processes: ten `quilt node`
// processes on 127.0.0.1, `quilt put` of a 64 MiB file, seven nodes
// killed with SIGKILL, `quilt get` returns identical bytes.
func TestRealProcessesSurviveSevenKilled(t *testing.T) {
	bin := buildQuilt(t)
	base := t.TempDir()
	env := append(os.Environ(), "QUILT_HOME="+filepath.Join(base, "home"))
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
		dir := filepath.Join(base, fmt.Sprintf("node%d", i))
		// One CPU each, as ten nodes sharing a machine should run.
		args := []string{"node", "--data", dir, "--listen", "127.0.0.1:0", "--log", "warn", "--cpus", "1"}
		if join != "" {
			args = append(args, "--join", join)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = env
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
	for i := 1; i < 10; i++ {
		own, err := identity.ParseInvite(start(i, first))
		if err != nil {
			t.Fatal(err)
		}
		inv.Addrs = append(inv.Addrs, own.Addrs...)
	}
	grid := inv.String()
	quilt := func(stdin []byte, args ...string) (string, error) {
		cmd := exec.Command(bin, append(args, "--grid", grid)...)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("quilt %s: %v\n%s", args[0], err, errb.String())
		}
		return out.String(), err
	}
	// Wait until the grid sees all ten alive.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := quilt(nil, "nodes")
		if err == nil && strings.Count(out, " alive ") == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("grid did not form: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	data := make([]byte, 64<<20)
	rand.Read(data)
	file := filepath.Join(base, "in")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	capOut, err := quilt(nil, "put", file)
	if err != nil {
		t.Fatal(err)
	}
	rcap := strings.TrimSpace(capOut)
	if !strings.HasPrefix(rcap, "quilt:r:") {
		t.Fatalf("put printed %q, not a read capability", capOut)
	}

	for _, i := range []int{0, 2, 3, 5, 6, 8, 9} {
		if err := procs[i].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		procs[i].Wait()
	}
	outFile := filepath.Join(base, "out")
	if _, err := quilt(nil, "get", rcap, "-o", outFile); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("get after 7 of 10 nodes were killed returned different bytes (%d of %d)", len(got), len(data))
	}
	// Standard input and output work too, and a range reads exactly.
	part, err := quilt(nil, "get", "--range", "1000-1999", rcap)
	if err != nil || part != string(data[1000:2000]) {
		t.Fatalf("range get: %v (%d bytes)", err, len(part))
	}
	// A range of several segments to a file, starting and ending inside
	// a segment: exactly its bytes.
	rangeFile := filepath.Join(base, "range")
	if _, err := quilt(nil, "get", "--range", "3000001-9999999", rcap, "-o", rangeFile); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(rangeFile); err != nil || !bytes.Equal(got, data[3000001:10000000]) {
		t.Fatalf("range get to a file: %v (%d bytes, want %d)", err, len(got), 10000000-3000001)
	}
	// With one more node gone, get fails clearly and writes no file.
	procs[1].Process.Signal(syscall.SIGKILL)
	procs[1].Wait()
	missing := filepath.Join(base, "missing")
	_, err = quilt(nil, "get", rcap, "-o", missing)
	if err == nil || !strings.Contains(err.Error(), "good shares of the 3 needed") {
		t.Fatalf("get with 2 of 10 nodes: %v", err)
	}
	if _, serr := os.Stat(missing); !os.IsNotExist(serr) {
		t.Fatalf("a failed get left %s behind", missing)
	}
}

// Errors for people: a bad capability and a missing grid say what to do.
func TestCLIErrors(t *testing.T) {
	bin := buildQuilt(t)
	env := append(os.Environ(), "QUILT_HOME="+t.TempDir(), "QUILT_GRID=")
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	cases := []struct {
		args []string
		want string
		code int
	}{
		{[]string{"get", "quilt:r:garbage"}, "capabilities look like", 1},
		{[]string{"get", "quilt:v:aaaa"}, "verify capability", 1},
		{[]string{"nodes"}, "quilt up", 1},
		{[]string{"put", "/nonexistent/file"}, "no such file", 1},
		{[]string{"frobnicate"}, "unknown command", 2},
		{[]string{"get"}, "Usage: quilt get", 2},
		{[]string{"nodes", "--grid", "quilt://short@127.0.0.1:1"}, "bad invite", 1},
		{[]string{"put", "--k", "5", "--n", "3", "-"}, "bad parameters", 1},
		{[]string{"node", "--data", filepath.Join(t.TempDir(), "n"), "--cpus", "-1"}, "--cpus -1", 1},
	}
	for _, c := range cases {
		out, code := run(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("quilt %v: exit %d, output:\n%s\nwant exit %d mentioning %q", c.args, code, out, c.code, c.want)
		}
	}
}
