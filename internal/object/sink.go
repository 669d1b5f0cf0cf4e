package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/sharestore"
)

// item is a piece of a share on its way to a node; release is called once
// the piece is no longer needed.
type item struct {
	b       []byte
	release func()
}

// sink streams one share to one node: pieces go through a small queue and
// a pipe into the PUT request's body. A failed or stalled sink is dropped:
// it keeps accepting pieces (and releasing them) so the upload goes on
// with the other shares.
type sink struct {
	share  int
	node   string
	q      chan item
	pw     *io.PipeWriter
	cancel context.CancelFunc
	failed atomic.Bool
	mu     sync.Mutex
	err    error // the first reason the share failed
	done   chan struct{}
	wdone  chan struct{}
}

var errAborted = errors.New("object: upload aborted")

func (c *Client) newSink(ctx context.Context, share int, node string, key sharestore.Key, size int64, lease sharestore.Lease) *sink {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	s := &sink{share: share, node: node, q: make(chan item, 4), pw: pw, cancel: cancel,
		done: make(chan struct{}), wdone: make(chan struct{})}
	go func() {
		err := c.grid.PutShare(ctx, node, key, pr, size, lease)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			s.fail(err)
		}
		pr.CloseWithError(fmt.Errorf("object: share %d on node %.8s: %w", share, node, errOr(err, errAborted)))
		close(s.done)
	}()
	go func() {
		defer close(s.wdone)
		for it := range s.q {
			if !s.failed.Load() {
				if _, err := pw.Write(it.b); err != nil {
					s.failed.Store(true)
				}
			}
			if it.release != nil {
				it.release()
			}
		}
	}()
	return s
}

// fail records why the share failed, keeping the first reason.
func (s *sink) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	s.failed.Store(true)
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
		if it.release != nil {
			it.release()
		}
		return false
	}
	select {
	case s.q <- it:
		return true
	default:
	}
	t := time.NewTimer(stall)
	defer t.Stop()
	select {
	case s.q <- it:
		return true
	case <-t.C:
		s.abort(fmt.Errorf("object: node %.8s made no progress for %v", s.node, stall))
		s.q <- it // the writer drains now that the request is cancelled
		return false
	}
}

// abort ends the share's upload without completing it: the node sees a
// cut-off stream and stores nothing.
func (s *sink) abort(err error) {
	s.fail(err)
	s.pw.CloseWithError(err)
	s.cancel()
}

// finish closes the share's stream after its last piece and waits for
// the node's answer.
func (s *sink) finish() error {
	close(s.q)
	<-s.wdone
	if !s.failed.Load() {
		s.pw.Close()
	} else {
		s.pw.CloseWithError(errAborted)
	}
	<-s.done
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
