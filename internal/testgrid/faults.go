package testgrid

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Liar wraps a store so that every share it serves has damaged bytes:
// with blocksOnly, only block bytes (its trailers stay true, so a reader
// trusts it until it checks a block); otherwise every byte read.
func Liar(s sharestore.Store, blocksOnly bool) sharestore.Store {
	return liar{s, blocksOnly}
}

type liar struct {
	sharestore.Store
	blocksOnly bool
}

func (l liar) Open(ctx context.Context, key sharestore.Key) (sharestore.Share, error) {
	sh, err := l.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	limit := sh.Info().Size
	if l.blocksOnly {
		var tail [8]byte
		if _, err := sh.ReadAt(tail[:], limit-8); err == nil {
			if tl, err := sharefile.TrailerLenFromTail(tail[:]); err == nil {
				limit -= int64(tl)
			}
		}
	}
	return lyingShare{sh, limit}, nil
}

type lyingShare struct {
	sharestore.Share
	limit int64 // damage bytes before this offset
}

func (s lyingShare) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.Share.ReadAt(p, off)
	for i := 0; i < n; i++ {
		if o := off + int64(i); o >= sharefile.HeaderSize && o < s.limit && o%997 == 0 {
			p[i] ^= 0x5a
		}
	}
	return n, err
}

// Slow wraps a store so that opening a share takes d longer, as a node on
// a slow link or disk would answer.
func Slow(s sharestore.Store, d time.Duration) sharestore.Store { return slow{s, d} }

type slow struct {
	sharestore.Store
	d time.Duration
}

func (s slow) Open(ctx context.Context, key sharestore.Key) (sharestore.Share, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Open(ctx, key)
}

// Throttle wraps a store so that, while *rate is above 0, every bulk read
// of a share's bytes (16 KiB or more at once: blocks, not the small reads
// of its trailer and hashes) takes as long as *rate bytes per second
// allow, as a node behind a slow radio link answers at once but sends
// slowly. The test sets and clears *rate at will (atomically).
func Throttle(s sharestore.Store, rate *atomic.Int64) sharestore.Store {
	return throttle{s, rate}
}

type throttle struct {
	sharestore.Store
	rate *atomic.Int64
}

func (t throttle) Open(ctx context.Context, key sharestore.Key) (sharestore.Share, error) {
	sh, err := t.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return throttledShare{sh, t.rate}, nil
}

type throttledShare struct {
	sharestore.Share
	rate *atomic.Int64
}

func (s throttledShare) ReadAt(p []byte, off int64) (int, error) {
	if r := s.rate.Load(); r > 0 && len(p) >= 16<<10 {
		time.Sleep(time.Duration(float64(len(p)) / float64(r) * float64(time.Second)))
	}
	return s.Share.ReadAt(p, off)
}

// Bytes counts the share bytes a node's store takes in (uploads) and
// gives out (reads), for tests that check an operation moves no data.
type Bytes struct {
	In, Out atomic.Int64
}

// Count wraps a store so that c counts the bytes of every share put into
// it and read from it.
func Count(s sharestore.Store, c *Bytes) sharestore.Store { return counting{s, c} }

type counting struct {
	sharestore.Store
	c *Bytes
}

func (s counting) Put(ctx context.Context, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) (sharestore.Info, error) {
	return s.Store.Put(ctx, key, countReader{r, &s.c.In}, size, lease)
}

func (s counting) Open(ctx context.Context, key sharestore.Key) (sharestore.Share, error) {
	sh, err := s.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return countedShare{sh, &s.c.Out}, nil
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type countedShare struct {
	sharestore.Share
	n *atomic.Int64
}

func (s countedShare) ReadAt(p []byte, off int64) (int, error) {
	n, err := s.Share.ReadAt(p, off)
	s.n.Add(int64(n))
	return n, err
}
