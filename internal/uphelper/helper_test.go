package uphelper_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

const (
	clientHost = "127.79.200.1:7700"
	fastHost   = "127.79.200.2:7700"
)

// p is small so that tests move little data: 8 segments of 32 KiB.
var p = codec.Params{K: 3, N: 10, SegmentSize: 32 << 10}

const size = 256 << 10

// data returns size bytes of a pattern a test can look for: random, but
// the same for a seed.
func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// countingConn counts the bytes a client writes on its connections.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// client is an uploader at host of ln: a node client whose connections
// go through host's links and are counted, and an object client over it.
type client struct {
	up   *uphelper.Uploader
	obj  *object.Client
	nc   *node.Client
	sent atomic.Int64 // bytes written on all its connections
}

func newClient(t *testing.T, g *testgrid.Grid, ln *linkemu.Network, host string) *client {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(crand.Reader)
	id, err := identity.New(key, g.Invite.Secret)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{}
	dial := ln.Dialer(host)
	inv := identity.Invite{Secret: g.Invite.Secret}
	for _, n := range g.Nodes {
		if n != nil {
			inv.Addrs = append(inv.Addrs, n.Addr())
		}
	}
	c.nc = node.NewClientDial(inv, id, func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{conn, &c.sent}, nil
	})
	c.obj = object.New(object.NodeGrid{Client: c.nc, MaxAge: 100 * time.Millisecond}, object.Options{
		LeaseSecret: func(si sharefile.SI) []byte { return append([]byte("uploader lease "), si[:]...) },
		AckAtHappy:  true, Stall: time.Minute,
	})
	t.Cleanup(c.obj.Close)
	c.up = &uphelper.Uploader{Nodes: c.nc, Objects: c.obj}
	return c
}

// helperOn runs the usual helper on node at, wrapped by wrap if set.
func helperOn(at int, wrap func(http.Handler) http.Handler) func(i int) func(*node.Node) http.Handler {
	return func(i int) func(*node.Node) http.Handler {
		if i != at {
			return nil
		}
		m := testgrid.HelperMount()
		if wrap == nil {
			return m
		}
		return func(n *node.Node) http.Handler { return wrap(m(n)) }
	}
}

// readBack reads rc with a client of its own, which never saw the upload.
func readBack(t *testing.T, g *testgrid.Grid, rc codec.ReadCap, want []byte) {
	t.Helper()
	c := g.Objects(object.Options{})
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Get(ctx, rc, &buf, 0, -1); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("read back %d bytes, not the %d stored", buf.Len(), len(want))
	}
}

// recorder keeps the bodies of the uploads a helper receives, and the
// requests' URLs and headers.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	meta   []string
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(r.Body, &buf), r.Body}
		h.ServeHTTP(w, r)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if r.URL.Path == uphelper.PathUpload {
			rec.bodies = append(rec.bodies, buf.Bytes())
			hdr, _ := json.Marshal(r.Header)
			rec.meta = append(rec.meta, r.URL.String()+string(hdr))
		}
	})
}

