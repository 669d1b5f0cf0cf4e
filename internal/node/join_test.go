package node_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// A joining node reaches the invite's node through Config.Dial, as all
// its other connections to nodes do (the lab's emulated links are
// there); it used to dial directly.
func TestJoinDialsThroughConfigDial(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	var dials atomic.Int64
	var d net.Dialer
	inv := g.Invite
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := node.Start(ctx, node.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", Version: "test", Join: &inv,
		TuneGossip: testgrid.FastGossip,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}})
	if err != nil {
		t.Fatal(err)
	}
	got := dials.Load()
	defer n.Close()
	if got == 0 {
		t.Fatal("the node joined without dialing through Config.Dial")
	}
}
