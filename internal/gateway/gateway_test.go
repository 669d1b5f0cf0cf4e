package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

func openGateway(t *testing.T, g *testgrid.Grid, dir string) *gateway.Gateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestGatewayObjects: buckets and objects over namespaces on a 10-node
// grid: inline and grid objects round-trip, ranges, listing with prefix,
// delimiter and pages, deletes; a second gateway sharing the registry
// sees the first's writes; reads survive n−k nodes down.
func TestGatewayObjects(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	ctx := context.Background()
	dir := t.TempDir()
	gw := openGateway(t, g, dir)

	if err := gw.CreateBucket(ctx, "photos", ""); err != nil {
		t.Fatal(err)
	}
	if err := gw.CreateBucket(ctx, "photos", ""); !errors.Is(err, gateway.ErrBucketExists) {
		t.Fatalf("second create: %v", err)
	}
	if err := gw.CreateBucket(ctx, "Bad_Name", ""); !errors.Is(err, gateway.ErrBadBucket) {
		t.Fatalf("bad name: %v", err)
	}
	small := []byte("hello, grid")
	big := randBytes(3<<20 + 17)
	keys := map[string][]byte{"a.txt": small, "2026/01/x.jpg": big, "2026/01/y.jpg": small, "2026/02/z.jpg": small, "b//odd/../key": small}
	for k, v := range keys {
		info, err := gw.Put(ctx, "photos", k, bytes.NewReader(v), int64(len(v)), gateway.PutOptions{ContentType: "image/jpeg", Meta: map[string]string{"camera": "x"}})
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		if want := fmt.Sprintf("%x", md5sum(v)); info.ETag != want {
			t.Fatalf("etag %s, want %s", info.ETag, want)
		}
	}
	for k, v := range keys {
		var buf bytes.Buffer
		info, err := gw.Get(ctx, "photos", k, &buf, 0, -1)
		if err != nil || !bytes.Equal(buf.Bytes(), v) || info.Meta["camera"] != "x" || info.ContentType != "image/jpeg" {
			t.Fatalf("get %s: %v, %d bytes", k, err, buf.Len())
		}
	}
	var part bytes.Buffer
	if _, err := gw.Get(ctx, "photos", "2026/01/x.jpg", &part, 1<<20, 1000); err != nil || !bytes.Equal(part.Bytes(), big[1<<20:1<<20+1000]) {
		t.Fatalf("range: %v", err)
	}
	if _, err := gw.Head(ctx, "photos", "missing"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("head missing: %v", err)
	}
	if _, err := gw.Head(ctx, "nobucket", "x"); !errors.Is(err, gateway.ErrNoBucket) {
		t.Fatalf("head in missing bucket: %v", err)
	}

	l, err := gw.List(ctx, "photos", "2026/", "/", "", 1000)
	if err != nil || fmt.Sprint(l.Prefixes) != "[2026/01/ 2026/02/]" || len(l.Objects) != 0 {
		t.Fatalf("list 2026/ by /: %+v %v", l, err)
	}
	var all []string
	after := ""
	for page := 0; ; page++ {
		l, err := gw.List(ctx, "photos", "", "", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Objects {
			all = append(all, o.Key)
		}
		if !l.Truncated {
			break
		}
		after = l.Next
	}
	if fmt.Sprint(all) != "[2026/01/x.jpg 2026/01/y.jpg 2026/02/z.jpg a.txt b//odd/../key]" {
		t.Fatalf("paged list: %v", all)
	}

	// Pages of one with a delimiter: each prefix once, and an end.
	var seen []string
	after = ""
	for page := 0; page < 20; page++ {
		l, err := gw.List(ctx, "photos", "", "/", after, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Objects {
			seen = append(seen, o.Key)
		}
		seen = append(seen, l.Prefixes...)
		if !l.Truncated {
			break
		}
		after = l.Next
	}
	if fmt.Sprint(seen) != "[2026/ a.txt b/]" {
		t.Fatalf("delimited pages of one: %v", seen)
	}

	// A wrong Content-MD5 writes nothing: the old version stays.
	if _, err := gw.Put(ctx, "photos", "a.txt", bytes.NewReader([]byte("replacement")), 11, gateway.PutOptions{WantMD5: make([]byte, 16)}); !errors.Is(err, gateway.ErrBadDigest) {
		t.Fatalf("put with a wrong MD5: %v", err)
	}
	buf0 := new(bytes.Buffer)
	if _, err := gw.Get(ctx, "photos", "a.txt", buf0, 0, -1); err != nil || !bytes.Equal(buf0.Bytes(), small) {
		t.Fatalf("after a refused put: %q %v", buf0.Bytes(), err)
	}

	// A second gateway with the same registry serves the same buckets.
	dir2 := t.TempDir()
	reg, _ := os.ReadFile(filepath.Join(dir, "registry"))
	os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600)
	gw2 := openGateway(t, g, dir2)
	var buf bytes.Buffer
	if _, err := gw2.Get(ctx, "photos", "2026/01/x.jpg", &buf, 0, -1); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("second gateway get: %v", err)
	}
	if _, err := gw2.Put(ctx, "photos", "from-gw2", bytes.NewReader(small), int64(len(small)), gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, _ := gw.List(ctx, "photos", "from-", "", "", 10)
		if len(l.Objects) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a put on the second gateway is not listed by the first")
		}
		time.Sleep(100 * time.Millisecond)
	}

	if err := gw.DeleteBucket(ctx, "photos"); !errors.Is(err, gateway.ErrNotEmpty) {
		t.Fatalf("delete non-empty bucket: %v", err)
	}
	if err := gw.Delete(ctx, "photos", "a.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Head(ctx, "photos", "a.txt"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("head after delete: %v", err)
	}

	// n−k = 7 nodes down: the grid object still reads.
	for i := 3; i < 10; i++ {
		g.Kill(i)
	}
	buf.Reset()
	if _, err := gw.Get(ctx, "photos", "2026/01/x.jpg", &buf, 0, -1); err != nil || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("get with 7 of 10 nodes down: %v", err)
	}
}