// Through a helper, the uploader sends the file about once (a direct
// upload sends 10/3 of it), the object reads back through any client
// with the capability, and the helper received neither the plaintext nor
// the key.
func TestHelperUploadSendsFileOnce(t *testing.T) {
	ln := linkemu.New(1)
	var rec recorder
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln, Helper: helperOn(0, rec.wrap)})
	c := newClient(t, g, ln, clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	in := data(1, size)

	// Direct, for comparison: the same client sends 10/3 of the file.
	before := c.sent.Load()
	if _, _, err := c.obj.Put(ctx, bytes.NewReader(in), size, p, 7); err != nil {
		t.Fatal(err)
	}
	if err := c.obj.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	direct := c.sent.Load() - before

	before = c.sent.Load()
	rc, rep, err := c.up.Put(ctx, helper, bytes.NewReader(in), size, p, 7)
	if err != nil {
		t.Fatal(err)
	}
	through := c.sent.Load() - before
	t.Logf("client sent %d bytes direct, %d through the helper (file %d); helper says happiness %d, %d pending; %d nodes confirmed",
		direct, through, size, rep.Answer.Happiness, rep.Answer.Pending, rep.ConfirmedNodes)
	if through > size*12/10 {
		t.Errorf("through the helper the client sent %d bytes for a file of %d: want about 1×", through, size)
	}
	if direct < size*3 {
		t.Errorf("direct upload sent only %d bytes for %d: the comparison measures nothing", direct, size)
	}
	if rep.ConfirmedNodes < 7 {
		t.Errorf("%d nodes confirmed, want ≥ 7", rep.ConfirmedNodes)
	}
	readBack(t, g, rc, in)

	// The helper put the verify capability in the repair registry.
	if rep.Answer.Registered == 0 {
		t.Error("the helper registered the object with no node's repair registry")
	}
	entries, err := c.nc.Registry(ctx, string(g.Nodes[5].ID()))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || e == rc.Verify().String()
	}
	if !found {
		t.Errorf("node 5's repair registry has no entry of the object (%d entries)", len(entries))
	}

	// What the helper got: sealed segments, never the plaintext or key.
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.bodies) != 1 {
		t.Fatalf("helper saw %d uploads, want 1", len(rec.bodies))
	}
	body := rec.bodies[0]
	if int64(len(body)) != size+int64(size/p.SegmentSize)*16 {
		t.Errorf("helper received %d bytes, want the %d of the sealed segments", len(body), size+size/p.SegmentSize*16)
	}
	for off := 0; off+64 <= size; off += 4096 {
		if bytes.Contains(body, in[off:off+64]) {
			t.Fatalf("the helper received plaintext (bytes %d..%d of the file)", off, off+64)
		}
	}
	for _, secret := range [][]byte{rc.Key[:], []byte(strings.ToLower(rc.String()))} {
		if bytes.Contains(body, secret) || strings.Contains(strings.ToLower(rec.meta[0]), strings.ToLower(string(secret))) {
			t.Fatal("the helper received the key")
		}
	}
	for _, k := range []string{rc.String(), strings.ToLower(hexOf(rc.Key[:]))} {
		if strings.Contains(strings.ToLower(rec.meta[0]), strings.ToLower(k)) {
			t.Fatal("the key was in the upload's URL or headers")
		}
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, x := range b {
		out = append(out, digits[x>>4], digits[x&15])
	}
	return string(out)
}

// A helper that stores other data than it was sent (here: one flipped
// byte of ciphertext) answers with a root the uploader did not compute,
// and the upload fails; one that stores right but names the wrong nodes
// is caught by the trailers the nodes hold. Neither returns a capability.
func TestLyingHelperDetected(t *testing.T) {
	var mode atomic.Int32 // 1: flip a byte; 2: misreport the nodes
	lie := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != uphelper.PathUpload {
				h.ServeHTTP(w, r)
				return
			}
			switch mode.Load() {
			case 1:
				r.Body = struct {
					io.Reader
					io.Closer
				}{&flipper{r: r.Body, at: 40_000}, r.Body}
				h.ServeHTTP(w, r)
			case 2:
				rr := httptest.NewRecorder()
				h.ServeHTTP(rr, r)
				var a uphelper.Answer
				if err := json.Unmarshal(rr.Body.Bytes(), &a); err != nil {
					w.WriteHeader(rr.Code)
					w.Write(rr.Body.Bytes())
					return
				}
				// Each share said to be on the node of the next.
				first := a.Shares[0].Node
				for i := range a.Shares {
					if i+1 < len(a.Shares) {
						a.Shares[i].Node = a.Shares[i+1].Node
					} else {
						a.Shares[i].Node = first
					}
					a.Shares[i].Err = ""
				}
				json.NewEncoder(w).Encode(a)
			}
		})
	}
	ln := linkemu.New(2)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln, Helper: helperOn(0, lie)})
	c := newClient(t, g, ln, clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	for _, m := range []int32{1, 2} {
		mode.Store(m)
		rc, _, err := c.up.Put(ctx, helper, bytes.NewReader(data(uint64(m), size)), size, p, 7)
		if !errors.Is(err, uphelper.ErrHelperLied) {
			t.Fatalf("mode %d: got %v (cap %v), want ErrHelperLied", m, err, rc.Size)
		}
		t.Logf("mode %d: %v", m, err)
	}
}

