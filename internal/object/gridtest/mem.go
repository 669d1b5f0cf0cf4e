package gridtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Mem is an in-process object.Grid: one in-memory share store
// (sharestore.Mem) per node, no network. It passes the suite, so unit
// tests of the object layer may use it in place of real nodes.
type Mem struct {
	mu     sync.Mutex
	ids    []string
	zones  map[string]string
	stores map[string]*sharestore.Mem
	down   map[string]bool
}

var _ object.Grid = (*Mem)(nil)

// NewMem returns a grid of one node per spec, named "mem-0", "mem-1", …
func NewMem(nodes []NodeSpec) *Mem {
	m := &Mem{zones: map[string]string{}, stores: map[string]*sharestore.Mem{}, down: map[string]bool{}}
	for i, n := range nodes {
		id := fmt.Sprintf("mem-%d", i)
		m.ids = append(m.ids, id)
		m.zones[id] = n.Zone
		m.stores[id] = sharestore.NewMem(n.Capacity)
	}
	return m
}

// Store returns node id's store (nil if there is no such node), for a
// test to inspect or damage.
func (m *Mem) Store(id string) *sharestore.Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stores[id]
}

// SetDown stops or restarts node id: a node that is down is not listed
// and every call to it fails.
func (m *Mem) SetDown(id string, down bool) {
	m.mu.Lock()
	m.down[id] = down
	m.mu.Unlock()
}

// StopZone stops the node of a zone (see SetDown).
func (m *Mem) StopZone(zone string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, z := range m.zones {
		if z == zone {
			m.down[id] = true
		}
	}
}

// store returns the store of a node that is up.
func (m *Mem) store(ctx context.Context, id string) (*sharestore.Mem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.stores[id]
	if !ok || m.down[id] {
		return nil, fmt.Errorf("gridtest: node %.8s is not reachable", id)
	}
	return s, nil
}

// Nodes implements object.Grid.
func (m *Mem) Nodes(ctx context.Context) ([]object.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []object.Node
	for _, id := range m.ids {
		if !m.down[id] {
			u := m.stores[id].Usage()
			out = append(out, object.Node{ID: id, Zone: m.zones[id], Free: u.Free, Used: u.Used})
		}
	}
	return out, nil
}

// PutShare implements object.Grid.
func (m *Mem) PutShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) error {
	s, err := m.store(ctx, node)
	if err != nil {
		return err
	}
	_, err = s.Put(ctx, key, r, size, lease)
	return err
}

// GetShare implements object.Grid: as a node, a range that starts at or
// past the end of the share is an error, and one that runs past it ends
// with the share.
func (m *Mem) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	s, err := m.store(ctx, node)
	if err != nil {
		return nil, err
	}
	sh, err := s.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer sh.Close()
	size := sh.Info().Size
	if off < 0 || off >= size {
		return nil, fmt.Errorf("gridtest: node %.8s: range from %d outside the share's %d bytes", node, off, size)
	}
	end := size
	if n >= 0 {
		end = min(off+n, size)
	}
	b := make([]byte, end-off)
	if _, err := sh.ReadAt(b, off); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// ListShares implements object.Grid.
func (m *Mem) ListShares(ctx context.Context, node string, si sharefile.SI) ([]int, error) {
	s, err := m.store(ctx, node)
	if err != nil {
		return nil, err
	}
	infos, err := s.List(ctx, si)
	out := make([]int, len(infos))
	for i, in := range infos {
		out[i] = in.Share
	}
	return out, err
}

// DeleteShare implements object.Grid.
func (m *Mem) DeleteShare(ctx context.Context, node string, key sharestore.Key, secret []byte) error {
	s, err := m.store(ctx, node)
	if err != nil {
		return err
	}
	_, err = s.Delete(ctx, key, secret)
	return err
}
