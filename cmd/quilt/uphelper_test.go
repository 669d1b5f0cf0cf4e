package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/identity"
)

// startHelperGrid starts five node processes, node 0 with --helper, and
// returns node 0's invite.
func startHelperGrid(t *testing.T) (*testGrid, identity.Invite) {
	t.Helper()
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
	return g, inv
}

// quilt put --helper goes through a node run with --helper and says so;
// the file reads back; with the helper killed, a file is uploaded
// directly instead, and -v says why.
func TestCLIPutThroughHelper(t *testing.T) {
	g, inv := startHelperGrid(t)
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

// A put keeps the link estimates it measured in $QUILT_HOME/links.json,
// and the next command starts from them: a put --helper-auto in a new
// process has estimates to compare (it used to say that it had measured
// no link, and go direct). A damaged file is no estimates, not an error.
func TestCLIKeepsLinkEstimates(t *testing.T) {
	g, inv := startHelperGrid(t)
	data := make([]byte, 2<<20)
	rand.Read(data)
	in := filepath.Join(g.base, "in")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	enc := []string{"--k", "2", "--n", "5", "--happy", "4"}
	capOut, log, err := g.quilt(nil, append([]string{"put"}, append(enc, in)...)...)
	if err != nil {
		t.Fatalf("put: %v\n%s", err, log)
	}
	var kept linksFile
	b, err := os.ReadFile(filepath.Join(g.base, "home", "links.json"))
	if err != nil {
		t.Fatalf("no link estimates kept: %v", err)
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		t.Fatal(err)
	}
	measured := 0
	for _, r := range kept.Nodes {
		if r.Up > 0 {
			measured++
		}
	}
	if measured < 4 || kept.Grid == "" || strings.Contains(string(b), inv.Secret.String()) {
		t.Fatalf("links.json: %d nodes with an upload estimate (want 4 or more), grid %q, or it names the secret:\n%s", measured, kept.Grid, b)
	}
	_, log, err = g.quilt(nil, append([]string{"put", "-v", "--helper", inv.Addrs[0], "--helper-auto"}, append(enc, in)...)...)
	if err != nil {
		t.Fatalf("put --helper-auto: %v\n%s", err, log)
	}
	if !strings.Contains(log, "path: ") || strings.Contains(log, "nodes measured") {
		t.Errorf("put --helper-auto in a new process did not start from the kept estimates:\n%s", log)
	}
	// --helper auto finds the one node that runs a helper.
	_, log, err = g.quilt(nil, append([]string{"put", "-v", "--helper", "auto"}, append(enc, in)...)...)
	if err != nil {
		t.Fatalf("put --helper auto: %v\n%s", err, log)
	}
	if !strings.Contains(log, "path: helper") || !strings.Contains(log, "of 1 helpers") {
		t.Errorf("put -v --helper auto did not go through node 0's helper:\n%s", log)
	}
	// A get keeps the downlink it measured too (the 2 MiB file is read
	// from several holders at once), and the next command starts from it.
	if _, log, err := g.quilt(nil, "get", strings.TrimSpace(capOut), "-o", filepath.Join(g.base, "out")); err != nil {
		t.Fatalf("get: %v\n%s", err, log)
	}
	kept = linksFile{}
	if b, err = os.ReadFile(filepath.Join(g.base, "home", "links.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		t.Fatal(err)
	}
	if kept.Downlink <= 0 {
		t.Errorf("links.json after a get of 2 MiB keeps no downlink estimate:\n%s", b)
	}
	if err := os.WriteFile(filepath.Join(g.base, "home", "links.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, log, err := g.quilt(nil, append([]string{"put"}, append(enc, in)...)...); err != nil {
		t.Fatalf("put with a damaged links.json: %v\n%s", err, log)
	}
}
