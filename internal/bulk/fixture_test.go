package bulk_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quilt-grid/quilt/internal/bulk"
	"github.com/quilt-grid/quilt/internal/gateway"
	s3api "github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// fixture is a gateway on a five-node in-process grid, serving S3 on
// 127.0.0.1 through a handler that counts the requests it passes.
type fixture struct {
	gw               *gateway.Gateway
	handler          http.Handler // the counting S3 handler
	url, key, secret string
	s3               *s3.Client // the SDK, for setting things up behind the copier's back
	mu               sync.Mutex
	ops              map[string]int // by operation: PutObject, UploadPart, GetObject, ...
	body             int64          // request body bytes of PutObject and UploadPart
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	key, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{gw: gw, key: key.ID, secret: key.Secret, ops: map[string]int{}}
	h := s3api.New(gw, s3api.Options{})
	f.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := opOf(r)
		f.mu.Lock()
		f.ops[op]++
		if op == "PutObject" || op == "UploadPart" {
			f.body += r.ContentLength
		}
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(f.handler)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.s3 = f.client(t)
	if _, err := f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	return f
}

// opOf names the S3 operation of a request, as far as the tests need.
func opOf(r *http.Request) string {
	q := r.URL.Query()
	object := strings.Contains(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPut && q.Has("uploadId"):
		return "UploadPart"
	case r.Method == http.MethodPut && object:
		return "PutObject"
	case r.Method == http.MethodGet && q.Has("uploadId"):
		return "ListParts"
	case r.Method == http.MethodGet && object:
		return "GetObject"
	case r.Method == http.MethodPost && q.Has("uploads"):
		return "CreateMultipartUpload"
	case r.Method == http.MethodPost && q.Has("uploadId"):
		return "CompleteMultipartUpload"
	}
	return r.Method
}

func (f *fixture) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[op]
}

func (f *fixture) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = map[string]int{}
	f.body = 0
}

func (f *fixture) client(t *testing.T) *s3.Client {
	t.Helper()
	c, err := bulk.NewClient(bulk.Endpoint{URL: f.url, KeyID: f.key, Secret: f.secret})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// copier is a Copier of the fixture with cfg (StateDir defaulted).
func (f *fixture) copier(t *testing.T, cfg bulk.Config) *bulk.Copier {
	t.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	cfg.Verbose = t.Logf
	c, err := bulk.New(f.client(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cp plans and runs one copy.
func (f *fixture) cp(t *testing.T, c *bulk.Copier, src, dst string, recursive bool) (bulk.Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := bulk.Parse(src, "data")
	if err != nil {
		t.Fatal(err)
	}
	d, err := bulk.Parse(dst, "data")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := c.Plan(ctx, s, d, recursive)
	if err != nil {
		return bulk.Stats{}, err
	}
	return c.Run(ctx, ts)
}
