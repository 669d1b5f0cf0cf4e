package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// A share PUT with the header X-Quilt-Only-Share (Client.PutOnlyShare)
// is taken only if the node neither holds nor is receiving another share
// of the same object: a repairer that moves a share to a node chosen
// because it held none of the object's (rebalancing) must not leave it
// with two when another mover chose it at the same moment. The check and
// the start of the upload are one step under a lock, so of two such PUTs
// of different shares of one object at once, one is refused (`exists`).
// Other PUTs do not check, but they are counted as arriving, so an
// only-share PUT sees them.

// incoming counts the share uploads under way, by object and share.
type incoming struct {
	mu sync.Mutex
	m  map[sharefile.SI]map[int]int
}

// receiving records an upload of key under way until the returned
// function is called; with only, it first refuses (ErrExists) if another
// share of the object is stored or arriving.
func (n *Node) receiving(ctx context.Context, key sharestore.Key, only bool) (func(), error) {
	in := &n.incoming
	in.mu.Lock()
	defer in.mu.Unlock()
	if only {
		for sh, k := range in.m[key.SI] {
			if sh != key.Share && k > 0 {
				return nil, fmt.Errorf("%w: node: share %d of the object is arriving", sharestore.ErrExists, sh)
			}
		}
		held, err := n.store.List(ctx, key.SI)
		if err != nil {
			return nil, err
		}
		for _, i := range held {
			if i.Share != key.Share {
				return nil, fmt.Errorf("%w: node: holds share %d of the object", sharestore.ErrExists, i.Share)
			}
		}
	}
	if in.m == nil {
		in.m = map[sharefile.SI]map[int]int{}
	}
	if in.m[key.SI] == nil {
		in.m[key.SI] = map[int]int{}
	}
	in.m[key.SI][key.Share]++
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		if in.m[key.SI][key.Share]--; in.m[key.SI][key.Share] == 0 {
			delete(in.m[key.SI], key.Share)
			if len(in.m[key.SI]) == 0 {
				delete(in.m, key.SI)
			}
		}
	}, nil
}
