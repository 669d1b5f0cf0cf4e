package object

import (
	"context"
	"io"
	"time"

	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// NodeGrid is the Grid of real storage nodes, reached through a
// node.Client.
type NodeGrid struct {
	Client *node.Client
	// MaxAge is how stale the member list may be; default 2s.
	MaxAge time.Duration
}

var _ Grid = NodeGrid{}

// Nodes implements Grid: the members a node reports alive or suspect
// (memberlist still counts a suspect live, and a slow node is still worth
// asking; one that fails is worked around).
func (g NodeGrid) Nodes(ctx context.Context) ([]Node, error) {
	age := g.MaxAge
	if age == 0 {
		age = 2 * time.Second
	}
	ms, err := g.Client.Members(ctx, age)
	if err != nil {
		return nil, err
	}
	var out []Node
	for _, m := range ms {
		if m.State == member.Alive || m.State == member.Suspect {
			out = append(out, Node{ID: m.ID, Zone: m.Zone, Free: m.Free, Used: m.Used, Coord: m.Coord})
		}
	}
	return out, nil
}

// PutShare implements Grid.
func (g NodeGrid) PutShare(ctx context.Context, n string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) error {
	_, err := g.Client.PutShare(ctx, n, key, r, size, lease)
	return err
}

// GetShare implements Grid.
func (g NodeGrid) GetShare(ctx context.Context, n string, key sharestore.Key, off, length int64) (io.ReadCloser, error) {
	return g.Client.GetShare(ctx, n, key, off, length)
}

// ListShares implements Grid.
func (g NodeGrid) ListShares(ctx context.Context, n string, si sharefile.SI) ([]int, error) {
	infos, err := g.Client.ListShares(ctx, n, si, false)
	out := make([]int, len(infos))
	for i, in := range infos {
		out[i] = in.Share
	}
	return out, err
}

// ListTrailers implements TrailerGrid.
func (g NodeGrid) ListTrailers(ctx context.Context, n string, si sharefile.SI) (map[int][]byte, error) {
	infos, err := g.Client.ListShares(ctx, n, si, true)
	if err != nil {
		return nil, err
	}
	out := make(map[int][]byte, len(infos))
	for _, in := range infos {
		out[in.Share] = in.Trailer
	}
	return out, nil
}

var _ TrailerGrid = NodeGrid{}

// DeleteShare implements Grid.
func (g NodeGrid) DeleteShare(ctx context.Context, n string, key sharestore.Key, secret []byte) error {
	return g.Client.DeleteShare(ctx, n, key, secret)
}
