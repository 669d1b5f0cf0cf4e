package s3_test

import (
	"bytes"
	"fmt"
	"io"
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
