// Package metrics serves Prometheus metrics for Quilt's processes: a
// registry of their own for each node and gateway (never the global
// default, so that many nodes in one process keep their counts apart),
// and a plain-HTTP listener that serves it at /metrics.
//
// It is a leaf: it imports nothing of Quilt, and the packages that count
// things (node, the S3 gateway) define their own metrics on the registry
// they are given.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry of one process's metrics with the Go
// runtime's (go_*) and the process's (process_*) collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Buckets are the latency buckets, in seconds, of Quilt's request
// histograms: from a millisecond (a status request on loopback) to a
// minute (a large share over a slow link).
var Buckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Server serves a registry at /metrics over plain HTTP.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen starts serving g at http://addr/metrics (port 0 picks one). The
// listener is plain HTTP: bind it to an address only the monitoring
// system reaches.
func Listen(addr string, g prometheus.Gatherer) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "metrics at /metrics")
	})
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr returns the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the address of the metrics page.
func (s *Server) URL() string { return "http://" + s.Addr() + "/metrics" }

// Close stops serving.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return s.srv.Close()
	}
	return nil
}

// Status is the status label of an HTTP answer: its code as a number.
func Status(code int) string {
	if code == 0 {
		code = http.StatusOK
	}
	return strconv.Itoa(code)
}
