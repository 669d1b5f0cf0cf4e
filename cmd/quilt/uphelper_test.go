package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/identity"
)

// quilt put --helper goes through a node run with --helper and says so;
// the file reads back; with the helper killed, a file is uploaded
// directly instead, and -v says why.
func TestCLIPutThroughHelper(t *testing.T) {
	g := startTestGridFunc(t, 5, func(i int) []string {
		if i == 0 {
			return []string{"--helper"}
		}
		return nil
	})
	inv, err := identity.ParseInvite(waitFile(t, filepath.Join(g.nodeDir(0), "invite"), 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	helperAddr := inv.Addrs[0]
	data := make([]byte, 3<<20+12345)
	rand.Read(data)
	in := filepath.Join(g.base, "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	capOut, log, err := g.quilt(nil, "put", "-v", "--k", "2", "--n", "5", "--happy", "4", "--helper", helperAddr, in)
	if err != nil {
		t.Fatalf("put --helper: %v\n%s", err, log)
	}
	if !strings.Contains(log, "path: helper") || !strings.Contains(log, "root checked") {
		t.Errorf("put -v --helper did not say it went through the helper:\n%s", log)
	}
	out := filepath.Join(t.TempDir(), "copy")
	if _, log, err := g.quilt(nil, "get", strings.TrimSpace(capOut), "-o", out); err != nil {
		t.Fatalf("get: %v\n%s", err, log)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("the file read back differs")
	}

	// A name that is no member's is an error, not a silent direct upload.
	if _, log, err := g.quilt(nil, "put", "--helper", "127.0.0.1:1", in); err == nil || !strings.Contains(log, "no such helper") {
		t.Errorf("put --helper of no member: %v\n%s", err, log)
	}

	// The helper's node dies: the file goes direct.
	g.procs[0].Process.Kill()
	g.procs[0].Wait()
	capOut, log, err = g.quilt(nil, "put", "-v", "--k", "2", "--n", "4", "--happy", "3", "--helper", helperAddr, in)
	if err != nil {
		t.Fatalf("put --helper with the helper dead: %v\n%s", err, log)
	}
	if !strings.Contains(log, "path: direct, after the helper failed") {
		t.Errorf("put -v did not say it fell back to a direct upload:\n%s", log)
	}
	if _, log, err := g.quilt(nil, "get", strings.TrimSpace(capOut), "-o", out+"2"); err != nil {
		t.Fatalf("get: %v\n%s", err, log)
	}
}
