package identity

import (
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"fmt"
)

// ServerTLS returns a TLS configuration for a node's server: TLS 1.3 only,
// presenting id.Cert, and requiring a client certificate chained to the grid
// CA. After the handshake, [PeerID] gives the client's node ID. NextProtos
// offers "h2" and "http/1.1". Each call returns a new Config.
func (id *Identity) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    id.pool,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// ClientTLS returns a TLS configuration for dialling nodes: TLS 1.3 only,
// presenting id.Cert, offering only "http/1.1".
//
// The standard verification (which would check the server name against the
// certificate's names) is replaced by a VerifyConnection callback that
//
//  1. verifies the server's leaf certificate against the grid CA, failing
//     with [ErrNotInGrid]; and
//  2. if the Config's ServerName parses as a [NodeID], requires that the ID
//     of the leaf's public key be that ID, failing with [ErrWrongNode].
//
// When ServerName is an IP address or a host name (for example when dialling
// an invite address whose node is not known yet), only 1 applies: the peer is
// some member of the grid, and [PeerID] says which. Each call returns a new
// Config; set ServerName on it before use.
func (id *Identity) ClientTLS() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{id.Cert},
		NextProtos:         []string{"http/1.1"},
		InsecureSkipVerify: true, // replaced by VerifyConnection
		VerifyConnection:   id.verifyServer,
	}
}

// verifyServer is the client's VerifyConnection callback; see ClientTLS.
func (id *Identity) verifyServer(cs tls.ConnectionState) error {
	got, err := id.verifyPeer(&cs, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return err
	}
	// On the client, cs.ServerName is the SNI name: empty for an IP address.
	want, err := ParseNodeID(cs.ServerName)
	if err != nil {
		return nil // not a node ID: any member of the grid will do
	}
	if got != want {
		return fmt.Errorf("%w: dialled %s, peer is %s", ErrWrongNode, want, got)
	}
	return nil
}

// verifyPeer checks that the peer's leaf certificate is signed by the grid CA
// and valid for usage, and returns the peer's node ID.
func (id *Identity) verifyPeer(cs *tls.ConnectionState, usage x509.ExtKeyUsage) (NodeID, error) {
	got, err := PeerID(cs)
	if err != nil {
		return "", err
	}
	leaf := cs.PeerCertificates[0]
	// The grid CA signs leaves directly (path length 0), so intermediates the
	// peer may send are ignored.
	_, err = leaf.Verify(x509.VerifyOptions{
		Roots:     id.pool,
		KeyUsages: []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotInGrid, err)
	}
	return got, nil
}

// PeerID returns the node ID of the public key in the peer's leaf
// certificate, as seen after a handshake (http.Request.TLS on a server;
// on a client of [Identity.NewTransport], [ConnState] of the connection).
// It does not verify the certificate: that
// is the handshake's job, so the result means something only for connections
// made with [Identity.ServerTLS] or [Identity.ClientTLS]. It fails with
// [ErrNotInGrid] when there is no peer certificate or its key is not Ed25519.
func PeerID(cs *tls.ConnectionState) (NodeID, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", fmt.Errorf("%w: no peer certificate", ErrNotInGrid)
	}
	pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return "", fmt.Errorf("%w: peer key is %T, want Ed25519", ErrNotInGrid, cs.PeerCertificates[0].PublicKey)
	}
	return IDFromPublicKey(pub), nil
}
