package s3_test

import (
	"context"
	"net/http/httptest"
	"testing"

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
