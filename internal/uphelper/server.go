package uphelper

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// The helper's API paths, under a node's API.
const (
	PathStatus = "/v1/helper"        // GET: Status
	PathUpload = "/v1/helper/upload" // POST: sealed segments in, Answer out
)

// Headers of an upload request.
const (
	hdrLease  = "X-Quilt-Lease"         // hex of the lease ID (hash of the renew secret)
	hdrCancel = "X-Quilt-Cancel"        // hex of the lease's cancel hash
	hdrExpire = "X-Quilt-Lease-Expires" // Unix seconds the lease runs to; absent: for ever
)

// DefaultUploads is how many uploads a helper runs at once by default.
const DefaultUploads = 4

// Config configures a helper.
type Config struct {
	// Objects places the shares. It should acknowledge at happiness
	// (object.Options.AckAtHappy) for the uploader to gain from the
	// helper's links; its LeaseSecret is the lease of the shares its
	// background repair places.
	Objects *object.Client
	// Uploads bounds the uploads running at once; one more is refused
	// with 503 (the uploader may go direct). Each holds a few segments
	// per share in memory (object.Put's bound) and nothing on disk.
	// Default DefaultUploads.
	Uploads int
	// Register, if set, puts the verify capability of every object
	// placed in the grid's repair registry (repairer.Register), before
	// the answer, as a direct upload's uploader does; it returns how
	// many nodes took it.
	Register func(ctx context.Context, vc codec.VerifyCap) (int, error)
	// BodyStall is how long an upload's body may deliver no byte before
	// the upload fails (its shares cut off, its slot freed); default
	// 60 s, as a node's share uploads (node.Config.BodyStall).
	BodyStall time.Duration
	// Logger receives one line per upload.
	Logger *slog.Logger
	// Metrics, if set, registers the helper's metrics (a node's
	// registry, served on its /metrics).
	Metrics prometheus.Registerer
}

// Server is an upload helper. It is safe for concurrent use.
type Server struct {
	cfg     Config
	slot    chan struct{}
	log     *slog.Logger
	uploads *prometheus.CounterVec // by result: ok, busy, failed, bad_request
	bytes   prometheus.Counter     // sealed bytes received
	placed  prometheus.Counter     // plaintext bytes of the objects placed
}

// NewServer returns a helper that places shares with cfg.Objects.
func NewServer(cfg Config) *Server {
	if cfg.Uploads <= 0 {
		cfg.Uploads = DefaultUploads
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.BodyStall <= 0 {
		cfg.BodyStall = 60 * time.Second
	}
	s := &Server{cfg: cfg, slot: make(chan struct{}, cfg.Uploads), log: cfg.Logger,
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quilt_helper_uploads_total",
			Help: "Uploads the node's upload helper was asked for, by result: ok (placed at happiness), busy (refused with 503, at its most uploads), failed (not placed), bad_request."},
			[]string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "quilt_helper_received_bytes_total",
			Help: "Sealed (encrypted) bytes the upload helper received from uploaders."}),
		placed: prometheus.NewCounter(prometheus.CounterOpts{Name: "quilt_helper_placed_bytes_total",
			Help: "Bytes of file (plaintext size) of the objects the upload helper placed at happiness."}),
	}
	for _, r := range []string{"ok", "busy", "failed", "bad_request"} {
		s.uploads.WithLabelValues(r)
	}
	if cfg.Metrics != nil {
		active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quilt_helper_uploads_active",
			Help: "Uploads the upload helper is running now."}, func() float64 { return float64(len(s.slot)) })
		slots := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quilt_helper_uploads_max",
			Help: "The most uploads the upload helper runs at once (--helper-uploads)."}, func() float64 { return float64(cap(s.slot)) })
		cfg.Metrics.MustRegister(s.uploads, s.bytes, s.placed, active, slots)
	}
	return s
}

// countingReader counts the bytes read through it into a counter.
type countingReader struct {
	r io.Reader
	c prometheus.Counter
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.c.Add(float64(n))
	return n, err
}

