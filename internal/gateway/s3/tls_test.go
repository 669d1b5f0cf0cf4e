package s3_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestTLSWithOwnCA serves S3 over HTTPS with the certificate the gateway
// issues from its own CA: the SDK trusting only that CA works, one with
// the system's roots is refused, and a second start keeps the CA.
func TestTLSWithOwnCA(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 4}, s3.Options{})
	dir := t.TempDir()
	setup, err := s3.LoadTLS(dir, "127.0.0.1:0", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if setup.CAFile != filepath.Join(dir, s3.CAFile) || len(setup.Fingerprint) != 32*3-1 {
		t.Fatalf("CA file %q, fingerprint %q", setup.CAFile, setup.Fingerprint)
	}
	if fi, err := os.Stat(filepath.Join(dir, s3.CAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v %v", fi, err)
	}
	srv := httptest.NewUnstartedServer(e.s3)
	srv.TLS = setup.Config
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatal(srv.URL)
	}
	pem, err := os.ReadFile(setup.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	ctx := context.Background()
	trusting := tlsClient(srv.URL, e, pool)
	if _, err := trusting.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("secure")}); err != nil {
		t.Fatal(err)
	}
	if _, err := trusting.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("secure"), Key: aws.String("k"), Body: strings.NewReader("over TLS")}); err != nil {
		t.Fatal(err)
	}
	// With the system's roots only, the gateway's certificate is unknown.
	systemOnly := tlsClient(srv.URL, e, nil)
	_, err = systemOnly.ListBuckets(ctx, &awss3.ListBucketsInput{})
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) {
		t.Fatalf("client without the CA: %v", err)
	}
	// A second start keeps the CA: the fingerprint is the same.
	again, err := s3.LoadTLS(dir, "127.0.0.1:0", "", "")
	if err != nil || again.Fingerprint != setup.Fingerprint {
		t.Fatalf("second start: %v, fingerprint %q, was %q", err, again.Fingerprint, setup.Fingerprint)
	}
	// The operator's certificate and key are served as they are.
	cert, key := writePair(t, setup, srv)
	op, err := s3.LoadTLS(t.TempDir(), "127.0.0.1:0", cert, key)
	if err != nil || op.CAFile != "" || len(op.Config.Certificates) != 1 {
		t.Fatalf("operator's certificate: %+v %v", op, err)
	}
	if _, err := s3.LoadTLS(t.TempDir(), "127.0.0.1:0", cert, ""); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
	// A damaged CA is an error, never replaced.
	if err := os.WriteFile(filepath.Join(dir, s3.CAFile), []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s3.LoadTLS(dir, "127.0.0.1:0", "", ""); err == nil {
		t.Fatal("a damaged CA file was accepted")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, s3.CAFile)); string(b) != "not PEM" {
		t.Fatal("the damaged CA file was overwritten")
	}
	os.Remove(filepath.Join(dir, s3.CAKeyFile))
	if _, err := s3.LoadTLS(dir, "127.0.0.1:0", "", ""); err == nil {
		t.Fatal("a CA without its key was accepted")
	}
}

// tlsClient is an SDK client of url trusting the roots of pool (the
// system's when nil), with the admin key, not retrying.
func tlsClient(url string, e *env, pool *x509.CertPool) *awss3.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return awss3.New(awss3.Options{
		BaseEndpoint:     aws.String(url),
		Region:           "us-east-1",
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(e.admin.ID, e.admin.Secret, ""),
		HTTPClient:       &http.Client{Transport: tr},
		RetryMaxAttempts: 1,
	})
}

// writePair writes the server certificate of setup and its key as PEM
// files, as an operator's would be.
func writePair(t *testing.T, setup *s3.TLSSetup, srv *httptest.Server) (string, string) {
	t.Helper()
	dir := t.TempDir()
	c := setup.Config.Certificates[0]
	var certPEM []byte
	for _, der := range c.Certificate {
		certPEM = append(certPEM, pemBlock("CERTIFICATE", der)...)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pemBlock("PRIVATE KEY", kder), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func TestTLSAuto(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7780": false, "[::1]:7780": false, "localhost:7780": false,
		"0.0.0.0:7780": true, ":7780": true, "10.1.2.3:7780": true, "gw.example.com:443": true,
	} {
		if got := s3.TLSAuto(addr); got != want {
			t.Errorf("TLSAuto(%q) = %v, want %v", addr, got, want)
		}
	}
	if !s3.Wildcard("0.0.0.0:1") || !s3.Wildcard(":1") || !s3.Wildcard("[::]:1") || s3.Wildcard("10.0.0.1:1") {
		t.Error("Wildcard")
	}
}

// TestTLSCertificateNames: the issued certificate names the listen host,
// and localhost and the loopback addresses whatever the host.
func TestTLSCertificateNames(t *testing.T) {
	dir := t.TempDir()
	for addr, want := range map[string][]string{
		"gw.example.com:443": {"gw.example.com", "localhost", "127.0.0.1"},
		"10.1.2.3:7780":      {"10.1.2.3", "localhost", "::1"},
		"0.0.0.0:7780":       {"localhost", "127.0.0.1"},
	} {
		setup, err := s3.LoadTLS(dir, addr, "", "")
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(setup.Config.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range want {
			if err := leaf.VerifyHostname(h); err != nil {
				t.Errorf("certificate for %s: %v", addr, err)
			}
		}
		if err := leaf.VerifyHostname("other.example.com"); err == nil {
			t.Errorf("certificate for %s names other.example.com", addr)
		}
	}
}

// IssueClient makes a client certificate that the gateway's CA (made on
// first use, the same one the server certificates chain to) verifies for
// client authentication only, with its key, and refuses a damaged CA.
func TestIssueClient(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, caPEM, err := s3.IssueClient(dir, "quilt volume vm1", 2)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, s3.CAFile))
	if err != nil || !bytes.Equal(onDisk, caPEM) {
		t.Fatalf("the CA returned is not the gateway's (%v)", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("client certificate does not verify: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a client certificate verifies as a server's")
	}
	if cert.Subject.CommonName != "quilt volume vm1" || cert.NotAfter.Before(time.Now().AddDate(1, 11, 0)) {
		t.Fatalf("subject %q, expires %v", cert.Subject.CommonName, cert.NotAfter)
	}
	if err := os.WriteFile(filepath.Join(dir, s3.CAKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := s3.IssueClient(dir, "x", 1); err == nil {
		t.Fatal("issued with a damaged CA key")
	}
}
