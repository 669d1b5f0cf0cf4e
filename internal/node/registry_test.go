package node_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// The repair registry keeps one line per storage index, replacing an
// entry given again, and refuses an empty entry, one of several lines and
// one too long, keeping what it had.
func TestRepairRegistry(t *testing.T) {
	ctx := context.Background()
	n, c := startNode(t, node.Config{ScrubEvery: -1})
	id := string(n.ID())
	var a, b sharefile.SI
	a[0], b[0] = 1, 2
	for _, e := range []struct {
		si    sharefile.SI
		entry string
	}{{a, "quilt:v:first"}, {b, "quilt:v:other"}, {a, "quilt:v:again"}} {
		if err := c.Register(ctx, id, e.si, e.entry); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"", "two\nlines", strings.Repeat("x", node.MaxRegistryEntry+1)} {
		if err := c.Register(ctx, id, a, bad); !errors.Is(err, node.ErrBadRequest) {
			t.Errorf("entry of %d bytes: %v, want ErrBadRequest", len(bad), err)
		}
	}
	reg, err := n.Registered()
	if err != nil {
		t.Fatal(err)
	}
	if len(reg) != 2 || reg[a] != "quilt:v:again" || reg[b] != "quilt:v:other" {
		t.Fatalf("registry: %v", reg)
	}
}

// A batch of registry entries is kept whole or not at all: a batch with
// one bad entry, or too many entries, is refused and changes nothing.
func TestRepairRegistryBatch(t *testing.T) {
	ctx := context.Background()
	n, c := startNode(t, node.Config{ScrubEvery: -1})
	id := string(n.ID())
	batch := make([]node.RegistryEntry, 300)
	for i := range batch {
		batch[i].SI[0], batch[i].SI[1] = byte(i), byte(i>>8)
		batch[i].Entry = fmt.Sprintf("quilt:v:%d", i)
	}
	if err := c.RegisterMany(ctx, id, batch); err != nil {
		t.Fatal(err)
	}
	var x sharefile.SI
	x[15] = 9
	bad := []node.RegistryEntry{{SI: x, Entry: "quilt:v:fine"}, {SI: batch[0].SI, Entry: "two\nlines"}}
	if err := c.RegisterMany(ctx, id, bad); !errors.Is(err, node.ErrBadRequest) {
		t.Errorf("batch with a bad entry: %v, want ErrBadRequest", err)
	}
	if err := c.RegisterMany(ctx, id, make([]node.RegistryEntry, node.MaxRegistryBatch+1)); err == nil {
		t.Error("a batch of more than MaxRegistryBatch entries was sent")
	}
	reg, err := n.Registered()
	if err != nil {
		t.Fatal(err)
	}
	if len(reg) != len(batch) {
		t.Fatalf("registry has %d entries, want %d", len(reg), len(batch))
	}
	for _, e := range batch {
		if reg[e.SI] != e.Entry {
			t.Fatalf("entry of %x: %q, want %q", e.SI[:2], reg[e.SI], e.Entry)
		}
	}
	if err := n.Unregister(batch[7].SI); err != nil {
		t.Fatal(err)
	}
	if reg, _ := n.Registered(); len(reg) != len(batch)-1 || reg[batch[7].SI] != "" {
		t.Fatalf("after Unregister: %d entries, entry %q", len(reg), reg[batch[7].SI])
	}
}

// A node started on the data directory of an earlier node, which kept one
// file per registry entry in DIR/repair/, moves the entries into its
// database and removes the directory; they are still there after a
// restart, and a file that is not an entry is left out.
func TestRepairRegistryMovesOneFilePerEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var a, b sharefile.SI
	a[0], b[0] = 0xaa, 0xbb
	old := filepath.Join(dir, "repair")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		hex.EncodeToString(a[:]): "quilt:v:a\n",
		hex.EncodeToString(b[:]): "quilt:v:b\n",
		"not-an-entry":           "x\n",
	} {
		if err := os.WriteFile(filepath.Join(old, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := func() *node.Node {
		n, err := node.Start(ctx, node.Config{Dir: dir, Listen: "127.0.0.1:0", TuneGossip: testgrid.FastGossip, ScrubEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for round := range 2 {
		n := start()
		reg, err := n.Registered()
		n.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(reg) != 2 || reg[a] != "quilt:v:a" || reg[b] != "quilt:v:b" {
			t.Fatalf("start %d: registry %v", round+1, reg)
		}
		if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("start %d: the one-file-per-entry directory is still there: %v", round+1, err)
		}
	}
}
