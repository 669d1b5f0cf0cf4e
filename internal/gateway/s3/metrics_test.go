package s3_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
)

// counted returns the sum of the counter (or histogram count) name over
// the series whose labels include want.
func counted(fs []*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := 0.0
	for _, f := range fs {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == v
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// The S3 middleware counts requests by operation and status, their
// latencies and the bytes of objects in and out.
func TestS3Metrics(t *testing.T) {
	e := newEnv(t, 5)
	reg := prometheus.NewRegistry()
	e.srv = httptest.NewServer(s3.Instrument(e.s3, reg))
	t.Cleanup(e.srv.Close)

	body := []byte(strings.Repeat("metrics ", 100))
	if resp, _ := e.do(t, e.admin, "PUT", "/metrics", nil); resp.StatusCode != 200 {
		t.Fatalf("create bucket: %s", resp.Status)
	}
	if resp, _ := e.do(t, e.admin, "PUT", "/metrics/k", body); resp.StatusCode != 200 {
		t.Fatalf("put: %s", resp.Status)
	}
	if resp, got := e.do(t, e.admin, "GET", "/metrics/k", nil); resp.StatusCode != 200 || len(got) != len(body) {
		t.Fatalf("get: %s, %d bytes", resp.Status, len(got))
	}
	if resp, _ := e.do(t, e.admin, "GET", "/metrics/missing", nil); resp.StatusCode != 404 {
		t.Fatalf("get of a missing key: %s", resp.Status)
	}
	if resp, _ := e.do(t, e.admin, "GET", "/metrics/k?torrent", nil); resp.StatusCode != 501 {
		t.Fatalf("get ?torrent: %s", resp.Status)
	}
	// A request is counted as its handler returns, which may be just
	// after the client read the answer: wait for the counts, bounded.
	want := []struct {
		labels map[string]string
		n      float64
	}{
		{map[string]string{"op": "CreateBucket", "status": "200"}, 1},
		{map[string]string{"op": "PutObject", "status": "200"}, 1},
		{map[string]string{"op": "GetObject", "status": "200"}, 1},
		{map[string]string{"op": "GetObject", "status": "404"}, 1},
		{map[string]string{"op": "NotImplemented", "status": "501"}, 1},
	}
	deadline := time.Now().Add(5 * time.Second)
	var fs []*dto.MetricFamily
	for {
		var err error
		if fs, err = reg.Gather(); err != nil {
			t.Fatal(err)
		}
		done := true
		for _, w := range want {
			done = done && counted(fs, "quilt_s3_requests_total", w.labels) == w.n
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			for _, w := range want {
				t.Errorf("quilt_s3_requests_total%v = %v, want %v", w.labels, counted(fs, "quilt_s3_requests_total", w.labels), w.n)
			}
			t.FailNow()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if in := counted(fs, "quilt_s3_received_bytes_total", map[string]string{"op": "PutObject"}); in != float64(len(body)) {
		t.Errorf("received bytes of PutObject: %v, want %d", in, len(body))
	}
	if out := counted(fs, "quilt_s3_sent_bytes_total", map[string]string{"op": "GetObject"}); out < float64(len(body)) {
		t.Errorf("sent bytes of GetObject: %v, want at least %d", out, len(body))
	}
	if n := counted(fs, "quilt_s3_request_duration_seconds", map[string]string{"op": "GetObject"}); n != 2 {
		t.Errorf("latencies of GetObject: %v observed, want 2", n)
	}
}
