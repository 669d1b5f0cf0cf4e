package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// gcLargeFill is what TestGCThroughS3GiB stores and deletes through S3.
const gcLargeFill = 1 << 30

// Space comes back at scale (issue 22, "what it must show" (1)): five
// real nodes (--no-fsync, sweeping expired leases every 200 ms) and a
// gateway whose objects have a 10 s lease renewed every 2 s. Through
// S3, a key to keep, a source and an S3 copy of it are stored; then
// 1 GiB (whole objects of 16 MiB and a multipart upload of 32 MiB), and
// all of it and the source are deleted. Within the grace set for the
// test (the lease term and a margin), the nodes' share bytes return to
// where they were before the fill, less the source; the key kept and
// the copy still read back, past several lease terms.
func TestGCThroughS3GiB(t *testing.T) {
	const nodes = 5
	g := startTestGridArgs(t, nodes, "--no-fsync", "--lease-sweep", "200ms", "--lease-grace", "0")
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0",
		extra: []string{"--lease", "10s", "--renew-every", "2s", "--cancel-delay", "0"}}
	t.Cleanup(gw.kill)
	gw.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client := gw.client()
	bucket := aws.String("gib")
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	body := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
	}
	get := func(key string) []byte {
		t.Helper()
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		return b
	}

	keep, src := body(3<<20), body(2<<20+7)
	put("keep", keep)
	before := g.settledShareBytes(t, nodes)
	put("src", src)
	srcBytes := g.settledShareBytes(t, nodes) - before
	if _, err := client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: bucket, Key: aws.String("copied"), CopySource: aws.String("gib/src")}); err != nil {
		t.Fatal(err)
	}
	base := g.settledShareBytes(t, nodes)
	if srcBytes <= 0 || base <= before+srcBytes {
		t.Fatalf("share bytes: %d before src, %d with it, %d with its copy", before, before+srcBytes, base)
	}

	// The fill: 1 GiB, as 16 MiB objects and one multipart upload.
	start := time.Now()
	const object, part = 16 << 20, 8 << 20
	chunk := body(object) // its bytes vary by a prefix per key: no two objects alike
	var keys []string
	for i := range (gcLargeFill - 4*part) / object {
		key := fmt.Sprintf("fill/%03d", i)
		copy(chunk, key)
		put(key, chunk)
		keys = append(keys, key)
	}
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucket, Key: aws.String("fill/multi")})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for n := int32(1); n <= 4; n++ {
		copy(chunk, fmt.Sprintf("part %d", n))
		out, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: bucket, Key: aws.String("fill/multi"), UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(chunk[:part])})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	if _, err := client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bucket, Key: aws.String("fill/multi"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "fill/multi")
	full := g.shareBytes(t, nodes)
	if full < base+gcLargeFill {
		t.Fatalf("after the fill nodes hold %d bytes of shares, %d before", full, base)
	}
	t.Logf("filled %d MiB through S3 in %v; nodes hold %d MiB of shares", gcLargeFill>>20, time.Since(start).Round(time.Second), full>>20)

	// Delete it all, and the source, in batches of DeleteObjects.
	start = time.Now()
	keys = append(keys, "src")
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		var ids []types.ObjectIdentifier
		for _, k := range keys[:n] {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: bucket, Delete: &types.Delete{Objects: ids}})
		if err != nil || len(out.Errors) > 0 {
			t.Fatalf("DeleteObjects: %v %v", err, out.Errors)
		}
		keys = keys[n:]
	}
	// The grace set for the test: the lease term (10 s) and a margin for
	// the cancels and sweeps.
	want := base - srcBytes
	deadline := time.Now().Add(40 * time.Second)
	for {
		got := g.shareBytes(t, nodes)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after the deletes nodes hold %d bytes of shares, want %d (%d before the fill, less the source's %d)",
				time.Since(start).Round(time.Second), got, want, base, srcBytes)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("space back to %d bytes of shares %v after the deletes", want, time.Since(start).Round(100*time.Millisecond))

	// What is still referenced outlives more lease terms and reads back.
	time.Sleep(12 * time.Second)
	if got := g.shareBytes(t, nodes); got != want {
		t.Fatalf("share bytes changed past a lease term: %d, want %d", got, want)
	}
	if !bytes.Equal(get("keep"), keep) || !bytes.Equal(get("copied"), src) {
		t.Fatal("a key still present, or the copy of a deleted one, reads back wrong")
	}
}
