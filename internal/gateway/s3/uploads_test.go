package s3_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestListMultipartUploadsParameters: ListMultipartUploads takes S3's
// prefix, delimiter, key-marker, upload-id-marker, max-uploads and
// encoding-type, and pages to the end.
func TestListMultipartUploadsParameters(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	c := e.client(e.admin)
	b := aws.String("uplist")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	ids := map[string][]string{}
	for _, k := range []string{"a/1", "a/1", "a/2", "b/x/1", "b/y", "c d", "top"} {
		mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		ids[k] = append(ids[k], aws.ToString(mp.UploadId))
	}
	show := func(out *awss3.ListMultipartUploadsOutput) string {
		var s []string
		for _, u := range out.Uploads {
			s = append(s, aws.ToString(u.Key))
		}
		for _, p := range out.CommonPrefixes {
			s = append(s, aws.ToString(p.Prefix)+"*")
		}
		return strings.Join(s, ",")
	}
	list := func(in awss3.ListMultipartUploadsInput) *awss3.ListMultipartUploadsOutput {
		t.Helper()
		in.Bucket = b
		out, err := c.ListMultipartUploads(ctx, &in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := show(list(awss3.ListMultipartUploadsInput{})); got != "a/1,a/1,a/2,b/x/1,b/y,c d,top" {
		t.Errorf("all: %s", got)
	}
	if got := show(list(awss3.ListMultipartUploadsInput{Prefix: aws.String("b/")})); got != "b/x/1,b/y" {
		t.Errorf("prefix b/: %s", got)
	}
	out := list(awss3.ListMultipartUploadsInput{Delimiter: aws.String("/")})
	if got := show(out); got != "c d,top,a/*,b/*" || aws.ToString(out.Delimiter) != "/" {
		t.Errorf("delimiter /: %s (delimiter %q)", got, aws.ToString(out.Delimiter))
	}
	if got := show(list(awss3.ListMultipartUploadsInput{Prefix: aws.String("b/"), Delimiter: aws.String("/")})); got != "b/y,b/x/*" {
		t.Errorf("prefix b/, delimiter /: %s", got)
	}
	if got := show(list(awss3.ListMultipartUploadsInput{KeyMarker: aws.String("a/2")})); got != "b/x/1,b/y,c d,top" {
		t.Errorf("key-marker a/2: %s", got)
	}
	if got := show(list(awss3.ListMultipartUploadsInput{KeyMarker: aws.String("a/1"), UploadIdMarker: aws.String(ids["a/1"][0])})); got != "a/1,a/2,b/x/1,b/y,c d,top" {
		t.Errorf("key-marker a/1 and its first upload: %s", got)
	}
	out = list(awss3.ListMultipartUploadsInput{Prefix: aws.String("c "), EncodingType: types.EncodingTypeUrl})
	if len(out.Uploads) != 1 || aws.ToString(out.Uploads[0].Key) != "c%20d" || aws.ToString(out.Prefix) != "c%20" {
		t.Errorf("encoding-type=url: %+v, prefix %q", out.Uploads, aws.ToString(out.Prefix))
	}
	// Pages of two, with and without a delimiter, to the end.
	for _, delim := range []string{"", "/"} {
		var got []string
		var km, um *string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("pages do not end")
			}
			in := awss3.ListMultipartUploadsInput{MaxUploads: aws.Int32(2), KeyMarker: km, UploadIdMarker: um}
			if delim != "" {
				in.Delimiter = aws.String(delim)
			}
			out := list(in)
			if n := len(out.Uploads) + len(out.CommonPrefixes); n > 2 {
				t.Fatalf("a page of %d", n)
			}
			if p := show(out); p != "" {
				got = append(got, p)
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			km, um = out.NextKeyMarker, out.NextUploadIdMarker
		}
		want := "a/1,a/1|a/2,b/x/1|b/y,c d|top"
		if delim != "" {
			want = "a/*,b/*|c d,top" // in key order, a page's uploads shown before its prefixes
		}
		if strings.Join(got, "|") != want {
			t.Errorf("pages (delimiter %q): %s, want %s", delim, strings.Join(got, "|"), want)
		}
	}
	for _, bad := range []string{"max-uploads=-1", "max-uploads=x", "encoding-type=base64"} {
		resp, body := e.do(t, e.admin, "GET", "/uplist?uploads&"+bad, nil)
		if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
			t.Errorf("%s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if out := list(awss3.ListMultipartUploadsInput{MaxUploads: aws.Int32(0)}); len(out.Uploads) != 0 || !aws.ToBool(out.IsTruncated) {
		t.Errorf("max-uploads=0: %d uploads, truncated %v", len(out.Uploads), aws.ToBool(out.IsTruncated))
	}
}
