package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// shareBytes is the bytes of the share files of g's first n nodes.
func (g *testGrid) shareBytes(t *testing.T, n int) int64 {
	t.Helper()
	shares, _ := g.storeBytes(n)
	return shares
}

// settledShareBytes waits until the first n nodes of g have no share in
// flight and the same share bytes for a second, and returns those bytes:
// a PUT is acknowledged at happiness, and its last shares land after it.
func (g *testGrid) settledShareBytes(t *testing.T, n int) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, _ := g.storeBytes(n)
	for stable := time.Now(); ; {
		time.Sleep(100 * time.Millisecond)
		shares, tmp := g.storeBytes(n)
		if shares != last || tmp != 0 {
			last, stable = shares, time.Now()
		} else if time.Since(stable) >= time.Second {
			return shares
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes' share bytes did not settle in 30 s: %d, %d in flight", shares, tmp)
		}
	}
}

// The grid reclaims space, with real processes: five nodes that sweep
// expired leases every 200 ms, and a gateway whose objects have a 5 s
// lease renewed every second. A bucket is filled through S3 (whole
// objects, an overwritten key, a completed multipart upload, an aborted
// one) and emptied; the nodes' share bytes come back to where they were
// before the fill, less the one object deleted from before it, while a
// key still present and an S3 copy of a deleted object stay, past their
// first lease (so renewed), and read back. A `quilt put --lease 1s`
// that nobody renews expires; one that `quilt renew` renewed stays, and
// `quilt rm` frees its shares at once.
func TestGCThroughS3(t *testing.T) {
	const nodes = 5
	g := startTestGridArgs(t, nodes, "--lease-sweep", "200ms", "--lease-grace", "0")
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0",
		extra: []string{"--lease", "5s", "--renew-every", "1s", "--cancel-delay", "0"}}
	t.Cleanup(gw.kill)
	gw.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := gw.client()
	bucket := aws.String("gcb")
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
	del := func(key string) {
		t.Helper()
		if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(key)}); err != nil {
			t.Fatalf("DELETE %s: %v", key, err)
		}
	}
	// waitBytes waits until the nodes' share bytes are want.
	waitBytes := func(what string, want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := g.shareBytes(t, nodes)
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nodes hold %d bytes of shares, want %d", what, got, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	settled := func() int64 { return g.settledShareBytes(t, nodes) }

	keep, src := body(1<<20), body(1<<20+5)
	put("keep", keep)
	kept := time.Now()
	before := settled()
	put("src", src)
	srcBytes := settled() - before
	if _, err := client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: bucket, Key: aws.String("copied"), CopySource: aws.String("gcb/src")}); err != nil {
		t.Fatal(err)
	}
	base := settled()
	if srcBytes <= 0 || base <= before+srcBytes {
		t.Fatalf("share bytes: %d before src, %d with it, %d with its copy", before, before+srcBytes, base)
	}

	// The fill: about 30 MiB through S3.
	for i := range 8 {
		put(fmt.Sprintf("junk/%d", i), body(2<<20+i))
	}
	put("junk/0", body(3<<20)) // overwrites
	mp := func(key string, complete bool) {
		t.Helper()
		up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		for n := int32(1); n <= 2; n++ {
			out, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(body(5 << 20))})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
		}
		if !complete {
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId}); err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bucket, Key: aws.String(key), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			t.Fatal(err)
		}
	}
	mp("junk/multi", true)
	mp("junk/aborted", false)
	if full := g.shareBytes(t, nodes); full < base+30<<20 {
		t.Fatalf("after the fill nodes hold %d bytes of shares, %d before", full, base)
	}

	// Empty it all but keep and copied.
	for i := range 8 {
		del(fmt.Sprintf("junk/%d", i))
	}
	del("junk/multi")
	del("src")
	waitBytes("after the deletes", base-srcBytes)

	// quilt put: one --lease 2s renewed for an hour by quilt renew,
	// one --lease 1s that nobody renews and that expires.
	level := settled()
	file := filepath.Join(g.base, "f")
	if err := os.WriteFile(file, body(300<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	capOut, _, err := g.quilt(nil, "put", "--happy", "5", "--lease", "2s", file)
	if err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	if out, _, err := g.quilt(nil, "renew", "--lease", "1h", strings.TrimSpace(capOut)); err != nil || !strings.Contains(out, "lease renewed on") {
		t.Fatalf("quilt renew: %v\n%s", err, out)
	}
	withPut := settled()
	if withPut == level {
		t.Fatal("quilt put stored nothing")
	}
	if _, _, err := g.quilt(nil, "put", "--happy", "5", "--lease", "1s", file); err != nil {
		t.Fatal(err)
	}
	waitBytes("a quilt put whose lease expired", withPut)

	// keep, copied and the renewed put outlive their first lease.
	if d := max(6*time.Second-time.Since(kept), 3*time.Second-time.Since(renewed)); d > 0 {
		time.Sleep(d)
	}
	if got := g.shareBytes(t, nodes); got != withPut {
		t.Fatalf("share bytes changed after the first lease terms: %d, want %d", got, withPut)
	}
	if !bytes.Equal(get("keep"), keep) || !bytes.Equal(get("copied"), src) {
		t.Fatal("a key still present, or the copy of a deleted one, reads back wrong")
	}

	// quilt rm frees the renewed put's shares at once.
	if out, _, err := g.quilt(nil, "rm", strings.TrimSpace(capOut)); err != nil || !strings.Contains(out, "shares deleted") {
		t.Fatalf("quilt rm: %v\n%s", err, out)
	}
	if got := g.shareBytes(t, nodes); got != level {
		t.Fatalf("after quilt rm: %d bytes of shares, want %d", got, level)
	}
	// A second rm finds no lease of this client's.
	if _, _, err := g.quilt(nil, "rm", strings.TrimSpace(capOut)); err == nil {
		t.Fatal("quilt rm of an object already removed succeeded")
	}
}
