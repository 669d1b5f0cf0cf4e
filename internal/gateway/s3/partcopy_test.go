package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestUploadPartCopy builds an object from ranges of another with
// UploadPartCopy, reads it back whole and by part number, and asks its
// attributes; then the failures: a range outside the source, a missing
// source, a source the key may not read, a failed copy condition.
func TestUploadPartCopy(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	for _, b := range []string{"pcsrc", "pcdst"} {
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	const first = 5 << 20
	src := make([]byte, first+100)
	rand.Read(src)
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("pcsrc"), Key: aws.String("s"), Body: bytes.NewReader(src)}); err != nil {
		t.Fatal(err)
	}
	cu, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	copyPart := func(n int32, rng, source string, hdr ...string) (*awss3.UploadPartCopyOutput, error) {
		in := &awss3.UploadPartCopyInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), UploadId: cu.UploadId, PartNumber: aws.Int32(n), CopySource: aws.String(source)}
		if rng != "" {
			in.CopySourceRange = aws.String(rng)
		}
		if len(hdr) > 0 {
			in.CopySourceIfMatch = aws.String(hdr[0])
		}
		return c.UploadPartCopy(ctx, in)
	}
	p1, err := copyPart(1, fmt.Sprintf("bytes=0-%d", first-1), "pcsrc/s")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := copyPart(2, fmt.Sprintf("bytes=%d-%d", first, len(src)-1), "pcsrc/s")
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(p1.CopyPartResult.ETag) == "" || aws.ToString(p2.CopyPartResult.ChecksumCRC32) == "" {
		t.Fatalf("copy results: %+v %+v", p1.CopyPartResult, p2.CopyPartResult)
	}
	// Failures store no part.
	for _, f := range []struct {
		rng, source, ifMatch, code string
	}{
		{fmt.Sprintf("bytes=0-%d", len(src)), "pcsrc/s", "", "InvalidArgument"},
		{"bytes=10-5", "pcsrc/s", "", "InvalidArgument"},
		{"0-5", "pcsrc/s", "", "InvalidArgument"},
		{"", "pcsrc/missing", "", "NoSuchKey"},
		{"", "nosuchbucket/s", "", "NoSuchBucket"},
		{"", "pcsrc/s", `"0123"`, "PreconditionFailed"},
	} {
		var hdr []string
		if f.ifMatch != "" {
			hdr = []string{f.ifMatch}
		}
		if _, err := copyPart(3, f.rng, f.source, hdr...); code(err) != f.code {
			t.Errorf("copy %q of %s: %v, want %s", f.rng, f.source, err, f.code)
		}
	}
	reader := e.key(t, false)
	if _, err := e.client(reader).UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), UploadId: cu.UploadId, PartNumber: aws.Int32(3), CopySource: aws.String("pcsrc/s")}); code(err) != "AccessDenied" {
		t.Errorf("copy by a key without grants: %v", err)
	}
	if _, err := c.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), UploadId: aws.String("00112233445566778899aabbccddeeff"), PartNumber: aws.Int32(1), CopySource: aws.String("pcsrc/s")}); code(err) != "NoSuchUpload" {
		t.Errorf("copy into a missing upload: %v", err)
	}
	lp, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), UploadId: cu.UploadId})
	if err != nil || len(lp.Parts) != 2 {
		t.Fatalf("parts after failed copies: %+v %v", lp, err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), UploadId: cu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: p1.CopyPartResult.ETag}, {PartNumber: aws.Int32(2), ETag: p2.CopyPartResult.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	get := func(in *awss3.GetObjectInput) ([]byte, *awss3.GetObjectOutput) {
		t.Helper()
		out, err := c.GetObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b, out
	}
	if b, _ := get(&awss3.GetObjectInput{Bucket: aws.String("pcdst"), Key: aws.String("d")}); !bytes.Equal(b, src) {
		t.Fatal("copied object differs from its source")
	}
	// By part number.
	b, out := get(&awss3.GetObjectInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), PartNumber: aws.Int32(2)})
	if !bytes.Equal(b, src[first:]) || aws.ToInt32(out.PartsCount) != 2 || aws.ToString(out.ContentRange) != fmt.Sprintf("bytes %d-%d/%d", first, len(src)-1, len(src)) {
		t.Fatalf("part 2: %d bytes, parts %d, range %q", len(b), aws.ToInt32(out.PartsCount), aws.ToString(out.ContentRange))
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), PartNumber: aws.Int32(1)})
	if err != nil || aws.ToInt64(h.ContentLength) != first || aws.ToInt32(h.PartsCount) != 2 {
		t.Fatalf("head part 1: %+v %v", h, err)
	}
	if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), PartNumber: aws.Int32(3)}); code(err) != "InvalidPartNumber" {
		t.Fatalf("part 3 of 2: %v", err)
	}
	if b, _ := get(&awss3.GetObjectInput{Bucket: aws.String("pcsrc"), Key: aws.String("s"), PartNumber: aws.Int32(1)}); !bytes.Equal(b, src) {
		t.Fatal("part 1 of a single-part object is not the object")
	}
	// Attributes.
	attrs, err := c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: aws.String("pcdst"), Key: aws.String("d"), MaxParts: aws.Int32(1),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts, types.ObjectAttributesObjectSize, types.ObjectAttributesStorageClass}})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(attrs.ObjectSize) != int64(len(src)) || attrs.StorageClass != types.StorageClassStandard || !bytes.HasSuffix([]byte(aws.ToString(attrs.ETag)), []byte("-2")) ||
		attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumCRC32) == "" || bytes.Contains([]byte(aws.ToString(attrs.Checksum.ChecksumCRC32)), []byte("-")) {
		t.Fatalf("attributes: %+v checksum %+v", attrs, attrs.Checksum)
	}
	op := attrs.ObjectParts
	if op == nil || aws.ToInt32(op.TotalPartsCount) != 2 || !aws.ToBool(op.IsTruncated) || len(op.Parts) != 1 || aws.ToString(op.NextPartNumberMarker) != "1" ||
		aws.ToInt64(op.Parts[0].Size) != first || aws.ToString(op.Parts[0].ChecksumCRC32) == "" {
		t.Fatalf("object parts: %+v", op)
	}
	attrs, err = c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: aws.String("pcsrc"), Key: aws.String("s"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesObjectParts}})
	if err != nil || attrs.ObjectParts != nil || attrs.ObjectSize != nil || aws.ToString(attrs.ETag) == "" {
		t.Fatalf("attributes of a single-part object: %+v %v", attrs, err)
	}
	if _, err := c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: aws.String("pcsrc"), Key: aws.String("missing"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag}}); code(err) != "NoSuchKey" {
		t.Fatalf("attributes of a missing key: %v", err)
	}
}
