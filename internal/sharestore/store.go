// Package sharestore keeps one node's shares: put, read byte ranges, list,
// keep each share's leases (add, renew and cancel them with their
// holders' secrets, and delete a share once no lease is left or all have
// expired), enforce a capacity, and check shares against their hash trees
// (scrub) without any key.
//
// A share becomes visible only once it has arrived whole and passed the
// frame check of package sharefile (header, length, trailer, and the hash
// tree from its block hashes up to the object root it claims): a crash or
// a dropped connection mid-upload never leaves a share that looks
// complete. Whether every block matches its hash is checked by every
// reader and by Scrub; a store made to (DiskOptions.CheckBlocks,
// Mem.CheckBlocks) also checks it on arrival, at the cost of hashing every
// byte it stores. Disk is the real store; Mem is an in-memory fake for
// unit tests. Both pass the suite in sharestoretest.
package sharestore

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

var (
	// ErrNotFound means the store holds no such share.
	ErrNotFound = errors.New("sharestore: share not found")
	// ErrFull means storing the share would go over the node's capacity
	// or the disk is full.
	ErrFull = errors.New("sharestore: node is full")
	// ErrForbidden means the secret given opens no lease of the share.
	ErrForbidden = errors.New("sharestore: the secret opens no lease of the share")
	// ErrCorrupt means a share failed its check: on upload, it is refused;
	// on scrub, it should be repaired from other shares.
	ErrCorrupt = errors.New("sharestore: share is corrupt")
	// ErrExists means a different share is already stored under the key.
	ErrExists = errors.New("sharestore: a different share exists under this key")
)

// Key names a share: the object's storage index and the share number.
type Key struct {
	SI    sharefile.SI
	Share int
}

// String returns the key as "sihex/share".
func (k Key) String() string { return fmt.Sprintf("%x/%d", k.SI[:], k.Share) }

// ParseSI parses a storage index written as hex.
func ParseSI(s string) (sharefile.SI, error) {
	var si sharefile.SI
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(si) {
		return si, fmt.Errorf("sharestore: bad storage index %q", s)
	}
	copy(si[:], b)
	return si, nil
}

// A Lease keeps a share on a node (as in Tahoe-LAFS). Its holder knows two
// secrets; the node keeps only their hashes: ID, the hash of the renew
// secret, which extends the lease (Store.Renew), and Cancel, the hash of
// the cancel secret, which removes it (Store.Delete). A share stays while
// it has a lease that has not expired; Store.Expire deletes one whose
// leases have all expired, and Delete the one whose last lease it
// cancels.
type Lease struct {
	ID      [32]byte  // SHA-256 of the renew secret
	Cancel  [32]byte  // SHA-256 of the cancel secret
	Expires time.Time // zero: never
}

// LeaseFor returns a lease that never expires, opened by secret both to
// renew and to cancel: the one lease of a share stored before leases had
// expiry times, and what a client that sends a single secret gets.
func LeaseFor(secret []byte) Lease {
	h := SecretHash(secret)
	return Lease{ID: h, Cancel: h}
}

// SecretHash is the hash a node keeps of a renew or cancel secret.
func SecretHash(secret []byte) [32]byte { return sha256.Sum256(secret) }

// MaxLeases bounds the leases of one share: a further lease is refused
// with ErrFull.
const MaxLeases = 64

func hashOpens(h [32]byte, secret []byte) bool {
	s := SecretHash(secret)
	return subtle.ConstantTimeCompare(h[:], s[:]) == 1
}

// expired says whether the lease ended before t.
func (l Lease) expired(t time.Time) bool { return !l.Expires.IsZero() && l.Expires.Before(t) }

// addLease returns leases with l added, or, if a lease of l's ID is there,
// with that lease's expiry moved to l's if later (or to never).
func addLease(leases []Lease, l Lease) ([]Lease, error) {
	out := append([]Lease(nil), leases...)
	for i := range out {
		if out[i].ID == l.ID {
			if !out[i].Expires.IsZero() && (l.Expires.IsZero() || l.Expires.After(out[i].Expires)) {
				out[i].Expires = l.Expires
			}
			return out, nil
		}
	}
	if len(out) >= MaxLeases {
		return nil, fmt.Errorf("%w: the share has %d leases already", ErrFull, len(out))
	}
	return append(out, l), nil
}

// renewLeases moves the expiry of the lease that secret renews to
// expires, if later. A share with a lease that never expires needs no
// renewal: renewing it succeeds and changes nothing. changed says whether
// the leases must be written.
func renewLeases(leases []Lease, secret []byte, expires time.Time) (out []Lease, changed bool, err error) {
	out = append([]Lease(nil), leases...)
	forever := false
	for i := range out {
		if hashOpens(out[i].ID, secret) {
			if !out[i].Expires.IsZero() && expires.After(out[i].Expires) {
				out[i].Expires = expires
				changed = true
			}
			return out, changed, nil
		}
		forever = forever || out[i].Expires.IsZero()
	}
	if forever {
		return out, false, nil
	}
	return nil, false, ErrForbidden
}

