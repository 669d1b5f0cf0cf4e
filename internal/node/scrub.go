package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Defaults of the scheduled scrub (Config.ScrubEvery, Config.ScrubRate).
const (
	DefaultScrubEvery = 30 * 24 * time.Hour
	DefaultScrubRate  = 4 << 20
)

// Bucket is a token bucket of bytes: Wait lets through at most rate bytes
// a second on average, in bursts of at most a twentieth of a second's
// worth, so that no second sees more than 5% over the rate. The
// scheduled scrub reads shares under one, a repairer moves shares under
// another.
type Bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// NewBucket returns a bucket of rate bytes a second (at least 1), empty.
func NewBucket(rate int64) *Bucket {
	r := float64(max(rate, 1))
	return &Bucket{rate: r, burst: max(r/20, 1), last: time.Now()}
}

// Burst is the most bytes one Wait of the bucket lets through at once: a
// reader metered by it should read no more than this at a time.
func (b *Bucket) Burst() int { return int(b.burst) }

// Wait takes n bytes from the bucket, sleeping until they are there; it
// returns early with ctx's error if ctx ends.
func (b *Bucket) Wait(ctx context.Context, n int64) error {
	for n > 0 {
		chunk := min(float64(n), b.burst)
		b.mu.Lock()
		now := time.Now()
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
		if b.tokens >= chunk {
			b.tokens -= chunk
			b.mu.Unlock()
			n -= int64(chunk)
			continue
		}
		need := time.Duration((chunk - b.tokens) / b.rate * float64(time.Second))
		b.mu.Unlock()
		t := time.NewTimer(max(need, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// ScrubResult is what one pass of the scheduled scrub found.
type ScrubResult struct {
	Shares  int              // shares scrubbed
	Bytes   int64            // bytes of those shares
	Damaged []sharestore.Key // shares found damaged, now quarantined
}

// scrubMetrics count the scheduled scrub's work.
type scrubMetrics struct {
	shares *prometheus.CounterVec // result: ok, damaged
	bytes  prometheus.Counter
	quar   prometheus.GaugeFunc
}

func (n *Node) newScrubMetrics(reg prometheus.Registerer) {
	n.scrubM = &scrubMetrics{
		shares: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_node_scrubbed_shares_total",
			Help: "Shares the node's scheduled scrub re-read and re-hashed, by result (ok, damaged)."}, []string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "quilt_node_scrubbed_bytes_total",
			Help: "Bytes of shares the node's scheduled scrub re-read."}),
		quar: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quilt_node_quarantined_shares",
			Help: "Shares found damaged and not yet replaced: the node answers reads of them with a corrupt error so that a repair rebuilds them."},
			func() float64 { return float64(len(n.Quarantined())) }),
	}
	reg.MustRegister(n.scrubM.shares, n.scrubM.bytes, n.scrubM.quar)
}

// quarantine marks a share damaged: reads of it answer ErrCorrupt until a
// sound copy is put in its place (see sharestore.Store.Put).
func (n *Node) quarantine(key sharestore.Key, err error) {
	n.quarMu.Lock()
	defer n.quarMu.Unlock()
	if n.quar == nil {
		n.quar = map[sharestore.Key]error{}
	}
	n.quar[key] = err
}

// release lifts a share's quarantine, once a sound copy replaced it.
func (n *Node) release(key sharestore.Key) {
	n.quarMu.Lock()
	delete(n.quar, key)
	n.quarMu.Unlock()
}

// quarantined returns the damage a share was quarantined for, or nil.
func (n *Node) quarantined(key sharestore.Key) error {
	n.quarMu.Lock()
	defer n.quarMu.Unlock()
	return n.quar[key]
}

// Quarantined returns the shares the node found damaged and that no
// sound copy has replaced yet, sorted.
func (n *Node) Quarantined() []sharestore.Key {
	n.quarMu.Lock()
	out := make([]sharestore.Key, 0, len(n.quar))
	for k := range n.quar {
		out = append(out, k)
	}
	n.quarMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// scrubLoop runs the scheduled scrub: one pass over every share each
// ScrubEvery, spread evenly over it, at most ScrubRate bytes a second.
func (n *Node) scrubLoop() {
	defer n.wg.Done()
	if n.cfg.ScrubEvery < 0 {
		return
	}
	every := orDefault(n.cfg.ScrubEvery, DefaultScrubEvery)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-n.stop
		cancel()
	}()
	for ctx.Err() == nil {
		start := time.Now()
		if _, err := n.scrubPass(ctx, start, every); err != nil && ctx.Err() == nil {
			n.log.Warn("scrub pass", "err", err)
		}
		if !sleepUntil(ctx, start.Add(every)) {
			return
		}
	}
}

// ScrubAll scrubs every share the node holds now, at the node's scrub
// rate but without spreading the pass over the schedule, and quarantines
// the damaged ones (as the scheduled scrub does).
func (n *Node) ScrubAll(ctx context.Context) (ScrubResult, error) {
	return n.scrubPass(ctx, time.Now(), 0)
}

// scrubPass scrubs every share, the one with the b-th byte of the pass's
// total not before start + every·b/total, so a pass takes about every.
func (n *Node) scrubPass(ctx context.Context, start time.Time, every time.Duration) (ScrubResult, error) {
	var res ScrubResult
	var infos []sharestore.Info
	var total int64
	if err := n.store.Walk(ctx, func(i sharestore.Info) error {
		infos = append(infos, i)
		total += i.Size
		return nil
	}); err != nil {
		return res, err
	}
	// Shares deleted while quarantined need no repair.
	held := make(map[sharestore.Key]bool, len(infos))
	for _, i := range infos {
		held[i.Key] = true
	}
	for _, k := range n.Quarantined() {
		if !held[k] {
			n.release(k)
		}
	}
	var done int64
	for _, i := range infos {
		if every > 0 && total > 0 {
			at := start.Add(time.Duration(float64(every) * float64(done) / float64(total)))
			if !sleepUntil(ctx, at) {
				return res, ctx.Err()
			}
		}
		done += i.Size
		if err := n.scrubRate.Wait(ctx, i.Size); err != nil {
			return res, err
		}
		_, err := n.store.Scrub(ctx, i.Key)
		switch {
		case err == nil:
			n.release(i.Key)
			n.scrubM.shares.WithLabelValues("ok").Inc()
		case errors.Is(err, sharestore.ErrNotFound):
			n.release(i.Key) // deleted since the walk
			continue
		case errors.Is(err, sharestore.ErrCorrupt):
			n.log.Warn("scrub found a damaged share; quarantined until repaired", "share", i.Key.String(), "err", err)
			n.quarantine(i.Key, err)
			res.Damaged = append(res.Damaged, i.Key)
			n.scrubM.shares.WithLabelValues("damaged").Inc()
		default:
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			n.log.Warn("scrub could not read a share", "share", i.Key.String(), "err", err)
			continue
		}
		res.Shares++
		res.Bytes += i.Size
		n.scrubM.bytes.Add(float64(i.Size))
	}
	if len(res.Damaged) > 0 || every > 0 {
		n.log.Info("scrub pass done", "shares", res.Shares, "bytes", res.Bytes, "damaged", len(res.Damaged))
	}
	return res, nil
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// errQuarantined is the answer to a read of a quarantined share.
func errQuarantined(key sharestore.Key, cause error) error {
	return fmt.Errorf("%w: share %s was found damaged by the node's scrub and awaits repair (%v)", sharestore.ErrCorrupt, key, cause)
}
