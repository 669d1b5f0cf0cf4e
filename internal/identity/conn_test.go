package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// connKey keys a request's connection in its context.
type connKey struct{}

// countingConn counts the writes made on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// countingListener counts the writes on the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

// Bodies of many TLS records travel intact both ways between a server on
// NewTLSListener and a client of NewTransport, both reading ahead and
// gathering, in far fewer writes than records; the server still sees who
// the client is.
func TestGatheredWrites(t *testing.T) {
	secret := newTestSecret(t)
	server := newTestIdentity(t, secret)
	client := newTestIdentity(t, secret)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _ := r.Context().Value(connKey{}).(net.Conn)
			peer, err := PeerID(ConnState(conn))
			if err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			// Echo the body back too, for the read-ahead on the client.
			w.Header().Set("X-Peer", string(peer))
			w.Header().Set("X-Sum", hex.EncodeToString(h.Sum(nil)))
			back := make([]byte, n)
			rand.Read(back)
			w.Write(back)
		}),
		TLSConfig: server.ServerTLS(),
		ErrorLog:  log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	var swrites atomic.Int64
	go srv.Serve(NewTLSListener(countingListener{ln, &swrites}, srv.TLSConfig))
	defer srv.Close()

	var writes atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	tr := client.NewTransport(resolver(map[NodeID]string{server.ID: ln.Addr().String()}), dial)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	for _, size := range []int{1, 100 << 10, 3<<20 + 17} {
		body := make([]byte, size)
		rand.Read(body)
		// A body that is not a *bytes.Reader, so that it goes chunked
		// in big writes (io.WriterTo) as share bodies do.
		req, _ := http.NewRequest("PUT", "https://"+string(server.ID)+"/", struct {
			io.WriterTo
			io.Reader
		}{bytes.NewReader(body), nil})
		before, sbefore := writes.Load(), swrites.Load()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d bytes: %d %v %s", size, resp.StatusCode, err, got)
		}
		sum := sha256.Sum256(body)
		if resp.Header.Get("X-Sum") != hex.EncodeToString(sum[:]) {
			t.Fatalf("%d bytes: the server got other bytes", size)
		}
		if len(got) != size {
			t.Fatalf("%d bytes: %d came back", size, len(got))
		}
		if resp.Header.Get("X-Peer") != string(client.ID) {
			t.Fatalf("server saw peer %q, want %q", resp.Header.Get("X-Peer"), client.ID)
		}
		records := size/(16<<10) + 1
		if n := writes.Load() - before; size > 1<<20 && n > int64(records/4) {
			t.Errorf("%d bytes (%d records or more) took %d writes by the client", size, records, n)
		}
		if n := swrites.Load() - sbefore; size > 1<<20 && n > int64(records/4) {
			t.Errorf("%d bytes (%d records or more) took %d writes by the server", size, records, n)
		}
	}
}

// BenchmarkTransfer moves 4 MiB bodies over one kept-alive connection of
// NewTransport to a server on NewTLSListener, up (PUT, as shares are
// stored) and down (GET, as they are read), with and without the
// read-ahead under TLS.
func BenchmarkTransfer(b *testing.B) {
	secret := newTestSecret(b)
	server := newTestIdentity(b, secret)
	client := newTestIdentity(b, secret)
	const size = 4 << 20
	payload := make([]byte, size)
	for _, ra := range []int{0, 64 << 10} {
		old := readAhead
		readAhead = ra
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == "PUT" {
					io.Copy(io.Discard, r.Body)
					return
				}
				w.Write(payload)
			}),
			TLSConfig: server.ServerTLS(),
			ErrorLog:  log.New(io.Discard, "", 0),
		}
		go srv.Serve(NewTLSListener(ln, srv.TLSConfig))
		tr := client.NewTransport(resolver(map[NodeID]string{server.ID: ln.Addr().String()}), nil)
		hc := &http.Client{Transport: tr}
		url := "https://" + string(server.ID) + "/"
		name := map[int]string{0: "readahead=off", 64 << 10: "readahead=64KiB"}[ra]
		b.Run("put/"+name, func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				req, _ := http.NewRequest("PUT", url, struct {
					io.WriterTo
					io.Reader
				}{bytes.NewReader(payload), nil})
				resp, err := hc.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
		b.Run("get/"+name, func(b *testing.B) {
			b.SetBytes(size)
			buf := make([]byte, 32<<10)
			for b.Loop() {
				resp, err := hc.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				if n, _ := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf); n != size {
					b.Fatalf("got %d bytes", n)
				}
				resp.Body.Close()
			}
		})
		tr.CloseIdleConnections()
		srv.Close()
		readAhead = old
	}
}