// cancelLease removes the leases that secret cancels; ErrForbidden if
// none.
func cancelLease(leases []Lease, secret []byte) ([]Lease, error) {
	var out []Lease
	for _, l := range leases {
		if !hashOpens(l.Cancel, secret) {
			out = append(out, l)
		}
	}
	if len(out) == len(leases) {
		return nil, ErrForbidden
	}
	return out, nil
}

// dropExpired returns the leases that had not expired by before.
func dropExpired(leases []Lease, before time.Time) []Lease {
	var out []Lease
	for _, l := range leases {
		if !l.expired(before) {
			out = append(out, l)
		}
	}
	return out
}

// Swept is what an expiry sweep (Store.Expire) removed.
type Swept struct {
	Leases int   // leases removed
	Shares int   // shares deleted, their last lease gone
	Bytes  int64 // bytes of those shares
}

// Info describes a stored share.
type Info struct {
	Key
	Size    int64          // bytes of the share
	Root    sharefile.Hash // the object root the share hashed to on arrival
	Created time.Time
}

// Share is an open stored share. ReadAt is safe for concurrent use.
type Share interface {
	io.ReaderAt
	io.Closer
	Info() Info
}

// Usage is how much a store holds and may hold.
type Usage struct {
	Used     int64 // bytes of stored shares
	Capacity int64 // 0: no limit but the disk's
	Free     int64 // bytes that may still be stored
	Shares   int
}

// Store is one node's share storage. All methods are safe for concurrent
// use.
type Store interface {
	// Put reads a whole share from r and stores it under key, with lease,
	// if it passes the check (see the package doc) and fits. It returns
	// once the share is durable. size is the share's length if the sender knows it, else
	// -1: a known size is refused at once if it does not fit, and must then
	// be exact.
	//
	// If a share is stored under key already and is sound (it passes
	// Scrub), the same share again keeps it as it is, adding lease to its
	// leases (or renewing the lease of the same ID), and another is
	// refused with ErrExists. If the stored copy is damaged, the new share
	// replaces it, keeping the leases of the old copy that can be read and
	// adding lease, once every block of the new one has matched its hash:
	// that is how a repairer puts back a share where a failing disk
	// damaged it.
	Put(ctx context.Context, key Key, r io.Reader, size int64, lease Lease) (Info, error)
	// Open opens a stored share for reading.
	Open(ctx context.Context, key Key) (Share, error)
	// List returns the shares held of one object, by share number.
	List(ctx context.Context, si sharefile.SI) ([]Info, error)
	// Walk calls fn for every stored share, in no particular order.
	Walk(ctx context.Context, fn func(Info) error) error
	// Delete cancels the leases of a share whose Cancel the secret opens
	// (ErrForbidden if none), and removes the share once it has no lease
	// left; removed says whether it did.
	Delete(ctx context.Context, key Key, secret []byte) (removed bool, err error)
	// Remove removes a share whatever its leases: how a node being
	// drained drops its copy of a share once a copy on another node,
	// with the same leases, is durable. ErrNotFound if there is none.
	Remove(ctx context.Context, key Key) error
	// Renew moves the expiry of the share's lease whose ID the secret
	// opens to expires, if that is later (ErrForbidden if no lease opens;
	// a share with a lease that never expires needs no renewal, and
	// renewing it succeeds).
	Renew(ctx context.Context, key Key, secret []byte, expires time.Time) error
	// AddLease gives a stored share lease, or, if it has a lease of the
	// same ID, moves that lease's expiry to lease's if later (as Tahoe-LAFS's
	// add-lease): how a second party that keeps an object (another
	// gateway of the same buckets) takes a lease of its own on shares it
	// did not upload.
	AddLease(ctx context.Context, key Key, lease Lease) error
	// Leases returns a share's leases.
	Leases(ctx context.Context, key Key) ([]Lease, error)
	// Expire removes every lease that expired before the time given, and
	// deletes the shares left with none.
	Expire(ctx context.Context, before time.Time) (Swept, error)
	// Scrub re-reads a share and checks it against its hash tree and the
	// root recorded on arrival.
	Scrub(ctx context.Context, key Key) (Info, error)
	// Usage reports used and free bytes.
	Usage() Usage
}

// ctxReader fails reads once ctx is done, so an abandoned upload stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// space keeps a store's byte count: used by stored shares, reserved by
// uploads in flight. Uploads reserve as bytes arrive, so concurrent uploads
// cannot together go over the capacity.
type space struct {
	mu       sync.Mutex
	capacity int64        // 0: no limit but diskFree
	diskFree func() int64 // free bytes of the medium; nil: unlimited
	used     int64
	reserved int64
	shares   int
}

