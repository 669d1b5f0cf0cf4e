package sharestore

import (
	"bytes"
	"context"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

// Mem is an in-memory Store for unit tests. It behaves as Disk does,
// minus durability.
type Mem struct {
	// CheckBlocks is DiskOptions.CheckBlocks; set it before the first Put.
	CheckBlocks bool

	space  space
	mu     sync.Mutex
	shares map[Key]*memShare
}

type memShare struct {
	info   Info
	leases []Lease
	data   []byte
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty in-memory store; capacity 0 means no limit.
func NewMem(capacity int64) *Mem {
	return &Mem{space: space{capacity: capacity}, shares: map[Key]*memShare{}}
}

// Put implements Store.
func (m *Mem) Put(ctx context.Context, key Key, r io.Reader, size int64, lease Lease) (Info, error) {
	var buf bytes.Buffer
	c, n, err := receive(ctx, key, &buf, r, size, &m.space, m.CheckBlocks)
	stored := false
	defer func() { m.space.settle(n, stored) }()
	if err != nil {
		return Info{}, err
	}
	si, err := finish(c, bytes.NewReader(buf.Bytes()), n)
	if err != nil {
		return Info{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var leases []Lease
	if old, ok := m.shares[key]; ok {
		if _, err := scrub(bytes.NewReader(old.data), old.info); err == nil {
			if old.info.Root != si.Root {
				return Info{}, ErrExists
			}
			leases, err := addLease(old.leases, lease)
			if err != nil {
				return Info{}, err
			}
			old.leases = leases
			return old.info, nil
		}
		// The copy here is damaged: the new share replaces it, once every
		// block of it matches its hash.
		if err := verifyWhole(bytes.NewReader(buf.Bytes()), n, si.Root); err != nil {
			return Info{}, err
		}
		leases = old.leases
	}
	leases, err = addLease(leases, lease)
	if err != nil {
		return Info{}, err
	}
	if old, ok := m.shares[key]; ok {
		m.space.remove(old.info.Size)
	}
	info := Info{Key: key, Size: n, Root: si.Root, Created: time.Now()}
	m.shares[key] = &memShare{info: info, leases: leases, data: buf.Bytes()}
	stored = true
	return info, nil
}

type memReader struct {
	*bytes.Reader
	info Info
}

func (r memReader) Info() Info   { return r.info }
func (r memReader) Close() error { return nil }

// Open implements Store.
func (m *Mem) Open(ctx context.Context, key Key) (Share, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return nil, ErrNotFound
	}
	return memReader{bytes.NewReader(s.data), s.info}, nil
}

// List implements Store.
func (m *Mem) List(ctx context.Context, si sharefile.SI) ([]Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Info
	for k, s := range m.shares {
		if k.SI == si {
			out = append(out, s.info)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Share < out[j].Share })
	return out, nil
}

// Walk implements Store.
func (m *Mem) Walk(ctx context.Context, fn func(Info) error) error {
	m.mu.Lock()
	infos := make([]Info, 0, len(m.shares))
	for _, s := range m.shares {
		infos = append(infos, s.info)
	}
	m.mu.Unlock()
	for _, i := range infos {
		if err := fn(i); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements Store.
func (m *Mem) Delete(ctx context.Context, key Key, secret []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return false, ErrNotFound
	}
	leases, err := cancelLease(s.leases, secret)
	if err != nil {
		return false, err
	}
	if len(leases) > 0 {
		s.leases = leases
		return false, nil
	}
	delete(m.shares, key)
	m.space.remove(s.info.Size)
	return true, nil
}

// Remove implements Store.
func (m *Mem) Remove(ctx context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return ErrNotFound
	}
	delete(m.shares, key)
	m.space.remove(s.info.Size)
	return nil
}

// Renew implements Store.
func (m *Mem) Renew(ctx context.Context, key Key, secret []byte, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return ErrNotFound
	}
	leases, _, err := renewLeases(s.leases, secret, expires)
	if err != nil {
		return err
	}
	s.leases = leases
	return nil
}

// AddLease implements Store.
func (m *Mem) AddLease(ctx context.Context, key Key, lease Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return ErrNotFound
	}
	leases, err := addLease(s.leases, lease)
	if err != nil {
		return err
	}
	s.leases = leases
	return nil
}

// Leases implements Store.
func (m *Mem) Leases(ctx context.Context, key Key) ([]Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return nil, ErrNotFound
	}
	return append([]Lease(nil), s.leases...), nil
}

// Expire implements Store.
func (m *Mem) Expire(ctx context.Context, before time.Time) (Swept, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sw Swept
	for k, s := range m.shares {
		left := dropExpired(s.leases, before)
		sw.Leases += len(s.leases) - len(left)
		s.leases = left
		if len(left) == 0 {
			delete(m.shares, k)
			m.space.remove(s.info.Size)
			sw.Shares++
			sw.Bytes += s.info.Size
		}
	}
	return sw, nil
}

// Scrub implements Store.
func (m *Mem) Scrub(ctx context.Context, key Key) (Info, error) {
	m.mu.Lock()
	s, ok := m.shares[key]
	m.mu.Unlock()
	if !ok {
		return Info{}, ErrNotFound
	}
	return scrub(bytes.NewReader(s.data), s.info)
}

// Usage implements Store.
func (m *Mem) Usage() Usage { return m.space.usage() }

// Corrupt flips one bit of a stored share's byte at off, as a failing disk
// would. It is for tests.
func (m *Mem) Corrupt(key Key, off int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.shares[key]
	if !ok {
		return ErrNotFound
	}
	s.data[off] ^= 1
	return nil
}
