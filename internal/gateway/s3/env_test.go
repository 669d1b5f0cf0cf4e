package s3_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// env is a gateway serving S3 on an in-process grid, with an admin key.
type env struct {
	grid  *testgrid.Grid
	gw    *gateway.Gateway
	s3    *s3.Server
	srv   *httptest.Server
	admin gateway.AccessKey
}

func newEnv(t *testing.T, nodes int) *env {
	return newEnvWith(t, testgrid.Options{Nodes: nodes}, s3.Options{})
}

func newEnvWith(t *testing.T, gopt testgrid.Options, opt s3.Options) *env {
	t.Helper()
	g := testgrid.New(t, gopt)
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	e := &env{grid: g, gw: gw, s3: s3.New(gw, opt)}
	e.srv = httptest.NewServer(e.s3)
	t.Cleanup(e.srv.Close)
	e.admin = e.key(t, true)
	return e
}

// key makes an access key (with no bucket of its own unless admin).
func (e *env) key(t *testing.T, admin bool) gateway.AccessKey {
	t.Helper()
	k, err := e.gw.CreateKey(context.Background(), admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (e *env) client(k gateway.AccessKey) *awss3.Client { return client(e.srv.URL, k.ID, k.Secret) }

// do sends a request signed (Signature V4, payload hashed) with key k:
// method, path and raw query, headers as name, value pairs.
func (e *env) do(t *testing.T, k gateway.AccessKey, method, pathQuery string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	return e.doHash(t, k, method, pathQuery, body, hex.EncodeToString(sum[:]), hdr...)
}

// doHash is do with the payload hash to sign and send.
func (e *env) doHash(t *testing.T, k gateway.AccessKey, method, pathQuery string, body []byte, ph string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+pathQuery, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("X-Amz-Content-Sha256", ph)
	creds := aws.Credentials{AccessKeyID: k.ID, SecretAccessKey: k.Secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, ph, "s3", "us-east-1", time.Now(), noDoubleEscape); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func md5sum(s string) []byte {
	h := md5.Sum([]byte(s))
	return h[:]
}

// raw sends a request signed with key k over a new connection: head is
// what the signature covers (method, path, headers as name, value
// pairs), then the body exactly as given. It returns the connection,
// the request written (and body sent) but not closed.
func (e *env) raw(t *testing.T, k gateway.AccessKey, method, path string, payloadHash string, hdr []string, body []byte) net.Conn {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	creds := aws.Credentials{AccessKeyID: k.ID, SecretAccessKey: k.Secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, "s3", "us-east-1", time.Now(), noDoubleEscape); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", req.URL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, req.URL.RequestURI(), req.URL.Host)
	for name, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	b.WriteString("\r\n")
	b.Write(body)
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the response on c (within 10 s).
func answer(t *testing.T, c net.Conn) (*http.Response, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits (up to 10 s) for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noDoubleEscape signs the path as S3 does: escaped once.
func noDoubleEscape(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }
