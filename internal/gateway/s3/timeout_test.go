package s3_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestStalledBody: a PUT whose body stops coming is answered 400
// RequestTimeout once BodyTimeout passes with no byte, the connection is
// closed, and what the upload held is let go: the request ends and no
// node keeps a share of it. A body that keeps coming, however slowly,
// is not cut off.
func TestStalledBody(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 5}, s3.Options{BodyTimeout: time.Second})
	if resp, b := e.do(t, e.admin, "PUT", "/stalls", nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	c := e.raw(t, e.admin, "PUT", "/stalls/k", "UNSIGNED-PAYLOAD", []string{"Content-Length", fmt.Sprint(4 << 20)}, make([]byte, 1<<20))
	resp, b := answer(t, c)
	if resp.StatusCode != 400 || !bytes.Contains(b, []byte("<Code>RequestTimeout</Code>")) {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, b)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection left open after the timeout: %d %v", n, err)
	}
	waitFor(t, "the request to end", func() bool { return e.s3.Active() == 0 })
	waitFor(t, "the nodes to drop the upload's shares", func() bool {
		for _, nd := range e.grid.Nodes {
			if nd != nil && nd.Store().Usage().Shares != 0 {
				return false
			}
		}
		return true
	})
	if resp, _ := e.do(t, e.admin, "HEAD", "/stalls/k", nil); resp.StatusCode != 404 {
		t.Fatalf("a timed-out body was stored: %d", resp.StatusCode)
	}

	// Slow but steady: a byte every 200 ms is progress.
	body := []byte("slow.")
	c = e.raw(t, e.admin, "PUT", "/stalls/slow", "UNSIGNED-PAYLOAD", []string{"Content-Length", fmt.Sprint(len(body))}, nil)
	for _, ch := range body {
		time.Sleep(200 * time.Millisecond)
		if _, err := c.Write([]byte{ch}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, b := answer(t, c); resp.StatusCode != 200 {
		t.Fatalf("slow body: %d %s", resp.StatusCode, b)
	}
}

// TestIdleConnectionClosed: HTTPServer closes a keep-alive connection
// idle for IdleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{IdleTimeout: 200 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.s3.HTTPServer()
	go srv.Serve(ln)
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", ln.Addr())
	resp, _ := answer(t, c)
	if resp.StatusCode != 403 || resp.Close {
		t.Fatalf("anonymous request: %d, close %v", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection not closed: %d %v", n, err)
	}
}
