package gateway_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

// With Config.Upload through an upload helper, the gateway's grid
// objects go through the helper (it sees each upload) and read back.
func TestGatewayUploadThroughHelper(t *testing.T) {
	var uploads atomic.Int32
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Helper: func(i int) func(*node.Node) http.Handler {
		if i != 0 {
			return nil
		}
		m := testgrid.HelperMount()
		return func(n *node.Node) http.Handler {
			h := m(n)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == uphelper.PathUpload {
					uploads.Add(1)
				}
				h.ServeHTTP(w, r)
			})
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc := g.NodeClient()
	oc := g.Objects(object.Options{})
	u := &uphelper.Uploader{Nodes: nc, Objects: oc}
	helper := string(g.Nodes[0].ID())
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: nc, Objects: oc, NoSync: true,
		Upload: func(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, error) {
			rc, _, err := u.Put(ctx, helper, r, size, p, happy)
			return rc, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if err := gw.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	big := randBytes(2<<20 + 5)
	if _, err := gw.Put(ctx, "bkt", "k", bytes.NewReader(big), int64(len(big)), gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if uploads.Load() != 1 {
		t.Fatalf("the helper saw %d uploads, want 1", uploads.Load())
	}
	var buf bytes.Buffer
	if _, err := gw.Get(ctx, "bkt", "k", &buf, 0, -1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), big) {
		t.Fatal("read back differs")
	}
}
