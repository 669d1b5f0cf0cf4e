package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// bodyGrid is a Grid whose PutShare hands each share body to consume and
// reports what consume returned. Only PutShare is used here.
type bodyGrid struct {
	consume func(r io.Reader) error
	got     chan error
}

func (g *bodyGrid) PutShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) error {
	err := g.consume(r)
	g.got <- err
	return err
}
func (g *bodyGrid) Nodes(context.Context) ([]Node, error) { return nil, nil }
func (g *bodyGrid) GetShare(context.Context, string, sharestore.Key, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("unused")
}
func (g *bodyGrid) ListShares(context.Context, string, sharefile.SI) ([]int, error) { return nil, nil }
func (g *bodyGrid) DeleteShare(context.Context, string, sharestore.Key, []byte) error {
	return nil
}

// newTestSink starts a sink whose share body is handed to consume.
func newTestSink(consume func(io.Reader) error) (*bodyGrid, *sink) {
	g := &bodyGrid{consume: consume, got: make(chan error, 1)}
	c := New(g, Options{Stall: 5 * time.Second})
	return g, c.newSink(context.Background(), 0, "n", sharestore.Key{}, -1, sharestore.Lease{}, sinkQueue, nil)
}

// Consumers of a share body: the transport's way (WriteTo) and a plain
// reader's (Read only, in small pieces).
var consumers = map[string]func(w *bytes.Buffer) func(io.Reader) error{
	"WriteTo": func(w *bytes.Buffer) func(io.Reader) error {
		return func(r io.Reader) error { _, err := r.(io.WriterTo).WriteTo(w); return err }
	},
	"Read": func(w *bytes.Buffer) func(io.Reader) error {
		return func(r io.Reader) error {
			_, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, make([]byte, 7))
			return err
		}
	},
}

// A share body delivers every piece in order and ends cleanly after the
// last; every piece is released once.
func TestShareBodyDelivers(t *testing.T) {
	for name, mk := range consumers {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			g, s := newTestSink(mk(&out))
			var released atomic.Int32
			var want bytes.Buffer
			for i := range 50 {
				b := bytes.Repeat([]byte{byte(i)}, 1+i*37)
				want.Write(b)
				if !s.send(item{b: b, release: func() { released.Add(1) }}, time.Second) {
					t.Fatalf("piece %d refused", i)
				}
			}
			if err := s.finish(); err != nil {
				t.Fatal(err)
			}
			if err := <-g.got; err != nil {
				t.Fatalf("consumer: %v", err)
			}
			if !bytes.Equal(out.Bytes(), want.Bytes()) {
				t.Fatalf("got %d bytes, want %d (or different content)", out.Len(), want.Len())
			}
			if n := released.Load(); n != 50 {
				t.Fatalf("%d pieces released, want 50", n)
			}
		})
	}
}

// An aborted share never ends cleanly for its consumer (the node would
// take a cut-off share as whole), and pieces sent after the abort are
// released too.
func TestShareBodyAbortCutsOff(t *testing.T) {
	for name, mk := range consumers {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			g, s := newTestSink(mk(&out))
			var released atomic.Int32
			piece := func() item { return item{b: []byte("piece"), release: func() { released.Add(1) }} }
			for range 3 {
				s.send(piece(), time.Second)
			}
			reason := errors.New("node too slow")
			s.abort(reason)
			for range 5 {
				s.send(piece(), time.Second)
			}
			err := s.finish()
			if !errors.Is(err, reason) {
				t.Fatalf("finish: %v, want the abort's reason", err)
			}
			if cerr := <-g.got; cerr == nil {
				t.Fatal("the consumer saw a clean end of an aborted share")
			}
			if n := released.Load(); n != 8 {
				t.Fatalf("%d pieces released, want 8", n)
			}
		})
	}
}

// A node that answers without reading the body (refusing it) leaves the
// pieces to be released by the sink, and the upload is not held up.
func TestShareBodyUnread(t *testing.T) {
	refused := errors.New("refused")
	g, s := newTestSink(func(io.Reader) error { return refused })
	<-g.got
	var released atomic.Int32
	for range 20 {
		s.send(item{b: []byte("x"), release: func() { released.Add(1) }}, time.Second)
	}
	if err := s.finish(); !errors.Is(err, refused) {
		t.Fatalf("finish: %v", err)
	}
	if n := released.Load(); n != 20 {
		t.Fatalf("%d pieces released, want 20", n)
	}
}
