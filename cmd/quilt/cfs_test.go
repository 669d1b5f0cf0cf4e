package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/nsclient"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// The issue's check with real processes: three `quilt node`s; `quilt cfs
// write` through one; `quilt cfs cat` through another returns it; `quilt
// cfs watch --exec` through the third ran its script with the right
// environment. Each client has its own QUILT_HOME, as three machines.
// Grants are enforced end to end: a granted key writes under its
// directory only, and not at all once revoked.
func TestConfigFilesystemProcesses(t *testing.T) {
	bin := buildQuilt(t)
	base := t.TempDir()
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, p := range procs {
			if p.Process != nil {
				p.Process.Kill()
				p.Wait()
			}
		}
	})
	var invites []string
	for i := range 3 {
		dir := filepath.Join(base, fmt.Sprintf("node%d", i))
		args := []string{"node", "--data", dir, "--listen", "127.0.0.1:0", "--log", "warn", "--ns-sync", "1s"}
		if i > 0 {
			args = append(args, "--join", invites[0])
		}
		cmd := exec.Command(bin, args...)
		log, _ := os.Create(dir + ".log")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		invites = append(invites, waitFile(t, filepath.Join(dir, "invite"), 30*time.Second))
	}
	// cfs runs a cfs verb as client `who` (its own QUILT_HOME) through
	// node `via`.
	cfs := func(who string, via int, stdin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append(append([]string{"cfs"}, args...), "--grid", invites[via])...)
		cmd.Env = append(os.Environ(), "QUILT_HOME="+filepath.Join(base, who))
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("cfs %s: %v: %s", args[0], err, errb.String())
		}
		return out.String(), err
	}
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	eventually := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	nsCap := strings.TrimSpace(must(cfs("alice", 0, "", "bootstrap", "cluster")))
	if !strings.HasPrefix(nsCap, "quilt:ns:") {
		t.Fatalf("bootstrap printed %q", nsCap)
	}
	for _, who := range []string{"bob", "carol"} {
		must(cfs(who, 0, "", "import", nsCap, "--name", "cluster"))
	}

	// carol watches through node 2.
	events := filepath.Join(base, "events.txt")
	watchLog := filepath.Join(base, "watch.log")
	watch := exec.Command(bin, "cfs", "watch", "--grid", invites[2], "--exec",
		`echo "$QUILT_EVENT_TYPE $QUILT_EVENT_PATH $QUILT_NAMESPACE" >> `+events)
	watch.Env = append(os.Environ(), "QUILT_HOME="+filepath.Join(base, "carol"))
	wl, _ := os.Create(watchLog)
	watch.Stdout, watch.Stderr = wl, wl
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	procs = append(procs, watch)
	eventually("watch starts", func() bool {
		b, _ := os.ReadFile(watchLog)
		return strings.Contains(string(b), "up to date")
	})

	// alice writes through node 0; bob reads through node 1.
	const hosts = "10.0.0.1 gateway\n10.0.0.2 storage\n"
	must(cfs("alice", 0, hosts, "write", "/etc/hosts"))
	eventually("bob reads alice's file through another node", func() bool {
		out, err := cfs("bob", 1, "", "cat", "/etc/hosts")
		return err == nil && out == hosts
	})
	eventually("carol's handler ran with the event's environment", func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "write /etc/hosts cluster\n")
	})
	if b, _ := os.ReadFile(events); !strings.Contains(string(b), "mkdir /etc cluster\n") {
		t.Errorf("no event for the directory write made: %q", b)
	}

	// A write from the watcher's own QUILT_HOME fires too, and a handler
	// may itself run cfs commands (the watcher does not hold the replica).
	carolKey := strings.TrimSpace(must(cfs("carol", 2, "", "genkey")))
	must(cfs("alice", 0, "", "grant", carolKey, "/etc", "--label", "carol"))
	// At once, through another node: the write waits for the grant to
	// get there.
	must(cfs("carol", 2, "mine\n", "write", "/etc/carol.conf"))
	eventually("the watcher saw a write made from its own home", func() bool {
		b, _ := os.ReadFile(events)
		return strings.Contains(string(b), "write /etc/carol.conf cluster\n")
	})

	// A bigger file travels in blocks; history and revert work.
	big := strings.Repeat("option value\n", 400)
	must(cfs("alice", 0, big, "write", "/etc/app.conf"))
	must(cfs("alice", 0, "v2\n", "write", "/etc/app.conf"))
	eventually("bob reads the new version", func() bool {
		out, err := cfs("bob", 1, "", "cat", "/etc/app.conf")
		return err == nil && out == "v2\n"
	})
	logOut := must(cfs("bob", 1, "", "log", "/etc/app.conf"))
	lines := strings.Split(strings.TrimSpace(logOut), "\n")
	if len(lines) != 2 {
		t.Fatalf("log has %d lines:\n%s", len(lines), logOut)
	}
	first := strings.Fields(strings.TrimPrefix(lines[0], "*"))[0]
	if !strings.HasPrefix(lines[1], "*") {
		t.Fatalf("the newest version is not marked current:\n%s", logOut)
	}
	must(cfs("alice", 0, "", "revert", "/etc/app.conf", first))
	eventually("the revert reaches bob", func() bool {
		out, err := cfs("bob", 1, "", "cat", "/etc/app.conf")
		return err == nil && out == big
	})

	// A file over 256 KiB goes to the grid as an erasure-coded object; the
	// entry holds its capability.
	huge := strings.Repeat("0123456789abcdef", 20<<10) // 320 KiB
	must(cfs("alice", 0, huge, "write", "/srv/image.bin"))
	eventually("bob reads the object-backed file", func() bool {
		out, err := cfs("bob", 1, "", "cat", "/srv/image.bin")
		return err == nil && out == huge
	})

	// bob's key: refused before a grant, allowed under /etc after,
	// refused outside /etc, refused after revocation.
	pub := strings.TrimSpace(must(cfs("bob", 1, "", "genkey")))
	if _, err := cfs("bob", 1, "x", "write", "/etc/bob.conf"); err == nil || !strings.Contains(err.Error(), "no grant") {
		t.Fatalf("write without a grant: %v", err)
	}
	must(cfs("alice", 0, "", "grant", pub, "/etc", "--label", "bob"))
	must(cfs("bob", 1, "from bob\n", "write", "/etc/bob.conf"))
	if _, err := cfs("bob", 1, "x", "write", "/srv/bob.conf"); err == nil {
		t.Fatal("bob wrote outside his grant")
	}
	// The grant reaches carol's node by gossip, maybe a moment after
	// bob's: wait for it as for everything else that crosses nodes.
	eventually("carol's node lists bob's key under /etc", func() bool {
		keys, err := cfs("carol", 2, "", "keys")
		return err == nil && strings.Contains(keys, "bob") && strings.Contains(keys, "/etc")
	})
	// A revocation keeps what the revoker has seen: wait until bob's
	// write has reached alice's node.
	eventually("alice sees bob's file", func() bool {
		out, err := cfs("alice", 0, "", "cat", "/etc/bob.conf")
		return err == nil && out == "from bob\n"
	})
	must(cfs("alice", 0, "", "revoke", "bob"))
	eventually("bob's key is refused after revocation", func() bool {
		_, err := cfs("bob", 1, "again\n", "write", "/etc/bob2.conf")
		return err != nil
	})
	eventually("what bob wrote before stays (acknowledged)", func() bool {
		out, err := cfs("carol", 2, "", "cat", "/etc/bob.conf")
		return err == nil && out == "from bob\n"
	})
	// A write bob's node took before it had the revocation is not
	// acknowledged: every node purges it once it has both, carol's too.
	var ls string
	eventually("a write by the revoked key is purged on carol's node", func() bool {
		ls = must(cfs("carol", 2, "", "ls", "-l", "/etc"))
		return !strings.Contains(ls, "bob2.conf")
	})
	for _, want := range []string{"hosts", "app.conf", "bob.conf"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls -l /etc lacks %s:\n%s", want, ls)
		}
	}
	members := must(cfs("carol", 2, "", "members"))
	if strings.Count(members, "alive") != 3 {
		t.Errorf("members:\n%s", members)
	}
}

