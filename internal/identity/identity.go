package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// Labels for [Secret.Derive] used by this package.
const caLabel = "quilt grid ca v1"

// Grid CA certificate parameters. They are fixed so that every holder of the
// secret builds the same certificate; changing any of them changes the CA
// certificate (not its key) and must come with a new caLabel.
var (
	caSubject   = "quilt grid CA"
	caSerial    = big.NewInt(1)
	caNotBefore = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Leaf certificate validity, relative to the time it is issued.
const (
	leafBackdate = time.Hour
	leafLifetime = 10 * 365 * 24 * time.Hour
)

// Identity is a party's key and TLS material for one grid. It is immutable
// and safe for concurrent use.
type Identity struct {
	// Key is the party's node key.
	Key ed25519.PrivateKey
	// ID is the node ID of Key.
	ID NodeID
	// Cert is the party's leaf certificate: Key's public key, CN and DNS SAN
	// = ID, signed by the grid CA, valid for server and client auth.
	Cert tls.Certificate

	ca   *x509.Certificate // the grid CA certificate
	pool *x509.CertPool    // holds only ca
}

// New builds an Identity for key in the grid with this secret.
//
// The grid CA key is an Ed25519 key derived from the secret (seed =
// secret.Derive("quilt grid ca v1")) and its self-signed certificate is built
// deterministically (fixed serial, subject "quilt grid CA", valid from
// 2020-01-01 to 2100-01-01), so every holder of the secret can issue itself a
// leaf certificate and verify everyone else's. The leaf is valid from an hour
// ago (to tolerate clock skew) for ten years.
func New(key ed25519.PrivateKey, secret Secret) (*Identity, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: node key has %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	caKey := ed25519.NewKeyFromSeed(secret.Derive(caLabel))
	ca, err := caCert(caKey)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	id := IDFromPublicKey(pub)
	leaf, err := leafCert(id, pub, ca, caKey, time.Now())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &Identity{
		Key: key,
		ID:  id,
		Cert: tls.Certificate{
			Certificate: [][]byte{leaf.Raw},
			PrivateKey:  key,
			Leaf:        leaf,
		},
		ca:   ca,
		pool: pool,
	}, nil
}

// caCert builds the grid CA's self-signed certificate. Ed25519 signatures
// are deterministic, so the result depends only on caKey.
func caCert(caKey ed25519.PrivateKey) (*x509.Certificate, error) {
	pub := caKey.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: caSubject},
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true, // leaves only: no intermediate CAs
		SubjectKeyId:          keyID(pub),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("identity: create grid CA certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

// leafCert issues the leaf certificate of node id with key pub.
func leafCert(id NodeID, pub ed25519.PublicKey, ca *x509.Certificate, caKey ed25519.PrivateKey, now time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("identity: certificate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: string(id)},
		DNSNames:              []string{string(id)},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(leafLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		SubjectKeyId:          keyID(pub),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("identity: create leaf certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}

// keyID is a certificate key identifier for pub (RFC 7093 method 1: the
// leftmost 160 bits of SHA-256 of the key). It is set explicitly so that the
// CA certificate does not depend on the Go version's default.
func keyID(pub ed25519.PublicKey) []byte {
	sum := sha256.Sum256(pub)
	return sum[:20]
}
