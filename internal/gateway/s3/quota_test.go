package s3_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestS3Quota: with the key of an account whose home has a quota, S3
// writes past it — PutObject, UploadPart, CompleteMultipartUpload,
// CopyObject — are 403 QuotaExceeded and store nothing; deleting frees
// room; the key reaches its home and nothing else.
func TestS3Quota(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	_, key, err := gw.CreateUser(ctx, gateway.NewUser{Name: "hana", Password: "hana's password", Quota: 12 << 20})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3.New(gw, s3.Options{}))
	defer srv.Close()
	c := client(srv.URL, key.ID, key.Secret)
	home := aws.String("home-hana")
	quota := func(what string, err error) {
		t.Helper()
		var re *awshttp.ResponseError
		if code(err) != "QuotaExceeded" || !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
			t.Fatalf("%s: %v, want 403 QuotaExceeded", what, err)
		}
	}
	five := make([]byte, 5<<20)
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: home, Key: aws.String("a"), Body: bytes.NewReader(five)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: home, Key: aws.String("b"), Body: bytes.NewReader(five)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: home, Key: aws.String("c"), Body: bytes.NewReader(five)})
	quota("PutObject", err)
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: home, Key: aws.String("c")}); err == nil {
		t.Fatal("a PUT refused for quota stored the object")
	}
	_, err = c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: home, Key: aws.String("copy"), CopySource: aws.String("home-hana/a")})
	quota("CopyObject", err)

	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: home, Key: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: home, Key: aws.String("m"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(five)})
	quota("UploadPart", err)
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: home, Key: aws.String("b")}); err != nil {
		t.Fatal(err)
	}
	p1, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: home, Key: aws.String("m"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(five)})
	if err != nil {
		t.Fatalf("a part within the quota: %v", err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: home, Key: aws.String("b"), Body: bytes.NewReader(five)}); err != nil {
		t.Fatal(err) // the upload's part is not in the bucket yet
	}
	done := &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag}}}
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: home, Key: aws.String("m"), UploadId: up.UploadId, MultipartUpload: done})
	quota("CompleteMultipartUpload", err)
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: home, Key: aws.String("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: home, Key: aws.String("m"), UploadId: up.UploadId, MultipartUpload: done}); err != nil {
		t.Fatalf("completing within the quota: %v", err)
	}
	if n, err := gw.Usage(ctx, "home-hana"); err != nil || n != 10<<20 {
		t.Fatalf("usage %d %v", n, err)
	}
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("elsewhere")}); code(err) != "AccessDenied" {
		t.Fatalf("an account's key made a bucket: %v", err)
	}
}
