package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/nbd"
	"github.com/quilt-grid/quilt/internal/volume"
)

// keySet is the gateway registry's record set of the volumes' client
// keys: one record per volume, the public keys whose certificates may
// open it over TLS.
const keySet = "volume-keys"

// volumeKeys is a volume's record in keySet.
type volumeKeys struct {
	// Keys are the SHA-256 of the certificates' public keys
	// (SubjectPublicKeyInfo), in hex.
	Keys []string `json:"keys"`
}

// keyID names a certificate's key in keySet: the SHA-256 of its
// SubjectPublicKeyInfo, in hex.
func keyID(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}

// The file names of a client's certificate directory, those qemu's
// tls-creds-x509 (endpoint=client) and libnbd's tls-certificates read.
const (
	clientCAFile   = "ca-cert.pem"
	clientCertFile = "client-cert.pem"
	clientKeyFile  = "client-key.pem"
)

// nbdTLSHelp describes the NBD TLS flags (volume serve --tls, up --nbd-tls).
const nbdTLSHelp = "TLS for NBD: on (STARTTLS required, and a client certificate made by 'quilt volume cert' for the volume), off, or auto (on unless the address is loopback)"

// nbdAuth is how an NBD server secures its exports: TLS required, and a
// volume opened only by a client whose certificate's key is one of the
// volume's keys in the registry.
type nbdAuth struct {
	tls    *tls.Config
	gw     *gateway.Gateway
	caFile string // the CA that issued the server's certificate
}

// checkNBDTLSMode rejects an NBD TLS mode other than on, off and auto.
func checkNBDTLSMode(mode string) error {
	switch mode {
	case "on", "off", "auto", "":
		return nil
	}
	return fmt.Errorf("NBD TLS %q: want on, off or auto", mode)
}

// newNBDAuth returns the TLS setup of an NBD server of the gateway in dir
// listening on addr, as mode (on, off, auto) says; nil for plain NBD. The
// server's certificate is issued by the gateway's own CA (DIR/s3-ca.pem,
// made on first use, as for the S3 endpoint).
func newNBDAuth(gw *gateway.Gateway, dir, addr, mode string) (*nbdAuth, error) {
	if err := checkNBDTLSMode(mode); err != nil {
		return nil, err
	}
	if mode == "off" || (mode != "on" && !s3.TLSAuto(addr)) {
		return nil, nil
	}
	setup, err := s3.LoadTLS(dir, addr, "", "")
	if err != nil {
		return nil, err
	}
	cfg := setup.Config.Clone()
	// Client certificates are not chained to a CA: a client is known by
	// its key, listed in the volume's record (check).
	cfg.ClientAuth = tls.RequestClientCert
	cfg.MinVersion = tls.VersionTLS12
	ca, err := filepath.Abs(setup.CAFile)
	if err != nil {
		ca = setup.CAFile
	}
	return &nbdAuth{tls: cfg, gw: gw, caFile: ca}, nil
}

// readVolumeKeys returns the keys of volume name (none if it has no record).
func readVolumeKeys(ctx context.Context, gw *gateway.Gateway, name string) (volumeKeys, error) {
	var k volumeKeys
	raw, err := gw.Record(ctx, keySet, name)
	if err != nil || raw == nil {
		return k, err
	}
	if err := json.Unmarshal(raw, &k); err != nil {
		return k, fmt.Errorf("volume %s: damaged key record: %v", name, err)
	}
	return k, nil
}

// check says whether peer may open volume name: it started TLS and sent
// a certificate whose key is one of the volume's. The certificate's
// signature over the handshake proves the client holds the key.
func (a *nbdAuth) check(ctx context.Context, name string, peer nbd.Peer) error {
	// The registry is pulled first, so that keys added or revoked by
	// another process (quilt volume cert, revoke) count at once.
	if err := a.gw.SyncRegistry(ctx); err != nil {
		return fmt.Errorf("volume %s: keys: %w", name, err)
	}
	return a.allowed(ctx, name, peer)
}

// allowed is check on the registry as this gateway holds it now.
func (a *nbdAuth) allowed(ctx context.Context, name string, peer nbd.Peer) error {
	if peer.TLS == nil || len(peer.TLS.PeerCertificates) == 0 {
		return fmt.Errorf("volume %s: no client certificate (make one with quilt volume cert): %w", name, nbd.ErrForbidden)
	}
	k, err := readVolumeKeys(ctx, a.gw, name)
	if err != nil {
		return err
	}
	if !slices.Contains(k.Keys, keyID(peer.TLS.PeerCertificates[0])) {
		return fmt.Errorf("volume %s: the client certificate is not one of the volume's: %w", name, nbd.ErrForbidden)
	}
	return nil
}

// volumeCert makes a key and a certificate that open volume name over
// TLS, in the directory out (ca-cert.pem, client-cert.pem,
// client-key.pem: the layout of qemu's tls-creds-x509 and libnbd's
// tls-certificates), and adds the key to the volume's record. The CA is
// the gateway's in dir, which issues the NBD servers' certificates.
func volumeCert(ctx context.Context, gw *gateway.Gateway, m *volume.Manager, dir, name, out string) error {
	if _, err := m.Stat(ctx, name); err != nil {
		return err
	}
	certPEM, keyPEM, caPEM, err := s3.IssueClient(dir, "quilt volume "+name, 20)
	if err != nil {
		return err
	}
	blk, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		b    []byte
		mode os.FileMode
	}{
		{clientKeyFile, keyPEM, 0o600},
		{clientCertFile, certPEM, 0o644},
		{clientCAFile, caPEM, 0o644},
	} {
		if err := writeFileAtomic(filepath.Join(out, f.name), f.b, f.mode); err != nil {
			return err
		}
	}
	k, err := readVolumeKeys(ctx, gw, name)
	if err != nil {
		return err
	}
	k.Keys = append(k.Keys, keyID(cert))
	body, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return gw.PutRecord(ctx, keySet, name, body)
}

// volumeRevoke forgets every key of volume name: no certificate made
// before opens it any more.
func volumeRevoke(ctx context.Context, gw *gateway.Gateway, name string) error {
	if err := volume.CheckName(name); err != nil {
		return err
	}
	return gw.DeleteRecord(ctx, keySet, name)
}
