package s3_test

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jonboulle/clockwork"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// versionsOf lists every version and delete marker of a bucket under
// prefix, in the listing's order, as "key@id" (a marker "key@id(dm)"),
// "*" appended to the latest.
func versionsOf(t *testing.T, c *awss3.Client, bucket, prefix string, maxKeys int32) []string {
	t.Helper()
	var out []string
	pages := awss3.NewListObjectVersionsPaginator(c, &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(maxKeys)})
	for n := 0; pages.HasMorePages(); n++ {
		if n > 100 {
			t.Fatal("paginator does not end")
		}
		p, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if int32(len(p.Versions)+len(p.DeleteMarkers)) > maxKeys {
			t.Fatalf("page of %d entries, max-keys %d", len(p.Versions)+len(p.DeleteMarkers), maxKeys)
		}
		// The SDK splits versions and markers: merge them back by key,
		// then newest first (the gateway's IDs sort newest first; null,
		// in these tests, is the oldest).
		type ent struct{ key, id, s string }
		var page []ent
		add := func(key, id *string, latest *bool, dm bool) {
			s := aws.ToString(key) + "@" + aws.ToString(id)
			if dm {
				s += "(dm)"
			}
			if aws.ToBool(latest) {
				s += "*"
			}
			sid := aws.ToString(id)
			if sid == "null" {
				sid = "~"
			}
			page = append(page, ent{aws.ToString(key), sid, s})
		}
		for _, v := range p.Versions {
			add(v.Key, v.VersionId, v.IsLatest, false)
		}
		for _, m := range p.DeleteMarkers {
			add(m.Key, m.VersionId, m.IsLatest, true)
		}
		sort.Slice(page, func(i, j int) bool {
			if page[i].key != page[j].key {
				return page[i].key < page[j].key
			}
			return page[i].id < page[j].id
		})
		for _, e := range page {
			out = append(out, e.s)
		}
	}
	return out
}

