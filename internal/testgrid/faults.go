package testgrid

import (
	"context"
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
