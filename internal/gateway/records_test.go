package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestRecords: named records round-trip, list and delete; the registry's
// own directories and names that are not one path component are
// refused.
func TestRecords(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	gw := openGateway(t, g, t.TempDir())
	ctx := context.Background()
	for _, c := range [][2]string{{"buckets", "x"}, {"keys", "x"}, {"uploads", "x"}, {"Bad", "x"}, {"a/b", "x"},
		{"set", "a/b"}, {"set", ".."}, {"set", "."}, {"set", "a\x00"}, {"set", strings.Repeat("a", 256)}} {
		if err := gw.PutRecord(ctx, c[0], c[1], []byte("v")); !errors.Is(err, gateway.ErrBadRecord) {
			t.Errorf("PutRecord %q %q: %v", c[0], c[1], err)
		}
	}
	if raw, err := gw.Record(ctx, "set", "missing"); raw != nil || err != nil {
		t.Fatalf("missing record: %q %v", raw, err)
	}
	if recs, err := gw.Records(ctx, "set"); len(recs) != 0 || err != nil {
		t.Fatalf("records of a set never written: %v %v", recs, err)
	}
	for _, n := range []string{"a", "p:u"} {
		if err := gw.PutRecord(ctx, "set", n, []byte("v-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	if raw, err := gw.Record(ctx, "set", "p:u"); string(raw) != "v-p:u" || err != nil {
		t.Fatalf("record: %q %v", raw, err)
	}
	if err := gw.DeleteRecord(ctx, "set", "a"); err != nil {
		t.Fatal(err)
	}
	if err := gw.DeleteRecord(ctx, "set", "a"); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}
	recs, err := gw.Records(ctx, "set")
	if err != nil || len(recs) != 1 || string(recs["p:u"]) != "v-p:u" {
		t.Fatalf("records: %v %v", recs, err)
	}
}

// TestRewrite: a copy by reference has the source's bytes and ETag with
// the new metadata; the source is unchanged; a rewrite in place changes
// only the metadata.
func TestRewrite(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	gw := openGateway(t, g, t.TempDir())
	ctx := context.Background()
	if err := gw.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	src, err := gw.Put(ctx, "bkt", "src", strings.NewReader("content"), 7, gateway.PutOptions{Meta: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gw.Rewrite(ctx, "bkt", "src", "bkt", "dst", func(i *gateway.ObjectInfo) {
		i.Meta = map[string]string{"b": "2"}
		i.Size, i.ETag = 1, "forged" // ignored: the bytes are the source's
	})
	if err != nil || out.ETag != src.ETag || out.Size != 7 {
		t.Fatalf("rewrite: %+v %v", out, err)
	}
	var b strings.Builder
	info, err := gw.Get(ctx, "bkt", "dst", &b, 0, -1)
	if err != nil || b.String() != "content" || info.Meta["b"] != "2" || info.Meta["a"] != "" {
		t.Fatalf("copy: %q %+v %v", b.String(), info, err)
	}
	if info, _ := gw.Head(ctx, "bkt", "src"); info.Meta["a"] != "1" {
		t.Fatalf("source changed: %+v", info)
	}
	if _, err := gw.Rewrite(ctx, "bkt", "missing", "bkt", "x", nil); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("rewrite of a missing object: %v", err)
	}
	if _, err := gw.Rewrite(ctx, "bkt", "src", "nobucket", "x", nil); !errors.Is(err, gateway.ErrNoBucket) {
		t.Fatalf("rewrite into a missing bucket: %v", err)
	}
}