func body(t *testing.T, c *awss3.Client, bucket, key, vid string) string {
	t.Helper()
	in := &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if vid != "" {
		in.VersionId = aws.String(vid)
	}
	out, err := c.GetObject(context.Background(), in)
	if err != nil {
		t.Fatalf("get %s@%s: %v", key, vid, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	if vid != "" && aws.ToString(out.VersionId) != vid {
		t.Fatalf("get %s@%s: x-amz-version-id %q", key, vid, aws.ToString(out.VersionId))
	}
	return string(b)
}

// TestVersioning walks S3's versioning with aws-sdk-go-v2: enabling,
// versions on every write, reads and copies of old versions, delete
// markers and their removal, deleting versions for good, suspension and
// null versions, DeleteObjects of versions, tags of a version, and the
// failure codes; listings and the file tree never show old versions.
func TestVersioning(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	c := e.client(e.admin)
	const bk = "ver"
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bk)}); err != nil {
		t.Fatal(err)
	}
	put := func(key, data string) string {
		t.Helper()
		out, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String(key), Body: strings.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.VersionId)
	}
	if vid := put("k", "v0"); vid != "" {
		t.Fatalf("unversioned bucket: PUT sent version %q", vid)
	}

	// Only the owner (or an admin) sets versioning.
	writer, err := e.gw.CreateKey(ctx, false, map[string]gateway.Perm{bk: gateway.Write})
	if err != nil {
		t.Fatal(err)
	}
	enable := &awss3.PutBucketVersioningInput{Bucket: aws.String(bk), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}
	if _, err := e.client(writer).PutBucketVersioning(ctx, enable); code(err) != "AccessDenied" {
		t.Fatalf("versioning set by a key that may only write: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(bk), VersioningConfiguration: &types.VersioningConfiguration{
		Status: types.BucketVersioningStatusEnabled, MFADelete: types.MFADeleteEnabled}}); code(err) != "NotImplemented" {
		t.Fatalf("MFA delete: %v", err)
	}
	if resp, b := e.do(t, e.admin, "PUT", "/"+bk+"?versioning", []byte(`<VersioningConfiguration><Status>On</Status></VersioningConfiguration>`)); resp.StatusCode != 400 || !strings.Contains(string(b), "MalformedXML") {
		t.Fatalf("status On: %d %s", resp.StatusCode, b)
	}
	if _, err := c.PutBucketVersioning(ctx, enable); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(bk)}); err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning: %+v %v", v, err)
	}

	// Every PUT is a new version; the null version written before is kept.
	v1, v2 := put("k", "v1"), put("k", "v2")
	if v1 == "" || v2 == "" || v1 == v2 || v1 == "null" {
		t.Fatalf("version IDs %q %q", v1, v2)
	}
	if got, want := fmt.Sprint(versionsOf(t, c, bk, "", 1000)), fmt.Sprint([]string{"k@" + v2 + "*", "k@" + v1, "k@null"}); got != want {
		t.Fatalf("versions %s, want %s", got, want)
	}
	if b := body(t, c, bk, "k", ""); b != "v2" {
		t.Fatalf("current: %q", b)
	}
	if b := body(t, c, bk, "k", v1); b != "v1" {
		t.Fatalf("version 1: %q", b)
	}
	if b := body(t, c, bk, "k", "null"); b != "v0" {
		t.Fatalf("null version: %q", b)
	}
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(v1)}); err != nil || aws.ToInt64(h.ContentLength) != 2 || aws.ToString(h.VersionId) != v1 {
		t.Fatalf("head of version 1: %+v %v", h, err)
	}

	// Failure codes of version IDs: malformed is 400, unknown 404; a
	// DELETE of either deletes nothing.
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String("bogus")})
	if code(err) != "InvalidArgument" {
		t.Fatalf("malformed version ID: %v", err)
	}
	unknown := strings.Repeat("0", 24)
	if _, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(unknown)}); code(err) != "NoSuchVersion" {
		t.Fatalf("unknown version ID: %v", err)
	}
	if _, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String("bogus")}); code(err) != "InvalidArgument" {
		t.Fatalf("delete of a malformed version ID: %v", err)
	}
	if _, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(unknown)}); code(err) != "NoSuchVersion" {
		t.Fatalf("delete of an unknown version ID: %v", err)
	}
	if resp, b := e.do(t, e.admin, "PUT", "/"+bk+"/k?versionId="+v1, []byte("x")); resp.StatusCode != 400 || !strings.Contains(string(b), "InvalidArgument") {
		t.Fatalf("PUT with a versionId: %d %s", resp.StatusCode, b)
	}
	if b := body(t, c, bk, "k", ""); b != "v2" {
		t.Fatalf("after refused deletes: %q", b)
	}

	// DELETE writes a delete marker: the key is gone from GET and
	// listings, every version stays.
	d, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("k")})
	if err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) == "" {
		t.Fatalf("delete: %+v %v", d, err)
	}
	marker := aws.ToString(d.VersionId)
	resp, _ := e.do(t, e.admin, "GET", "/"+bk+"/k", nil)
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" || resp.Header.Get("x-amz-version-id") != marker {
		t.Fatalf("GET behind a delete marker: %d %v", resp.StatusCode, resp.Header)
	}
	resp, b := e.do(t, e.admin, "GET", "/"+bk+"/k?versionId="+marker, nil)
	if resp.StatusCode != 405 || !strings.Contains(string(b), "MethodNotAllowed") || resp.Header.Get("x-amz-delete-marker") != "true" {
		t.Fatalf("GET of a delete marker by its ID: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if l, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(bk)}); err != nil || len(l.Contents) != 0 {
		t.Fatalf("listing behind a delete marker: %+v %v", l, err)
	}
	if l, err := e.gw.TreeStore(bk).List(ctx, "", "", "", 100); err != nil || len(l.Objects) != 0 || len(l.Prefixes) != 0 {
		t.Fatalf("file tree behind a delete marker: %+v %v", l, err)
	}
	if got, want := fmt.Sprint(versionsOf(t, c, bk, "", 1000)), fmt.Sprint([]string{"k@" + marker + "(dm)*", "k@" + v2, "k@" + v1, "k@null"}); got != want {
		t.Fatalf("versions %s, want %s", got, want)
	}
	// Removing the marker brings the object back.
	if d, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(marker)}); err != nil || !aws.ToBool(d.DeleteMarker) || aws.ToString(d.VersionId) != marker {
		t.Fatalf("delete of the marker: %+v %v", d, err)
	}
	if b := body(t, c, bk, "k", ""); b != "v2" {
		t.Fatalf("after the marker's removal: %q", b)
	}
	// Deleting the current version for good makes the previous current.
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(v2)}); err != nil {
		t.Fatal(err)
	}
	if b := body(t, c, bk, "k", ""); b != "v1" {
		t.Fatalf("after deleting the current version: %q", b)
	}
	if _, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String(v2)}); code(err) != "NoSuchVersion" {
		t.Fatalf("deleted version: %v", err)
	}

	// A copy from an old version.
	cp, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String(bk), Key: aws.String("c"), CopySource: aws.String(bk + "/k?versionId=null")})
	if err != nil || aws.ToString(cp.CopySourceVersionId) != "null" || aws.ToString(cp.VersionId) == "" {
		t.Fatalf("copy of the null version: %+v %v", cp, err)
	}
	cVersion := aws.ToString(cp.VersionId)
	if b := body(t, c, bk, "c", ""); b != "v0" {
		t.Fatalf("copy: %q", b)
	}
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String(bk), Key: aws.String("c2"), CopySource: aws.String(bk + "/k?versionId=" + unknown)}); code(err) != "NoSuchVersion" {
		t.Fatalf("copy of an unknown version: %v", err)
	}

	// Tags of one version.
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String("null"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("old"), Value: aws.String("yes")}}}}); err != nil {
		t.Fatal(err)
	}
	if tg, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(bk), Key: aws.String("k"), VersionId: aws.String("null")}); err != nil || len(tg.TagSet) != 1 {
		t.Fatalf("tags of the null version: %+v %v", tg, err)
	}
	if tg, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: aws.String(bk), Key: aws.String("k")}); err != nil || len(tg.TagSet) != 0 {
		t.Fatalf("tags of the current version: %+v %v", tg, err)
	}

	// Suspended: writes are the null version, replacing the null one;
	// other versions stay.
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(bk), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}}); err != nil {
		t.Fatal(err)
	}
	if vid := put("k", "s1"); vid != "null" {
		t.Fatalf("suspended: version %q", vid)
	}
	if vid := put("k", "s2"); vid != "null" {
		t.Fatalf("suspended: version %q", vid)
	}
	// (The helper puts null last: the answer's own order is checked.)
	if got, want := fmt.Sprint(versionsOf(t, c, bk, "k", 1000)), fmt.Sprint([]string{"k@" + v1, "k@null*"}); got != want {
		t.Fatalf("suspended: versions %s, want %s", got, want)
	}
	if _, b := e.do(t, e.admin, "GET", "/"+bk+"?versions&prefix=k", nil); strings.Index(string(b), "<VersionId>null<") > strings.Index(string(b), "<VersionId>"+v1+"<") {
		t.Fatalf("suspended: the null version is not listed first: %s", b)
	}
	if b := body(t, c, bk, "k", "null"); b != "s2" {
		t.Fatalf("suspended: null version %q", b)
	}

	// DeleteObjects with version IDs; one without writes a (null) marker.
	dd, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(bk), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("k"), VersionId: aws.String(v1)}, {Key: aws.String("k"), VersionId: aws.String("null")},
		{Key: aws.String("c")}, {Key: aws.String("k"), VersionId: aws.String("bogus")}}}})
	if err != nil || len(dd.Deleted) != 3 || len(dd.Errors) != 1 || aws.ToString(dd.Errors[0].Code) != "InvalidArgument" {
		t.Fatalf("DeleteObjects: %+v %v", dd, err)
	}
	for _, del := range dd.Deleted {
		if aws.ToString(del.Key) == "c" && (!aws.ToBool(del.DeleteMarker) || aws.ToString(del.DeleteMarkerVersionId) != "null") {
			t.Fatalf("DeleteObjects of c: %+v", del)
		}
	}
	if got, want := fmt.Sprint(versionsOf(t, c, bk, "", 1000)), fmt.Sprint([]string{"c@" + cVersion, "c@null(dm)*"}); got != want {
		t.Fatalf("after DeleteObjects: versions %s, want %s", got, want)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(bk)}); code(err) != "BucketNotEmpty" {
		t.Fatalf("delete of a bucket with versions: %v", err)
	}
	for _, v := range []string{cVersion, "null"} {
		if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("c"), VersionId: aws.String(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String(bk)}); err != nil {
		t.Fatalf("delete of the emptied bucket: %v", err)
	}

	// Keys in the versions' hidden space are refused.
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bk)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String("\U0010FFFFx"), Body: strings.NewReader("x")}); code(err) != "InvalidArgument" {
		t.Fatalf("key starting with U+10FFFF: %v", err)
	}
	// The bucket made again under the name is not versioned.
	if v, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String(bk)}); err != nil || v.Status != "" {
		t.Fatalf("new bucket of the name: %+v %v", v, err)
	}
}

