package s3_test

import (
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRouting: every operation the gateway does not implement gets 501
// NotImplemented, never a listing, the object's bytes or an overwrite;
// headers that ask for what is not implemented are refused; ordinary
// parameters still work.
func TestRouting(t *testing.T) {
	e := newEnv(t, 5)
	a := e.admin
	mustDo := func(method, pq string, body string, want int, hdr ...string) {
		t.Helper()
		resp, b := e.do(t, a, method, pq, []byte(body), hdr...)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, pq, resp.StatusCode, b, want)
		}
	}
	mustDo("PUT", "/rtb", "", 200)
	mustDo("PUT", "/rtb/obj", "original", 200)
	stillOriginal := func(what string) {
		t.Helper()
		resp, b := e.do(t, a, "GET", "/rtb/obj", nil)
		if resp.StatusCode != 200 || string(b) != "original" {
			t.Fatalf("after %s: %d %q", what, resp.StatusCode, b)
		}
	}

	type tc struct {
		method, pq, body string
		hdr              []string
		status           int
		code             string
	}
	var cases []tc
	cases = append(cases, tc{"HEAD", "/rtb/obj?attributes", "", nil, 501, ""})
	for _, sub := range []string{"torrent", "restore", "select&select-type=2"} {
		cases = append(cases, tc{"GET", "/rtb/obj?" + sub, "", nil, 501, "NotImplemented"})
	}
	for _, sub := range []string{"retention", "legal-hold", "acl"} {
		if sub != "acl" { // served (objectlock.go, acl.go): never the object's bytes or an overwrite
			cases = append(cases, tc{"PUT", "/rtb/obj?" + sub, "<Retention><Mode>GOVERNANCE</Mode></Retention>", nil, 400, "MalformedXML"},
				tc{"GET", "/rtb/obj?" + sub, "", nil, 400, "InvalidRequest"})
		}
		cases = append(cases, tc{"DELETE", "/rtb/obj?" + sub, "", nil, 501, "NotImplemented"})
	}
	cases = append(cases, tc{"POST", "/rtb/obj?restore", "<RestoreRequest/>", nil, 501, "NotImplemented"},
		tc{"POST", "/rtb/obj", "", nil, 501, "NotImplemented"},
		tc{"GET", "/rtb/obj?partNumber=2", "", nil, 416, "InvalidPartNumber"},
		tc{"GET", "/rtb/obj?partNumber=1", "", []string{"Range", "bytes=0-1"}, 400, "InvalidRequest"},
		tc{"PUT", "/rtb/obj?partNumber=1", "evil", nil, 501, "NotImplemented"},
		tc{"DELETE", "/rtb/obj?partNumber=1", "", nil, 501, "NotImplemented"},
		tc{"GET", "/rtb/obj?attributes", "", nil, 400, "InvalidArgument"},
		tc{"GET", "/rtb/obj?attributes", "", []string{"x-amz-object-attributes", "ETag,Bogus"}, 400, "InvalidArgument"},
		tc{"GET", "/?foo", "", nil, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj?uploads", "", nil, 501, "NotImplemented"},
		tc{"GET", "/rtb?uploads&delete", "", nil, 501, "NotImplemented"})
	for _, sub := range []string{"encryption", "policyStatus", "ownershipControls", "object-lock",
		"versioning", "website", "policy", "acl", "logging", "notification", "replication", "accelerate",
		"requestPayment", "analytics", "metrics", "inventory", "intelligent-tiering", "publicAccessBlock", "versions", "session"} {
		// Served: ACLs, policies, Block Public Access, Object Ownership
		// (access.go, ownership.go), GET ?versions, GET and PUT
		// ?versioning (versioning_test.go) and ?object-lock
		// (objectlock_test.go).
		served := sub == "policy" || sub == "acl" || sub == "publicAccessBlock" || sub == "ownershipControls" || sub == "object-lock"
		if sub != "versions" && sub != "versioning" && !served && sub != "policyStatus" {
			cases = append(cases, tc{"GET", "/rtb?" + sub, "", nil, 501, "NotImplemented"})
		}
		if !served && sub != "versioning" {
			cases = append(cases, tc{"PUT", "/rtb?" + sub, "<X/>", nil, 501, "NotImplemented"})
		}
		if !served || sub == "acl" {
			cases = append(cases, tc{"DELETE", "/rtb?" + sub, "", nil, 501, "NotImplemented"})
		}
	}
	// Headers.
	sum := crc32.ChecksumIEEE([]byte("original"))
	good := base64.StdEncoding.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	bad := base64.StdEncoding.EncodeToString([]byte{1, 2, 3, 4})
	cases = append(cases,
		// SSE-C over plain HTTP (sse_test.go has the rest), and where
		// no operation takes it.
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-server-side-encryption-customer-algorithm", "AES256"}, 400, "InvalidRequest"},
		tc{"GET", "/rtb/obj", "", []string{"x-amz-server-side-encryption-customer-algorithm", "AES256"}, 400, "InvalidRequest"},
		tc{"DELETE", "/rtb/obj", "", []string{"x-amz-server-side-encryption-customer-algorithm", "AES256"}, 501, "NotImplemented"},
		tc{"DELETE", "/rtb/obj?x-amz-server-side-encryption-customer-algorithm=AES256", "", nil, 501, "NotImplemented"},
		tc{"GET", "/rtb/obj?x-amz-server-side-encryption-customer-algorithm=AES256", "", nil, 400, "InvalidRequest"},
		tc{"PUT", "/rtb/obj?tagging", "<Tagging/>", []string{"x-amz-server-side-encryption-customer-algorithm", "AES256"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-copy-source-server-side-encryption-customer-algorithm", "AES256"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-server-side-encryption", "aws:kms"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-server-side-encryption", "aws:kms:dsse"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-server-side-encryption-aws-kms-key-id", "k"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-server-side-encryption", "AES512"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj?x-amz-server-side-encryption=aws%3Akms", "evil", nil, 501, "NotImplemented"},
		tc{"DELETE", "/rtb/obj?X-Amz-Acl=public-read", "", nil, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj", "evil", []string{"If-None-Match", "*"}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/obj", "evil", []string{"If-None-Match", `"x"`}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"If-Match", `"x"`}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "If-None-Match", "*"}, 501, "NotImplemented"},
		tc{"POST", "/rtb/obj?uploads", "", []string{"If-None-Match", "*"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-acl", "public-read-sometimes"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-acl", "log-delivery-write"}, 501, "NotImplemented"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-grant-read", "id=x y"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-grant-read", "emailAddress=a@example.com"}, 400, "UnresolvableGrantByEmailAddress"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-acl", "private", "x-amz-grant-read", "id=alice"}, 400, "InvalidRequest"},
		tc{"DELETE", "/rtb/obj", "", []string{"x-amz-acl", "public-read"}, 400, "InvalidArgument"},
		tc{"DELETE", "/rtb/obj", "", []string{"x-amz-grant-read", "id=alice"}, 400, "InvalidArgument"},
		tc{"GET", "/rtb/obj", "", []string{"x-amz-acl", "private"}, 200, ""},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-object-lock-mode", "COMPLIANCE"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-object-lock-legal-hold", "ON"}, 400, "InvalidRequest"},
		tc{"GET", "/rtb?object-lock", "", nil, 404, "ObjectLockConfigurationNotFoundError"},
		tc{"PUT", "/rtb?object-lock", "<X/>", nil, 400, "MalformedXML"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-tagging", "aws:a=b"}, 400, "InvalidTag"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-tagging", "a=b&a=c"}, 400, "InvalidTag"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-tagging", "a=%zz"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-tagging-directive", "MERGE"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-checksum-crc32", bad}, 400, "BadDigest"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-checksum-crc32", "!!"}, 400, "BadDigest"},
		tc{"DELETE", "/rtb/obj?versionId=bogus", "", nil, 400, "InvalidArgument"},
		tc{"DELETE", "/rtb/obj?versionId=000000000000000000000000", "", nil, 404, "NoSuchVersion"},
		tc{"GET", "/rtb/obj?versionId=3HL4kqtJlcpXroDTDmJ", "", nil, 400, "InvalidArgument"},
		tc{"GET", "/rtb/obj?versionId=000000000000000000000000", "", nil, 404, "NoSuchVersion"},
		tc{"GET", "/rtb/obj?versionId=3f1c2a4e-9b7d-4c1e-8f2a-0123456789ab", "", nil, 404, "NoSuchVersion"},
		tc{"PUT", "/rtb/obj?versionId=null", "evil", nil, 400, "InvalidArgument"},
		tc{"PUT", "/rtb?versioning", "<VersioningConfiguration><Status>Enabled</Status><MfaDelete>Enabled</MfaDelete></VersioningConfiguration>", nil, 501, "NotImplemented"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj?versionId=abc"}, 400, "InvalidArgument"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj?versionId=000000000000000000000000"}, 404, "NoSuchVersion"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-copy-source-if-match", `"0123"`}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-copy-source-if-unmodified-since", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-copy-source-if-none-match", "*"}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-copy-source-if-modified-since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, 412, "PreconditionFailed"},
		tc{"PUT", "/rtb/obj", "evil", []string{"x-amz-expected-bucket-owner", "someone-else"}, 403, "AccessDenied"},
		tc{"PUT", "/rtb/obj", "original", []string{"x-amz-server-side-encryption", "AES256", "x-amz-acl", "private", "x-amz-checksum-crc32", good}, 200, ""},
		tc{"PUT", "/rtb/copy", "", []string{"x-amz-copy-source", "rtb/obj", "x-amz-copy-source-if-match", `"` + fmt.Sprintf("%x", md5sum("original")) + `"`}, 200, ""},
		tc{"GET", "/rtb?list-type=2&prefix=o&max-keys=5&fetch-owner=true&encoding-type=url&x-id=ListObjectsV2", "", nil, 200, ""},
		tc{"GET", "/rtb?location", "", nil, 200, ""},
		tc{"GET", "/rtb/obj?versionId=null", "", nil, 200, ""},
	)
	for _, c := range cases {
		resp, b := e.do(t, a, c.method, c.pq, []byte(c.body), c.hdr...)
		if resp.StatusCode != c.status || c.code != "" && !strings.Contains(string(b), "<Code>"+c.code+"</Code>") {
			t.Errorf("%s %s %v: %d %s, want %d %s", c.method, c.pq, c.hdr, resp.StatusCode, b, c.status, c.code)
		}
		stillOriginal(c.method + " " + c.pq)
	}
	resp, _ := e.do(t, a, "GET", "/rtb/obj?response-content-type=text/x-test&response-content-disposition=attachment", nil)
	if resp.Header.Get("Content-Type") != "text/x-test" || resp.Header.Get("Content-Disposition") != "attachment" {
		t.Errorf("response-* overrides: %v", resp.Header)
	}
}
