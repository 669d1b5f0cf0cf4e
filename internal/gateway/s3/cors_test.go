package s3_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
)

// preflight sends an unsigned OPTIONS request.
func preflight(t *testing.T, url, origin, method, headers string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("OPTIONS", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if method != "" {
		req.Header.Set("Access-Control-Request-Method", method)
	}
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestCORS puts, gets and deletes a bucket's CORS configuration with the
// SDK, refuses invalid ones, and answers preflights and actual requests
// by its rules.
func TestCORS(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("web")}); code(err) != "NoSuchCORSConfiguration" {
		t.Fatalf("get before put: %v", err)
	}
	resp, body := preflight(t, e.srv.URL+"/web/k", "https://app.example", "PUT", "")
	if resp.StatusCode != 403 || !strings.Contains(body, "CORS is not enabled") {
		t.Fatalf("preflight without configuration: %d %s", resp.StatusCode, body)
	}

	// Invalid configurations.
	for _, bad := range []struct {
		rule types.CORSRule
		code string
	}{
		{types.CORSRule{AllowedMethods: []string{"PATCH"}, AllowedOrigins: []string{"*"}}, "InvalidRequest"},
		{types.CORSRule{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"https://*.*.example"}}, "InvalidRequest"},
	} {
		_, err := c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String("web"),
			CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{bad.rule}}})
		if code(err) != bad.code {
			t.Errorf("put %+v: %v, want %s", bad.rule, err, bad.code)
		}
	}

	// What the SDK would not send: rules without an origin or a method,
	// no rule, not XML.
	for _, bad := range []string{
		"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>",
		"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>",
		"<CORSConfiguration></CORSConfiguration>",
		"<CORSConfiguration><CORSRule>",
	} {
		resp, body := e.do(t, e.admin, "PUT", "/web?cors", []byte(bad))
		if resp.StatusCode != 400 || !strings.Contains(string(body), "MalformedXML") {
			t.Errorf("put %s: %d %s", bad, resp.StatusCode, body)
		}
	}

	cfg := &types.CORSConfiguration{CORSRules: []types.CORSRule{
		{ID: aws.String("app"), AllowedOrigins: []string{"https://app.example", "https://*.pages.example"},
			AllowedMethods: []string{"GET", "PUT", "POST"}, AllowedHeaders: []string{"x-custom", "x-amz-*", "content-type"},
			ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(600)},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
	}}
	if _, err := c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String("web"), CORSConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("web")})
	if err != nil || len(got.CORSRules) != 2 || aws.ToString(got.CORSRules[0].ID) != "app" ||
		len(got.CORSRules[0].AllowedOrigins) != 2 || aws.ToInt32(got.CORSRules[0].MaxAgeSeconds) != 600 ||
		got.CORSRules[1].AllowedOrigins[0] != "*" {
		t.Fatalf("get: %v %+v", err, got)
	}

	// Preflights.
	for _, p := range []struct {
		origin, method, headers string
		status                  int
		allowOrigin             string
	}{
		{"https://app.example", "PUT", "X-Custom, Content-Type", 200, "https://app.example"},
		{"https://shop.pages.example", "POST", "x-amz-meta-a", 200, "https://shop.pages.example"}, // wildcard origin and header
		{"https://app.example", "DELETE", "", 403, ""},                                            // method not allowed
		{"https://app.example", "PUT", "x-other", 403, ""},                                        // header not allowed
		{"https://evil.example", "PUT", "", 403, ""},                                              // origin not allowed
		{"https://evil.example", "GET", "", 200, "*"},                                             // the second rule
		{"https://evil.example", "GET", "x-custom", 403, ""},                                      // which allows no header
	} {
		resp, body := preflight(t, e.srv.URL+"/web/some/key", p.origin, p.method, p.headers)
		if resp.StatusCode != p.status || resp.Header.Get("Access-Control-Allow-Origin") != p.allowOrigin {
			t.Errorf("preflight %+v: %d %q %s", p, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
		}
		if p.status == 403 && !strings.Contains(body, "This CORS request is not allowed") {
			t.Errorf("preflight %+v: %s", p, body)
		}
	}
	resp, _ = preflight(t, e.srv.URL+"/web/k", "https://app.example", "PUT", "x-custom")
	if h := resp.Header; h.Get("Access-Control-Allow-Methods") != "GET, PUT, POST" || h.Get("Access-Control-Max-Age") != "600" ||
		h.Get("Access-Control-Allow-Headers") != "x-custom" || h.Get("Access-Control-Expose-Headers") != "ETag" {
		t.Fatalf("preflight headers: %v", h)
	}
	if resp, _ := preflight(t, e.srv.URL+"/web/k", "", "PUT", ""); resp.StatusCode != 400 {
		t.Fatalf("preflight without origin: %d", resp.StatusCode)
	}
	if resp, _ := preflight(t, e.srv.URL+"/nobucket/k", "https://app.example", "PUT", ""); resp.StatusCode != 404 {
		t.Fatalf("preflight of a missing bucket: %d", resp.StatusCode)
	}

	// Actual requests carry the headers when a rule allows them.
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("web"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}
	resp, _ = e.do(t, e.admin, "GET", "/web/k", nil, "Origin", "https://app.example")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		resp.Header.Get("Access-Control-Expose-Headers") != "ETag" {
		t.Fatalf("actual GET: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = e.do(t, e.admin, "DELETE", "/web/nothing", nil, "Origin", "https://app.example")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("actual DELETE, which no rule allows: %d %v", resp.StatusCode, resp.Header)
	}
	// An actual request that carries Access-Control-Request-Method (and
	// -Headers) is matched by them, as S3 matches it, not by its method.
	resp, _ = e.do(t, e.admin, "DELETE", "/web/nothing", nil, "Origin", "https://app.example",
		"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "X-Custom")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		resp.Header.Get("Access-Control-Allow-Headers") != "x-custom" {
		t.Fatalf("actual DELETE asking for PUT: %d %v", resp.StatusCode, resp.Header)
	}
	for _, h := range [][]string{
		{"Origin", "https://evil.example", "Access-Control-Request-Method", "PUT"},                                             // GET allowed from anywhere, PUT not
		{"Origin", "https://app.example", "Access-Control-Request-Method", "DELETE"},                                           // no rule allows DELETE
		{"Origin", "https://app.example", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "x-other"}, // nor this header
	} {
		resp, _ = e.do(t, e.admin, "GET", "/web/k", nil, h...)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("actual GET with %v: %d %v", h, resp.StatusCode, resp.Header)
		}
	}

	// A key granted read only may read the configuration, not change it.
	k := e.key(t, false)
	k.Buckets = map[string]gateway.Perm{"web": gateway.Read}
	if err := e.gw.PutKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	rc := e.client(k)
	if _, err := rc.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("web")}); err != nil {
		t.Fatalf("reader get: %v", err)
	}
	if _, err := rc.DeleteBucketCors(ctx, &awss3.DeleteBucketCorsInput{Bucket: aws.String("web")}); code(err) != "AccessDenied" {
		t.Fatalf("reader delete: %v", err)
	}

	if _, err := c.DeleteBucketCors(ctx, &awss3.DeleteBucketCorsInput{Bucket: aws.String("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("web")}); code(err) != "NoSuchCORSConfiguration" {
		t.Fatalf("get after delete: %v", err)
	}
	if resp, _ := preflight(t, e.srv.URL+"/web/k", "https://app.example", "PUT", ""); resp.StatusCode != 403 {
		t.Fatalf("preflight after delete: %d", resp.StatusCode)
	}

	// A bucket made again under the name has no configuration.
	if _, err := c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String("web"), CORSConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("web"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: aws.String("web")}); code(err) != "NoSuchCORSConfiguration" {
		t.Fatalf("get on the new bucket: %v", err)
	}
}
