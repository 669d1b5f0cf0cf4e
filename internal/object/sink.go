package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// item is a piece of a share on its way to a node; release is called once
// the piece is no longer needed.
type item struct {
	b       []byte
	release func()
}

// free calls the piece's release, if any.
func (it item) free() {
	if it.release != nil {
		it.release()
	}
}

// sink streams one share to one node: pieces go through a small queue
// into the PUT request's body (a shareBody). A failed or stalled sink is
// dropped: it keeps accepting pieces (and releasing them) so the upload
// goes on with the other shares.
type sink struct {
	share  int
	node   string
	clock  clock.Clock // times stalls
	q      chan item
	body   *shareBody
	cancel context.CancelFunc
	failed atomic.Bool
	mu     sync.Mutex
	err    error         // the first reason the share failed
	done   chan struct{} // closed when the node has answered
	wdone  chan struct{} // closed when every queued piece is released
	moved  chan struct{} // see newSink
	sent   atomic.Int64  // bytes written to the connection
	// starved is how long (ns) the connection waited for the upload to
	// queue its next piece: time the link was not what held the share.
	starved atomic.Int64
}

// signal tells whoever paces the upload that this share moved on.
func (s *sink) signal() {
	if s.moved != nil {
		select {
		case s.moved <- struct{}{}:
		default:
		}
	}
}

var errAborted = errors.New("object: upload aborted")

// sinkQueue is how many pieces (blocks, mostly) wait for each share's
// connection. The pieces of one segment are shared by all sinks, so the
// deepest queue decides how many segments an upload holds (each 3.5 MB
// at 3-of-10 and 1 MiB): two keep every connection busy, and each segment
// more is memory a short-lived `quilt put` touches afresh, at a page fault
// per 4 KiB (a queue of 4 made 10 segments for a 16 MiB put, 2 makes 8,
// 3% faster: docs/benchmarks.md).
const sinkQueue = 2

// newSink starts a share's upload with a queue of queue pieces; moved,
// if not nil, is signalled (without blocking) whenever the share's
// connection takes a piece or the share fails.
func (c *Client) newSink(ctx context.Context, share int, node string, key sharestore.Key, size int64, lease sharestore.Lease, queue int, moved chan struct{}) *sink {
	ctx, cancel := context.WithCancel(ctx)
	s := &sink{share: share, node: node, clock: c.opt.Clock, q: make(chan item, queue), cancel: cancel,
		done: make(chan struct{}), wdone: make(chan struct{}), moved: moved}
	s.body = &shareBody{s: s, closed: make(chan struct{})}
	go func() {
		start := time.Now()
		err := c.grid.PutShare(ctx, node, key, s.body, size, lease)
		if err == nil {
			err = ctx.Err()
		}
		// A share's throughput, also of one cut off for lagging: what
		// reached the node in the time its connection had something to
		// send, until the node's answer. The time the share waited for
		// the upload (reading and encoding the input, or held back with
		// the rest at the pace of the happy-th fastest node) says
		// nothing of this link and is left out, else a fast node paced
		// by a slow one measures as slow. A small share's time is mostly
		// round trips, not throughput: not counted.
		if s.sent.Load() >= minMeasured {
			c.links.upload(node, s.sent.Load(), time.Since(start)-time.Duration(s.starved.Load()))
		}
		if err != nil {
			s.fail(err)
			cancel() // a body write still blocked on the connection ends
		}
		s.body.Close()
		close(s.done)
	}()
	go func() {
		defer close(s.wdone)
		s.body.drain()
	}()
	return s
}

// shareBody is a share's upload as a request body. The node client's HTTP
// transport takes it with WriteTo, which writes each piece straight from
// the queue to the connection (no copy through a pipe, one write per
// block); Read serves any other consumer. Every piece is released once
// written, or unwritten once the share failed or the body was closed.
type shareBody struct {
	s      *sink
	mu     sync.Mutex // held by the one consumer at a time
	cur    item       // piece being read by Read
	off    int        // bytes of cur already read
	closed chan struct{}
	once   sync.Once
}