// runCFSOut runs a cfs command in this process and returns what it
// printed on standard output.
func runCFSOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	outc := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		outc <- string(b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = runCFS(ctx, args)
	os.Stdout = old
	w.Close()
	return <-outc, err
}

// The flags and output of the verbs that change and show the tree, run
// in this process against a test grid: mkdir -p, rm -r, ln, ln -s, link,
// slink, chmod and mode, show, ls -l, log, keys, export.
func TestCFSVerbsInProcess(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 2})
	t.Setenv("QUILT_HOME", t.TempDir())
	t.Setenv("QUILT_GRID", g.Invite.String())
	t.Setenv("QUILT_NS", "")
	must := func(args ...string) string {
		t.Helper()
		out, err := runCFSOut(t, args...)
		if err != nil {
			t.Fatalf("cfs %v: %v", args, err)
		}
		return out
	}
	capStr := strings.TrimSpace(must("bootstrap", "cluster"))
	if c, err := nsclient.ParseCap(capStr); err != nil || c.String() != capStr {
		t.Fatalf("bootstrap printed %q: %v", capStr, err)
	}
	if got := strings.TrimSpace(must("export")); got != capStr {
		t.Errorf("export: %q, bootstrap: %q", got, capStr)
	}
	must("mkdir", "-p", "/etc/app/conf.d")
	if _, err := runCFSOut(t, "mkdir", "/etc"); err == nil {
		t.Error("mkdir of an existing directory")
	}
	in := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(in, []byte("10.0.0.1 gw\n"), 0o600)
	must("write", "/etc/hosts", in)
	must("ln", "/etc/hosts", "/etc/hosts.hard")
	must("link", "/etc/hosts", "/etc/hosts.link")
	must("ln", "-s", "hosts", "/etc/hosts.sym")
	must("slink", "/etc/hosts", "/etc/hosts.abs")
	must("chmod", "+x", "/etc/hosts")
	must("mode", "-x", "/etc/hosts.hard")
	if _, err := runCFSOut(t, "chmod", "/etc/hosts"); err == nil {
		t.Error("chmod without +x or -x")
	}
	for _, p := range []string{"/etc/hosts.hard", "/etc/hosts.link", "/etc/hosts.sym", "/etc/hosts.abs"} {
		if got := must("cat", p); got != "10.0.0.1 gw\n" {
			t.Errorf("cat %s: %q", p, got)
		}
	}
	ls := must("ls", "-l", "/etc")
	for _, want := range []string{"drwx", "app/", "-rwx", "hosts.sym -> hosts", "hosts.abs -> /etc/hosts"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, ls)
		}
	}
	show := must("show")
	for _, want := range []string{"/\n", "  etc/\n", "    app/\n", "      conf.d/\n", "    hosts  (12 bytes)\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if _, err := runCFSOut(t, "rm", "/etc/app"); err == nil {
		t.Error("rm of a directory that is not empty, without -r")
	}
	must("rm", "-r", "/etc/app")
	if strings.Contains(must("ls", "/etc"), "app") {
		t.Error("rm -r left /etc/app")
	}
	log := must("log", "/etc/hosts")
	if lines := strings.Split(strings.TrimSpace(log), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "+x") || !strings.HasPrefix(lines[1], "*") {
		t.Errorf("log:\n%s", log)
	}
	keys := must("keys")
	if !strings.Contains(keys, "root key") {
		t.Errorf("keys:\n%s", keys)
	}
	if _, err := runCFSOut(t, "frobnicate"); err == nil {
		t.Error("an unknown verb")
	}
}
