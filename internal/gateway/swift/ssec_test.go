package swift_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestS3CustomerKeyInSwift: an object stored through S3 with a customer
// key (SSE-C) cannot be read through Swift, which has no way to give the
// key: GET, a ranged GET, HEAD and COPY get a whole 403 answer saying
// why, before any of the object is sent; an object without a key in the
// same container reads as ever.
func TestS3CustomerKeyInSwift(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.gw.CreateBucket(ctx, "sealed", e.admin.ID); err != nil {
		t.Fatal(err)
	}
	var key gateway.CustomerKey
	copy(key[:], "0123456789abcdef0123456789abcdef")
	body := bytes.Repeat([]byte("secret "), 2000) // past the inline size
	for name, k := range map[string]*gateway.CustomerKey{"ssec": &key, "plain": nil} {
		if _, err := e.gw.Put(ctx, "sealed", name, bytes.NewReader(body), int64(len(body)), gateway.PutOptions{CustomerKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client(t)
	for _, tc := range []struct {
		method string
		hdr    []string
	}{{"GET", nil}, {"GET", []string{"Range", "bytes=0-9"}}, {"HEAD", nil}, {"COPY", []string{"Destination", "sealed/copied"}}} {
		resp, b := c.do(t, tc.method, "/sealed/ssec", nil, tc.hdr...) // fails on a body cut short
		if resp.StatusCode != 403 || tc.method != "HEAD" && !strings.Contains(string(b), "customer-provided key") {
			t.Errorf("%s %v of an SSE-C object: %s %q", tc.method, tc.hdr, resp.Status, b)
		}
		if bytes.Contains(b, []byte("secret")) {
			t.Errorf("%s: the object's bytes were sent", tc.method)
		}
	}
	if resp, _ := c.do(t, "HEAD", "/sealed/copied", nil); resp.StatusCode != 404 {
		t.Errorf("a refused COPY wrote its destination: %s", resp.Status)
	}
	if resp, b := c.do(t, "GET", "/sealed/plain", nil); resp.StatusCode != 200 || !bytes.Equal(b, body) {
		t.Errorf("plain object: %s, %d bytes", resp.Status, len(b))
	}
}