// TestGatewaysReadEachOthersWritesAtOnce: two gateways sharing a registry
// (behind one load balancer, say) whose background sync would come too
// late: a key put through one is read, and deleted, through the other at
// once, since a key a replica lacks is looked for again after pulling the
// bucket.
func TestGatewaysReadEachOthersWritesAtOnce(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	open := func(dir string) *gateway.Gateway {
		gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
			NoSync: true, SyncEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		return gw
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	gw1 := open(dir1)
	if err := gw1.CreateBucket(ctx, "shared", ""); err != nil {
		t.Fatal(err)
	}
	reg, err := os.ReadFile(filepath.Join(dir1, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	gw2 := open(dir2)
	if _, err := gw2.Head(ctx, "shared", "warm"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("head of a missing key: %v", err) // gw2 now holds the bucket open
	}
	for i, size := range []int{100, 20000} { // inline, then a grid object
		key := fmt.Sprintf("k%d", i)
		data := randBytes(size)
		if _, err := gw1.Put(ctx, "shared", key, bytes.NewReader(data), int64(size), gateway.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := gw2.Get(ctx, "shared", key, &buf, 0, -1); err != nil || !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("get through the second gateway just after the put through the first: %v (%d bytes)", err, buf.Len())
		}
	}
	if _, err := gw1.Put(ctx, "shared", "doomed", bytes.NewReader([]byte("x")), 1, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := gw2.Delete(ctx, "shared", "doomed"); err != nil {
		t.Fatal(err)
	}
	// The delete was real: the first gateway, pulling the bucket (as a
	// listing does), no longer has the key.
	l, err := gw1.List(ctx, "shared", "doomed", "", "", 10)
	if err != nil || len(l.Objects) != 0 {
		t.Fatalf("listing after a delete through the other gateway: %+v %v", l.Objects, err)
	}
	if _, err := gw2.Head(ctx, "shared", "never"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("head of a key neither has: %v", err)
	}
}
