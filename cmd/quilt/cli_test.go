package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