// Status is what GET /v1/helper answers.
type Status struct {
	// Rate is the bytes of file a second the helper estimates it places
	// at the asked k, n and happiness (object.Client.HappyRate); 0 when
	// it has not measured enough links yet.
	Rate float64 `json:"rate"`
	// Busy and Uploads are the uploads running and the most it runs.
	Busy    int `json:"busy"`
	Uploads int `json:"uploads"`
}

// Answer is what a helper answers to an upload.
type Answer struct {
	Root      string `json:"root"` // hex of the object root
	Size      int64  `json:"size"` // plaintext bytes
	Happiness int    `json:"happiness"`
	Zones     int    `json:"zones"`
	Pending   int    `json:"pending"` // shares still being placed
	// Registered is how many nodes took the object's verify capability
	// into their repair registry (0: the uploader should register it).
	Registered int           `json:"registered"`
	Shares     []AnswerShare `json:"shares"`
}

// AnswerShare is where the helper says one share went.
type AnswerShare struct {
	Share int    `json:"share"`
	Node  string `json:"node"`
	// Err is empty when the share is stored, "pending" when it was
	// still on its way at the acknowledgement, else why it failed.
	Err string `json:"err,omitempty"`
}

// ServeHTTP serves the helper's API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == PathStatus && r.Method == http.MethodGet:
		s.status(w, r)
	case r.URL.Path == PathUpload && r.Method == http.MethodPost:
		s.upload(w, r)
	default:
		http.Error(w, "uphelper: no such endpoint", http.StatusNotFound)
	}
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	p, happy, err := paramsOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(Status{Rate: s.cfg.Objects.HappyRate(p, happy), Busy: len(s.slot), Uploads: cap(s.slot)})
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	bad := func(msg string) {
		s.uploads.WithLabelValues("bad_request").Inc()
		http.Error(w, msg, http.StatusBadRequest)
	}
	p, happy, err := paramsOf(r)
	if err != nil {
		bad(err.Error())
		return
	}
	q := r.URL.Query()
	si, err := parseSI(q.Get("si"))
	if err != nil {
		bad(err.Error())
		return
	}
	size := int64(-1)
	if v := q.Get("size"); v != "" {
		size, err = strconv.ParseInt(v, 10, 64)
		if err != nil || size < 0 {
			bad(fmt.Sprintf("uphelper: bad size %q", v))
			return
		}
	}
	lease, err := leaseOf(r.Header)
	if err != nil {
		bad(err.Error())
		return
	}
	select {
	case s.slot <- struct{}{}:
		defer func() { <-s.slot }()
	default:
		s.uploads.WithLabelValues("busy").Inc()
		http.Error(w, fmt.Sprintf("uphelper: busy with %d uploads", cap(s.slot)), http.StatusServiceUnavailable)
		return
	}
	start := time.Now()
	body := &stallBody{r: countingReader{r: r.Body, c: s.bytes}, rc: http.NewResponseController(w), stall: s.cfg.BodyStall}
	defer body.done()
	vc, rep, err := s.cfg.Objects.PutSealed(r.Context(), body, size, p, si, happy, lease)
	if err != nil {
		s.uploads.WithLabelValues("failed").Inc()
		s.log.Info("helper upload failed", "si", hex.EncodeToString(si[:4]), "err", err)
		code := http.StatusBadGateway
		if errors.Is(err, object.ErrUnhappy) {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, "uphelper: "+err.Error(), code)
		return
	}
	s.uploads.WithLabelValues("ok").Inc()
	s.placed.Add(float64(vc.Size))
	s.log.Info("helper upload", "si", hex.EncodeToString(si[:4]), "bytes", vc.Size, "happiness", rep.Happiness, "pending", rep.Pending, "took", time.Since(start))
	a := Answer{Root: hex.EncodeToString(vc.Root[:]), Size: vc.Size, Happiness: rep.Happiness, Zones: rep.Zones, Pending: rep.Pending}
	if s.cfg.Register != nil {
		rctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		a.Registered, err = s.cfg.Register(rctx, vc)
		cancel()
		if err != nil {
			s.log.Info("helper upload not in the repair registry", "si", hex.EncodeToString(si[:4]), "err", err)
		}
	}
	for _, sr := range rep.Shares {
		as := AnswerShare{Share: sr.Share, Node: sr.Node}
		switch {
		case errors.Is(sr.Err, object.ErrPending):
			as.Err = "pending"
		case sr.Err != nil:
			as.Err = sr.Err.Error()
		}
		a.Shares = append(a.Shares, as)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(a)
}

