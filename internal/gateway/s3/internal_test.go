package s3

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInternalErrorHidden: an unexpected error's detail goes to the log,
// with the request ID; the client gets a generic message and the ID.
func TestInternalErrorHidden(t *testing.T) {
	var log bytes.Buffer
	rec := httptest.NewRecorder()
	q := &request{w: rec, r: httptest.NewRequest("GET", "/b/k", nil), id: "REQ123", log: slog.New(slog.NewTextHandler(&log, nil))}
	q.fail(errors.New("bbolt: page 42 of /srv/quilt-gw/ns.db is damaged"))
	body := rec.Body.String()
	if rec.Code != 500 || strings.Contains(body, "bbolt") || !strings.Contains(body, "<Code>InternalError</Code>") || !strings.Contains(body, "REQ123") {
		t.Fatalf("answer: %d %s", rec.Code, body)
	}
	if l := log.String(); !strings.Contains(l, "page 42") || !strings.Contains(l, "REQ123") {
		t.Fatalf("log: %s", l)
	}
}

// TestResolve: the routing whitelist, parameters and subresources apart.
func TestResolve(t *testing.T) {
	for _, c := range []struct {
		method, target, hdr, want string
	}{
		{"GET", "/", "", "ListBuckets"},
		{"GET", "/?x-id=ListBuckets&max-buckets=10", "", "ListBuckets"},
		{"PUT", "/", "", ""},
		{"GET", "/b", "", "ListObjects"},
		{"GET", "/b?list-type=2&prefix=a&delimiter=%2F&max-keys=3&continuation-token=x&start-after=a&fetch-owner=true&encoding-type=url", "", "ListObjects"},
		{"GET", "/b?versions", "", "ListObjectVersions"},
		{"GET", "/b?versions&key-marker=a&version-id-marker=null&prefix=p&delimiter=%2F&max-keys=2", "", "ListObjectVersions"},
		{"GET", "/b?versioning", "", "GetBucketVersioning"},
		{"PUT", "/b?versioning", "", "PutBucketVersioning"},
		{"GET", "/b?location", "", "GetBucketLocation"},
		{"GET", "/b?uploads&max-uploads=5&key-marker=a&upload-id-marker=b", "", "ListMultipartUploads"},
		{"POST", "/b?delete", "", "DeleteObjects"},
		{"POST", "/b", "", ""},
		{"PUT", "/b", "", "CreateBucket"},
		{"PUT", "/b?acl", "", "PutBucketAcl"},
		{"GET", "/b?acl", "", "GetBucketAcl"},
		{"DELETE", "/b?acl", "", ""},
		{"PUT", "/b?policy", "", "PutBucketPolicy"},
		{"GET", "/b?policyStatus", "", "GetBucketPolicyStatus"},
		{"PUT", "/b?policyStatus", "", ""},
		{"DELETE", "/b?publicAccessBlock", "", "DeletePublicAccessBlock"},
		{"PUT", "/b/k?policy", "", ""},
		{"DELETE", "/b", "", "DeleteBucket"},
		{"DELETE", "/b?cors", "", "DeleteBucketCors"},
		{"PUT", "/b?cors", "", "PutBucketCors"},
		{"GET", "/b?cors", "", "GetBucketCors"},
		{"PUT", "/b/k?cors", "", ""},
		{"DELETE", "/b?website", "", ""},
		{"HEAD", "/b", "", "HeadBucket"},
		{"GET", "/b/k", "", "GetObject"},
		{"GET", "/b/k?response-content-type=a&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00&versionId=null", "", "GetObject"},
		{"GET", "/b/k?partNumber=2", "", "GetObject"},
		{"PUT", "/b/k?partNumber=2", "", ""},
		{"GET", "/b/k?attributes", "", "GetObjectAttributes"},
		{"PUT", "/b/k?tagging", "", "PutObjectTagging"},
		{"GET", "/b/k?tagging&versionId=null", "", "GetObjectTagging"},
		{"DELETE", "/b/k?tagging", "", "DeleteObjectTagging"},
		{"POST", "/b/k?tagging", "", ""},
		{"PUT", "/b?tagging", "", "PutBucketTagging"},
		{"GET", "/b?tagging", "", "GetBucketTagging"},
		{"DELETE", "/b?tagging", "", "DeleteBucketTagging"},
		{"GET", "/b/k?uploadId=u&max-parts=2&part-number-marker=1", "", "ListParts"},
		{"GET", "/b/k?acl", "", "GetObjectAcl"},
		{"PUT", "/b/k?acl", "", "PutObjectAcl"},
		{"DELETE", "/b/k?acl", "", ""},
		{"HEAD", "/b/k", "", "HeadObject"},
		{"PUT", "/b/k", "", "PutObject"},
		{"PUT", "/b/k", "b/src", "CopyObject"},
		{"PUT", "/b/k?uploadId=u&partNumber=1", "", "UploadPart"},
		{"PUT", "/b/k?uploadId=u&partNumber=1", "b/src", "UploadPartCopy"},
		{"PUT", "/b/k?retention", "", "PutObjectRetention"},
		{"GET", "/b/k?legal-hold&versionId=null", "", "GetObjectLegalHold"},
		{"DELETE", "/b/k?retention", "", ""},
		{"GET", "/b?object-lock", "", "GetObjectLockConfiguration"},
		{"POST", "/b/k?uploads", "", "CreateMultipartUpload"},
		{"POST", "/b/k?uploadId=u", "", "CompleteMultipartUpload"},
		{"POST", "/b/k?select&select-type=2", "", ""},
		{"DELETE", "/b/k", "", "DeleteObject"},
		{"DELETE", "/b/k?uploadId=u", "", "AbortMultipartUpload"},
		{"PATCH", "/b/k", "", ""},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.hdr != "" {
			r.Header.Set("x-amz-copy-source", c.hdr)
		}
		b, o, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		got, ok := resolve(r, b, o)
		if ok != (c.want != "") || got.name != c.want {
			t.Errorf("%s %s (copy %q): %q %v, want %q", c.method, c.target, c.hdr, got.name, ok, c.want)
		}
	}
}
