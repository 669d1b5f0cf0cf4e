package metrics_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/metrics"
)

// Two registries keep their counts apart, each served on its own
// listener; a closed server stops answering; a bad address is an error
// naming it.
func TestListen(t *testing.T) {
	serve := func(value float64) *metrics.Server {
		reg := metrics.NewRegistry()
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "quilt_test_total", Help: "a test counter"})
		reg.MustRegister(c)
		c.Add(value)
		s, err := metrics.Listen("127.0.0.1:0", reg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	get := func(url string) (string, error) {
		resp, err := http.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	a, b := serve(1), serve(2)
	defer b.Close()
	for _, c := range []struct {
		s    *metrics.Server
		want string
	}{{a, "quilt_test_total 1\n"}, {b, "quilt_test_total 2\n"}} {
		body, err := get(c.s.URL())
		if err != nil || !strings.Contains(body, c.want) || !strings.Contains(body, "go_goroutines") {
			t.Fatalf("%s: %v\n%s", c.s.URL(), err, body)
		}
	}
	a.Close()
	if _, err := get(a.URL()); err == nil {
		t.Fatal("a closed server still answers")
	}
	if _, err := metrics.Listen("127.0.0.1:notaport", prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), "127.0.0.1:notaport") {
		t.Fatalf("bad address: %v", err)
	}
}
