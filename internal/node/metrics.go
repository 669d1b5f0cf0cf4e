package node

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/metrics"
)

// nodeMetrics are a node's Prometheus metrics, on a registry of its own
// (Node.Registry): its space and shares, the requests of its API by
// operation and outcome, their latencies, the bytes they moved, and the
// members of gossip by state.
type nodeMetrics struct {
	requests *prometheus.CounterVec   // op, outcome
	latency  *prometheus.HistogramVec // op
	in, out  *prometheus.CounterVec   // op
}

// newMetrics registers a node's metrics on reg.
func (n *Node) newMetrics(reg prometheus.Registerer) *nodeMetrics {
	m := &nodeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_node_requests_total",
			Help: "Requests to the node's API by operation (put, get, list, delete, scrub, status, members, other) and outcome (ok, not_found, exists, full, forbidden, corrupt, bad_request, client_error, error)."},
			[]string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quilt_node_request_duration_seconds",
			Help: "Time from a request's headers to the end of its answer, by operation.", Buckets: metrics.Buckets},
			[]string{"op"}),
		in: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_node_received_bytes_total",
			Help: "Bytes of request bodies read by the node's API (shares stored), by operation."}, []string{"op"}),
		out: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_node_sent_bytes_total",
			Help: "Bytes of answer bodies written by the node's API (shares served), by operation."}, []string{"op"}),
	}
	usage := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(m.requests, m.latency, m.in, m.out,
		usage("quilt_node_capacity_bytes", "Most bytes of shares the node stores (--capacity); 0: no limit but the disk's.",
			func() float64 { return float64(n.store.Usage().Capacity) }),
		usage("quilt_node_used_bytes", "Bytes of shares the node stores.",
			func() float64 { return float64(n.store.Usage().Used) }),
		usage("quilt_node_free_bytes", "Bytes of shares the node may still store.",
			func() float64 { return float64(n.store.Usage().Free) }),
		usage("quilt_node_shares", "Shares the node holds.",
			func() float64 { return float64(n.store.Usage().Shares) }),
		membersCollector{n},
	)
	return m
}

// membersCollector reports the members of gossip by state, as this node
// sees them, at each scrape.
type membersCollector struct{ n *Node }

var membersDesc = prometheus.NewDesc("quilt_node_members",
	"Members of the grid as this node sees them, by state (alive, suspect, dead, left).", []string{"state"}, nil)

func (c membersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- membersDesc }

func (c membersCollector) Collect(ch chan<- prometheus.Metric) {
	count := map[string]int{member.Alive: 0, member.Suspect: 0, member.Dead: 0, member.Left: 0}
	for _, m := range c.n.members.Members() {
		count[m.State]++
	}
	for state, k := range count {
		ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(k), state)
	}
}

// requestOp names the operation of a request to the node's API, for the
// op label: a small fixed set, whatever the path.
func requestOp(r *http.Request) string {
	p := r.URL.Path
	switch {
	case p == "/v1/status":
		return "status"
	case p == "/v1/members":
		return "members"
	case strings.HasPrefix(p, "/v1/shares/"):
		parts := strings.Count(strings.TrimPrefix(p, "/v1/shares/"), "/")
		switch {
		case parts == 0 && r.Method == http.MethodGet:
			return "list"
		case parts == 1 && r.Method == http.MethodPut:
			return "put"
		case parts == 1 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			return "get"
		case parts == 1 && r.Method == http.MethodDelete:
			return "delete"
		case parts == 2 && r.Method == http.MethodPost && strings.HasSuffix(p, "/scrub"):
			return "scrub"
		}
	}
	return "other"
}

// outcome names the outcome of an answer by its status: ok, the kind of
// error the node sends for it (see kinds), client_error or error.
func outcome(status int) string {
	switch {
	case status == 0 || status < 400:
		return "ok"
	}
	for _, k := range kinds {
		if k.status == status {
			return k.name
		}
	}
	if status < 500 {
		return "client_error"
	}
	return "error"
}

// countingBody counts the bytes read from a request's body.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n += int64(k)
	return k, err
}

// observe records a served request; a node without metrics (nil, as a
// handler built bare in tests) records nothing.
func (m *nodeMetrics) observe(op string, status int, in, out int64, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(op, outcome(status)).Inc()
	m.latency.WithLabelValues(op).Observe(took.Seconds())
	if in > 0 {
		m.in.WithLabelValues(op).Add(float64(in))
	}
	if out > 0 {
		m.out.WithLabelValues(op).Add(float64(out))
	}
}
