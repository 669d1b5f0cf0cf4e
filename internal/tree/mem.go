package tree

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemStore is a Store in memory, for unit tests of the tree and of front
// ends. A copy shares the source's bytes (by reference, as a grid
// object's capability is shared), and a batch is applied at once.
type MemStore struct {
	mu       sync.Mutex
	objs     map[string]memObj
	watchers map[chan []string]bool
	now      func() time.Time
}

type memObj struct {
	data []byte // shared by copies, never written after Put
	meta map[string]string
	mod  time.Time
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{objs: map[string]memObj{}, watchers: map[chan []string]bool{}, now: time.Now}
}

func (m *MemStore) object(k string, o memObj) Object {
	return Object{Key: k, Size: int64(len(o.data)), Modified: o.mod, Meta: maps.Clone(o.meta)}
}

// Stat returns the object at key.
func (m *MemStore) Stat(ctx context.Context, key string) (Object, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	if !ok {
		return Object{}, fmt.Errorf("tree: key %q: %w", key, fs.ErrNotExist)
	}
	return m.object(key, o), nil
}

// List lists keys as S3's ListObjects does.
func (m *MemStore) List(ctx context.Context, prefix, delimiter, after string, limit int) (Listing, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := slices.Sorted(maps.Keys(m.objs))
	var l Listing
	if limit <= 0 {
		return l, nil
	}
	skipUnder := ""
	if delimiter != "" && strings.HasPrefix(after, prefix) && strings.HasSuffix(after, delimiter) &&
		strings.Contains(after[len(prefix):], delimiter) {
		skipUnder = after
	}
	i, _ := slices.BinarySearch(keys, max(prefix, after))
	for ; i < len(keys); i++ {
		k := keys[i]
		if !strings.HasPrefix(k, prefix) {
			break
		}
		if k <= after || skipUnder != "" && strings.HasPrefix(k, skipUnder) {
			continue
		}
		if delimiter != "" {
			if j := strings.Index(k[len(prefix):], delimiter); j >= 0 {
				cp := k[:len(prefix)+j+len(delimiter)]
				if len(l.Prefixes) > 0 && l.Prefixes[len(l.Prefixes)-1] == cp {
					continue
				}
				if len(l.Objects)+len(l.Prefixes) == limit {
					l.More = true
					break
				}
				l.Prefixes = append(l.Prefixes, cp)
				skipUnder = cp
				continue
			}
		}
		if len(l.Objects)+len(l.Prefixes) == limit {
			l.More = true
			break
		}
		l.Objects = append(l.Objects, m.object(k, m.objs[k]))
	}
	return l, nil
}

// Open reads a range of an object.
func (m *MemStore) Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	m.mu.Lock()
	o, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("tree: key %q: %w", key, fs.ErrNotExist)
	}
	n := int64(len(o.data))
	if length < 0 || off+length > n {
		length = n - off
	}
	if off < 0 || off > n {
		return nil, fmt.Errorf("tree: range %d+%d outside %d bytes: %w", off, length, n, fs.ErrInvalid)
	}
	return io.NopCloser(bytes.NewReader(o.data[off : off+length])), nil
}

// Put stores an object.
func (m *MemStore) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (Object, error) {
	if key == "" {
		return Object{}, fmt.Errorf("tree: empty key: %w", fs.ErrInvalid)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return Object{}, err
	}
	if size >= 0 && int64(len(data)) != size {
		return Object{}, fmt.Errorf("tree: %d bytes, %d announced: %w", len(data), size, io.ErrUnexpectedEOF)
	}
	m.mu.Lock()
	o := memObj{data: data, meta: maps.Clone(meta), mod: m.now().UTC()}
	m.objs[key] = o
	obj := m.object(key, o)
	m.notify([]string{key})
	m.mu.Unlock()
	return obj, nil
}

// Apply commits a batch atomically.
func (m *MemStore) Apply(ctx context.Context, ops []Op) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, op := range ops {
		if op.Key == "" {
			return fmt.Errorf("tree: empty key: %w", fs.ErrInvalid)
		}
		if op.From != "" {
			if _, ok := m.objs[op.From]; !ok {
				return fmt.Errorf("tree: copy from %q: %w", op.From, fs.ErrNotExist)
			}
		}
	}
	now := m.now().UTC()
	// Copies read their sources before any write of the batch.
	srcs := map[string]memObj{}
	for _, op := range ops {
		if op.From != "" {
			srcs[op.From] = m.objs[op.From]
		}
	}
	var keys []string
	for _, op := range ops {
		switch {
		case op.Delete:
			continue
		case op.From != "":
			o := srcs[op.From]
			if op.Meta != nil {
				o.meta = maps.Clone(op.Meta)
			}
			o.mod = now
			m.objs[op.Key] = o
		default:
			m.objs[op.Key] = memObj{data: nil, meta: maps.Clone(op.Meta), mod: now}
		}
		keys = append(keys, op.Key)
	}
	for _, op := range ops {
		if op.Delete {
			if _, ok := m.objs[op.Key]; ok {
				delete(m.objs, op.Key)
				keys = append(keys, op.Key)
			}
		}
	}
	m.notify(keys)
	return nil
}

// notify sends keys to every watcher that has room; m.mu is held.
func (m *MemStore) notify(keys []string) {
	if len(keys) == 0 {
		return
	}
	for ch := range m.watchers {
		select {
		case ch <- keys:
		default:
		}
	}
}

// Watch sends the keys of every Put and Apply until ctx ends.
func (m *MemStore) Watch(ctx context.Context) (<-chan []string, error) {
	ch := make(chan []string, 64)
	m.mu.Lock()
	m.watchers[ch] = true
	m.mu.Unlock()
	go func() {
		<-ctx.Done()
		m.mu.Lock()
		delete(m.watchers, ch)
		close(ch)
		m.mu.Unlock()
	}()
	return ch, nil
}

// Len returns the number of keys, for tests.
func (m *MemStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objs)
}
