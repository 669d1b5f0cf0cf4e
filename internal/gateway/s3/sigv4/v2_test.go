package sigv4_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

// The access key of the examples in S3's developer guide, "Signing and
// authenticating REST requests" (Signature Version 2).
const (
	docV2Key    = "AKIAIOSFODNN7EXAMPLE"
	docV2Secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// rawRequest builds a server request from its head lines.
func rawRequest(t *testing.T, lines ...string) *http.Request {
	t.Helper()
	return serverRequest(t, []byte(strings.Join(lines, "\r\n")+"\r\n\r\n"))
}

// TestStringToSignV2Examples checks the StringToSign and the signature of
// each of the developer guide's authentication examples, and that Verify
// accepts the documented Authorization header at the documented time.
func TestStringToSignV2Examples(t *testing.T) {
	for _, tc := range []struct {
		name       string
		req        []string
		hostBucket string
		toSign     string // "" when the guide's string differs from S3's rule (below)
		sig        string
	}{
		{"object GET", []string{
			"GET /photos/puppy.jpg HTTP/1.1",
			"Host: awsexamplebucket1.us-west-1.s3.amazonaws.com",
			"Date: Tue, 27 Mar 2007 19:36:42 +0000",
		}, "awsexamplebucket1", "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg", "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="},
		{"object PUT", []string{
			"PUT /photos/puppy.jpg HTTP/1.1",
			"Content-Type: image/jpeg",
			"Content-Length: 0",
			"Host: awsexamplebucket1.s3.us-west-1.amazonaws.com",
			"Date: Tue, 27 Mar 2007 21:15:45 +0000",
		}, "awsexamplebucket1", "PUT\n\nimage/jpeg\nTue, 27 Mar 2007 21:15:45 +0000\n/awsexamplebucket1/photos/puppy.jpg", "iqRzw+ileNPu1fhspnRs8nOjjIA="},
		{"list (prefix, max-keys, marker are not signed)", []string{
			"GET /?prefix=photos&max-keys=50&marker=puppy HTTP/1.1",
			"User-Agent: Mozilla/5.0",
			"Host: awsexamplebucket1.us-west-1.s3.amazonaws.com",
			"Date: Tue, 27 Mar 2007 19:42:41 +0000",
		}, "awsexamplebucket1", "GET\n\n\nTue, 27 Mar 2007 19:42:41 +0000\n/awsexamplebucket1/", "m0WP8eCtspQl5Ahe6L1SozdX9YA="},
		{"fetch ACL (a subresource)", []string{
			"GET /?acl HTTP/1.1",
			"Host: awsexamplebucket1.us-west-1.s3.amazonaws.com",
			"Date: Tue, 27 Mar 2007 19:44:46 +0000",
		}, "awsexamplebucket1", "GET\n\n\nTue, 27 Mar 2007 19:44:46 +0000\n/awsexamplebucket1/?acl", "82ZHiFIjc+WbcwFKGUVEQspPn+0="},
		// The guide signs x-amz-date's value in the Date line and leaves
		// it out of the x-amz-* headers; S3's rule (an empty Date line)
		// gives another string, and Verify accepts both.
		{"DELETE with x-amz-date (path style)", []string{
			"DELETE /awsexamplebucket1/photos/puppy.jpg HTTP/1.1",
			"User-Agent: dotnet",
			"Host: s3.us-west-1.amazonaws.com",
			"Date: Tue, 27 Mar 2007 21:20:27 +0000",
			"x-amz-date: Tue, 27 Mar 2007 21:20:26 +0000",
		}, "", "", "XbyTlbQdu9Xw5o8P4iMwPktxQd8="},
		{"upload with x-amz-* headers, repeated meta, CNAME bucket", []string{
			"PUT /db-backup.dat.gz HTTP/1.1",
			"User-Agent: curl/7.15.5",
			"Host: static.example.com:8080",
			"Date: Tue, 27 Mar 2007 21:06:08 +0000",
			"x-amz-acl: public-read",
			"content-type: application/x-download",
			"Content-MD5: 4gJE4saaMU4BqNR0kLY+lw==",
			"X-Amz-Meta-ReviewedBy: joe@example.com",
			"X-Amz-Meta-ReviewedBy: jane@example.com",
			"X-Amz-Meta-FileChecksum: 0x02661779",
			"X-Amz-Meta-ChecksumAlgorithm: crc32",
			"Content-Disposition: attachment; filename=database.dat",
			"Content-Encoding: gzip",
			"Content-Length: 0",
		}, "static.example.com", "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\nTue, 27 Mar 2007 21:06:08 +0000\n" +
			"x-amz-acl:public-read\nx-amz-meta-checksumalgorithm:crc32\nx-amz-meta-filechecksum:0x02661779\n" +
			"x-amz-meta-reviewedby:joe@example.com,jane@example.com\n/static.example.com/db-backup.dat.gz", "jtBQa0Aq+DkULFI8qrpwIjGEx0E="},
		{"list all buckets", []string{
			"GET / HTTP/1.1",
			"Host: s3.us-west-1.amazonaws.com",
			"Date: Wed, 28 Mar 2007 01:29:59 +0000",
		}, "", "GET\n\n\nWed, 28 Mar 2007 01:29:59 +0000\n/", "qGdzdERIC03wnaRNKh6OqZehG9s="},
		{"unicode keys (the path as sent)", []string{
			"GET /dictionary/fran%C3%A7ais/pr%c3%a9f%c3%a8re HTTP/1.1",
			"Host: s3.us-west-1.amazonaws.com",
			"Date: Wed, 28 Mar 2007 01:49:49 +0000",
		}, "", "GET\n\n\nWed, 28 Mar 2007 01:49:49 +0000\n/dictionary/fran%C3%A7ais/pr%c3%a9f%c3%a8re", "DNEZGsoieTZ92F3bUfSPQcbGmlM="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rawRequest(t, tc.req...)
			if tc.toSign != "" {
				if got := sigv4.StringToSignV2(r, tc.hostBucket, false); got != tc.toSign {
					t.Fatalf("StringToSign\n%q\nwant\n%q", got, tc.toSign)
				}
				if got := sigv4.SignV2(docV2Secret, tc.toSign); got != tc.sig {
					t.Fatalf("signature %s, want %s", got, tc.sig)
				}
			}
			r.Header.Set("Authorization", "AWS "+docV2Key+":"+tc.sig)
			at, err := time.Parse(time.RFC1123Z, r.Header.Get("Date"))
			if err != nil {
				t.Fatal(err)
			}
			v := verifier(at, map[string]string{docV2Key: docV2Secret})
			v.HostBucket = tc.hostBucket
			res, err := v.Verify(r)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if res.AccessKey != docV2Key || res.Version != 2 || res.Payload != sigv4.Unsigned {
				t.Fatalf("result %+v", res)
			}
		})
	}
}

