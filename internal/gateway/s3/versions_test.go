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

// TestListObjectVersions: on a bucket never versioned, each object is
// its one "null" version, latest; the SDK's paginator walks them with
// key and version-id markers, and a tool emptying the bucket by its
// versions deletes everything.
func TestListObjectVersions(t *testing.T) {
	e := newEnv(t, 4)
	c := e.client(e.admin)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("vbk")}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("a/%d", i)
		want = append(want, k)
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("vbk"), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("vbk"), Key: aws.String("b/x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	vs, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("vbk")})
	if err != nil || vs.Status != "" {
		t.Fatalf("GetBucketVersioning: %+v %v", vs, err)
	}
	var got []string
	pages := awss3.NewListObjectVersionsPaginator(c, &awss3.ListObjectVersionsInput{Bucket: aws.String("vbk"), Prefix: aws.String("a/"), MaxKeys: aws.Int32(3)})
	for n := 0; pages.HasMorePages(); n++ {
		if n > 10 {
			t.Fatal("paginator does not end")
		}
		p, err := pages.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.DeleteMarkers) != 0 {
			t.Fatalf("delete markers: %+v", p.DeleteMarkers)
		}
		for _, v := range p.Versions {
			if aws.ToString(v.VersionId) != "null" || !aws.ToBool(v.IsLatest) || aws.ToInt64(v.Size) != 3 || aws.ToString(v.ETag) == "" {
				t.Fatalf("version %+v", v)
			}
			got = append(got, aws.ToString(v.Key))
		}
		if aws.ToBool(p.IsTruncated) && (aws.ToString(p.NextKeyMarker) == "" || aws.ToString(p.NextVersionIdMarker) != "null") {
			t.Fatalf("truncated page without markers: %+v", p)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	// Delimiter: common prefixes.
	out, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("vbk"), Delimiter: aws.String("/")})
	if err != nil || len(out.Versions) != 0 || len(out.CommonPrefixes) != 2 || aws.ToString(out.CommonPrefixes[1].Prefix) != "b/" {
		t.Fatalf("with delimiter: %+v %v", out, err)
	}
	// Markers: after a/5's null version come a/6 and b/x.
	out, err = c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("vbk"), KeyMarker: aws.String("a/5"), VersionIdMarker: aws.String("null")})
	if err != nil || len(out.Versions) != 2 || aws.ToString(out.Versions[0].Key) != "a/6" {
		t.Fatalf("after a/5: %+v %v", out, err)
	}
	_, err = c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("vbk"), VersionIdMarker: aws.String("null")})
	if code(err) != "InvalidArgument" {
		t.Fatalf("version-id marker without key marker: %v", err)
	}
	_, err = c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("nope")})
	if code(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
	// Emptying by versions, as tools do before deleting a bucket.
	all, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("vbk")})
	if err != nil {
		t.Fatal(err)
	}
	var ids []types.ObjectIdentifier
	for _, v := range all.Versions {
		ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
	}
	if d, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("vbk"), Delete: &types.Delete{Objects: ids}}); err != nil || len(d.Errors) != 0 || len(d.Deleted) != 8 {
		t.Fatalf("delete by versions: %+v %v", d, err)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("vbk")}); err != nil {
		t.Fatal(err)
	}
}