// TestVersionsPaging: the versions of many keys, with delete markers,
// paged by key and version-id markers (max-keys 1, 2 and 3) list the
// same as one page; with a delimiter, common prefixes roll up versions.
func TestVersionsPaging(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	c := e.client(e.admin)
	const bk = "verpg"
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bk)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(bk), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	var want []string
	// (Keys with control characters cannot be XML markers without
	// encoding-type=url: a\x01b is written after the paging checks.)
	for _, k := range []string{"a", "b/1", "b/2", "c"} {
		var ids []string
		for i := range 3 {
			out, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String(k), Body: strings.NewReader(fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, aws.ToString(out.VersionId))
		}
		var entries []string
		if k == "c" {
			d, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String(k)})
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, k+"@"+aws.ToString(d.VersionId)+"(dm)*")
		}
		for i := len(ids) - 1; i >= 0; i-- {
			s := k + "@" + ids[i]
			if i == len(ids)-1 && k != "c" {
				s += "*"
			}
			entries = append(entries, s)
		}
		want = append(want, entries...)
	}
	for _, mk := range []int32{1, 2, 3} {
		if got := versionsOf(t, c, bk, "", mk); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("max-keys %d: %q, want %q", mk, got, want)
		}
	}
	for i := range 2 {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String("a\x01b"), Body: strings.NewReader(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Its versions sort between a's and b/1's, as the key does.
	all, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(bk), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(all.Versions) != 14 {
		t.Fatalf("all versions: %+v %v", all, err)
	}
	var keys []string
	for _, v := range all.Versions {
		k, _ := url.QueryUnescape(aws.ToString(v.Key))
		keys = append(keys, k)
	}
	if got, want := fmt.Sprintf("%q", keys), fmt.Sprintf("%q", []string{"a", "a", "a", "a\x01b", "a\x01b", "b/1", "b/1", "b/1", "b/2", "b/2", "b/2", "c", "c", "c"}); got != want {
		t.Fatalf("keys of the versions: %s, want %s", got, want)
	}
	out, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(bk), Delimiter: aws.String("/")})
	if err != nil || len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "b/" || len(out.Versions) != 8 || len(out.DeleteMarkers) != 1 {
		t.Fatalf("with a delimiter: %+v %v", out, err)
	}
	out, err = c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(bk), Delimiter: aws.String("/"), KeyMarker: aws.String("b/")})
	if err != nil || len(out.CommonPrefixes) != 0 || len(out.Versions) != 3 || aws.ToString(out.Versions[0].Key) != "c" {
		t.Fatalf("after the common prefix: %+v %v", out, err)
	}
	enc, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String(bk), Prefix: aws.String("a\x01"), EncodingType: types.EncodingTypeUrl})
	if err != nil || len(enc.Versions) != 2 || !aws.ToBool(enc.Versions[0].IsLatest) || aws.ToBool(enc.Versions[1].IsLatest) {
		t.Fatalf("prefix a\\x01: %+v %v", enc, err)
	}
	if k, _ := url.QueryUnescape(aws.ToString(enc.Versions[0].Key)); k != "a\x01b" {
		t.Fatalf("key %q", k)
	}
}

