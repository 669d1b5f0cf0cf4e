package s3_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestDeletedBucketKeepsItsUploads: a bucket with a multipart upload open
// cannot be deleted, and once it is (the upload aborted), another key that
// makes a bucket of the same name sees nothing of the first owner's
// upload: not listed, its parts not listed, not completable.
func TestDeletedBucketKeepsItsUploads(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	ka, kb := e.key(t, false), e.key(t, false)
	a, b := e.client(ka), e.client(kb)

	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("b")}); err == nil {
		t.Fatal("a one-letter bucket name was accepted")
	}
	bk := aws.String("shared-name")
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bk}); err != nil {
		t.Fatal(err)
	}
	mp, err := a.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: bk, Key: aws.String("secret")})
	if err != nil {
		t.Fatal(err)
	}
	up, err := a.UploadPart(ctx, &awss3.UploadPartInput{Bucket: bk, Key: aws.String("secret"), UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("the first owner's data")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: bk})
	if code(err) != "BucketNotEmpty" || !strings.Contains(err.Error(), "multipart uploads in progress") {
		t.Fatalf("delete a bucket with an upload open: %v", err)
	}
	if _, err := a.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: bk, Key: aws.String("secret"), UploadId: mp.UploadId}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: bk}); err != nil {
		t.Fatalf("delete once the upload is aborted: %v", err)
	}

	if _, err := b.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bk}); err != nil {
		t.Fatal(err)
	}
	lu, err := b.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: bk})
	if err != nil || len(lu.Uploads) != 0 {
		t.Fatalf("the new bucket lists uploads: %v %+v", err, lu)
	}
	if _, err := b.ListParts(ctx, &awss3.ListPartsInput{Bucket: bk, Key: aws.String("secret"), UploadId: mp.UploadId}); code(err) != "NoSuchUpload" {
		t.Fatalf("list parts of the old bucket's upload: %v", err)
	}
	if _, err := b.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: bk, Key: aws.String("secret"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}}); code(err) != "NoSuchUpload" {
		t.Fatalf("complete the old bucket's upload: %v", err)
	}
	if _, err := b.GetObject(ctx, &awss3.GetObjectInput{Bucket: bk, Key: aws.String("secret")}); code(err) != "NoSuchKey" {
		t.Fatalf("get: %v", err)
	}
}
