package node

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// handler returns the node's HTTP API. Every request has already passed
// the grid's mutual TLS.
func (n *Node) handler(extra http.Handler) http.Handler {
	mux := http.NewServeMux()
	if extra != nil {
		mux.Handle("/v1/", extra)
	}
	mux.HandleFunc("GET /v1/status", n.getStatus)
	mux.HandleFunc("GET /v1/members", n.getMembers)
	mux.HandleFunc("GET /v1/shares/{si}", n.listShares)
	mux.HandleFunc("PUT /v1/shares/{si}/{n}", n.putShare)
	mux.HandleFunc("GET /v1/shares/{si}/{n}", n.getShare)
	mux.HandleFunc("DELETE /v1/shares/{si}/{n}", n.deleteShare)
	mux.HandleFunc("POST /v1/shares/{si}/{n}/scrub", n.scrubShare)
	mux.HandleFunc("POST /v1/shares/{si}/renew", n.renewShares)
	mux.HandleFunc("POST /v1/shares/{si}/cancel", n.cancelShares)
	mux.HandleFunc("PUT /v1/repair/{si}", n.putRegistry)
	mux.HandleFunc("GET /v1/repair", n.getRegistry)
	mux.HandleFunc("POST /v1/repair", n.postRegistry)
	mux.HandleFunc("POST /v1/drain", n.postDrain)
	mux.HandleFunc("GET /v1/drain", n.getDrain)
	return n.logRequests(mux)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

// Unwrap gives http.ResponseController the server's writer, for its
// connection deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom copies a body (a share, from http.ServeContent) in 256 KiB
// writes: under TLS each write's records leave together (see
// identity.NewTLSListener), where io.Copy's 32 KiB would take a system
// call for every two records.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	var buf []byte
	select {
	case buf = <-copyBufs:
	default:
		buf = make([]byte, 256<<10)
	}
	defer func() {
		select {
		case copyBufs <- buf:
		default:
		}
	}()
	return io.CopyBuffer(struct{ io.Writer }{w}, r, buf)
}

// copyBufs keeps ReadFrom's buffers (a free list: see identity's
// gatherBufs for why not a sync.Pool).
var copyBufs = make(chan []byte, 32)

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	m, err := w.ResponseWriter.Write(b)
	w.bytes += int64(m)
	return m, err
}

// connKey keys a request's connection in its context (see
// http.Server.ConnContext), for the peer's identity.
type connKey struct{}

func (n *Node) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		var body *countingBody
		op := requestOp(r)
		if r.Body != nil && r.Body != http.NoBody {
			// The handler reads a copy of the request, so that the
			// server's own still holds its body: the server checks its
			// type to decide what to do with a body the handler left
			// unread (a stalled share upload must not be waited for).
			body = &countingBody{ReadCloser: r.Body}
			r = r.WithContext(r.Context())
			r.Body = body
		}
		h.ServeHTTP(sw, r)
		in := int64(0)
		if body != nil {
			in = body.n
		}
		n.metrics.observe(op, sw.status, in, sw.bytes, time.Since(start))
		peer := ""
		if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			if id, err := identity.PeerID(identity.ConnState(c)); err == nil {
				peer = id.Short()
			}
		}
		n.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"in", in, "out", sw.bytes, "peer", peer, "ms", time.Since(start).Milliseconds())
	})
}

func (n *Node) getStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, n.meta())
}

func (n *Node) getMembers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, n.members.Members())
}

