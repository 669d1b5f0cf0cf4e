package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	eventually("carol may write under /etc", func() bool {
		_, err := cfs("carol", 2, "mine\n", "write", "/etc/carol.conf")
		return err == nil
	})
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
	eventually("bob may write under /etc", func() bool {
		_, err := cfs("bob", 1, "from bob\n", "write", "/etc/bob.conf")
		return err == nil
	})
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
	ls := must(cfs("carol", 2, "", "ls", "-l", "/etc"))
	for _, want := range []string{"hosts", "app.conf", "bob.conf"} {
		if !strings.Contains(ls, want) {
			t.Errorf("ls -l /etc lacks %s:\n%s", want, ls)
		}
	}
	if strings.Contains(ls, "bob2.conf") {
		t.Errorf("a write by a revoked key shows:\n%s", ls)
	}
	members := must(cfs("carol", 2, "", "members"))
	if strings.Count(members, "alive") != 3 {
		t.Errorf("members:\n%s", members)
	}
}