// flipper flips the byte at offset at of what it reads.
type flipper struct {
	r   io.Reader
	off int
	at  int
}

func (f *flipper) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if f.at >= f.off && f.at < f.off+n {
		b[f.at-f.off] ^= 1
	}
	f.off += n
	return n, err
}

// A helper that dies mid-upload makes the upload fail with
// ErrHelperFailed and no capability; a direct upload then works.
func TestHelperKilledMidUpload(t *testing.T) {
	ln := linkemu.New(3)
	g := testgrid.New(t, testgrid.Options{Nodes: 11, Net: ln, Helper: helperOn(0, nil)})
	ln.SetHost(clientHost, linkemu.HostLimit{Up: 100_000})
	c := newClient(t, g, ln, clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	in := data(3, size)
	go func() {
		for c.sent.Load() < size/3 && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		g.Kill(0)
	}()
	rc, rep, err := c.up.Put(ctx, helper, bytes.NewReader(in), size, p, 7)
	if !errors.Is(err, uphelper.ErrHelperFailed) {
		t.Fatalf("got %v (cap of %d bytes), want ErrHelperFailed", err, rc.Size)
	}
	if rc != (codec.ReadCap{}) {
		t.Fatal("a capability came with the error")
	}
	t.Logf("%v (sent %d)", err, rep.Sent)
	g.WaitAlive(10)
	rc, _, err = c.obj.Put(ctx, bytes.NewReader(in), size, p, 7)
	if err != nil {
		t.Fatalf("direct upload after the helper died: %v", err)
	}
	readBack(t, g, rc, in)
}

// Behind a throttled uplink, the measured links make Choose take the
// helper; on a fast link, where the nodes (1 MB/s each) are the limit
// for the client and the helper alike, they do not.
func TestChooseHelperBehindSlowUplink(t *testing.T) {
	ln := linkemu.New(4)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln, Helper: helperOn(0, nil)})
	for i := range 10 {
		ln.SetHost(testgrid.Host(i), linkemu.HostLimit{Down: 1_000_000})
	}
	ln.SetHost(clientHost, linkemu.HostLimit{Up: 100_000})
	slow := newClient(t, g, ln, clientHost)
	fast := newClient(t, g, ln, fastHost)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	// The helper learns its links by placing an object.
	if _, _, err := fast.up.Put(ctx, helper, bytes.NewReader(data(40, size)), size, p, 7); err != nil {
		t.Fatal(err)
	}
	for i, c := range []*client{slow, fast} {
		// Each client measures its links with a direct upload.
		if _, _, err := c.obj.Put(ctx, bytes.NewReader(data(uint64(41+i), size)), size, p, 7); err != nil {
			t.Fatal(err)
		}
		if err := c.obj.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The helper's rate comes once its background shares are measured.
	var st uphelper.Status
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var err error
		st, err = uphelper.HelperStatus(ctx, fast.nc, helper, p, 7)
		if err != nil {
			t.Fatal(err)
		}
		if st.Rate > 0 || time.Now().After(deadline) {
			break
		}
	}
	if st.Rate == 0 {
		t.Fatal("the helper reports no placing rate after placing an object")
	}
	cs := uphelper.Choose(slow.obj.Links(), st.Rate, size, p, 7)
	cf := uphelper.Choose(fast.obj.Links(), st.Rate, size, p, 7)
	t.Logf("slow uplink: %s", cs.Why)
	t.Logf("fast link: %s", cf.Why)
	if !cs.Helper {
		t.Errorf("behind a 100 kB/s uplink the helper was not chosen: %s", cs.Why)
	}
	if cf.Helper {
		t.Errorf("on a fast link the helper was chosen: %s", cf.Why)
	}
}