// paramsOf reads k, n, seg and happy from a request's query.
func paramsOf(r *http.Request) (codec.Params, int, error) {
	q := r.URL.Query()
	var v [4]int
	for i, name := range []string{"k", "n", "seg", "happy"} {
		x, err := strconv.Atoi(q.Get(name))
		if err != nil {
			return codec.Params{}, 0, fmt.Errorf("uphelper: query %s=%q: want a number", name, q.Get(name))
		}
		v[i] = x
	}
	p := codec.Params{K: v[0], N: v[1], SegmentSize: v[2]}
	if err := p.Validate(); err != nil {
		return codec.Params{}, 0, fmt.Errorf("uphelper: %w", err)
	}
	if v[3] < 1 || v[3] > p.N {
		return codec.Params{}, 0, fmt.Errorf("uphelper: happiness %d must be between 1 and n=%d", v[3], p.N)
	}
	return p, v[3], nil
}

func parseSI(s string) (sharefile.SI, error) {
	var si sharefile.SI
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(si) {
		return si, fmt.Errorf("uphelper: bad storage index %q", s)
	}
	copy(si[:], b)
	return si, nil
}

func parseHash(name, s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("uphelper: header %s: want 64 hex digits", name)
	}
	copy(h[:], b)
	return h, nil
}

// leaseOf reads the uploader's lease from an upload's headers.
func leaseOf(h http.Header) (sharestore.Lease, error) {
	var l sharestore.Lease
	var err error
	if l.ID, err = parseHash(hdrLease, h.Get(hdrLease)); err != nil {
		return l, err
	}
	if l.Cancel, err = parseHash(hdrCancel, h.Get(hdrCancel)); err != nil {
		return l, err
	}
	if v := h.Get(hdrExpire); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return l, fmt.Errorf("uphelper: header %s: want Unix seconds", hdrExpire)
		}
		l.Expires = time.Unix(sec, 0)
	}
	return l, nil
}

// leaseHeaders writes a lease as an upload's headers.
func leaseHeaders(h http.Header, l sharestore.Lease) {
	h.Set(hdrLease, hex.EncodeToString(l.ID[:]))
	h.Set(hdrCancel, hex.EncodeToString(l.Cancel[:]))
	if !l.Expires.IsZero() {
		h.Set(hdrExpire, strconv.FormatInt(l.Expires.Unix(), 10))
	}
}

// stallBody reads an upload's body under a rolling read deadline, so a
// client that stops sending without closing its connection does not
// hold a slot of the helper for ever.
type stallBody struct {
	r     io.Reader
	rc    *http.ResponseController
	stall time.Duration
	set   time.Time
	ok    bool // the connection takes deadlines
	began bool
}

func (b *stallBody) Read(p []byte) (int, error) {
	if !b.began {
		b.began = true
		b.set = time.Now()
		b.ok = b.rc.SetReadDeadline(b.set.Add(b.stall)) == nil
	}
	n, err := b.r.Read(p)
	if n > 0 && b.ok {
		if now := time.Now(); now.Sub(b.set) >= b.stall/8 {
			b.set = now
			b.rc.SetReadDeadline(now.Add(b.stall))
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("uphelper: upload made no progress for %v: %w", b.stall, err)
	}
	return n, err
}

// done lifts the deadline for the connection's next request.
func (b *stallBody) done() {
	if b.ok {
		b.rc.SetReadDeadline(time.Time{})
	}
}