func shareKey(r *http.Request) (sharestore.Key, error) {
	si, err := sharestore.ParseSI(r.PathValue("si"))
	if err != nil {
		return sharestore.Key{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	num, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || num < 0 || num > 255 {
		return sharestore.Key{}, fmt.Errorf("%w: bad share number %q", ErrBadRequest, r.PathValue("n"))
	}
	return sharestore.Key{SI: si, Share: num}, nil
}

func (n *Node) listShares(w http.ResponseWriter, r *http.Request) {
	si, err := sharestore.ParseSI(r.PathValue("si"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	infos, err := n.store.List(r.Context(), si)
	if err != nil {
		writeError(w, err)
		return
	}
	withTrailers := r.URL.Query().Get("trailers") == "1"
	out := []ShareInfo{}
	for _, i := range infos {
		si := shareInfo(i)
		if withTrailers {
			si.Trailer = n.trailer(r.Context(), i.Key)
		}
		out = append(out, si)
	}
	writeJSON(w, 200, out)
}

// maxListedTrailer bounds a trailer sent in a share list (that of a
// 32 GiB object in 1 MiB segments); a larger one is read separately.
const maxListedTrailer = 1 << 20

// trailer reads a share's trailer, or nil if it cannot (the reader then
// asks for it separately, and finds out why).
func (n *Node) trailer(ctx context.Context, key sharestore.Key) []byte {
	if n.quarantined(key) != nil {
		return nil
	}
	s, err := n.store.Open(ctx, key)
	if err != nil {
		return nil
	}
	defer s.Close()
	size := s.Info().Size
	if size < 8 {
		return nil
	}
	var tail [8]byte
	if _, err := s.ReadAt(tail[:], size-8); err != nil {
		return nil
	}
	l, err := sharefile.TrailerLenFromTail(tail[:])
	if err != nil || l <= 0 || l > maxListedTrailer || int64(l) > size {
		return nil
	}
	b := make([]byte, l)
	if _, err := s.ReadAt(b, size-int64(l)); err != nil {
		return nil
	}
	return b
}

func (n *Node) putShare(w http.ResponseWriter, r *http.Request) {
	key, err := shareKey(r)
	if err != nil {
		writeError(w, err)
		return
	}
	lease, err := n.leaseOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	size := r.ContentLength
	if v := r.Header.Get(hdrSize); v != "" {
		announced, err := strconv.ParseInt(v, 10, 64)
		if err != nil || announced < 0 || (size >= 0 && size != announced) {
			writeError(w, fmt.Errorf("%w: bad %s header %q (body of %d bytes)", ErrBadRequest, hdrSize, v, size))
			return
		}
		size = announced
	}
	if n.Draining() {
		writeError(w, fmt.Errorf("%w: %w", sharestore.ErrFull, errDraining))
		return
	}
	done, err := n.receiving(r.Context(), key, r.Header.Get(hdrOnly) != "")
	if err != nil {
		writeError(w, err)
		return
	}
	body := n.progressBody(w, r)
	info, err := n.store.Put(r.Context(), key, body, size, lease)
	body.done()
	done()
	if err != nil {
		n.log.Info("share refused", "share", key.String(), "err", err)
		writeError(w, err)
		return
	}
	n.release(key) // a sound copy is in place
	n.usageChanged()
	writeJSON(w, http.StatusCreated, shareInfo(info))
}

func (n *Node) getShare(w http.ResponseWriter, r *http.Request) {
	key, err := shareKey(r)
	if err != nil {
		writeError(w, err)
		return
	}
	s, err := n.store.Open(r.Context(), key)
	if err != nil {
		writeError(w, err)
		return
	}
	defer s.Close()
	if qerr := n.quarantined(key); qerr != nil {
		writeError(w, errQuarantined(key, qerr))
		return
	}
	info := s.Info()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Quilt-Root", fmt.Sprintf("%x", info.Root[:]))
	// ServeContent answers Range requests with exactly the bytes asked.
	var content io.ReadSeeker = io.NewSectionReader(s, 0, info.Size)
	if sq, ok := s.(sharestore.Sequential); ok {
		if rd := sq.SequentialReader(); rd != nil {
			defer rd.Close()
			content = rd
		}
	}
	http.ServeContent(w, r, "", info.Created, content)
}

func (n *Node) deleteShare(w http.ResponseWriter, r *http.Request) {
	key, err := shareKey(r)
	if err != nil {
		writeError(w, err)
		return
	}
	secret, err := hex.DecodeString(r.Header.Get(hdrSecret))
	if err != nil {
		writeError(w, fmt.Errorf("%w: bad %s header", ErrBadRequest, hdrSecret))
		return
	}
	if _, err := n.store.Delete(r.Context(), key, secret); err != nil {
		writeError(w, err)
		return
	}
	n.usageChanged()
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) scrubShare(w http.ResponseWriter, r *http.Request) {
	key, err := shareKey(r)
	if err != nil {
		writeError(w, err)
		return
	}
	info, err := n.store.Scrub(r.Context(), key)
	switch {
	case err == nil:
		n.release(key)
	case errors.Is(err, sharestore.ErrCorrupt):
		n.log.Warn("scrub found a damaged share; quarantined until repaired", "share", key.String(), "err", err)
		n.quarantine(key, err)
	case !errors.Is(err, sharestore.ErrNotFound):
		n.log.Warn("scrub could not read a share", "share", key.String(), "err", err)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, shareInfo(info))
}

// progressBody reads a request's body under a rolling read deadline:
// a body that delivers no byte for the node's BodyStall fails its read
// with a timeout, so the upload is aborted and its reserved space
// released (see Config.BodyStall).
type progressBody struct {
	r     io.Reader
	rc    *http.ResponseController
	stall time.Duration
	set   time.Time // when the deadline was last pushed back
	ok    bool      // the connection takes deadlines
}

func (n *Node) progressBody(w http.ResponseWriter, r *http.Request) *progressBody {
	b := &progressBody{r: r.Body, rc: http.NewResponseController(w), stall: orDefault(n.cfg.BodyStall, 60*time.Second)}
	b.set = time.Now()
	if err := b.rc.SetReadDeadline(b.set.Add(b.stall)); err == nil {
		b.ok = true
	} else {
		n.log.Debug("share upload without a progress limit: the connection takes no deadline", "err", err)
	}
	return b
}

// Read reads the body, pushing the deadline back as bytes arrive (at
// most every stall/8, so a fast upload costs few deadline updates; a
// stalled one is cut off after between 7/8 of the stall and the stall).
func (b *progressBody) Read(p []byte) (int, error) {
	m, err := b.r.Read(p)
	if m > 0 && b.ok {
		if now := time.Now(); now.Sub(b.set) >= b.stall/8 {
			b.set = now
			b.rc.SetReadDeadline(now.Add(b.stall))
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("node: share upload made no progress for %v: %w", b.stall, err)
	}
	return m, err
}

// done lifts the deadline once the body is read, for the connection's
// next request.
func (b *progressBody) done() {
	if b.ok {
		b.rc.SetReadDeadline(time.Time{})
	}
}
