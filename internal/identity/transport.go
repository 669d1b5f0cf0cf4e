package identity

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Transport timeouts and limits.
const (
	dialTimeout         = 10 * time.Second
	handshakeTimeout    = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxIdleConnsPerHost = 16
	maxIdleConns        = 256
)

// NewTransport returns an http.Transport for talking to nodes with this
// identity.
//
// URLs name a node by its ID as host: https://<nodeid>/v1/.... Such a host
// is resolved with resolve (nil resolves nothing) to a host:port, failing
// with [ErrUnknownNode] if it is unknown, and the TLS handshake pins the node
// ID (see [Identity.ClientTLS]). Any other host:port is dialled as it is and
// only has to belong to the grid.
//
// dial makes the underlying connections; nil means a net.Dialer. It exists so
// that a lab can put link emulation under the transport.
//
// The transport speaks HTTP/1.1, keeps connections alive (up to 16 idle per
// node), does not ask for compression (bodies are mostly ciphertext and range
// reads must see the stored bytes) and ignores proxy settings. Dialling and
// the TLS handshake each time out after 10 s; there is no overall timeout,
// since bodies stream: use the request's context.
//
// Its connections read ahead and gather the TLS records of each write into
// few system calls (see rawConn). They are therefore not *tls.Conn, and
// responses carry no Response.TLS: use [ConnState] on the connection that
// httptrace's GotConn reports.
func (id *Identity) NewTransport(resolve func(NodeID) (addr string, ok bool), dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	d := &nodeDialer{id: id, resolve: resolve, dial: dial}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.dialContext,
		DialTLSContext:        d.dialTLSContext,
		ForceAttemptHTTP2:     false,
		TLSHandshakeTimeout:   handshakeTimeout,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConnsPerHost,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// nodeDialer dials nodes by ID or address for NewTransport.
type nodeDialer struct {
	id      *Identity
	resolve func(NodeID) (string, bool)
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dialContext dials addr (host:port from a URL), resolving a node ID host.
func (d *nodeDialer) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, _, err := d.dialRaw(ctx, network, addr)
	return conn, err
}

// dialTLSContext dials addr and does the TLS handshake, with the URL host as
// server name so that a node ID host is pinned.
func (d *nodeDialer) dialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, host, err := d.dialRaw(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := d.id.ClientTLS()
	cfg.ServerName = host
	raw := newRawConn(conn)
	tc := tls.Client(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("identity: TLS handshake with %s: %w", addr, err)
	}
	return &gatherConn{Conn: tc, raw: raw}, nil
}

// dialRaw resolves addr if its host is a node ID and dials it. It returns
// the host part of addr, which is the TLS server name.
func (d *nodeDialer) dialRaw(ctx context.Context, network, addr string) (net.Conn, string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("identity: dial %s: %w", addr, err)
	}
	target := addr
	if nid, err := ParseNodeID(host); err == nil {
		host = string(nid)
		var ok bool
		if d.resolve != nil {
			target, ok = d.resolve(nid)
		}
		if !ok {
			return nil, "", fmt.Errorf("%w: %s", ErrUnknownNode, nid)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := d.dial(dctx, network, target)
	if err != nil {
		return nil, "", err
	}
	return conn, host, nil
}
