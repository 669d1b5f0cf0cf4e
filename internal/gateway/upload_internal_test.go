package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestUploadBelongsToBucketInstance: an upload left behind by a bucket
// deleted with it open (here the registry entry is deleted directly, as
// a gateway that had not yet seen the upload would) is not visible
// through a later bucket of the same name.
func TestUploadBelongsToBucketInstance(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	gw, err := Open(ctx, Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if err := gw.CreateBucket(ctx, "reused", "A"); err != nil {
		t.Fatal(err)
	}
	u, err := gw.CreateUpload(ctx, "reused", "k", PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := gw.PutPart(ctx, "reused", "k", u.ID, 1, strings.NewReader("first owner"), 11, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.DeleteBucket(ctx, "reused"); !errors.Is(err, ErrUploadsOpen) {
		t.Fatalf("delete with an upload open: %v", err)
	}
	if err := gw.write(ctx, &gw.registry, "/buckets/reused", func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := gw.CreateBucket(ctx, "reused", "B"); err != nil {
		t.Fatal(err)
	}
	if us, err := gw.Uploads(ctx, "reused"); err != nil || len(us) != 0 {
		t.Fatalf("uploads of the new bucket: %v %+v", err, us)
	}
	if _, err := gw.Parts(ctx, "reused", "k", u.ID); !errors.Is(err, ErrNoUpload) {
		t.Fatalf("parts: %v", err)
	}
	if _, err := gw.PutPart(ctx, "reused", "k", u.ID, 2, strings.NewReader("x"), 1, nil, nil); !errors.Is(err, ErrNoUpload) {
		t.Fatalf("put part: %v", err)
	}
	if _, err := gw.CompleteUpload(ctx, "reused", "k", u.ID, []PartRef{{Number: 1, ETag: p.ETag}}, 0, nil); !errors.Is(err, ErrNoUpload) {
		t.Fatalf("complete: %v", err)
	}
	if err := gw.AbortUpload(ctx, "reused", "k", u.ID); !errors.Is(err, ErrNoUpload) {
		t.Fatalf("abort: %v", err)
	}
	if err := gw.DeleteBucket(ctx, "reused"); err != nil {
		t.Fatalf("the new bucket has no upload of its own: %v", err)
	}

	// A record from before uploads named their bucket's ID belongs to
	// the bucket of its name only if that bucket is older than it.
	b := &bucket{name: "x", created: u.Initiated}
	if !(Upload{Bucket: "x", Initiated: u.Initiated}).belongs(b) || (Upload{Bucket: "x", Initiated: u.Initiated.Add(-1)}).belongs(b) {
		t.Fatal("legacy upload records")
	}
}
