package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// newTestIdentity returns an Identity with a fresh key in the grid of secret.
func newTestIdentity(t testing.TB, secret Secret) *Identity {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := New(key, secret)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func newTestSecret(t testing.TB) Secret {
	t.Helper()
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testServer is a node's HTTPS server on loopback. Its handler answers with
// the client's node ID and counts the requests that reach it.
type testServer struct {
	addr string
	hits atomic.Int64
}

func startServer(t *testing.T, id *Identity) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, id, ln)
}

// serve runs a node's HTTPS server on ln until the test ends.
func serve(t *testing.T, id *Identity, ln net.Listener) *testServer {
	t.Helper()
	ts := &testServer{addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ts.hits.Add(1)
			peer, err := PeerID(r.TLS)
			if err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			fmt.Fprintf(w, "%s %x", peer, r.TLS.Version)
		}),
		TLSConfig:         id.ServerTLS(),
		ErrorLog:          log.New(io.Discard, "", 0), // refused handshakes are expected
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ts
}

// resolver maps node IDs to addresses.
func resolver(m map[NodeID]string) func(NodeID) (string, bool) {
	return func(id NodeID) (string, bool) {
		a, ok := m[id]
		return a, ok
	}
}

// get fetches url with transport tr and returns the response body.
func get(t *testing.T, tr http.RoundTripper, url string) (*http.Response, string, error) {
	t.Helper()
	resp, body, _, err := getTLS(t, tr, url)
	return resp, body, err
}

// getTLS is get that also returns the TLS state of the connection the
// request went over (the transport's own connections carry no
// Response.TLS: see NewTransport).
func getTLS(t *testing.T, tr http.RoundTripper, url string) (*http.Response, string, *tls.ConnectionState, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var conn net.Conn
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, "", nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), ConnState(conn), err
}

func TestNewCertificates(t *testing.T) {
	secret := newTestSecret(t)
	a := newTestIdentity(t, secret)
	b := newTestIdentity(t, secret)
	if a.ID == b.ID {
		t.Fatal("two keys gave the same ID")
	}
	if !bytes.Equal(a.ca.Raw, b.ca.Raw) {
		t.Fatal("the grid CA certificate is not deterministic")
	}
	if a.ca.Subject.CommonName != "quilt grid CA" || !a.ca.IsCA {
		t.Errorf("CA subject %q IsCA %v", a.ca.Subject.CommonName, a.ca.IsCA)
	}
	leaf := a.Cert.Leaf
	if leaf.Subject.CommonName != string(a.ID) || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != string(a.ID) {
		t.Errorf("leaf CN %q DNS %q, want %q", leaf.Subject.CommonName, leaf.DNSNames, a.ID)
	}
	if !leaf.PublicKey.(ed25519.PublicKey).Equal(a.Key.Public()) {
		t.Error("leaf key is not the node key")
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if time.Until(leaf.NotAfter) < 9*365*24*time.Hour || time.Since(leaf.NotBefore) < 30*time.Minute {
		t.Errorf("leaf valid %v to %v", leaf.NotBefore, leaf.NotAfter)
	}
	// b's pool verifies a's leaf for both usages; another grid's does not.
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.pool, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("leaf does not verify for usage %v: %v", u, err)
		}
	}
	c := newTestIdentity(t, newTestSecret(t))
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.pool}); err == nil {
		t.Error("leaf verifies under another grid's CA")
	}
	if _, err := New(ed25519.PrivateKey{1, 2, 3}, secret); err == nil {
		t.Error("New accepted a short key")
	}
}

