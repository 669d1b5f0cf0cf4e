package s3_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func tagSet(tags []types.Tag) string {
	var s []string
	for _, t := range tags {
		s = append(s, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
	}
	return strings.Join(s, "&")
}

func mkTags(n int, kv ...string) []types.Tag {
	var out []types.Tag
	for i := range n {
		out = append(out, types.Tag{Key: aws.String(fmt.Sprintf("k%02d", i)), Value: aws.String("v")})
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

// TestObjectTagging: tags with PUT (x-amz-tagging), multipart and copy
// (COPY and REPLACE directives), the tagging subresource, the count on
// GET and HEAD, and S3's limits.
func TestObjectTagging(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("tags")}); err != nil {
		t.Fatal(err)
	}
	b := aws.String("tags")
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("o"), Body: strings.NewReader("tagged"), Tagging: aws.String("team=blue&year=2026")}); err != nil {
		t.Fatal(err)
	}
	get := func(key string) string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return tagSet(out.TagSet)
	}
	if got := get("o"); got != "team=blue&year=2026" {
		t.Fatalf("tags %q", got)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil || aws.ToInt32(h.TagCount) != 2 {
		t.Fatalf("head: %v %v", h.TagCount, err)
	}
	g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil || aws.ToInt32(g.TagCount) != 2 {
		t.Fatalf("get: %v %v", g.TagCount, err)
	}
	g.Body.Close()
	// PutObjectTagging replaces the set, keeping bytes and ETag.
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("o"), Tagging: &types.Tagging{TagSet: mkTags(0, "only", "one")}}); err != nil {
		t.Fatal(err)
	}
	if got := get("o"); got != "only=one" {
		t.Fatalf("tags after put %q", got)
	}
	if got := getString(t, c, "tags", "o"); got != "tagged" {
		t.Fatalf("bytes after tagging %q", got)
	}
	h2, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("o")})
	if err != nil || aws.ToString(h2.ETag) != aws.ToString(h.ETag) {
		t.Fatalf("ETag after tagging %v, was %v (%v)", h2.ETag, h.ETag, err)
	}
	// Copy: the source's tags by default, the header's with REPLACE.
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: aws.String("copied"), CopySource: aws.String("tags/o")}); err != nil {
		t.Fatal(err)
	}
	if got := get("copied"); got != "only=one" {
		t.Fatalf("copied tags %q", got)
	}
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: aws.String("replaced"), CopySource: aws.String("tags/o"),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("new=tag")}); err != nil {
		t.Fatal(err)
	}
	if got := get("replaced"); got != "new=tag" {
		t.Fatalf("replaced tags %q", got)
	}
	// Multipart: the tags given at creation.
	cu, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp"), Tagging: aws.String("mp=yes")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: cu.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("p")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: cu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	if got := get("mp"); got != "mp=yes" {
		t.Fatalf("multipart tags %q", got)
	}
	// Delete.
	if _, err := c.DeleteObjectTagging(ctx, &awss3.DeleteObjectTaggingInput{Bucket: b, Key: aws.String("o")}); err != nil {
		t.Fatal(err)
	}
	if got := get("o"); got != "" {
		t.Fatalf("tags after delete %q", got)
	}
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("o")}); err != nil || h.TagCount != nil {
		t.Fatalf("tag count after delete: %v %v", h.TagCount, err)
	}
	// Limits and failures, none changing the tags.
	long := strings.Repeat("é", 129)
	for _, f := range []struct {
		tags []types.Tag
		code string
	}{
		{mkTags(11), "BadRequest"},
		{mkTags(0, long, "v"), "InvalidTag"},
		{mkTags(0, "k", strings.Repeat("v", 257)), "InvalidTag"},
		{mkTags(0, "aws:k", "v"), "InvalidTag"},
		{mkTags(0, "k", "1", "k", "2"), "InvalidTag"},
	} {
		if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("copied"), Tagging: &types.Tagging{TagSet: f.tags}}); code(err) != f.code {
			t.Errorf("%d tags: %v, want %s", len(f.tags), err, f.code)
		}
	}
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("copied"), Tagging: &types.Tagging{TagSet: mkTags(10, strings.Repeat("é", 128), strings.Repeat("v", 256))[1:]}}); err != nil {
		t.Errorf("10 tags at the length limits: %v", err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("toomany"), Body: strings.NewReader("x"), Tagging: aws.String(strings.Repeat("a=1&", 10) + "b=2")}); code(err) != "InvalidTag" {
		t.Errorf("PUT with a tag twice: %v", err)
	}
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("missing"), Tagging: &types.Tagging{TagSet: mkTags(1)}}); code(err) != "NoSuchKey" {
		t.Errorf("tagging a missing key: %v", err)
	}
	reader := e.key(t, false)
	if _, err := e.client(reader).GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: aws.String("o")}); code(err) != "AccessDenied" {
		t.Errorf("tags read by a key without grants: %v", err)
	}
}

// TestBucketTagging: Put/Get/DeleteBucketTagging, 50 tags at most.
func TestBucketTagging(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	b := aws.String("btags")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b}); code(err) != "NoSuchTagSet" {
		t.Fatalf("no tags yet: %v", err)
	}
	if _, err := c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: mkTags(50)}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b})
	if err != nil || len(out.TagSet) != 50 || aws.ToString(out.TagSet[0].Key) != "k00" {
		t.Fatalf("bucket tags: %v %v", out, err)
	}
	if _, err := c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: mkTags(51)}}); code(err) != "InvalidTag" {
		t.Fatalf("51 tags: %v", err)
	}
	if out, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b}); err != nil || len(out.TagSet) != 50 {
		t.Fatalf("bucket tags after a refused put: %v", err)
	}
	if _, err := c.DeleteBucketTagging(ctx, &awss3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b}); code(err) != "NoSuchTagSet" {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: aws.String("nope")}); code(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
}
