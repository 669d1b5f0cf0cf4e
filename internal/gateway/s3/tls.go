package s3

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
)

// File names of the gateway's own certificate authority in its
// directory: the CA certificate clients trust (AWS_CA_BUNDLE) and its
// private key, which never leaves the gateway.
const (
	CAFile    = "s3-ca.pem"
	CAKeyFile = "s3-ca-key.pem"
)

// TLSSetup is how the S3 endpoint serves HTTPS.
type TLSSetup struct {
	// Config serves the certificate.
	Config *tls.Config
	// CAFile is the gateway's own CA certificate (DIR/s3-ca.pem), for
	// clients to trust; empty when serving the operator's certificate.
	CAFile string
	// Fingerprint is the SHA-256 of the CA certificate (DER), as
	// colon-separated hex; empty with the operator's certificate.
	Fingerprint string
}

// TLSAuto says whether --s3-tls auto serves HTTPS on addr: yes unless
// its host is a loopback address or "localhost".
func TLSAuto(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// Wildcard says whether the host of addr is a wildcard (any address):
// empty, 0.0.0.0 or ::.
func Wildcard(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// LoadTLS returns the TLS setup of a gateway whose state is in dir,
// listening on addr (host:port). With certFile and keyFile it serves
// that certificate. Without, it serves a certificate it issues at every
// start from its own CA, made on first use and kept in dir (CAFile,
// CAKeyFile): for addr's host (every address of this machine when it is
// a wildcard), localhost, 127.0.0.1 and ::1.
func LoadTLS(dir, addr, certFile, keyFile string) (*TLSSetup, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("s3 TLS: a certificate needs both its file and its key file")
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("s3 TLS: %w", err)
		}
		return &TLSSetup{Config: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}, nil
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return nil, err
	}
	cert, err := issue(ca, caKey, hostsOf(addr))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(ca.Raw)
	fp := make([]string, len(sum))
	for i, b := range sum {
		fp[i] = fmt.Sprintf("%02X", b)
	}
	return &TLSSetup{
		Config:      &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		CAFile:      filepath.Join(dir, CAFile),
		Fingerprint: strings.Join(fp, ":"),
	}, nil
}

// hostsOf is the names and addresses the server certificate is for.
func hostsOf(addr string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if !Wildcard(addr) {
		return append(hosts, host)
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts = append(hosts, name)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, n.IP.String())
			}
		}
	}
	return hosts
}

// loadCA reads the gateway's CA from dir, making it on first use. The
// key is written first, then the certificate: a CA certificate on disk
// always has its key.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		return parseCA(certPEM, keyPEM)
	}
	if cerr == nil {
		return nil, nil, fmt.Errorf("s3 TLS: %s without its key: %w", certPath, kerr)
	}
	if !errors.Is(cerr, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("s3 TLS: %w", cerr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"Quilt"}, CommonName: "Quilt S3 gateway CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(20, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return nil, nil, fmt.Errorf("s3 TLS: %w", err)
	}
	if err := atomicfile.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, fmt.Errorf("s3 TLS: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}

func parseCA(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("s3 TLS: %s or %s is not PEM", CAFile, CAKeyFile)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("s3 TLS: %s: %w", CAFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("s3 TLS: %s: %w", CAKeyFile, err)
	}
	if !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, fmt.Errorf("s3 TLS: %s is not the key of %s", CAKeyFile, CAFile)
	}
	return ca, key, nil
}

// issue makes a server certificate for hosts, signed by the CA, valid
// for a year (it is made again at every start).
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Quilt"}, CommonName: hosts[len(hosts)-1]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// IssueClient makes a key and a client certificate (for TLS client
// authentication) named cn, signed by the CA of the gateway whose state
// is in dir (made on first use), valid for years, and returns them as PEM
// with the CA certificate's PEM. The NBD server of block volumes uses it:
// QEMU checks its own certificate against the CA it trusts.
func IssueClient(dir, cn string, years int) (certPEM, keyPEM, caPEM []byte, err error) {
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"Quilt"}, CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(years, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
}
