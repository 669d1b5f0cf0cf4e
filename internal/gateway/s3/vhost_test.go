package s3_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// vhostClient is an SDK client in its default, virtual-hosted addressing
// (https://BUCKET.DOMAIN/KEY) against endpoint; every connection goes to
// the test server whatever host name the SDK puts in front of the domain,
// as a wildcard DNS record for the domain would send it.
func vhostClient(e *env, endpoint string) *awss3.Client {
	addr := e.srv.Listener.Addr().String()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	return awss3.New(awss3.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider(e.admin.ID, e.admin.Secret, ""),
		HTTPClient:       &http.Client{Transport: tr},
		RetryMaxAttempts: 1,
	})
}

// With --s3-domain, the SDK's default virtual-hosted-style requests
// (bucket in the host name) reach the same buckets and keys as
// path-style ones, bucket operations included; without it, the host name
// is ignored and such a request names no bucket.
func TestVirtualHostedStyle(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{Domain: "S3.Quilt.Test"})
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	ctx := context.Background()
	vh := vhostClient(e, "http://s3.quilt.test:"+port)
	path := e.client(e.admin)

	if _, err := vh.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("photos.2026")}); err != nil {
		t.Fatalf("create bucket virtual-hosted: %v", err)
	}
	body := "a picture"
	if _, err := vh.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("photos.2026"), Key: aws.String("dir/a b.jpg"), Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("put virtual-hosted: %v", err)
	}
	// Path style reads what virtual-hosted style wrote, and back.
	got, err := path.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("photos.2026"), Key: aws.String("dir/a b.jpg")})
	if err != nil {
		t.Fatalf("get path-style: %v", err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(b) != body {
		t.Fatalf("path-style read %q", b)
	}
	if _, err := path.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("photos.2026"), Key: aws.String("other"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	list, err := vh.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("photos.2026")})
	if err != nil {
		t.Fatalf("list virtual-hosted: %v", err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, *o.Key)
	}
	if strings.Join(keys, ",") != "dir/a b.jpg,other" {
		t.Fatalf("virtual-hosted listing: %v", keys)
	}
	if _, err := vh.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("photos.2026"), Key: aws.String("missing")}); err == nil {
		t.Error("head of a missing key succeeded")
	}
	// A bucket that does not exist is NoSuchBucket, by host as by path.
	if _, err := vh.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("nothere")}); code(err) != "NoSuchBucket" {
		t.Errorf("list of a missing bucket virtual-hosted: %v", err)
	}
	// The domain itself is path-style: ListBuckets, and /BUCKET/KEY.
	resp, _ := e.do(t, e.admin, "GET", "/photos.2026/other", nil)
	if resp.StatusCode != 200 {
		t.Errorf("path-style GET on the plain host: %d", resp.StatusCode)
	}
	for _, k := range []string{"dir/a b.jpg", "other"} {
		if _, err := vh.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("photos.2026"), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := vh.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("photos.2026")}); err != nil {
		t.Fatalf("delete bucket virtual-hosted: %v", err)
	}

	// Without a domain the gateway reads the path only: the same
	// virtual-hosted request names the service, not the bucket.
	plain := newEnv(t, 3)
	_, port, _ = net.SplitHostPort(plain.srv.Listener.Addr().String())
	if _, err := vhostClient(plain, "http://s3.quilt.test:"+port).CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("photos")}); err == nil {
		t.Error("a virtual-hosted CreateBucket without --s3-domain succeeded")
	}
	if _, err := plain.client(plain.admin).HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("photos")}); err == nil {
		t.Error("a virtual-hosted CreateBucket without --s3-domain made the bucket")
	}
}
