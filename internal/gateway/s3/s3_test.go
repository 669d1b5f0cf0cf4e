package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

func client(url, id, secret string) *awss3.Client {
	return awss3.New(awss3.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(id, secret, ""),
	})
}

// code is the S3 error code of an SDK error.
func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestS3WithTheAWSSDK drives the S3 API with aws-sdk-go-v2 against a
// gateway on a 10-node in-process grid, failures included.
func TestS3WithTheAWSSDK(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	key, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s3.New(gw, s3.Options{}))
	defer srv.Close()
	c := client(srv.URL, key.ID, key.Secret)

	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("data")}); code(err) != "BucketAlreadyOwnedByYou" {
		t.Fatalf("create twice: %v", err)
	}
	lb, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "data" {
		t.Fatalf("list buckets: %v %+v", err, lb)
	}
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("nope")}); err == nil {
		t.Fatal("head of a missing bucket succeeded")
	}
	if loc, err := c.GetBucketLocation(ctx, &awss3.GetBucketLocationInput{Bucket: aws.String("data")}); err != nil || loc.LocationConstraint != "" {
		t.Fatalf("location: %v %+v", err, loc)
	}
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("scratch")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("scratch")}); err != nil {
		t.Fatalf("delete an empty bucket: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String("scratch")}); err == nil {
		t.Fatal("a deleted bucket is still there")
	}

	small := []byte("hello from the SDK")
	big := make([]byte, 5<<20+3)
	rand.Read(big)
	put, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt"),
		Body: bytes.NewReader(small), ContentType: aws.String("text/plain"), Metadata: map[string]string{"author": "ana"},
		CacheControl: aws.String("max-age=60")})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"%x"`, md5.Sum(small)); *put.ETag != want {
		t.Fatalf("etag %s, want %s", *put.ETag, want)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("big.bin"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	head, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt")})
	if err != nil || head.Metadata["author"] != "ana" || *head.ContentType != "text/plain" || *head.ContentLength != int64(len(small)) || aws.ToString(head.CacheControl) != "max-age=60" {
		t.Fatalf("head: %v %+v", err, head)
	}
	get := func(k, rng string) ([]byte, error) {
		in := &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(k)}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
	if b, err := get("big.bin", ""); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("get big: %v (%d bytes)", err, len(b))
	}
	if b, err := get("big.bin", "bytes=1048570-1048579"); err != nil || !bytes.Equal(b, big[1048570:1048580]) {
		t.Fatalf("range: %v", err)
	}
	if b, err := get("big.bin", "bytes=-10"); err != nil || !bytes.Equal(b, big[len(big)-10:]) {
		t.Fatalf("suffix range: %v", err)
	}
	if _, err := get("big.bin", fmt.Sprintf("bytes=%d-", len(big)+5)); code(err) != "InvalidRange" {
		t.Fatalf("range past the end: %v", err)
	}
	if _, err := get("missing", ""); code(err) != "NoSuchKey" {
		t.Fatalf("missing key: %v", err)
	}
	var nsb *types.NoSuchBucket
	if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("nope"), Key: aws.String("x")}); !errors.As(err, &nsb) && code(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
	if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt"), IfNoneMatch: put.ETag}); !strings.Contains(fmt.Sprint(err), "304") {
		t.Fatalf("If-None-Match with the current ETag: %v", err)
	}
	if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt"), IfMatch: aws.String(`"0000"`)}); code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with another ETag: %v", err)
	}
	if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt"), IfModifiedSince: aws.Time(time.Now().Add(time.Hour))}); !strings.Contains(fmt.Sprint(err), "304") {
		t.Fatalf("If-Modified-Since after the write: %v", err)
	}
	if out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt"), IfModifiedSince: aws.Time(time.Now().Add(-time.Hour))}); err != nil {
		t.Fatalf("If-Modified-Since before the write: %v", err)
	} else {
		out.Body.Close()
	}

	// Listing: prefix, delimiter, pages.
	for _, k := range []string{"docs/a.txt", "docs/sub/b.txt", "img/1.png", "img/2.png"} {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatal(err)
		}
	}
	lo, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("data"), Prefix: aws.String("docs/"), Delimiter: aws.String("/")})
	if err != nil || len(lo.Contents) != 2 || len(lo.CommonPrefixes) != 1 || *lo.CommonPrefixes[0].Prefix != "docs/sub/" {
		t.Fatalf("list docs/ by /: %v %+v", err, lo)
	}
	var keys []string
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String("data"), MaxKeys: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
	}
	if fmt.Sprint(keys) != "[big.bin docs/a.txt docs/hello.txt docs/sub/b.txt img/1.png img/2.png]" {
		t.Fatalf("paged listing: %v", keys)
	}
	v1, err := c.ListObjects(ctx, &awss3.ListObjectsInput{Bucket: aws.String("data"), Prefix: aws.String("img/")})
	if err != nil || len(v1.Contents) != 2 {
		t.Fatalf("list v1: %v", err)
	}

	// Copy, batch delete, delete.
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("data"), Key: aws.String("copy.txt"), CopySource: aws.String("data/docs/hello.txt")}); err != nil {
		t.Fatal(err)
	}
	if b, err := get("copy.txt", ""); err != nil || !bytes.Equal(b, small) {
		t.Fatalf("copy: %v", err)
	}
	del, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("data"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("img/1.png")}, {Key: aws.String("img/2.png")}}}})
	if err != nil || len(del.Deleted) != 2 {
		t.Fatalf("delete objects: %v", err)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("data")}); code(err) != "BucketNotEmpty" {
		t.Fatalf("delete a non-empty bucket: %v", err)
	}

	// A presigned URL works with plain net/http.
	pre, err := awss3.NewPresignClient(c).PresignGetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt")},
		awss3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(pre.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, small) {
		t.Fatalf("presigned get: %d %q", resp.StatusCode, b)
	}

	// A wrong secret is refused.
	if _, err := client(srv.URL, key.ID, "wrong"+key.Secret).ListBuckets(ctx, &awss3.ListBucketsInput{}); code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := client(srv.URL, "QKNOSUCHKEY", key.Secret).ListBuckets(ctx, &awss3.ListBucketsInput{}); code(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown key: %v", err)
	}

	// Multipart: three parts (5 MiB, 5 MiB, 1 MiB), listed, completed;
	// the object reads whole and across part boundaries; an aborted
	// upload is gone.
	mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("multi.bin"),
		ContentType: aws.String("application/x-multi"), Metadata: map[string]string{"parts": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	whole := make([]byte, 11<<20)
	rand.Read(whole)
	bounds := []int{0, 5 << 20, 10 << 20, 11 << 20}
	var done []types.CompletedPart
	md5s := md5.New()
	for i := 0; i < 3; i++ {
		chunk := whole[bounds[i]:bounds[i+1]]
		up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("data"), Key: aws.String("multi.bin"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(chunk)})
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		sum := md5.Sum(chunk)
		md5s.Write(sum[:])
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	lp, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("data"), Key: aws.String("multi.bin"), UploadId: mp.UploadId})
	if err != nil || len(lp.Parts) != 3 {
		t.Fatalf("list parts: %v", err)
	}
	lu, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String("data")})
	if err != nil || len(lu.Uploads) != 1 || *lu.Uploads[0].UploadId != *mp.UploadId {
		t.Fatalf("list uploads: %v", err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("multi.bin"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{done[1], done[0]}}}); code(err) != "InvalidPart" {
		t.Fatalf("complete out of order: %v", err)
	}
	cm, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("multi.bin"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"%x-3"`, md5s.Sum(nil)); *cm.ETag != want {
		t.Fatalf("multipart etag %s, want %s", *cm.ETag, want)
	}
	if b, err := get("multi.bin", ""); err != nil || !bytes.Equal(b, whole) {
		t.Fatalf("get multipart object: %v", err)
	}
	if b, err := get("multi.bin", fmt.Sprintf("bytes=%d-%d", 5<<20-10, 5<<20+9)); err != nil || !bytes.Equal(b, whole[5<<20-10:5<<20+10]) {
		t.Fatalf("range across parts: %v", err)
	}
	ab, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("aborted")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("data"), Key: aws.String("aborted"), UploadId: ab.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("part")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("aborted"), UploadId: ab.UploadId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("data"), Key: aws.String("aborted"), UploadId: ab.UploadId}); code(err) != "NoSuchUpload" {
		t.Fatalf("parts of an aborted upload: %v", err)
	}
	if _, err := get("aborted", ""); code(err) != "NoSuchKey" {
		t.Fatalf("an aborted upload left an object: %v", err)
	}

	// A key with read permission on the bucket reads but does not write,
	// and sees no other bucket.
	reader, err := gw.CreateKey(ctx, false, map[string]gateway.Perm{"data": gateway.Read})
	if err != nil {
		t.Fatal(err)
	}
	rc := client(srv.URL, reader.ID, reader.Secret)
	if out, err := rc.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("docs/hello.txt")}); err != nil {
		t.Fatalf("reader get: %v", err)
	} else {
		out.Body.Close()
	}
	if _, err := rc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("x"), Body: strings.NewReader("x")}); code(err) != "AccessDenied" {
		t.Fatalf("reader put: %v", err)
	}
	if _, err := rc.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("data")}); code(err) != "AccessDenied" {
		t.Fatalf("reader delete bucket: %v", err)
	}

	// A key that made a bucket owns it; once the bucket is deleted, the
	// grant goes with it, and a bucket made again under the name is not
	// the old owner's.
	maker, err := gw.CreateKey(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	mc := client(srv.URL, maker.ID, maker.Secret)
	if _, err := mc.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("mine")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("mine"), Key: aws.String("x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("owner put: %v", err)
	}
	if _, err := rc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("mine"), Key: aws.String("y"), Body: strings.NewReader("y")}); code(err) != "AccessDenied" {
		t.Fatalf("another key wrote into a bucket it has no grant on: %v", err)
	}
	mc.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("mine"), Key: aws.String("x")})
	if _, err := mc.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("mine")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("mine")}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("mine"), Key: aws.String("z"), Body: strings.NewReader("z")}); code(err) != "AccessDenied" {
		t.Fatalf("the old owner wrote into a new bucket of the same name: %v", err)
	}

	// n−k nodes stopped: GET still answers.
	for i := 3; i < 10; i++ {
		g.Kill(i)
	}
	if b, err := get("big.bin", ""); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("get with 7 of 10 nodes down: %v", err)
	}
}
