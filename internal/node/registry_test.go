package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharefile"
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