// signV2 signs a server request with minio-go's Signature V2 signer, as
// its V2 client does, and returns it.
func signV2(t *testing.T, method, target string, hdr ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://127.0.0.1:9000"+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return serverRequest(t, wire(t, signer.SignV2(*req, testKey, testSecret, false)))
}

// TestVerifyV2 checks requests signed by minio-go's V2 signer, and each
// way a V2 request fails.
func TestVerifyV2(t *testing.T) {
	now := time.Now()
	ok := func(t *testing.T, r *http.Request) {
		t.Helper()
		res, err := verifier(now, nil).Verify(r)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if res.AccessKey != testKey || res.Version != 2 {
			t.Fatalf("result %+v", res)
		}
	}
	fails := func(t *testing.T, r *http.Request, code string) *sigv4.Error {
		t.Helper()
		_, err := verifier(now, nil).Verify(r)
		return wantCode(t, err, code)
	}

	t.Run("signed subresources and headers", func(t *testing.T) {
		ok(t, signV2(t, "GET", "/b/k?versionId=3&response-content-type=text%2Fplain"))
		ok(t, signV2(t, "PUT", "/b/k%20a?partNumber=2&uploadId=u%2B1", "Content-Type", "text/plain", "Content-Md5", "XUFAKrxLKna5cZ2REBfFkg==", "X-Amz-Meta-A", "1", "X-Amz-Copy-Source", "/b/other"))
		ok(t, signV2(t, "GET", "/b?prefix=a&max-keys=3&versions"))
		ok(t, signV2(t, "POST", "/b?delete"))
		ok(t, signV2(t, "GET", "/b/k?retention")) // minio-go signs retention
	})
	t.Run("unsigned query parameters may change", func(t *testing.T) {
		r := signV2(t, "GET", "/b?prefix=a")
		r.RequestURI = "/b?prefix=b"
		ok(t, r)
	})
	t.Run("tampered", func(t *testing.T) {
		for _, tamper := range []func(r *http.Request){
			func(r *http.Request) { r.Method = "DELETE" },
			func(r *http.Request) { r.RequestURI = "/b/l" },
			func(r *http.Request) { r.RequestURI = "/b/k?acl" },
			func(r *http.Request) { r.Header.Set("Content-Type", "text/html") },
			func(r *http.Request) { r.Header.Set("X-Amz-Acl", "public-read") },
			func(r *http.Request) { r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2("wrong", "x")) },
		} {
			r := signV2(t, "GET", "/b/k", "Content-Type", "text/plain")
			tamper(r)
			fails(t, r, "SignatureDoesNotMatch")
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		r := signV2(t, "GET", "/b/k")
		_, err := verifier(now, map[string]string{testKey: "another secret"}).Verify(r)
		wantCode(t, err, "SignatureDoesNotMatch")
	})
	t.Run("unknown key", func(t *testing.T) {
		r := signV2(t, "GET", "/b/k")
		_, err := verifier(now, map[string]string{"OTHER": testSecret}).Verify(r)
		wantCode(t, err, "InvalidAccessKeyId")
	})
	t.Run("missing date", func(t *testing.T) {
		r := signV2(t, "GET", "/b/k")
		r.Header.Del("Date")
		if e := fails(t, r, "AccessDenied"); !strings.Contains(e.Message, "Date") {
			t.Fatalf("message %q", e.Message)
		}
	})
	t.Run("skewed", func(t *testing.T) {
		r := signV2(t, "GET", "/b/k")
		_, err := verifier(now.Add(16*time.Minute), nil).Verify(r)
		wantCode(t, err, "RequestTimeTooSkewed")
		_, err = verifier(now.Add(-16*time.Minute), nil).Verify(r)
		wantCode(t, err, "RequestTimeTooSkewed")
		if _, err := verifier(now.Add(14*time.Minute), nil).Verify(r); err != nil {
			t.Fatalf("within skew: %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, h := range []string{"AWS " + testKey, "AWS :sig", "AWS " + testKey + ":"} {
			r := signV2(t, "GET", "/b/k")
			r.Header.Set("Authorization", h)
			fails(t, r, "AuthorizationHeaderMalformed")
		}
		r := signV2(t, "GET", "/b/k")
		r.Header.Set("Authorization", "AWS "+testKey+":not-base64!")
		fails(t, r, "SignatureDoesNotMatch")
	})
	t.Run("aws-chunked needs V4", func(t *testing.T) {
		r := signV2(t, "PUT", "/b/k", "X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
		fails(t, r, "InvalidArgument")
	})
	t.Run("header and query", func(t *testing.T) {
		r := signV2(t, "GET", "/b/k?AWSAccessKeyId="+testKey+"&Expires=1&Signature=x")
		fails(t, r, "InvalidArgument")
		r = signV2(t, "GET", "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256")
		fails(t, r, "InvalidArgument")
	})
}

// TestVerifyV2Variants checks the forms of the StringToSign other signers
// use: an empty Date line with x-amz-date (S3's rule, s3cmd), the
// subresources that minio-go or botocore leave unsigned, and botocore's
// "/bucket/" for a path-style bucket request.
func TestVerifyV2Variants(t *testing.T) {
	now := time.Now().UTC()
	amzDate := now.Format(http.TimeFormat)
	r := rawRequest(t, "GET /b/k?object-lock&versionId=7 HTTP/1.1", "Host: 127.0.0.1", "x-amz-date: "+amzDate)
	want := "GET\n\n\n\nx-amz-date:" + amzDate + "\n/b/k?object-lock&versionId=7"
	if got := sigv4.StringToSignV2(r, "", false); got != want {
		t.Fatalf("StringToSign %q, want %q", got, want)
	}
	for name, toSign := range map[string]string{
		"all signed":           want,
		"object-lock unsigned": "GET\n\n\n\nx-amz-date:" + amzDate + "\n/b/k?versionId=7",
	} {
		r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2(testSecret, toSign))
		if _, err := verifier(now, nil).Verify(r); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// versionId is never optional.
	r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2(testSecret, "GET\n\n\n\nx-amz-date:"+amzDate+"\n/b/k?object-lock"))
	_, err := verifier(now, nil).Verify(r)
	wantCode(t, err, "SignatureDoesNotMatch")
	// A bucket's path-style resource, "/b", as botocore signs it: "/b/".
	r = rawRequest(t, "PUT /b HTTP/1.1", "Host: 127.0.0.1", "Date: "+amzDate)
	r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2(testSecret, "PUT\n\n\n"+amzDate+"\n/b/"))
	if _, err := verifier(now, nil).Verify(r); err != nil {
		t.Errorf("bucket resource with a slash: %v", err)
	}
	r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2(testSecret, "PUT\n\n\n"+amzDate+"\n/c/"))
	_, err = verifier(now, nil).Verify(r)
	wantCode(t, err, "SignatureDoesNotMatch")
	// A bad x-amz-date is refused whatever the Date header says.
	r = rawRequest(t, "GET /b/k HTTP/1.1", "Host: 127.0.0.1", "x-amz-date: yesterday", "Date: "+amzDate)
	r.Header.Set("Authorization", "AWS "+testKey+":"+sigv4.SignV2(testSecret, sigv4.StringToSignV2(r, "", false)))
	_, err = verifier(now, nil).Verify(r)
	wantCode(t, err, "AccessDenied")
}