// next returns the next piece to send: io.EOF after the last one, an
// error if the share failed or the body was closed.
func (b *shareBody) next() (item, error) {
	var it item
	var ok bool
	select {
	case it, ok = <-b.s.q:
	default:
		// Nothing queued: the connection waits for the upload, not the
		// other way round (see sink.starved).
		t0 := time.Now()
		select {
		case it, ok = <-b.s.q:
		case <-b.closed:
			return item{}, errAborted
		}
		b.s.starved.Add(int64(time.Since(t0)))
	}
	b.s.signal()
	if !ok {
		// finish closes the queue; abort marks the share failed
		// before that, so a cut-off upload never ends cleanly.
		if b.s.failed.Load() {
			return item{}, errOr(b.s.reason(), errAborted)
		}
		return item{}, io.EOF
	}
	if b.s.failed.Load() {
		it.free()
		return item{}, errOr(b.s.reason(), errAborted)
	}
	return it, nil
}

// WriteTo writes the share's pieces to w as they are queued, until the
// last one.
func (b *shareBody) WriteTo(w io.Writer) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	if b.off < len(b.cur.b) { // a Read began this piece
		m, err := w.Write(b.cur.b[b.off:])
		n += int64(m)
		b.cur.free()
		b.cur, b.off = item{}, 0
		if err != nil {
			b.s.failed.Store(true)
			return n, err
		}
	}
	for {
		it, err := b.next()
		if err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		m, err := w.Write(it.b)
		n += int64(m)
		b.s.sent.Add(int64(m))
		it.free()
		if err != nil {
			b.s.failed.Store(true)
			return n, err
		}
	}
}

// Read implements io.Reader, for consumers without WriterTo.
func (b *shareBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.off >= len(b.cur.b) {
		b.cur.free()
		b.cur, b.off = item{}, 0
		it, err := b.next()
		if err != nil {
			return 0, err
		}
		b.cur = it
	}
	n := copy(p, b.cur.b[b.off:])
	b.off += n
	b.s.sent.Add(int64(n))
	return n, nil
}

// Close ends the body: pieces still queued, or queued later, are released
// unwritten. It does not wait for a consumer.
func (b *shareBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// drain waits for Close and for the consumer to let go, then releases
// every piece left, until the queue is closed.
func (b *shareBody) drain() {
	<-b.closed
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur.free()
	b.cur = item{}
	for it := range b.s.q {
		it.free()
	}
}

// fail records why the share failed, keeping the first reason.
func (s *sink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	s.failed.Store(true)
	s.signal()
}

func (s *sink) reason() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// send queues a piece, giving up on the share if its node makes no
// progress for stall. It reports whether the share is still going.
func (s *sink) send(it item, stall time.Duration) bool {
	if s.failed.Load() {
		it.free()
		return false
	}
	select {
	case s.q <- it:
		return true
	default:
	}
	t := s.clock.NewTimer(stall)
	defer t.Stop()
	select {
	case s.q <- it:
		return true
	case <-t.Chan():
		s.abort(fmt.Errorf("object: node %.8s made no progress for %v", s.node, stall))
		s.q <- it // the writer drains now that the request is cancelled
		return false
	}
}

// offer queues a piece without waiting (AckAtHappy): a share whose
// queue is full has fallen too far behind the upload, and is cut off,
// to be placed in the background by repair once the upload ends.
func (s *sink) offer(it item) {
	if s.failed.Load() {
		it.free()
		return
	}
	select {
	case s.q <- it:
	default:
		s.abort(fmt.Errorf("object: node %.8s fell %d pieces behind the upload; its share is placed later", s.node, cap(s.q)))
		it.free()
	}
}

// abort ends the share's upload without completing it: the node sees a
// cut-off stream and stores nothing.
func (s *sink) abort(err error) {
	s.fail(err)
	s.cancel()
}

// finish closes the share's stream after its last piece and waits for
// the node's answer.
func (s *sink) finish() error {
	close(s.q)
	<-s.done
	<-s.wdone
	s.cancel()
	if !s.failed.Load() {
		return nil
	}
	return errOr(s.reason(), errAborted)
}

// sinks is the set of shares of one upload.
type sinks []*sink

// abortAll aborts every share and waits for all of them.
func (ss sinks) abortAll(err error) {
	var wg sync.WaitGroup
	for _, s := range ss {
		s.abort(err)
		wg.Add(1)
		go func() { defer wg.Done(); s.finish() }()
	}
	wg.Wait()
}
