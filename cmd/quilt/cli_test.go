package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
)

// A damaged config or namespace list is an error naming the file, and
// the file is left as it was for the user to repair; it used to be
// silently read as empty and then overwritten.
func TestCLIDamagedStateFiles(t *testing.T) {
	h := t.TempDir()
	t.Setenv("QUILT_HOME", h)
	t.Setenv("QUILT_GRID", "")
	damaged := []byte(`{"grid": "quilt://`)
	os.MkdirAll(filepath.Join(h, "cfs"), 0o700)
	for _, p := range []string{configPath(), filepath.Join(cfsHome(), "namespaces.json")} {
		if err := os.WriteFile(p, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), configPath()) {
		t.Errorf("loadConfig of a damaged file: %v", err)
	}
	if _, err := (&gridFlags{grid: "quilt://x@127.0.0.1:1"}).connect(); err == nil || !strings.Contains(err.Error(), configPath()) {
		t.Errorf("connect with a damaged config: %v", err)
	}
	ns := filepath.Join(cfsHome(), "namespaces.json")
	if err := runCFS(t.Context(), []string{"ls"}); err == nil || !strings.Contains(err.Error(), ns) {
		t.Errorf("cfs ls with a damaged namespaces.json: %v", err)
	}
	(&session{}).rememberPeers(nil)
	for _, p := range []string{configPath(), ns} {
		if b, _ := os.ReadFile(p); string(b) != string(damaged) {
			t.Errorf("%s was changed to %q", p, b)
		}
	}
	// A good config is read and rewritten whole.
	if err := saveConfig(clientConfig{Grid: "g", Peers: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if c, err := loadConfig(); err != nil || c.Grid != "g" || len(c.Peers) != 1 {
		t.Fatalf("loadConfig after saveConfig: %+v %v", c, err)
	}
}

// testGrid is a grid of real `quilt node` processes on 127.0.0.1.
type testGrid struct {
	t      testing.TB
	bin    string
	base   string
	env    []string
	invite string
	procs  []*exec.Cmd
}

// startTestGrid starts n nodes and waits until the first sees them all.
func startTestGrid(t *testing.T, n int) *testGrid { return startTestGridArgs(t, n) }

// startTestGridArgs is startTestGrid with extra flags for every node.
func startTestGridArgs(t *testing.T, n int, extra ...string) *testGrid {
	return startTestGridFunc(t, n, func(int) []string { return extra })
}

// startTestGridFunc is startTestGrid with extra(i) the extra flags of
// node i.
func startTestGridFunc(t testing.TB, n int, extra func(i int) []string) *testGrid {
	g := &testGrid{t: t, bin: buildQuilt(t), base: t.TempDir()}
	g.env = append(os.Environ(), "QUILT_HOME="+filepath.Join(g.base, "home"), "QUILT_GRID=")
	t.Cleanup(func() {
		for _, p := range g.procs {
			if p.Process != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	})
	for i := range n {
		g.startNode(extra(i)...)
	}
	g.waitAlive(n)
	return g
}

// startNode starts one more node with extra flags, joining the grid
// unless it is the first, and waits until it has written its invite.
func (g *testGrid) startNode(extra ...string) {
	t := g.t
	i := len(g.procs)
	dir := g.nodeDir(i)
	args := append([]string{"node", "--data", dir, "--listen", "127.0.0.1:0", "--log", "warn", "--cpus", "1"}, extra...)
	if i > 0 {
		args = append(args, "--join", g.invite)
	}
	cmd := exec.Command(g.bin, args...)
	cmd.Env = g.env
	log, _ := os.Create(dir + ".log")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.procs = append(g.procs, cmd)
	own, err := identity.ParseInvite(waitFile(t, filepath.Join(dir, "invite"), 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if i == 0 {
		g.invite = own.String()
		return
	}
	inv, err := identity.ParseInvite(g.invite)
	if err != nil {
		t.Fatal(err)
	}
	inv.Addrs = appendNew(inv.Addrs, own.Addrs...)
	g.invite = inv.String()
}

// waitAlive waits (30 s at most) until quilt nodes shows n members
// alive.
func (g *testGrid) waitAlive(n int) {
	t := g.t
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, err := g.quilt(nil, "nodes")
		if err == nil && strings.Count(out, " alive ") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grid did not form: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command returns a quilt client command on the grid.
func (g *testGrid) command(args ...string) *exec.Cmd {
	cmd := exec.Command(g.bin, append(args, "--grid", g.invite)...)
	cmd.Env = g.env
	return cmd
}

// quilt runs a client command, returning its stdout and stderr.
func (g *testGrid) quilt(stdin []byte, args ...string) (string, string, error) {
	cmd := g.command(args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("quilt %s: %v\n%s", args[0], err, errb.String())
	}
	return out.String(), errb.String(), err
}

// On a grid of real processes: put -v prints the verify capability and
// quilt cap verify derives it. A `quilt get -o FILE` stopped by SIGTERM
// half way exits non-zero saying so, and leaves neither FILE nor its
// temporary file (it used to exit 0 with a truncated FILE); a put stopped
// half way says interrupted, not that nodes are missing.
func TestCLIPutGetOnGrid(t *testing.T) {
	g := startTestGrid(t, 3)
	data := make([]byte, 96<<20)
	rand.Read(data)
	in := filepath.Join(g.base, "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	capOut, putLog, err := g.quilt(nil, "put", "-v", "--k", "2", "--n", "3", "--happy", "3", in)
	if err != nil {
		t.Fatal(err)
	}
	rcap := strings.TrimSpace(capOut)
	// put -v prints the verify capability, labelled, on standard error;
	// quilt cap verify derives the same one from the read capability;
	// quilt check takes it.
	rc, err := codec.ParseReadCap(rcap)
	if err != nil {
		t.Fatal(err)
	}
	vcap := rc.Verify().String()
	if !strings.Contains(putLog, "verify capability (checks and repairs, cannot read): "+vcap+"\n") {
		t.Errorf("put -v did not print the verify capability %s:\n%s", vcap, putLog)
	}
	capVerify := func(c string) (string, error) {
		out, err := exec.Command(g.bin, "cap", "verify", c).Output()
		return strings.TrimSpace(string(out)), err
	}
	for _, from := range []string{rcap, vcap} {
		if out, err := capVerify(from); err != nil || out != vcap {
			t.Errorf("quilt cap verify %s: %q, %v; want %s", from, out, err, vcap)
		}
	}
	if out, err := capVerify("quilt:r:garbage"); err == nil {
		t.Errorf("quilt cap verify of a damaged capability printed %q", out)
	}
	if out, _, err := g.quilt(nil, "check", vcap); err != nil || !strings.Contains(out, "healthy") {
		t.Errorf("quilt check of the derived verify capability: %v\n%s", err, out)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "copy")
	cmd := g.command("get", rcap, "-o", out)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the temporary file beside the target has some bytes.
	deadline := time.Now().Add(30 * time.Second)
	for started := false; !started; {
		ents, _ := os.ReadDir(outDir)
		for _, e := range ents {
			if info, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), ".copy.") && info.Size() > 0 && info.Size() < int64(len(data)) {
				started = true
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no partial temporary file appeared in %s", outDir)
		}
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if err == nil || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("get stopped by SIGTERM: %v, stderr %q; want a non-zero exit saying interrupted", err, errb.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an interrupted get left %s (%v)", out, err)
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Errorf("an interrupted get left %v", ents)
	}
	// A put stopped half way says it was interrupted, not that shares
	// were lost for want of nodes.
	put := g.command("put", "--k", "2", "--n", "3", "--happy", "3", "-")
	stdin, err := put.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var putOut, putErr bytes.Buffer
	put.Stdout, put.Stderr = &putOut, &putErr
	if err := put.Start(); err != nil {
		t.Fatal(err)
	}
	// Once this returns, put has read (nearly) all of it.
	if _, err := stdin.Write(data[:8<<20]); err != nil {
		t.Fatal(err)
	}
	put.Process.Signal(syscall.SIGTERM)
	stdin.Close()
	err = put.Wait()
	if err == nil || !strings.Contains(putErr.String(), "interrupted") || strings.Contains(putErr.String(), "add nodes") || putOut.Len() != 0 {
		t.Errorf("put stopped by SIGTERM: %v, stdout %q, stderr %q; want a non-zero exit saying interrupted and no capability", err, putOut.String(), putErr.String())
	}
	// Not interrupted, the same get writes the whole file.
	if _, _, err := g.quilt(nil, "get", rcap, "-o", out); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatalf("get wrote %d bytes, not the object's %d", len(got), len(data))
	}

	// The invite a joined node writes names it first, then the other
	// live members: a client given only it still reaches the grid with
	// that node gone.
	last := len(g.procs) - 1
	own, err := identity.ParseInvite(waitFile(t, filepath.Join(g.base, fmt.Sprintf("node%d", last), "invite"), time.Second))
	if err != nil {
		t.Fatal(err)
	}
	all, _ := identity.ParseInvite(g.invite)
	if len(own.Addrs) != len(all.Addrs) || own.Addrs[0] != all.Addrs[last] {
		t.Fatalf("node %d's invite names %v; want itself first and every member of %v", last, own.Addrs, all.Addrs)
	}
	g.procs[last].Process.Kill()
	g.procs[last].Wait()
	g.invite = own.String()
	if _, _, err := g.quilt(nil, "get", rcap, "-o", out); err != nil {
		t.Fatalf("get through the invite of a node that is gone: %v", err)
	}
}

// A data directory in use is refused at once, naming the process that
// has it; it used to fail after a while with "ns.db: timeout".
func TestCLIDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s is in use by another process (pid %d)", dir, os.Getpid())
	// Bounded: without the lock these would run a node until cancelled.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := runNode(ctx, []string{"--data", dir, "--listen", "127.0.0.1:0"}); err == nil || err.Error() != want {
		t.Errorf("node on a directory in use: %v; want %q", err, want)
	}
	if err := runUp(ctx, []string{"--dir", dir, "--port", "0"}); err == nil || err.Error() != want {
		t.Errorf("up on a directory in use: %v; want %q", err, want)
	}
	release()
	// Released, the directory can be locked again.
	release, err = lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	release()
}

// Joining through a dead address or with another grid's secret gives up
// after --join-timeout with an error naming the address and the reason,
// and a hint; every failed attempt is logged meanwhile.
func TestCLIJoinFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	first := t.TempDir()
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, []string{"--data", first, "--listen", "127.0.0.1:0", "--log", "error"}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("first node: %v", err)
		}
	})
	inv, err := identity.ParseInvite(waitFile(t, filepath.Join(first, "invite"), 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	other, err := identity.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		join       identity.Invite
		addr, hint string
	}{
		{identity.Invite{Secret: inv.Secret, Addrs: []string{dead}}, dead, "nothing listens"},
		{identity.Invite{Secret: other, Addrs: inv.Addrs}, inv.Addrs[0], "secret is wrong"},
	} {
		err := runNode(ctx, []string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--log", "error",
			"--join", c.join.String(), "--join-timeout", "1s"})
		if err == nil || !strings.Contains(err.Error(), c.addr) || !strings.Contains(hint(err), c.hint) {
			t.Errorf("join %s: %v (hint %q); want an error naming %s, hint mentioning %q", c.join, err, hint(err), c.addr, c.hint)
		}
	}
}

// quilt key finds the gateway quilt up runs (DIR/gateway, recorded in the
// client config) when the grid is the default one; it used to look in
// $QUILT_HOME/gateway, where quilt up keeps nothing.
func TestCLIKeyFindsUpsGateway(t *testing.T) {
	h := t.TempDir()
	t.Setenv("QUILT_HOME", h)
	t.Setenv("QUILT_GRID", "")
	def := filepath.Join(h, "gateway")
	if got := keyDir(""); got != def {
		t.Errorf("no config: %s, want %s", got, def)
	}
	if err := saveConfig(clientConfig{Grid: "quilt://up", Gateway: "/grid/gateway"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, env, want string }{
		{"", "", "/grid/gateway"},
		{"quilt://up", "", "/grid/gateway"},
		{"", "quilt://up", "/grid/gateway"},
		{"quilt://other", "", def},
		{"", "quilt://other", def},
	} {
		t.Setenv("QUILT_GRID", c.env)
		if got := keyDir(c.flag); got != c.want {
			t.Errorf("--grid %q, QUILT_GRID %q: %s, want %s", c.flag, c.env, got, c.want)
		}
	}
}