// TestPresignV2 checks URLs presigned by minio-go's V2 signer: valid
// until Expires, and refused after it or when changed.
func TestPresignV2(t *testing.T) {
	presign := func(t *testing.T, target string, expires int64) *http.Request {
		t.Helper()
		req, err := http.NewRequest("GET", "http://127.0.0.1:9000"+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		return serverRequest(t, wire(t, signer.PreSignV2(*req, testKey, testSecret, expires, false)))
	}
	now := time.Now()
	r := presign(t, "/b/some%20key?response-content-disposition=attachment%3B%20filename%3Dx", 3600)
	res, err := verifier(now, nil).Verify(r)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.AccessKey != testKey || res.Version != 2 || res.Payload != sigv4.Unsigned {
		t.Fatalf("result %+v", res)
	}
	// Long after the request was made, but before it expires: no skew check.
	if _, err := verifier(now.Add(59*time.Minute), nil).Verify(r); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	_, err = verifier(now.Add(61*time.Minute), nil).Verify(r)
	if e := wantCode(t, err, "AccessDenied"); !strings.Contains(e.Message, "expired") {
		t.Fatalf("message %q", e.Message)
	}

	path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	q.Set("Expires", "99999999999")
	for _, target := range []string{path + "?" + q.Encode(), "/b/other?" + rawQuery} {
		r2 := r.Clone(r.Context())
		r2.RequestURI = target
		_, err := verifier(now, nil).Verify(r2)
		wantCode(t, err, "SignatureDoesNotMatch")
	}

	for _, query := range []string{"AWSAccessKeyId=" + testKey + "&Signature=x", "Expires=1&Signature=x", "AWSAccessKeyId=" + testKey + "&Expires=1"} {
		r2 := r.Clone(r.Context())
		r2.RequestURI = "/b/k?" + query
		_, err := verifier(now, nil).Verify(r2)
		wantCode(t, err, "AccessDenied")
	}
	r2 := r.Clone(r.Context())
	r2.RequestURI = "/b/k?AWSAccessKeyId=" + testKey + "&Expires=soon&Signature=x"
	_, err = verifier(now, nil).Verify(r2)
	if e := wantCode(t, err, "AccessDenied"); !strings.Contains(e.Message, "seconds since epoch") {
		t.Fatalf("message %q", e.Message)
	}
	r2.RequestURI = strings.Replace(r.RequestURI, "AWSAccessKeyId="+testKey, "AWSAccessKeyId=NOBODY", 1)
	_, err = verifier(now, nil).Verify(r2)
	wantCode(t, err, "InvalidAccessKeyId")
}

// TestPostPolicyV2 checks a POST form's V2 signature as minio-go makes it.
func TestPostPolicyV2(t *testing.T) {
	policy := "eyJleHBpcmF0aW9uIjoiMjAzMC0wMS0wMVQwMDowMDowMFoiLCJjb25kaXRpb25zIjpbXX0="
	sig := signer.PostPresignSignatureV2(policy, testSecret)
	if err := sigv4.VerifyPostPolicyV2(testSecret, policy, sig); err != nil {
		t.Fatalf("VerifyPostPolicyV2: %v", err)
	}
	if sig != sigv4.SignV2(testSecret, policy) {
		t.Fatalf("SignV2 differs from minio-go's")
	}
	wantCode(t, sigv4.VerifyPostPolicyV2("other", policy, sig), "SignatureDoesNotMatch")
	wantCode(t, sigv4.VerifyPostPolicyV2(testSecret, policy+"x", sig), "SignatureDoesNotMatch")
	wantCode(t, sigv4.VerifyPostPolicyV2(testSecret, policy, "garbage"), "SignatureDoesNotMatch")
}