// TestVersioningOtherWrites: a completed multipart upload is a version
// too; GetObjectAttributes and HEAD take versionId; HEAD of a key behind
// a delete marker says so; a versioned bucket's keys leave room for
// their versions' names; GetBucketVersioning of a missing bucket.
func TestVersioningOtherWrites(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	c := e.client(e.admin)
	const bk = "vermp"
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bk)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(bk), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	first, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String("m"), Body: strings.NewReader("first")})
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(bk), Key: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(bk), Key: aws.String("m"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("second")})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(bk), Key: aws.String("m"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: p.ETag, PartNumber: aws.Int32(1)}}}})
	if err != nil || aws.ToString(done.VersionId) == "" || aws.ToString(done.VersionId) == aws.ToString(first.VersionId) {
		t.Fatalf("completion: %+v %v", done, err)
	}
	if b := body(t, c, bk, "m", aws.ToString(first.VersionId)); b != "first" {
		t.Fatalf("version before the completion: %q", b)
	}
	attrs, err := c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: aws.String(bk), Key: aws.String("m"), VersionId: first.VersionId,
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != 5 || aws.ToString(attrs.VersionId) != aws.ToString(first.VersionId) {
		t.Fatalf("attributes of the first version: %+v %v", attrs, err)
	}
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(bk), Key: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	resp, _ := e.do(t, e.admin, "HEAD", "/"+bk+"/m", nil)
	if resp.StatusCode != 404 || resp.Header.Get("x-amz-delete-marker") != "true" {
		t.Fatalf("HEAD behind a delete marker: %d %v", resp.StatusCode, resp.Header)
	}
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(bk), Key: aws.String("m"), VersionId: done.VersionId}); err != nil || aws.ToInt64(h.ContentLength) != 6 {
		t.Fatalf("HEAD of the completed version: %+v %v", h, err)
	}
	// Keys: 994 bytes fit, 995 do not (the versions' names hold the key).
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String(strings.Repeat("k", 994)), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("key of 994 bytes: %v", err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bk), Key: aws.String(strings.Repeat("k", 995)), Body: strings.NewReader("x")}); code(err) != "KeyTooLongError" {
		t.Fatalf("key of 995 bytes: %v", err)
	}
	// A longer key written before versioning was enabled: read, and
	// deleted by its null version.
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("verlong")}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("l", 1000)
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("verlong"), Key: aws.String(long), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("verlong"), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("verlong"), Key: aws.String(long)}); code(err) != "KeyTooLongError" {
		t.Fatalf("delete marker for a 1000-byte key: %v", err)
	}
	if b := body(t, c, "verlong", long, "null"); b != "x" {
		t.Fatalf("long key: %q", b)
	}
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("verlong"), Key: aws.String(long), VersionId: aws.String("null")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("verlong"), Key: aws.String(long)}); code(err) != "NotFound" && code(err) != "NoSuchKey" {
		t.Fatalf("long key after its deletion: %v", err)
	}
	if _, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("nope")}); code(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("nope"), VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); code(err) != "NoSuchBucket" {
		t.Fatalf("missing bucket: %v", err)
	}
}