// Choose's rule on fixed estimates.
func TestChooseRule(t *testing.T) {
	links := func(n int, up float64) map[string]object.LinkEstimate {
		m := map[string]object.LinkEstimate{}
		for i := range n {
			m[string(rune('a'+i))] = object.LinkEstimate{Up: up}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		links map[string]object.LinkEstimate
		rate  float64
		want  bool
	}{
		{"uplink-limited, fast helper", links(10, 15_000), 2_000_000, true},
		{"node-limited, helper as fast", links(10, 1_000_000), 3_000_000, false},
		{"helper not measured", links(10, 15_000), 0, false},
		{"too few links measured", links(5, 15_000), 2_000_000, false},
		{"slow helper", links(10, 15_000), 60_000, false},
	} {
		if got := uphelper.Choose(tc.links, tc.rate, 4<<20, codec.DefaultParams(), 7); got.Helper != tc.want {
			t.Errorf("%s: helper %v, want %v (%s)", tc.name, got.Helper, tc.want, got.Why)
		}
	}
}

// Bad requests get a clear error, not an upload.
func TestHelperBadRequests(t *testing.T) {
	ln := linkemu.New(5)
	g := testgrid.New(t, testgrid.Options{Nodes: 3, Net: ln, Helper: helperOn(0, nil)})
	c := newClient(t, g, ln, clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	if _, err := c.nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"k=3&n=10&seg=4096&happy=7", "bad storage index"},
		{"k=0&n=10&seg=4096&happy=7&si=00", "uphelper"},
		{"k=3&n=10&seg=4096&happy=11&si=00112233445566778899aabbccddeeff", "happiness"},
		{"k=3&n=10&seg=4096&happy=7&si=00112233445566778899aabbccddeeff", "X-Quilt-Lease"},
	} {
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+helper+uphelper.PathUpload+"?"+tc.query, strings.NewReader("x"))
		resp, err := c.nc.HTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s %q, want 400 with %q", tc.query, resp.Status, b, tc.want)
		}
	}
	// A node that runs no helper says so.
	_, err := uphelper.HelperStatus(ctx, c.nc, string(g.Nodes[1].ID()), p, 2)
	if !errors.Is(err, uphelper.ErrHelperFailed) {
		t.Errorf("status of a node without a helper: %v", err)
	}
	if _, err := uphelper.Resolve(ctx, c.nc, "nosuchnode"); !errors.Is(err, uphelper.ErrNoHelper) {
		t.Errorf("resolve of no member: %v", err)
	}
}

// A helper busy with its most uploads refuses one more (503) and
// PutVia uploads it directly instead, saying why.
func TestBusyHelperFallsBackToDirect(t *testing.T) {
	ln := linkemu.New(6)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Net: ln, Helper: func(i int) func(*node.Node) http.Handler {
		if i != 0 {
			return nil
		}
		return uphelper.Mount(uphelper.NodeConfig{Uploads: 1, Stall: 5 * time.Second})
	}})
	ln.SetHost(clientHost, linkemu.HostLimit{Up: 50_000})
	slow := newClient(t, g, ln, clientHost)
	other := newClient(t, g, ln, fastHost)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	done := make(chan error, 1)
	go func() {
		_, _, err := slow.up.Put(ctx, helper, bytes.NewReader(data(60, size)), size, p, 7)
		done <- err
	}()
	for slow.sent.Load() < 60_000 {
		time.Sleep(10 * time.Millisecond)
	}
	in := data(61, size)
	_, _, err := other.up.Put(ctx, helper, bytes.NewReader(in), size, p, 7)
	if !errors.Is(err, uphelper.ErrHelperFailed) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("second upload to a helper of one: %v, want ErrHelperFailed saying busy", err)
	}
	rc, path, err := other.up.PutVia(ctx, helper, false, bytes.NewReader(in), size, p, 7)
	if err != nil {
		t.Fatal(err)
	}
	if path.Helper || !strings.Contains(path.Why, "after the helper failed") {
		t.Errorf("PutVia with the helper busy: helper %v, %q", path.Helper, path.Why)
	}
	readBack(t, g, rc, in)
	if err := <-done; err != nil {
		t.Fatalf("the first upload through the helper: %v", err)
	}
	// The helper's node counts both on its /metrics.
	want := map[string]float64{`quilt_helper_uploads_total{result="ok"}`: 1, `quilt_helper_uploads_total{result="busy"}`: 2, // Put, then PutVia before it went direct
		`quilt_helper_uploads_total{result="failed"}`: 0, `quilt_helper_placed_bytes_total`: size, `quilt_helper_uploads_max`: 1}
	got := gathered(t, g.Nodes[0].Registry())
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if sealed := got["quilt_helper_received_bytes_total"]; sealed < size {
		t.Errorf("quilt_helper_received_bytes_total = %v, want at least the file's %d bytes", sealed, size)
	}
}

