package namespace_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/namespace/peertest"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// A local database as a peer passes the Peer suite, so unit tests may
// sync with one in place of a node.
func TestLocalPeerConformance(t *testing.T) {
	peertest.Run(t, func(t *testing.T) peertest.Target {
		db, err := namespace.OpenDB(filepath.Join(t.TempDir(), "ns.db"), namespace.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return peertest.Target{Peer: db.AsPeer(), DB: db}
	})
}

// HTTPPeer, talking to a real node's API, passes the Peer suite. The
// node is alone, so nothing takes its gossip queue but the suite.
func TestHTTPPeerConformance(t *testing.T) {
	peertest.Run(t, func(t *testing.T) peertest.Target {
		g := testgrid.New(t, testgrid.Options{Nodes: 1})
		rep := g.Replicas[0]
		nc := g.NodeClient()
		// The client dials nodes by ID once it has their addresses.
		if _, err := nc.Members(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		return peertest.Target{
			Peer: namespace.HTTPPeer{Client: nc.HTTP(), Base: "https://" + string(g.Nodes[0].ID())},
			DB:   rep.DB(),
			Gossiped: func() [][]byte {
				var out [][]byte
				for _, m := range rep.GetBroadcasts(0, 1<<20) {
					out = append(out, m[33:]) // after the tag and the namespace
				}
				return out
			},
		}
	})
}
