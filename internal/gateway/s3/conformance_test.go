package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"mime"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/quilt-grid/quilt/internal/gateway/s3"
)

// TestS3Conformance checks answers where S3 has a precise behaviour
// applications rely on, with aws-sdk-go-v2: encoding-type=url leaves
// '/' alone, ListBuckets pages by max-buckets, UTF-8 user metadata,
// a repeated CompleteMultipartUpload, EntityTooSmall, a copy onto
// itself, aws-chunked not kept as the object's Content-Encoding, and
// MinIO's snowball auto-extract and storage classes S3 has not refused.
func TestS3Conformance(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	for _, b := range []string{"conf-a", "conf-b", "conf-c", "other"} {
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(key string, body []byte, meta map[string]string) {
		t.Helper()
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("conf-a"), Key: aws.String(key),
			Body: bytes.NewReader(body), Metadata: meta}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}

	t.Run("encoding-type=url", func(t *testing.T) {
		put("dir a/x+y.txt", []byte("1"), nil)
		put("dir a/sub/z", []byte("2"), nil)
		l, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("conf-a"), Prefix: aws.String("dir a/"),
			Delimiter: aws.String("/"), EncodingType: types.EncodingTypeUrl})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(l.Prefix) != "dir%20a/" || aws.ToString(l.Delimiter) != "/" {
			t.Errorf("prefix %q, delimiter %q: want %q, %q", aws.ToString(l.Prefix), aws.ToString(l.Delimiter), "dir%20a/", "/")
		}
		if len(l.Contents) != 1 || aws.ToString(l.Contents[0].Key) != "dir%20a/x%2By.txt" {
			t.Errorf("contents %+v", l.Contents)
		}
		if len(l.CommonPrefixes) != 1 || aws.ToString(l.CommonPrefixes[0].Prefix) != "dir%20a/sub/" {
			t.Errorf("common prefixes %+v", l.CommonPrefixes)
		}
		v, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("conf-a"), Prefix: aws.String("dir a/"),
			Delimiter: aws.String("/"), EncodingType: types.EncodingTypeUrl})
		if err != nil || aws.ToString(v.Prefix) != "dir%20a/" || aws.ToString(v.Delimiter) != "/" {
			t.Errorf("versions: %v, prefix %q, delimiter %q", err, aws.ToString(v.Prefix), aws.ToString(v.Delimiter))
		}
	})

	t.Run("max-buckets", func(t *testing.T) {
		var names []string
		var token *string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("pages do not end")
			}
			l, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(2), ContinuationToken: token, Prefix: aws.String("conf-")})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Buckets) > 2 {
				t.Fatalf("max-buckets 2 gave %d", len(l.Buckets))
			}
			for _, b := range l.Buckets {
				names = append(names, aws.ToString(b.Name))
			}
			if token = l.ContinuationToken; token == nil {
				break
			}
		}
		if strings.Join(names, ",") != "conf-a,conf-b,conf-c" {
			t.Errorf("paged buckets %v", names)
		}
		for _, bad := range []int32{0, 10001} {
			if _, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{MaxBuckets: aws.Int32(bad)}); code(err) != "InvalidArgument" {
				t.Errorf("max-buckets %d: %v", bad, err)
			}
		}
		l, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{})
		if err != nil || len(l.Buckets) != 4 || l.ContinuationToken != nil {
			t.Errorf("unpaged: %v, %d buckets", err, len(l.Buckets))
		}
	})

	t.Run("UTF-8 metadata", func(t *testing.T) {
		const word = "héllo, 日本"
		encoded := mime.BEncoding.Encode("UTF-8", word)
		// Raw UTF-8 (as aws-sdk-go-v2 sends it) and RFC 2047 (as the
		// SDKs' documentation asks) both read back RFC 2047-encoded,
		// decoding to the text; ASCII stays as it is.
		put("meta-raw", []byte("m"), map[string]string{"name": word, "plain": "ascii ok"})
		put("meta-2047", []byte("m"), map[string]string{"name": encoded})
		for _, k := range []string{"meta-raw", "meta-2047"} {
			h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("conf-a"), Key: aws.String(k)})
			if err != nil {
				t.Fatal(err)
			}
			got := h.Metadata["name"]
			dec, err := new(mime.WordDecoder).DecodeHeader(got)
			if err != nil || dec != word || got == word {
				t.Errorf("%s: x-amz-meta-name %q decodes to %q (%v), want RFC 2047 of %q", k, got, dec, err, word)
			}
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("meta-raw")})
		if err != nil || h.Metadata["plain"] != "ascii ok" {
			t.Errorf("ASCII metadata: %v %q", err, h.Metadata["plain"])
		}
		// Stored as text: what other front ends read.
		info, err := e.gw.Head(ctx, "conf-a", "meta-2047")
		if err != nil || info.Meta["name"] != word {
			t.Errorf("stored metadata %q (%v), want %q", info.Meta["name"], err, word)
		}
	})

	t.Run("multipart completion", func(t *testing.T) {
		mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("conf-a"), Key: aws.String("mp")})
		if err != nil {
			t.Fatal(err)
		}
		part := func(n int32, size int) types.CompletedPart {
			b := make([]byte, size)
			rand.Read(b)
			up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("conf-a"), Key: aws.String("mp"), UploadId: mp.UploadId,
				PartNumber: aws.Int32(n), Body: bytes.NewReader(b)})
			if err != nil {
				t.Fatalf("part %d: %v", n, err)
			}
			return types.CompletedPart{PartNumber: aws.Int32(n), ETag: up.ETag}
		}
		small, last := part(1, 1000), part(2, 1000)
		complete := func(parts ...types.CompletedPart) (*awss3.CompleteMultipartUploadOutput, error) {
			return c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("conf-a"), Key: aws.String("mp"),
				UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		}
		if _, err := complete(small, last); code(err) != "EntityTooSmall" {
			t.Fatalf("a small part not the last: %v, want EntityTooSmall", err)
		}
		big := part(1, s3.MinPart)
		first, err := complete(big, last)
		if err != nil {
			t.Fatal(err)
		}
		again, err := complete(big, last)
		if err != nil {
			t.Fatalf("second completion: %v", err)
		}
		if aws.ToString(again.ETag) != aws.ToString(first.ETag) || aws.ToString(again.Key) != "mp" {
			t.Fatalf("second completion: ETag %s, key %s, want %s, mp", aws.ToString(again.ETag), aws.ToString(again.Key), aws.ToString(first.ETag))
		}
		// Other parts than the completion's, or another object at the
		// key since: the upload is gone.
		if _, err := complete(big); code(err) != "NoSuchUpload" {
			t.Errorf("completion with other parts: %v", err)
		}
		put("mp", []byte("overwritten"), nil)
		if _, err := complete(big, last); code(err) != "NoSuchUpload" {
			t.Errorf("completion after an overwrite: %v", err)
		}
		if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("conf-a"), Key: aws.String("mp"),
			UploadId: aws.String("nosuchupload"), MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{last}}}); code(err) != "NoSuchUpload" {
			t.Errorf("unknown upload: %v", err)
		}
	})

	t.Run("copy onto itself", func(t *testing.T) {
		put("self", []byte("self"), map[string]string{"v": "1"})
		_, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("self"), CopySource: aws.String("conf-a/self")})
		if code(err) != "InvalidRequest" {
			t.Fatalf("copy onto itself: %v, want InvalidRequest", err)
		}
		if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("self"), CopySource: aws.String("conf-a/self"),
			MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"v": "2"}}); err != nil {
			t.Fatalf("copy onto itself with REPLACE: %v", err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("self")})
		if err != nil || h.Metadata["v"] != "2" {
			t.Fatalf("after REPLACE: %v %v", err, h.Metadata)
		}
		// To another key, or another bucket, COPY is fine.
		if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("other"), Key: aws.String("self"), CopySource: aws.String("conf-a/self")}); err != nil {
			t.Fatalf("copy to another bucket: %v", err)
		}
	})

	t.Run("snowball auto-extract", func(t *testing.T) {
		// MinIO's archive extraction is refused, not done as a plain PUT
		// of the archive; the same metadata set false is plain metadata.
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("snow.tar"),
			Body: strings.NewReader("tar"), Metadata: map[string]string{"Snowball-Auto-Extract": "true"}})
		if code(err) != "NotImplemented" {
			t.Fatalf("snowball auto-extract: %v, want NotImplemented", err)
		}
		if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("snow.tar")}); err == nil {
			t.Fatal("the refused archive was stored")
		}
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("snow.tar"),
			Body: strings.NewReader("tar"), Metadata: map[string]string{"Snowball-Auto-Extract": "false"}}); err != nil {
			t.Fatalf("auto-extract false: %v", err)
		}
	})

	t.Run("refused with a body", func(t *testing.T) {
		// A client that sends a large body whole, without Expect:
		// 100-continue, reads the refusal (not a reset connection).
		big := make([]byte, 6<<20)
		for _, tc := range []struct {
			path   string
			hdr    []string
			status int
		}{{"/conf-a/snow.tar", []string{"X-Amz-Meta-Snowball-Auto-Extract", "true"}, 501}, {"/nosuchbucket/x", nil, 404}} {
			hdr := append([]string{"Content-Length", fmt.Sprint(len(big))}, tc.hdr...)
			conn := e.raw(t, e.admin, "PUT", tc.path, "UNSIGNED-PAYLOAD", hdr, big) // fails if the body cannot be sent
			if resp, rb := answer(t, conn); resp.StatusCode != tc.status {
				t.Errorf("%s: %d %s, want %d", tc.path, resp.StatusCode, rb, tc.status)
			}
		}
	})

	t.Run("storage class", func(t *testing.T) {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("sc"),
			Body: strings.NewReader("x"), StorageClass: "CHEAP"}); code(err) != "InvalidStorageClass" {
			t.Fatalf("storage class CHEAP: %v, want InvalidStorageClass", err)
		}
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("sc"),
			Body: strings.NewReader("x"), StorageClass: types.StorageClassStandardIa}); err != nil {
			t.Fatalf("storage class STANDARD_IA: %v", err)
		}
	})

	t.Run("aws-chunked stripped", func(t *testing.T) {
		body := []byte("chunked body")
		for _, tc := range []struct{ sent, kept string }{{"aws-chunked", ""}, {"aws-chunked,gzip", "gzip"}, {"gzip, aws-chunked", "gzip"}} {
			var b bytes.Buffer
			fmt.Fprintf(&b, "%x\r\n%s\r\n0\r\n\r\n", len(body), body)
			conn := e.raw(t, e.admin, "PUT", "/conf-a/chunked", "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
				[]string{"Content-Encoding", tc.sent, "X-Amz-Decoded-Content-Length", fmt.Sprint(len(body)),
					"Content-Length", fmt.Sprint(b.Len())}, b.Bytes())
			if resp, rb := answer(t, conn); resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", tc.sent, resp.StatusCode, rb)
			}
			h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("conf-a"), Key: aws.String("chunked")})
			if err != nil || aws.ToString(h.ContentEncoding) != tc.kept || aws.ToInt64(h.ContentLength) != int64(len(body)) {
				t.Errorf("sent %q: Content-Encoding %q (%v), want %q", tc.sent, aws.ToString(h.ContentEncoding), err, tc.kept)
			}
		}
	})
}