// TestLifecycleVersions: on a versioned bucket the lifecycle sweep
// expires noncurrent versions NoncurrentDays after they became
// noncurrent (keeping NewerNoncurrentVersions of them), removes a delete
// marker left alone (ExpiredObjectDeleteMarker), and expiring a current
// object writes a delete marker: its version stays.
func TestLifecycleVersions(t *testing.T) {
	fake := clockwork.NewFakeClockAt(time.Now())
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{Clock: fake, LifecycleEvery: time.Hour})
	c := e.client(e.admin)
	ctx := context.Background()
	b := aws.String("lcver")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: b, VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	cfg := &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		{ID: aws.String("old"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("old/")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}},
		{ID: aws.String("keep1"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("keep1/")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1), NewerNoncurrentVersions: aws.Int32(1)}},
		{ID: aws.String("markers"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("gone/")},
			Expiration: &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)}},
		{ID: aws.String("cur"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("cur/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
	}}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	ids := map[string][]string{}
	put := func(key string) {
		t.Helper()
		out, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader(key)})
		if err != nil {
			t.Fatal(err)
		}
		ids[key] = append(ids[key], aws.ToString(out.VersionId))
	}
	for range 3 {
		put("old/a")
		put("keep1/b")
	}
	put("gone/c")
	put("gone/d")
	put("cur/e")
	for _, k := range []string{"gone/c", "gone/d"} {
		if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	// gone/c's object version is deleted for good: its marker is alone.
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String("gone/c"), VersionId: aws.String(ids["gone/c"][0])}); err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		t.Helper()
		out, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, v := range out.Versions {
			n[aws.ToString(v.Key)]++
		}
		for _, m := range out.DeleteMarkers {
			n[aws.ToString(m.Key)+"(dm)"]++
		}
		return n
	}
	sweep := func(d time.Duration) {
		t.Helper()
		fake.Advance(d)
		if err := e.s3.SweepLifecycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// At once: only gone/c's lone marker goes (it has no day count).
	sweep(0)
	if got, want := fmt.Sprint(count()), fmt.Sprint(map[string]int{"old/a": 3, "keep1/b": 3, "gone/d": 1, "gone/d(dm)": 1, "cur/e": 1}); got != want {
		t.Fatalf("at once: %s, want %s", got, want)
	}
	sweep(3 * 24 * time.Hour)
	if got, want := fmt.Sprint(count()), fmt.Sprint(map[string]int{"old/a": 1, "keep1/b": 2, "gone/d": 1, "gone/d(dm)": 1, "cur/e": 1, "cur/e(dm)": 1}); got != want {
		t.Fatalf("after three days: %s, want %s", got, want)
	}
	// What is left: old/a's current version, keep1/b's current and its
	// newest noncurrent one.
	if b := body(t, c, "lcver", "old/a", ids["old/a"][2]); b != "old/a" {
		t.Fatalf("old/a: %q", b)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("keep1/b"), VersionId: aws.String(ids["keep1/b"][1])}); err != nil {
		t.Fatalf("keep1/b's newest noncurrent version: %v", err)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("keep1/b"), VersionId: aws.String(ids["keep1/b"][0])}); code(err) != "NotFound" && code(err) != "NoSuchVersion" {
		t.Fatalf("keep1/b's oldest version: %v", err)
	}
}
