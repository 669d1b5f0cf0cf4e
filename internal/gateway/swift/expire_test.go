package swift_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestExpiringObjects: X-Delete-At and X-Delete-After on PUT, POST and
// copies; bad values are 400; from its time an object is 404 and removed
// when read, and Expire removes the others whose time has come, not
// those whose expiry a later PUT or POST dropped.
func TestExpiringObjects(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	resp, body := c.do(t, "PUT", "/exp", nil)
	want(t, "PUT container", resp, body, 201)
	now := e.clock.Now().Unix()
	put := func(name string, hdr ...string) {
		t.Helper()
		resp, body := c.do(t, "PUT", "/exp/"+name, []byte("bytes of "+name), hdr...)
		want(t, "PUT "+name, resp, body, 201)
	}
	put("a", "X-Delete-After", "60")
	put("b", "X-Delete-At", fmt.Sprint(now+30))
	put("keep")
	put("over", "X-Delete-After", "10")
	put("over") // a new version without an expiry
	put("p")
	put("q", "X-Delete-After", "10")
	resp, _ = c.do(t, "HEAD", "/exp/a", nil)
	if resp.Header.Get("X-Delete-At") != fmt.Sprint(now+60) {
		t.Fatalf("X-Delete-After 60 at %d: X-Delete-At %q", now, resp.Header.Get("X-Delete-At"))
	}
	for _, bad := range [][]string{{"X-Delete-At", fmt.Sprint(now - 1)}, {"X-Delete-At", "soon"}, {"X-Delete-After", "-1"}, {"X-Delete-After", "1.5"}} {
		resp, body = c.do(t, "PUT", "/exp/bad", []byte("x"), bad...)
		want(t, fmt.Sprintf("PUT with %s: %s", bad[0], bad[1]), resp, body, 400)
		resp, body = c.do(t, "POST", "/exp/keep", nil, bad...)
		want(t, fmt.Sprintf("POST with %s: %s", bad[0], bad[1]), resp, body, 400)
	}
	// POST sets an expiry, or drops it (POST replaces what it does not
	// repeat); a copy does not inherit its source's.
	resp, body = c.do(t, "POST", "/exp/p", nil, "X-Delete-After", "10")
	want(t, "POST X-Delete-After", resp, body, 202)
	resp, body = c.do(t, "POST", "/exp/q", nil, "X-Object-Meta-Colour", "red")
	want(t, "POST without an expiry", resp, body, 202)
	resp, body = c.do(t, "COPY", "/exp/a", nil, "Destination", "exp/a-copy")
	want(t, "COPY", resp, body, 201)
	resp, body = c.do(t, "PUT", "/exp/b-copy", nil, "X-Copy-From", "/exp/b", "X-Delete-After", "20")
	want(t, "X-Copy-From with X-Delete-After", resp, body, 201)
	for name, at := range map[string]string{"p": fmt.Sprint(now + 10), "q": "", "a-copy": "", "over": "", "b-copy": fmt.Sprint(now + 20)} {
		resp, _ = c.do(t, "HEAD", "/exp/"+name, nil)
		if resp.Header.Get("X-Delete-At") != at {
			t.Fatalf("%s: X-Delete-At %q, want %q", name, resp.Header.Get("X-Delete-At"), at)
		}
	}

	// 45 s later: b is 404 when read, and gone from the grid too.
	e.clock.Add(45 * time.Second)
	resp, body = c.do(t, "GET", "/exp/b", nil)
	want(t, "GET of an expired object", resp, body, 404)
	if _, err := e.gw.Head(ctx, "exp", "b"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("the expired object read through Swift is still there: %v", err)
	}
	for _, m := range []string{"HEAD", "DELETE", "POST"} {
		resp, body = c.do(t, m, "/exp/p", nil)
		want(t, m+" of an expired object", resp, body, 404)
	}
	resp, body = c.do(t, "COPY", "/exp/b-copy", nil, "Destination", "exp/x")
	want(t, "COPY of an expired object", resp, body, 404)
	resp, body = c.do(t, "GET", "/exp/a", nil)
	want(t, "GET of an object not yet expired", resp, body, 200)

	// 75 s: Expire removes a (the others already went when read), and
	// keeps the objects whose expiry went away.
	e.clock.Add(30 * time.Second)
	n, err := e.api.Expire(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Expire removed %d: %v", n, err)
	}
	for name, there := range map[string]bool{"a": false, "b": false, "p": false, "b-copy": false, "keep": true, "over": true, "q": true, "a-copy": true} {
		_, err := e.gw.Head(ctx, "exp", name)
		if there != (err == nil) {
			t.Errorf("%s after Expire: %v", name, err)
		}
	}
	recs, err := e.gw.Records(ctx, "swift-expiring")
	if err != nil || len(recs) != 0 {
		t.Fatalf("records left after Expire: %d %v", len(recs), err)
	}
	if n, err := e.api.Expire(ctx); err != nil || n != 0 {
		t.Fatalf("Expire again removed %d: %v", n, err)
	}
}