func TestTLSSameGrid(t *testing.T) {
	secret := newTestSecret(t)
	server := newTestIdentity(t, secret)
	client := newTestIdentity(t, secret)
	ts := startServer(t, server)

	var dials atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		if addr != ts.addr {
			return nil, fmt.Errorf("dialled %s, want the resolved %s", addr, ts.addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	tr := client.NewTransport(resolver(map[NodeID]string{server.ID: ts.addr}), dial)
	defer tr.CloseIdleConnections()

	for i := 0; i < 2; i++ { // the second request reuses the connection
		resp, body, cs, err := getTLS(t, tr, "https://"+string(server.ID)+"/v1/who")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		if want := fmt.Sprintf("%s %x", client.ID, tls.VersionTLS13); body != want {
			t.Fatalf("server saw %q, want %q (client ID, TLS 1.3)", body, want)
		}
		if cs == nil || cs.Version != tls.VersionTLS13 {
			t.Fatalf("client negotiated %v, want TLS 1.3", cs)
		}
		if got, err := PeerID(cs); err != nil || got != server.ID {
			t.Fatalf("client sees peer %q, %v; want %q", got, err, server.ID)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials through the custom dialer, want 1 (keep-alive)", n)
	}
	if n := ts.hits.Load(); n != 2 {
		t.Errorf("server handled %d requests, want 2", n)
	}
}

func TestTLSByAddress(t *testing.T) {
	// Dialling an invite address: any member of the grid is accepted, and
	// PeerID says which one it is.
	secret := newTestSecret(t)
	server := newTestIdentity(t, secret)
	client := newTestIdentity(t, secret)
	ts := startServer(t, server)
	tr := client.NewTransport(nil, nil)
	defer tr.CloseIdleConnections()

	resp, body, cs, err := getTLS(t, tr, "https://"+ts.addr+"/v1/who")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, string(client.ID)) {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	if got, err := PeerID(cs); err != nil || got != server.ID {
		t.Fatalf("PeerID = %q, %v; want %q", got, err, server.ID)
	}

	// The same by IPv6 loopback, if the machine has it.
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Log("skipping IPv6: ", err)
		return
	}
	ts6 := serve(t, server, ln)
	if !strings.HasPrefix(ts6.addr, "[::1]:") {
		t.Fatalf("IPv6 address %q", ts6.addr)
	}
	_, _, cs, err = getTLS(t, tr, "https://"+ts6.addr+"/v1/who")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := PeerID(cs); err != nil || got != server.ID {
		t.Fatalf("IPv6: PeerID = %q, %v; want %q", got, err, server.ID)
	}
}

func TestTLSClientFromOtherGrid(t *testing.T) {
	server := newTestIdentity(t, newTestSecret(t))
	ts := startServer(t, server)
	stranger := newTestIdentity(t, newTestSecret(t))

	// With our transport the stranger refuses the server first.
	tr := stranger.NewTransport(resolver(map[NodeID]string{server.ID: ts.addr}), nil)
	defer tr.CloseIdleConnections()
	if _, _, err := get(t, tr, "https://"+string(server.ID)+"/"); err == nil {
		t.Fatal("request from another grid succeeded")
	}

	// A stranger that does not check the server is refused by the server.
	cfg := stranger.ClientTLS()
	cfg.VerifyConnection = nil
	raw := &http.Transport{TLSClientConfig: cfg}
	defer raw.CloseIdleConnections()
	if resp, body, err := get(t, raw, "https://"+ts.addr+"/"); err == nil {
		t.Fatalf("server accepted a certificate from another grid: %d %q", resp.StatusCode, body)
	} else if !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Errorf("error %q, want the server's \"unknown certificate authority\" alert", err)
	}
	if n := ts.hits.Load(); n != 0 {
		t.Fatalf("handler ran %d times for clients from another grid", n)
	}
}

func TestTLSServerFromOtherGrid(t *testing.T) {
	server := newTestIdentity(t, newTestSecret(t))
	ts := startServer(t, server)
	client := newTestIdentity(t, newTestSecret(t))

	for _, url := range []string{"https://" + string(server.ID) + "/", "https://" + ts.addr + "/"} {
		tr := client.NewTransport(resolver(map[NodeID]string{server.ID: ts.addr}), nil)
		_, _, err := get(t, tr, url)
		tr.CloseIdleConnections()
		if err == nil {
			t.Fatalf("%s: client accepted a server from another grid", url)
		}
		if !errors.Is(err, ErrNotInGrid) {
			t.Fatalf("%s: error %q does not wrap ErrNotInGrid", url, err)
		}
		if !strings.Contains(err.Error(), ErrNotInGrid.Error()) {
			t.Fatalf("%s: error %q does not say %q", url, err, ErrNotInGrid)
		}
	}
}

func TestTLSWrongNode(t *testing.T) {
	secret := newTestSecret(t)
	server := newTestIdentity(t, secret)
	client := newTestIdentity(t, secret)
	expected := newTestIdentity(t, secret) // a member, but not the one listening
	ts := startServer(t, server)

	tr := client.NewTransport(resolver(map[NodeID]string{expected.ID: ts.addr}), nil)
	defer tr.CloseIdleConnections()
	_, _, err := get(t, tr, "https://"+string(expected.ID)+"/")
	if err == nil {
		t.Fatal("client accepted the wrong node")
	}
	if !errors.Is(err, ErrWrongNode) {
		t.Fatalf("error %q does not wrap ErrWrongNode", err)
	}
	if !strings.Contains(err.Error(), string(server.ID)) {
		t.Errorf("error %q does not name the node that answered", err)
	}

	// Upper case in the URL is the same node ID.
	_, _, err = get(t, tr, "https://"+strings.ToUpper(string(expected.ID))+"/")
	if !errors.Is(err, ErrWrongNode) {
		t.Fatalf("upper-case URL: error %v, want ErrWrongNode", err)
	}
}

func TestTransportUnknownNode(t *testing.T) {
	secret := newTestSecret(t)
	client := newTestIdentity(t, secret)
	other := newTestIdentity(t, secret)
	for _, resolve := range []func(NodeID) (string, bool){nil, resolver(nil)} {
		tr := client.NewTransport(resolve, func(_ context.Context, _, addr string) (net.Conn, error) {
			t.Errorf("dialled %s for an unknown node", addr)
			return nil, errors.New("no dialling in this test")
		})
		_, _, err := get(t, tr, "https://"+string(other.ID)+"/")
		if !errors.Is(err, ErrUnknownNode) {
			t.Fatalf("error %v, want ErrUnknownNode", err)
		}
	}
}

func TestTLSClientWithoutCertificate(t *testing.T) {
	server := newTestIdentity(t, newTestSecret(t))
	ts := startServer(t, server)

	tr := &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true,
		MinVersion:         tls.VersionTLS13,
	}}
	defer tr.CloseIdleConnections()
	resp, body, err := get(t, tr, "https://"+ts.addr+"/")
	if err == nil {
		t.Fatalf("server accepted a client without a certificate: %d %q", resp.StatusCode, body)
	}
	if !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("error %q, want the server's \"certificate required\" alert", err)
	}
	if n := ts.hits.Load(); n != 0 {
		t.Fatalf("handler ran %d times for a client without a certificate", n)
	}
}

