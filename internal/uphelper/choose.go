package uphelper

import (
	"fmt"
	"sort"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// Margin is how many times faster the estimate through a helper must be
// than a direct upload's for Choose to take the helper: link estimates
// are noisy (placement counts those within a factor of two as equal), and
// a helper that is not clearly faster only adds a hop.
const Margin = 2.0

// Choice is Choose's decision and the estimates it made it from.
type Choice struct {
	Helper bool
	// Direct and Through are the estimated seconds of the upload direct
	// and through the helper (0: not estimated).
	Direct, Through float64
	// Why says it in words, for `quilt put -v`.
	Why string
}

// Choose decides whether an upload of size bytes goes through a helper,
// from the uploader's link estimates (object.Client.Links) and the rate
// the helper says it places at (Status.Rate):
//
//   - direct, acknowledged at happiness, the upload lasts about as long
//     as the happy-th fastest node takes its share, size/k bytes, at
//     the throughput measured to it (measured while all n shares shared
//     the uplink, so it includes that sharing);
//   - through the helper, the file goes once over the uplink, whose
//     rate is at least the sum of the throughputs measured to the nodes
//     (they were measured at once, over the same uplink), while the
//     helper places at its own rate: the slower of the two sets the
//     pace;
//   - the helper is taken when that is Margin times faster.
//
// Without estimates of happy nodes, or a rate from the helper (it has
// not placed anything yet), there is nothing to compare and the upload
// goes direct.
func Choose(links map[string]object.LinkEstimate, helperRate float64, size int64, p codec.Params, happy int) Choice {
	var ups []float64
	var sum float64
	for _, e := range links {
		if e.Up > 0 {
			ups = append(ups, e.Up)
			sum += e.Up
		}
	}
	if len(ups) < happy || happy < 1 {
		return Choice{Why: fmt.Sprintf("direct: links to %d nodes measured, %d needed to estimate", len(ups), happy)}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(ups)))
	if size < 0 {
		size = int64(p.SegmentSize) // unknown: the ratio does not depend on it
	}
	direct := float64(size) / float64(p.K) / ups[happy-1]
	if helperRate <= 0 {
		return Choice{Direct: direct, Why: "direct: the helper has no placing rate yet (it has measured too few links)"}
	}
	through := float64(size) / min(sum, helperRate)
	c := Choice{Direct: direct, Through: through, Helper: through*Margin < direct}
	how := "direct"
	if c.Helper {
		how = "helper"
	}
	c.Why = fmt.Sprintf("%s: estimated %.1fs direct (%.0f kB/s to the %dth-fastest node), %.1fs through the helper (uplink ≥ %.0f kB/s, helper places %.0f kB/s)",
		how, direct, ups[happy-1]/1e3, happy, through, sum/1e3, helperRate/1e3)
	return c
}
