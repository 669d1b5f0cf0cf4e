package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestContentSHA256Mismatch: a signed PUT whose body is not the one
// hashed is 400 XAmzContentSHA256Mismatch whatever its length, and
// nothing is stored.
func TestContentSHA256Mismatch(t *testing.T) {
	e := newEnv(t, 5)
	if resp, b := e.do(t, e.admin, "PUT", "/shabucket", nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	wrong := strings.Repeat("ab", 32)
	for _, n := range []int{10, 5000, 1 << 20, 2 << 20, 1<<20 + 1} {
		body := make([]byte, n)
		rand.Read(body)
		resp, b := e.doHash(t, e.admin, "PUT", "/shabucket/k", body, wrong)
		if resp.StatusCode != 400 || !bytes.Contains(b, []byte("<Code>XAmzContentSHA256Mismatch</Code>")) {
			t.Errorf("%d bytes: %d %s", n, resp.StatusCode, b)
		}
	}
	if resp, _ := e.do(t, e.admin, "HEAD", "/shabucket/k", nil); resp.StatusCode != 404 {
		t.Fatalf("a refused body was stored: %d", resp.StatusCode)
	}
}

// TestMalformedBodies: a malformed chunk size in Transfer-Encoding:
// chunked or in an aws-chunked body is a 400 naming the problem, past the
// inline size too (where the body streams to the grid).
func TestMalformedBodies(t *testing.T) {
	e := newEnv(t, 5)
	if resp, b := e.do(t, e.admin, "PUT", "/chunks", nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	data := bytes.Repeat([]byte("x"), 5000)
	good := fmt.Sprintf("%x\r\n%s\r\n", len(data), data)
	c := e.raw(t, e.admin, "PUT", "/chunks/te", "UNSIGNED-PAYLOAD", []string{"Transfer-Encoding", "chunked"}, []byte(good+"zz\r\nabc\r\n0\r\n\r\n"))
	if resp, b := answer(t, c); resp.StatusCode != 400 || !bytes.Contains(b, []byte("<Code>InvalidRequest</Code>")) {
		t.Errorf("bad chunk size, chunked: %d %s", resp.StatusCode, b)
	}
	body := good + "zz\r\nabc\r\n0\r\n\r\n"
	c = e.raw(t, e.admin, "PUT", "/chunks/aws", "STREAMING-UNSIGNED-PAYLOAD-TRAILER", []string{"Content-Encoding", "aws-chunked",
		"X-Amz-Decoded-Content-Length", fmt.Sprint(len(data) + 3), "Content-Length", fmt.Sprint(len(body))}, []byte(body))
	if resp, b := answer(t, c); resp.StatusCode != 400 || !bytes.Contains(b, []byte("aws-chunked")) {
		t.Errorf("bad chunk size, aws-chunked: %d %s", resp.StatusCode, b)
	}
	for _, k := range []string{"te", "aws"} {
		if resp, _ := e.do(t, e.admin, "HEAD", "/chunks/"+k, nil); resp.StatusCode != 404 {
			t.Errorf("%s: a refused body was stored: %d", k, resp.StatusCode)
		}
	}
}

// TestClientAbortLogged: a client that closes the connection mid-body is
// logged as 499, not as a server error.
func TestClientAbortLogged(t *testing.T) {
	var log syncBuffer
	e := newEnvWith(t, testgrid.Options{Nodes: 5}, s3.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if resp, b := e.do(t, e.admin, "PUT", "/aborts", nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	c := e.raw(t, e.admin, "PUT", "/aborts/k", "UNSIGNED-PAYLOAD", []string{"Content-Length", fmt.Sprint(1 << 20)}, make([]byte, 100<<10))
	c.Close()
	waitFor(t, "the request's log line", func() bool { return strings.Contains(log.String(), "path=/aborts/k") })
	if l := log.String(); !strings.Contains(l, "status=499") || strings.Contains(l, "status=500") {
		t.Fatalf("log: %s", l)
	}
}

// TestErrorAnswers: S3's answers for bad keys, missing buckets, a full
// grid.
func TestErrorAnswers(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 5, Capacity: func(int) int64 { return 64 << 10 }}, s3.Options{})
	if resp, b := e.do(t, e.admin, "PUT", "/answers", nil); resp.StatusCode != 200 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	check := func(what string, k gateway.AccessKey, method, path string, body []byte, status int, code string) {
		t.Helper()
		resp, b := e.do(t, k, method, path, body)
		if resp.StatusCode != status || !bytes.Contains(b, []byte("<Code>"+code+"</Code>")) {
			t.Errorf("%s: %d %s, want %d %s", what, resp.StatusCode, b, status, code)
		}
	}
	_, err := e.client(e.admin).PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("answers"), Key: aws.String("a\x00b"), Body: strings.NewReader("x")})
	if code(err) != "InvalidArgument" || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("NUL in a key: %v", err)
	}
	check("a key of 1025 bytes", e.admin, "PUT", "/answers/"+strings.Repeat("k", 1025), []byte("x"), 400, "KeyTooLongError")
	other := e.key(t, false)
	check("a missing bucket, non-admin key", other, "GET", "/no-such-bucket/x", nil, 404, "NoSuchBucket")
	check("a missing bucket, listing", other, "GET", "/no-such-bucket", nil, 404, "NoSuchBucket")
	check("a bucket not granted", other, "GET", "/answers/x", nil, 403, "AccessDenied")
	if _, err := e.client(other).CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("others")}); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{"no-such-bucket/x": "NoSuchBucket", "answers/x": "AccessDenied"} {
		_, err := e.client(other).CopyObject(context.Background(), &awss3.CopyObjectInput{Bucket: aws.String("others"), Key: aws.String("c"), CopySource: aws.String(src)})
		if code(err) != want {
			t.Errorf("copy from %s: %v, want %s", src, err, want)
		}
	}
	check("a reserved bucket name", e.admin, "PUT", "/sthree-configurator", nil, 400, "InvalidBucketName")
	big := make([]byte, 2<<20)
	rand.Read(big)
	check("a full grid", e.admin, "PUT", "/answers/big", big, 507, "InsufficientStorage")
}
