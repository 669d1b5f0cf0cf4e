package s3

import (
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/metrics"
)

// Instrument returns h (the S3 server) counting its requests on reg:
// quilt_s3_requests_total by operation (the S3 name: PutObject,
// GetObject, …) and status, their latencies, and the bytes of request
// and answer bodies. A request is counted when its handler returns, so
// just after its client may have read the whole answer.
func Instrument(h http.Handler, reg prometheus.Registerer) http.Handler {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_s3_requests_total",
		Help: "S3 requests by operation (PutObject, GetObject, …; NotImplemented for those the gateway does not know) and HTTP status."},
		[]string{"op", "status"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "quilt_s3_request_duration_seconds",
		Help: "Time from an S3 request's headers to the end of its answer, by operation.", Buckets: metrics.Buckets},
		[]string{"op"})
	in := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_s3_received_bytes_total",
		Help: "Bytes of S3 request bodies read (objects uploaded), by operation."}, []string{"op"})
	out := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_s3_sent_bytes_total",
		Help: "Bytes of S3 answer bodies written (objects downloaded), by operation."}, []string{"op"})
	reg.MustRegister(requests, latency, in, out)
	var domain string
	if srv, ok := h.(*Server); ok {
		domain = srv.opt.Domain
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		op := operation(r, domain)
		cw := &countingWriter{ResponseWriter: w}
		var body *countingReader
		if r.Body != nil && r.Body != http.NoBody {
			body = &countingReader{ReadCloser: r.Body}
			r.Body = body
		}
		h.ServeHTTP(cw, r)
		requests.WithLabelValues(op, metrics.Status(cw.status)).Inc()
		latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
		if body != nil && body.n > 0 {
			in.WithLabelValues(op).Add(float64(body.n))
		}
		if cw.n > 0 {
			out.WithLabelValues(op).Add(float64(cw.n))
		}
	})
}

// operation names a request's S3 operation for the op label, as the
// server will route it.
func operation(r *http.Request, domain string) string {
	bucket, object := requestTarget(r, domain)
	switch {
	case r.Method == http.MethodOptions:
		return "Preflight"
	case isPostObject(r, bucket, object):
		return "PostObject"
	}
	if o, ok := resolve(r, bucket, object); ok {
		return o.name
	}
	return "NotImplemented"
}

// countingWriter notes an answer's status and counts its body's bytes.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 && s >= 200 { // not an informational answer (100 Continue)
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	k, err := w.ResponseWriter.Write(b)
	w.n += int64(k)
	return k, err
}

// Unwrap gives http.ResponseController the server's writer (deadlines,
// flushes).
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countingReader counts the bytes read from a request's body.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (b *countingReader) Read(p []byte) (int, error) {
	k, err := b.ReadCloser.Read(p)
	b.n += int64(k)
	return k, err
}
