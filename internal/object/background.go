package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/codec"
)

// ErrPending is the error of a share in a PutReport that was still on its
// way when Put acknowledged the upload (Options.AckAtHappy): its fate is
// in the report's Background.
var ErrPending = errors.New("object: share still being placed")

// BackgroundReport is how the shares left after an early acknowledgement
// were completed.
type BackgroundReport struct {
	Uploaded []ShareResult // shares that were in flight, with their fate
	// Repaired counts the shares placed by a repair from the verify
	// capability once the uploads ended (shares cut off for lagging too
	// far, or whose upload failed).
	Repaired int
	Healthy  bool          // every share of the object is stored
	Took     time.Duration // from the acknowledgement to the end
	Err      error         // why the object is not whole, if it is not
}

// Pending is the background completion of one upload.
type Pending struct {
	done chan struct{}
	rep  BackgroundReport
}

// Wait waits for the background completion to end and returns its
// report, or ctx's error.
func (p *Pending) Wait(ctx context.Context) (*BackgroundReport, error) {
	select {
	case <-p.done:
		return &p.rep, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// bgStats count background completions for metrics.
type bgStats struct {
	shares  *prometheus.CounterVec
	seconds prometheus.Histogram
	running prometheus.Gauge
}

func newBGStats() *bgStats {
	return &bgStats{
		shares: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "quilt_object_background_shares_total",
			Help: "Shares completed after an upload was acknowledged at happiness, by how: uploaded (the upload in flight finished), repaired (placed by repair from the verify capability), failed (left to the grid's repairers).",
		}, []string{"how"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "quilt_object_background_seconds",
			Help:    "Time from an upload's acknowledgement at happiness to the end of its background completion.",
			Buckets: []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "quilt_object_background_running",
			Help: "Uploads acknowledged at happiness whose remaining shares are still being completed.",
		}),
	}
}

// Collectors returns the metrics of the client's background completions
// (quilt_object_background_*), to register on a process's registry.
func (c *Client) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.stats.shares, c.stats.seconds, c.stats.running}
}

// complete finishes an upload acknowledged early: it waits for the shares
// still in flight, then repairs the object if any share is missing. It
// runs under the client's background context with the Background
// deadline.
func (c *Client) complete(ctx context.Context, cancel context.CancelFunc, vc codec.VerifyCap, fin []chan struct{}, ferr []error, ss sinks, pending []int, missing int, p *Pending) {
	defer c.bgWG.Done()
	defer cancel()
	defer close(p.done)
	defer c.stats.running.Dec()
	start := time.Now()
	p.rep.Uploaded = make([]ShareResult, len(pending))
	for i, sh := range pending {
		<-fin[sh]
		err := ferr[sh]
		p.rep.Uploaded[i] = ShareResult{Share: sh, Node: ss[sh].node, Err: err}
		if err == nil {
			c.stats.shares.WithLabelValues("uploaded").Inc()
		} else {
			missing++
			c.log.Warn("share not stored in the background", "share", sh, "node", ss[sh].node, "err", err)
		}
	}
	p.rep.Healthy = missing == 0
	if missing > 0 && ctx.Err() == nil {
		rrep, err := c.Repair(ctx, vc, false)
		switch {
		case err != nil:
			p.rep.Err = fmt.Errorf("object: background repair: %w", err)
		case rrep != nil:
			for _, st := range rrep.Repaired {
				if st.Err == nil {
					p.rep.Repaired++
				}
			}
			p.rep.Healthy = rrep.Healthy()
		}
		c.stats.shares.WithLabelValues("repaired").Add(float64(p.rep.Repaired))
	}
	if !p.rep.Healthy {
		if p.rep.Err == nil {
			p.rep.Err = errOr(ctx.Err(), errors.New("object: shares missing after the background completion"))
		}
		c.stats.shares.WithLabelValues("failed").Add(float64(max(missing-p.rep.Repaired, 0)))
	}
	p.rep.Took = time.Since(start)
	c.stats.seconds.Observe(p.rep.Took.Seconds())
}
