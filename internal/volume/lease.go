package volume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLeaseTTL is how long a writer's lease lasts without renewal; it
// is renewed every third of that while the volume is open.
const DefaultLeaseTTL = 30 * time.Second

// Errors of the writers' leases.
var (
	// ErrLeased is returned by Open when another holder has a live lease
	// on the volume.
	ErrLeased = errors.New("volume: volume is open for writing elsewhere")
	// ErrLeaseLost is returned by a flush once this handle's lease has
	// run out or been taken: its map is not committed.
	ErrLeaseLost = errors.New("volume: writer's lease lost")
)

// leaseRecord is a writer's lease on one volume, a record of the leases'
// Catalog under the volume's name.
type leaseRecord struct {
	Holder  string    `json:"holder"`          // for people: host and process
	Owner   string    `json:"owner,omitempty"` // Config.LeaseOwner
	ID      string    `json:"id"`              // the holding Manager, random
	Expires time.Time `json:"expires"`         // the holder's clock
}

// lease is an open volume's lease, renewed in the background.
type lease struct {
	m      *Manager
	name   string
	until  atomic.Int64 // unix nanoseconds: the lease is ours until then
	lost   atomic.Bool  // someone else's lease was found
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newLeaseID names a Manager in its leases.
func newLeaseID() (holder, id string) {
	b := make([]byte, 8)
	rand.Read(b)
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid()), hex.EncodeToString(b)
}

// readLease returns the lease record of name, or nil. A damaged record is
// treated as no lease: it is replaced.
func (m *Manager) readLease(ctx context.Context, name string) (*leaseRecord, error) {
	raw, err := m.cfg.Leases.Get(ctx, name)
	if err != nil || raw == nil {
		return nil, err
	}
	var l leaseRecord
	if json.Unmarshal(raw, &l) != nil || l.ID == "" {
		return nil, nil
	}
	return &l, nil
}

// writeLease stores this Manager's lease on name until now+TTL and
// returns that time.
func (m *Manager) writeLease(ctx context.Context, name string) (time.Time, error) {
	until := time.Now().Add(m.cfg.LeaseTTL)
	body, err := json.Marshal(leaseRecord{Holder: m.holder, Owner: m.cfg.LeaseOwner, ID: m.id, Expires: until})
	if err != nil {
		return time.Time{}, err
	}
	return until, m.cfg.Leases.Put(ctx, name, body)
}

// acquireLease takes the lease on name for writing, or fails with
// ErrLeased while another holder's is live.
func (m *Manager) acquireLease(ctx context.Context, name string) (*lease, error) {
	l, err := m.readLease(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("volume %s: lease: %w", name, err)
	}
	// A live lease of another Manager refuses, unless it has this one's
	// owner: that Manager is gone (one live Manager per owner).
	if l != nil && l.ID != m.id && time.Now().Before(l.Expires) && (m.cfg.LeaseOwner == "" || l.Owner != m.cfg.LeaseOwner) {
		return nil, fmt.Errorf("%w: %s is served by %s (its lease runs to %s unless renewed)",
			ErrLeased, name, l.Holder, l.Expires.UTC().Format(time.RFC3339))
	}
	until, err := m.writeLease(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("volume %s: lease: %w", name, err)
	}
	// Read it back: of two takers at once, the one whose record stayed wins.
	if l, err = m.readLease(ctx, name); err != nil {
		return nil, fmt.Errorf("volume %s: lease: %w", name, err)
	}
	if l == nil || l.ID != m.id {
		holder := "another server"
		if l != nil {
			holder = l.Holder
		}
		return nil, fmt.Errorf("%w: %s is served by %s", ErrLeased, name, holder)
	}
	rctx, cancel := context.WithCancel(context.Background())
	ls := &lease{m: m, name: name, cancel: cancel}
	ls.until.Store(until.UnixNano())
	ls.wg.Add(1)
	go ls.renew(rctx)
	return ls, nil
}

// renew renews the lease every third of the TTL until stopped, or until
// another holder's lease is found.
func (ls *lease) renew(ctx context.Context) {
	defer ls.wg.Done()
	t := time.NewTicker(ls.m.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, ls.m.cfg.LeaseTTL/3)
		l, err := ls.m.readLease(cctx, ls.name)
		if err == nil && l != nil && l.ID != ls.m.id {
			ls.lost.Store(true)
			cancel()
			return
		}
		if err == nil {
			var until time.Time
			if until, err = ls.m.writeLease(cctx, ls.name); err == nil {
				ls.until.Store(until.UnixNano())
			}
		}
		cancel()
		// A failed renewal is retried at the next tick; the handle stops
		// committing once the lease has run out (valid).
	}
}

// valid reports whether the lease is still this handle's.
func (ls *lease) valid() bool {
	return !ls.lost.Load() && time.Now().UnixNano() < ls.until.Load()
}

// release stops renewing and deletes the lease record if it is still
// this Manager's.
func (ls *lease) release() {
	ls.cancel()
	ls.wg.Wait()
	if ls.lost.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := ls.m.readLease(ctx, ls.name); err == nil && l != nil && l.ID == ls.m.id {
		ls.m.cfg.Leases.Delete(ctx, ls.name)
	}
}
