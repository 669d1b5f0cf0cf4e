package lab

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// TestWriteReadSizesAndTrace runs write-read on perfect links with the
// sizes, client, segment size and number of runs chosen, and checks
// that the table has exactly those cases, each run that many times, and
// that the trace names the holders of the read of several segments.
func TestWriteReadSizesAndTrace(t *testing.T) {
	out := t.TempDir()
	var log bytes.Buffer
	env := &Env{Quick: true, Out: out, Work: t.TempDir(), Seed: 1, Scenario: scenario.LAN(10), Log: &log,
		Sizes: []int64{1 << 20}, Clients: []string{"client"}, SegmentSize: 256 << 10, Trace: true, Runs: 2}
	if err := Run(context.Background(), "write-read", env); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "write-read.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1][3] != "1048576" || rows[1][1] != "client" || rows[1][4] != "2" {
		t.Fatalf("rows %v; want one of 1 MiB from client, run twice", rows)
	}
	if !strings.Contains(log.String(), "holders at once") || !strings.Contains(log.String(), "  s0") {
		t.Errorf("no trace of the read's holders in the log:\n%s", log.String())
	}
}

// TestWriteReadUnknownClient: a client the scenario lacks is an error
// that names it, before any node starts.
func TestWriteReadUnknownClient(t *testing.T) {
	env := &Env{Quick: true, Out: t.TempDir(), Work: t.TempDir(), Seed: 1, Scenario: scenario.LAN(3), Clients: []string{"nobody"}}
	err := Run(context.Background(), "write-read", env)
	if err == nil || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("err %v; want one naming the client", err)
	}
}