// gathered returns the values of a registry's counters and gauges, by
// name and labels as Prometheus writes them.
func gathered(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				name += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[name] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[name] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A client that stops sending mid-upload, its connection still open,
// is cut off after the helper's BodyStall and its slot freed.
func TestStalledUploadCutOff(t *testing.T) {
	ln := linkemu.New(7)
	g := testgrid.New(t, testgrid.Options{Nodes: 3, Net: ln, Helper: func(i int) func(*node.Node) http.Handler {
		if i != 0 {
			return nil
		}
		return uphelper.Mount(uphelper.NodeConfig{Uploads: 1, BodyStall: time.Second})
	}})
	c := newClient(t, g, ln, clientHost)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	helper := string(g.Nodes[0].ID())
	if _, err := c.nc.Members(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(make([]byte, 1000)) // then nothing, and no end
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://"+helper+uphelper.PathUpload+
		"?k=1&n=3&seg=4096&happy=2&si=00112233445566778899aabbccddeeff", pr)
	req.Header.Set("X-Quilt-Lease", strings.Repeat("ab", 32))
	req.Header.Set("X-Quilt-Cancel", strings.Repeat("cd", 32))
	resp, err := c.nc.HTTP().Do(req)
	if err != nil {
		t.Fatalf("the stalled upload got no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || !strings.Contains(string(b), "no progress") {
		t.Fatalf("stalled upload: %s %q, want an error saying it made no progress", resp.Status, b)
	}
	st, err := uphelper.HelperStatus(ctx, c.nc, helper, codec.Params{K: 1, N: 3, SegmentSize: 4096}, 2)
	if err != nil || st.Busy != 0 {
		t.Fatalf("after the stalled upload: %+v, %v; want no upload busy", st, err)
	}
}

// Nodes that run a helper say so in their gossip metadata, and Discover
// chooses among them by the client's link estimates; a grid with no
// helper is ErrNoHelper.
func TestDiscoverHelper(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 4, Helper: func(i int) func(*node.Node) http.Handler {
		if i == 1 || i == 3 {
			return testgrid.HelperMount()
		}
		return nil
	}})
	g.WaitAlive(4)
	nc := g.NodeClient()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := string(g.Nodes[1].ID()), string(g.Nodes[3].ID())
	var id, why string
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		id, why, err = uphelper.Discover(ctx, nc, map[string]object.LinkEstimate{a: {Up: 1e6}, b: {Up: 5e6}})
		if err == nil && id == b || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || id != b || !strings.Contains(why, "fastest measured") {
		t.Fatalf("Discover: %.8s (%s), %v; want %.8s, the helper with the faster link", id, why, err, b)
	}
	id, _, err = uphelper.Discover(ctx, nc, map[string]object.LinkEstimate{a: {RTT: 2 * time.Millisecond}, b: {RTT: 40 * time.Millisecond}})
	if err != nil || id != a {
		t.Fatalf("Discover by round trips: %.8s, %v; want %.8s", id, err, a)
	}
	if id, _, err := uphelper.Discover(ctx, nc, nil); err != nil || (id != a && id != b) {
		t.Fatalf("Discover with no estimates: %.8s, %v; want one of the helpers", id, err)
	}

	plain := testgrid.New(t, testgrid.Options{Nodes: 2})
	plain.WaitAlive(2)
	if _, _, err := uphelper.Discover(ctx, plain.NodeClient(), nil); !errors.Is(err, uphelper.ErrNoHelper) {
		t.Fatalf("Discover on a grid without helpers: %v, want ErrNoHelper", err)
	}
}
