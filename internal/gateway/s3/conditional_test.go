package s3_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestConditionalPutRace: 12 concurrent creators of one key with
// If-None-Match: *; exactly one wins, the others get 412, and the key
// holds the winner's bytes.
func TestConditionalPutRace(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("cond")}); err != nil {
		t.Fatal(err)
	}
	const n = 12
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String("lock"),
				Body: strings.NewReader(fmt.Sprintf("creator %d", i)), IfNoneMatch: aws.String("*")})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch code(err) {
		case "":
			if winner >= 0 {
				t.Errorf("creators %d and %d both created the key", winner, i)
			}
			winner = i
		case "PreconditionFailed":
		default:
			t.Errorf("creator %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no creator won")
	}
	if got := getString(t, c, "cond", "lock"); got != fmt.Sprintf("creator %d", winner) {
		t.Fatalf("key holds %q, winner was %d", got, winner)
	}
}

// TestConditionalWrites: If-Match and If-None-Match on PutObject and
// CompleteMultipartUpload, their failures writing nothing.
func TestConditionalWrites(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("cond")}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string, ifMatch, ifNone *string) (*awss3.PutObjectOutput, error) {
		return c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String(key), Body: strings.NewReader(body), IfMatch: ifMatch, IfNoneMatch: ifNone})
	}
	if _, err := put("k", "v0", aws.String(`"0123"`), nil); code(err) != "NoSuchKey" {
		t.Fatalf("If-Match on a missing key: %v", err)
	}
	v1, err := put("k", "v1", nil, aws.String("*"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put("k", "v2", nil, aws.String("*")); code(err) != "PreconditionFailed" {
		t.Fatalf("If-None-Match on an existing key: %v", err)
	}
	v3, err := put("k", "v3", v1.ETag, nil)
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	if _, err := put("k", "v4", v1.ETag, nil); code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match with a stale ETag: %v", err)
	}
	if got := getString(t, c, "cond", "k"); got != "v3" {
		t.Fatalf("key holds %q", got)
	}
	// Multipart: the condition is checked at completion; a failed one
	// leaves the upload open.
	cu, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("cond"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("cond"), Key: aws.String("k"), UploadId: cu.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("multipart")})
	if err != nil {
		t.Fatal(err)
	}
	complete := func(ifMatch, ifNone *string) error {
		_, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("cond"), Key: aws.String("k"), UploadId: cu.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}},
			IfMatch:         ifMatch, IfNoneMatch: ifNone})
		return err
	}
	if err := complete(nil, aws.String("*")); code(err) != "PreconditionFailed" {
		t.Fatalf("completion with If-None-Match on an existing key: %v", err)
	}
	if err := complete(v1.ETag, nil); code(err) != "PreconditionFailed" {
		t.Fatalf("completion with a stale If-Match: %v", err)
	}
	if _, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("cond"), Key: aws.String("k"), UploadId: cu.UploadId}); err != nil {
		t.Fatalf("upload gone after a failed completion: %v", err)
	}
	if got := getString(t, c, "cond", "k"); got != "v3" {
		t.Fatalf("key holds %q after failed completions", got)
	}
	if err := complete(v3.ETag, nil); err != nil {
		t.Fatalf("completion with the current ETag: %v", err)
	}
	if got := getString(t, c, "cond", "k"); got != "multipart" {
		t.Fatalf("key holds %q after completion", got)
	}
}

func getString(t *testing.T, c *awss3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