// freeLocked returns the bytes that may still be reserved.
func (s *space) freeLocked() int64 {
	free := int64(1) << 62
	if s.capacity > 0 {
		free = s.capacity - s.used
	}
	if s.diskFree != nil {
		free = min(free, s.diskFree())
	}
	return max(free-s.reserved, 0)
}

// reserve claims n more bytes for an upload of key.
func (s *space) reserve(key Key, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if free := s.freeLocked(); n > free {
		return fmt.Errorf("%w: no room for share %s (%d bytes free)", ErrFull, key, free)
	}
	s.reserved += n
	return nil
}

// settle ends an upload's reservation of n bytes; stored says whether the
// share was kept.
func (s *space) settle(n int64, stored bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved -= n
	if stored {
		s.used += n
		s.shares++
	}
}

// remove accounts for a deleted share of n bytes.
func (s *space) remove(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used -= n
	s.shares--
}

func (s *space) usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Usage{Used: s.used, Capacity: s.capacity, Free: s.freeLocked(), Shares: s.shares}
}

// receive copies a share from r to w through a checker, reserving space:
// all of size at once if it is known (>= 0), else as bytes arrive. The
// checker checks the share's frame, and its blocks too if checkBlocks. It
// returns the bytes reserved, also on error: the caller settles them.
func receive(ctx context.Context, key Key, w io.Writer, r io.Reader, size int64, sp *space, checkBlocks bool) (*sharefile.Checker, int64, error) {
	newChecker := sharefile.NewFrameChecker
	if checkBlocks {
		newChecker = sharefile.NewChecker
	}
	c := newChecker()
	var n, reserved int64
	if size >= 0 {
		if err := sp.reserve(key, size); err != nil {
			return nil, 0, err
		}
		reserved = size
	}
	// A writer with a buffer of its own (directWriter) is read into
	// directly, saving a copy of every byte.
	fw, direct := w.(interface {
		Free() []byte
		Filled(int) error
	})
	var own []byte
	if !direct {
		own = make([]byte, 256<<10)
	}
	src := ctxReader{ctx, r}
	for {
		buf := own
		if direct {
			buf = fw.Free()
		}
		// Fill the buffer: a TLS body yields ~16 KiB a read, and a write
		// syscall and reservation per record would cost more than the copy.
		m, rerr := io.ReadFull(src, buf)
		if rerr == io.ErrUnexpectedEOF {
			rerr = io.EOF
		}
		if m > 0 {
			if size < 0 {
				if err := sp.reserve(key, int64(m)); err != nil {
					return nil, reserved, err
				}
				reserved += int64(m)
			} else if n+int64(m) > size {
				return nil, reserved, fmt.Errorf("%w: share %s is longer than the %d bytes announced", ErrCorrupt, key, size)
			}
			n += int64(m)
			if _, err := c.Write(buf[:m]); err != nil {
				return nil, reserved, fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			if h, ok := c.Header(); ok && (h.SI != key.SI || h.Share != key.Share) {
				return nil, reserved, fmt.Errorf("%w: share header says %x/%d, uploaded as %s", ErrCorrupt, h.SI[:], h.Share, key)
			}
			if direct {
				if err := fw.Filled(m); err != nil {
					return nil, reserved, err
				}
			} else if _, err := w.Write(buf[:m]); err != nil {
				return nil, reserved, err
			}
		}
		if rerr == io.EOF {
			if size >= 0 && n != size {
				return nil, reserved, fmt.Errorf("%w: share %s ended after %d of the %d bytes announced", ErrCorrupt, key, n, size)
			}
			return c, n, nil
		}
		if rerr != nil {
			return nil, reserved, fmt.Errorf("sharestore: upload of %s cut off after %d bytes: %w", key, n, rerr)
		}
	}
}

// finish checks a received share, re-reading its tail from ra.
func finish(c *sharefile.Checker, ra io.ReaderAt, size int64) (sharefile.Info, error) {
	info, err := c.Finish(ra, size)
	if err != nil {
		return info, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return info, nil
}

// scrub checks a share's bytes and the root recorded for it.
func scrub(ra io.ReaderAt, info Info) (Info, error) {
	si, err := sharefile.Verify(ra, info.Size)
	if err != nil {
		return info, fmt.Errorf("%w: %s: %v", ErrCorrupt, info.Key, err)
	}
	if si.Root != info.Root {
		return info, fmt.Errorf("%w: %s no longer hashes to the object root it arrived with", ErrCorrupt, info.Key)
	}
	return info, nil
}

// verifyWhole checks every block of a share of size bytes read from ra,
// and that it hashes to root: a share that replaces a damaged copy is
// checked whole, whatever the store checks on arrival.
func verifyWhole(ra io.ReaderAt, size int64, root sharefile.Hash) error {
	si, err := sharefile.Verify(ra, size)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if si.Root != root {
		return fmt.Errorf("%w: share hashes to another root on a second look", ErrCorrupt)
	}
	return nil
}
