package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// metricValue returns the value of the metric name whose labels include
// want (a counter's count, a gauge's value, a histogram's sample count),
// summed over the series that match, and whether any did.
func metricValue(families []*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	sum, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			found = true
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum, found
}

// waitMetrics gathers g until ok accepts what it gathered: a request is
// counted once its handler returns, which may be just after its client
// has read the answer. It fails the test after a few seconds.
func waitMetrics(t *testing.T, g prometheus.Gatherer, ok func([]*dto.MetricFamily) bool) []*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fs, err := g.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if ok(fs) {
			return fs
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, f := range fs {
				if strings.HasPrefix(f.GetName(), "quilt_") {
					expfmt.MetricFamilyToText(&b, f)
				}
			}
			t.Fatalf("metrics did not get there within 5 s:\n%s", b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A node counts its share requests by operation and outcome, the bytes
// they moved and its space, and serves them at /metrics when asked to.
func TestNodeMetrics(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	n := g.Nodes[0]
	c := g.NodeClient()
	ctx := context.Background()
	id := string(n.ID())
	if _, err := c.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 1, N: 2, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("m"), 5000))
	if err != nil {
		t.Fatal(err)
	}
	key := sharestore.Key{SI: rc.Key.StorageIndex(), Share: 0}
	lease := sharestore.LeaseFor([]byte("secret"))
	if _, err := c.GetShare(ctx, id, key, 0, 10); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("missing share: %v", err)
	}
	if _, err := c.PutShare(ctx, id, key, bytes.NewReader(shares[0]), int64(len(shares[0])), lease); err != nil {
		t.Fatal(err)
	}
	r, err := c.GetShare(ctx, id, key, 0, int64(len(shares[0])))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	r.Close()

	size := float64(len(shares[0]))
	fs := waitMetrics(t, n.Registry(), func(fs []*dto.MetricFamily) bool {
		put, _ := metricValue(fs, "quilt_node_requests_total", map[string]string{"op": "put", "outcome": "ok"})
		got, _ := metricValue(fs, "quilt_node_requests_total", map[string]string{"op": "get", "outcome": "ok"})
		missing, _ := metricValue(fs, "quilt_node_requests_total", map[string]string{"op": "get", "outcome": "not_found"})
		return put == 1 && got == 1 && missing == 1
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"quilt_node_received_bytes_total", map[string]string{"op": "put"}, size},
		{"quilt_node_request_duration_seconds", map[string]string{"op": "get"}, 2},
		{"quilt_node_shares", nil, 1},
		{"quilt_node_members", map[string]string{"state": "alive"}, 1},
		{"quilt_node_members", map[string]string{"state": "dead"}, 0},
	} {
		if v, ok := metricValue(fs, c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	// The share, and the error answer of the missing one.
	if sent, _ := metricValue(fs, "quilt_node_sent_bytes_total", map[string]string{"op": "get"}); sent <= size || sent > size+1000 {
		t.Errorf("quilt_node_sent_bytes_total{op=get} = %v after serving a share of %v bytes and a 404", sent, size)
	}
	if used, _ := metricValue(fs, "quilt_node_used_bytes", nil); used < size {
		t.Errorf("quilt_node_used_bytes = %v with a share of %v bytes stored", used, size)
	}
	if n.MetricsURL() != "" {
		t.Errorf("a node not asked to serves metrics at %s", n.MetricsURL())
	}
}

// With Config.Metrics a node serves /metrics over plain HTTP, in the
// Prometheus text format; a bad address is an error naming it.
func TestNodeMetricsListener(t *testing.T) {
	n, err := node.Start(context.Background(), node.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", Metrics: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !strings.HasPrefix(n.MetricsURL(), "http://127.0.0.1:") {
		t.Fatalf("MetricsURL %q", n.MetricsURL())
	}
	resp, err := http.Get(n.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fs["quilt_node_free_bytes"]; !ok {
		t.Fatalf("no quilt_node_free_bytes among %d families", len(fs))
	}
	_, err = node.Start(context.Background(), node.Config{Dir: t.TempDir(), Listen: "127.0.0.1:0", Metrics: "127.0.0.1:bad"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:bad") {
		t.Fatalf("bad metrics address: %v", err)
	}
}