func TestTLSOldVersionRefused(t *testing.T) {
	secret := newTestSecret(t)
	server := newTestIdentity(t, secret)
	ts := startServer(t, server)
	client := newTestIdentity(t, secret) // a member: only the version is wrong

	cfg := &tls.Config{
		Certificates:       []tls.Certificate{client.Cert},
		InsecureSkipVerify: true,
		MaxVersion:         tls.VersionTLS12,
	}
	conn, err := tls.Dial("tcp", ts.addr, cfg)
	if err == nil {
		conn.Close()
		t.Fatal("server accepted TLS 1.2")
	}
	if !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("error %q, want a protocol version alert", err)
	}

	// The same client at TLS 1.3 is accepted, so the version was the reason.
	cfg.MaxVersion = tls.VersionTLS13
	conn, err = tls.Dial("tcp", ts.addr, cfg)
	if err != nil {
		t.Fatalf("TLS 1.3: %v", err)
	}
	conn.Close()
}

func TestPeerIDErrors(t *testing.T) {
	if _, err := PeerID(nil); !errors.Is(err, ErrNotInGrid) {
		t.Errorf("PeerID(nil) error %v, want ErrNotInGrid", err)
	}
	if _, err := PeerID(&tls.ConnectionState{}); !errors.Is(err, ErrNotInGrid) {
		t.Errorf("PeerID(no certificates) error %v, want ErrNotInGrid", err)
	}
}
