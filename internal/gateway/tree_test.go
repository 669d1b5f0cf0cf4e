package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
)

// openTreeGateway opens a gateway that keeps up to inline bytes in the
// entry and stores more as grid objects.
func openTreeGateway(t testing.TB, g *testgrid.Grid, inline int) *gateway.Gateway {
	t.Helper()
	return openTreeGatewayIn(t, g, t.TempDir(), inline)
}

func openTreeGatewayIn(t testing.TB, g *testgrid.Grid, dir string, inline int) *gateway.Gateway {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: inline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// TestTreeGateway runs the tree's conformance suite on gateway buckets
// over a grid of real nodes: files over 100 bytes are grid objects, the
// rest inline.
func TestTreeGateway(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw := openTreeGateway(t, g, 100)
	n := 0
	treetest.Run(t, func(t *testing.T) treetest.Env {
		n++
		name := fmt.Sprintf("tree-%d", n)
		if err := gw.CreateBucket(context.Background(), name, ""); err != nil {
			t.Fatal(err)
		}
		s := gw.TreeStore(name)
		return treetest.Env{FS: tree.New(s), Store: s}
	})
}

// TestTreeGatewayVersioned runs the suite on versioned buckets: the
// versions every write and delete keeps are never files of the tree.
func TestTreeGatewayVersioned(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw := openTreeGateway(t, g, 100)
	n := 0
	treetest.Run(t, func(t *testing.T) treetest.Env {
		n++
		name := fmt.Sprintf("vtree-%d", n)
		ctx := context.Background()
		if err := gw.CreateBucket(ctx, name, ""); err != nil {
			t.Fatal(err)
		}
		if err := gw.SetVersioning(ctx, name, gateway.VersioningEnabled); err != nil {
			t.Fatal(err)
		}
		s := gw.TreeStore(name)
		return treetest.Env{FS: tree.New(s), Store: s}
	})
	// The suite's renames and removes kept versions: noncurrent ones and
	// delete markers.
	kept := 0
	for i := 1; i <= n; i++ {
		l, err := gw.ListVersions(context.Background(), fmt.Sprintf("vtree-%d", i), "", "", "", "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range l.Versions {
			if !v.IsLatest || v.DeleteMarker {
				kept++
			}
		}
	}
	if kept == 0 {
		t.Fatal("no version kept by the tree's writes on versioned buckets")
	}
}

// TestTreeS3: keys written through S3 appear in the tree with their
// implied directories, and files written through the tree read back
// through S3 with their mode and mtime as x-amz-meta-*.
func TestTreeS3(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw := openTreeGateway(t, g, 100)
	ctx := context.Background()
	admin, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3.New(gw, s3.Options{}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections) // before the server closes
	c := awss3.New(awss3.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1", UsePathStyle: true,
		HTTPClient:  &http.Client{Transport: tr},
		Credentials: credentials.NewStaticCredentialsProvider(admin.ID, admin.Secret, "")})
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("doors")}); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("grid object ", 100)
	for k, v := range map[string]string{"docs/2026/report.txt": big, "docs/readme": "hi", "folder/": ""} {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("doors"), Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
			t.Fatal(err)
		}
	}
	ft := gw.Tree("doors")
	all, err := ft.ReadDirAll(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(infoNames(all)); got != "[docs/ folder/]" {
		t.Fatalf("root lists %s", got)
	}
	if st, err := ft.Stat(ctx, "docs/2026"); err != nil || !st.IsDir() || !st.Implied {
		t.Fatalf("implied docs/2026: %+v, %v", st, err)
	}
	if st, err := ft.Stat(ctx, "folder"); err != nil || !st.IsDir() || st.Implied {
		t.Fatalf("folder/ marker: %+v, %v", st, err)
	}
	rc, st, err := ft.Open(ctx, "docs/2026/report.txt", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != big[5:15] || st.Size != int64(len(big)) {
		t.Fatalf("range through the tree: %q", b)
	}

	mt := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if _, err := ft.Create(ctx, "folder/photo.jpg", strings.NewReader(big), tree.CreateOptions{Mode: 0o640, ModTime: mt}); err != nil {
		t.Fatal(err)
	}
	if err := ft.Rename(ctx, "docs", "folder/docs", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("doors"), Key: aws.String("folder/photo.jpg")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != big || out.Metadata["mode"] != "33184" || out.Metadata["mtime"] != fmt.Sprintf("%d.000000000", mt.Unix()) ||
		aws.ToString(out.ContentType) != "image/jpeg" {
		t.Fatalf("S3 reads %d bytes, metadata %v, type %s", len(body), out.Metadata, aws.ToString(out.ContentType))
	}
	// The renamed directory, through S3: new keys, old ones gone.
	lo, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("doors")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range lo.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if got := fmt.Sprint(keys); got != "[folder/ folder/docs/2026/report.txt folder/docs/readme folder/photo.jpg]" {
		t.Fatalf("S3 lists %s", got)
	}
	out, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("doors"), Key: aws.String("folder/docs/2026/report.txt")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != big || out.Metadata["mtime"] == "" {
		t.Fatalf("renamed object through S3: %d bytes, metadata %v", len(body), out.Metadata)
	}
}

// TestTreeEventsFromAnotherGateway: a write through another gateway that
// serves the same bucket reaches a subscriber of this gateway's tree as
// KindChanged once this gateway's replica pulls it.
func TestTreeEventsFromAnotherGateway(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	dir1, dir2 := t.TempDir(), t.TempDir()
	gw1 := openTreeGatewayIn(t, g, dir1, 0)
	ctx := context.Background()
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
	gw2 := openTreeGatewayIn(t, g, dir2, 0)
	tr := gw1.Tree("shared")
	ch, cancel := tr.Subscribe(64)
	defer cancel()
	if _, err := gw2.Put(ctx, "shared", "elsewhere/k", strings.NewReader("x"), 1, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == tree.KindChanged && ev.Path == "elsewhere/k" {
				if st, err := tr.Stat(ctx, "elsewhere"); err != nil || !st.IsDir() {
					t.Fatalf("after the event: %+v, %v", st, err)
				}
				return
			}
		case <-deadline:
			t.Fatal("no event for the other gateway's write")
		}
	}
}

func infoNames(is []tree.Info) []string {
	var out []string
	for _, i := range is {
		n := i.Name()
		if i.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	return out
}

// countingGrid is a grid whose nodes count the share bytes they take in
// and give out.
func countingGrid(t testing.TB, nodes int) (*testgrid.Grid, []*testgrid.Bytes) {
	counts := make([]*testgrid.Bytes, nodes)
	for i := range counts {
		counts[i] = &testgrid.Bytes{}
	}
	g := testgrid.New(t, testgrid.Options{Nodes: nodes, Wrap: func(i int, s sharestore.Store) sharestore.Store {
		return testgrid.Count(s, counts[i])
	}})
	return g, counts
}

func sumBytes(counts []*testgrid.Bytes) (in, out int64) {
	for _, c := range counts {
		in += c.In.Load()
		out += c.Out.Load()
	}
	return in, out
}

// TestTreeRenameMovesNoBytes: renaming a directory of 300 files, grid
// objects among them, rewrites entries only: no node takes in or gives
// out a share byte, and every file reads back under its new name.
func TestTreeRenameMovesNoBytes(t *testing.T) {
	g, counts := countingGrid(t, 5)
	gw := openTreeGateway(t, g, 64)
	ctx := context.Background()
	if err := gw.CreateBucket(ctx, "bulk", ""); err != nil {
		t.Fatal(err)
	}
	tr := gw.Tree("bulk")
	if err := tr.MkdirAll(ctx, "src/sub", 0); err != nil {
		t.Fatal(err)
	}
	// 20 grid objects, written one by one; 280 more files share their
	// objects (copies by reference).
	const files, objects = 300, 20
	content := func(i int) string { return fmt.Sprintf("file %d of the tree ", i%objects) + strings.Repeat("x", 100) }
	for i := range objects {
		if _, err := tr.Create(ctx, fmt.Sprintf("src/f%03d", i), strings.NewReader(content(i)), tree.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if in, _ := sumBytes(counts); in < objects*100 {
		t.Fatalf("the nodes took in %d bytes for %d grid objects: inline?", in, objects)
	}
	var ops []tree.Op
	for i := objects; i < files; i++ {
		dir := "src/"
		if i%3 == 0 {
			dir = "src/sub/"
		}
		ops = append(ops, tree.Op{Key: fmt.Sprintf("%sf%03d", dir, i), From: fmt.Sprintf("src/f%03d", i%objects)})
	}
	if err := gw.TreeStore("bulk").Apply(ctx, ops); err != nil {
		t.Fatal(err)
	}
	in0, out0 := sumBytes(counts)
	if err := tr.Rename(ctx, "src", "dst", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if in, out := sumBytes(counts); in != in0 || out != out0 {
		t.Fatalf("rename moved share bytes: %d in, %d out", in-in0, out-out0)
	}
	got := 0
	for _, d := range []string{"dst", "dst/sub"} {
		all, err := tr.ReadDirAll(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range all {
			if !i.IsDir() {
				got++
			}
		}
	}
	if got != files {
		t.Fatalf("dst holds %d files, want %d", got, files)
	}
	if l, err := gw.List(ctx, "bulk", "src/", "", "", 10); err != nil || len(l.Objects) != 0 {
		t.Fatalf("src keeps %d keys, %v", len(l.Objects), err)
	}
	for _, i := range []int{0, 19, 21, 299} {
		dir := "dst/"
		if i >= objects && i%3 == 0 {
			dir = "dst/sub/"
		}
		rc, _, err := tr.Open(ctx, fmt.Sprintf("%sf%03d", dir, i), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if string(b) != content(i) {
			t.Fatalf("file %d reads %q", i, b)
		}
	}
	if _, out := sumBytes(counts); out == out0 {
		t.Fatal("reading grid objects moved no share bytes: is the counter counting?")
	}
}

// BenchmarkTreeRenameDir renames a directory of 10,000 files (one grid
// object, and 9,999 keys that share it) on a 5-node grid; the files are
// made with batches, the timer covers the rename only.
func BenchmarkTreeRenameDir(b *testing.B) {
	const files = 10000
	g, counts := countingGrid(b, 5)
	gw := openTreeGateway(b, g, 64)
	ctx := context.Background()
	if err := gw.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	tr := gw.Tree("bench")
	st := gw.TreeStore("bench")
	if err := tr.Mkdir(ctx, "d0", 0); err != nil {
		b.Fatal(err)
	}
	if _, err := tr.Create(ctx, "d0/f00000", bytes.NewReader(bytes.Repeat([]byte("q"), 1000)), tree.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for start := 1; start < files; start += 1000 {
		var ops []tree.Op
		for i := start; i < min(start+1000, files); i++ {
			ops = append(ops, tree.Op{Key: fmt.Sprintf("d0/f%05d", i), From: "d0/f00000"})
		}
		if err := st.Apply(ctx, ops); err != nil {
			b.Fatal(err)
		}
	}
	var renamed atomic.Int64
	in0, out0 := sumBytes(counts)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := tr.Rename(ctx, fmt.Sprintf("d%d", i), fmt.Sprintf("d%d", i+1), tree.RenameOptions{}); err != nil {
			b.Fatal(err)
		}
		renamed.Add(files)
	}
	b.StopTimer()
	b.ReportMetric(float64(renamed.Load())/b.Elapsed().Seconds(), "files/s")
	// The 10,000 names share one grid object: a rename that copied data
	// would make the nodes take in or give out its shares.
	in, out := sumBytes(counts)
	b.ReportMetric(float64(in-in0+out-out0), "share-bytes-moved")
	if in != in0 || out != out0 {
		b.Fatalf("renaming %d files moved share bytes: %d in, %d out", files, in-in0, out-out0)
	}
	if l, err := gw.List(ctx, "bench", fmt.Sprintf("d%d/", b.N), "", "", 1); err != nil || len(l.Objects) == 0 {
		b.Fatalf("renamed directory empty: %v", err)
	}
}
