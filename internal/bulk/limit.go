package bulk

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/quilt-grid/quilt/internal/clock"
)

// Limiter caps the bytes per second of every stream that passes through
// it together (--bwlimit is a total, not a per-stream rate). It is a
// token bucket (golang.org/x/time/rate) read against an injected clock,
// so a test can move time by hand. Safe for concurrent use.
type Limiter struct {
	lim      *rate.Limiter
	clock    clock.Clock
	burst    int
	consumed atomic.Int64
}

// NewLimiter returns a Limiter of bytesPerSec (> 0) on clk (nil: the
// real clock). The bucket holds a tenth of a second of traffic (at least
// 512 bytes, at most 64 KiB), so a stream never gets ahead of the rate
// by more than that.
func NewLimiter(bytesPerSec int64, clk clock.Clock) *Limiter {
	burst := bytesPerSec / 10
	burst = max(burst, 512)
	burst = min(burst, 64<<10)
	return &Limiter{lim: rate.NewLimiter(rate.Limit(bytesPerSec), int(burst)), clock: clock.Or(clk), burst: int(burst)}
}

// Consumed is the number of bytes that have passed the limiter.
func (l *Limiter) Consumed() int64 { return l.consumed.Load() }

// wait blocks until n bytes (n <= burst) may pass, or ctx ends.
func (l *Limiter) wait(ctx context.Context, n int) error {
	now := l.clock.Now()
	r := l.lim.ReserveN(now, n)
	if !r.OK() {
		return fmt.Errorf("bulk: %d bytes exceed the limiter's burst of %d", n, l.burst)
	}
	if d := r.DelayFrom(now); d > 0 {
		t := l.clock.NewTimer(d)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			r.CancelAt(l.clock.Now())
			return ctx.Err()
		}
	}
	l.consumed.Add(int64(n))
	return nil
}

// chunk is how much one Read may take at once.
func (l *Limiter) chunk(p []byte) []byte {
	if l != nil && len(p) > l.burst {
		return p[:l.burst]
	}
	return p
}

// Reader returns r read no faster than the limit; a nil Limiter returns r.
func (l *Limiter) Reader(ctx context.Context, r io.Reader) io.Reader {
	if l == nil {
		return r
	}
	return &limitedReader{ctx: ctx, r: r, l: l}
}

type limitedReader struct {
	ctx context.Context
	r   io.Reader
	l   *Limiter
}

func (lr *limitedReader) Read(p []byte) (int, error) {
	// Read first, then wait for what was read: the bytes are charged
	// exactly, and the caller sees them only once the limit allows.
	n, err := lr.r.Read(lr.l.chunk(p))
	if n > 0 {
		if werr := lr.l.wait(lr.ctx, n); werr != nil {
			return 0, werr
		}
	}
	return n, err
}
