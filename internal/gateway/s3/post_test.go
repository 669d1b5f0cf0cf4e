package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

// postForm is a browser form for POST Object.
type postForm struct {
	k          gateway.AccessKey
	expires    time.Time
	conds      []any
	fields     [][2]string // besides the signature's, in order
	after      [][2]string // fields after the file
	filename   string
	file       []byte
	noPolicy   bool
	badSig     bool
	noFile     bool
	unnamed    bool     // the file part has an empty form name
	unsignedOf []string // fields left out of the conditions
}

// send posts the form to bucket and returns the answer (redirects not
// followed).
func (f postForm) send(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	now := time.Now().UTC()
	cred := sigv4.PostCredential{AccessKey: f.k.ID, Date: now.Format("20060102"), Region: "us-east-1"}
	credStr := f.k.ID + "/" + cred.Date + "/us-east-1/s3/aws4_request"
	sigFields := [][2]string{{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"x-amz-credential", credStr}, {"x-amz-date", now.Format("20060102T150405Z")}}
	conds := append([]any{}, f.conds...)
	for _, fv := range append(append([][2]string{}, f.fields...), sigFields...) {
		skip := false
		for _, u := range f.unsignedOf {
			skip = skip || u == fv[0]
		}
		if !skip {
			conds = append(conds, map[string]string{fv[0]: fv[1]})
		}
	}
	doc, _ := json.Marshal(map[string]any{"expiration": f.expires.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conds})
	policy := base64.StdEncoding.EncodeToString(doc)
	sig := sigv4.SignPostPolicy(f.k.Secret, cred, policy)
	if f.badSig {
		sig = sigv4.SignPostPolicy("wrong"+f.k.Secret, cred, policy)
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, fv := range f.fields {
		mw.WriteField(fv[0], fv[1])
	}
	if !f.noPolicy {
		for _, fv := range sigFields {
			mw.WriteField(fv[0], fv[1])
		}
		mw.WriteField("Policy", policy)
		mw.WriteField("X-Amz-Signature", sig)
	}
	if !f.noFile {
		name := "file"
		if f.unnamed {
			name = ""
		}
		fw, _ := mw.CreateFormFile(name, f.filename)
		fw.Write(f.file)
	}
	for _, fv := range f.after {
		mw.WriteField(fv[0], fv[1])
	}
	mw.Close()
	req, _ := http.NewRequest("POST", url, &b)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestPostObject uploads files with signed HTML forms, and refuses
// expired policies, unmet conditions, bad signatures, files out of the
// size range and forms without a policy, storing nothing.
func TestPostObject(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("forms")}); err != nil {
		t.Fatal(err)
	}
	url := e.srv.URL + "/forms"
	base := func() postForm {
		return postForm{k: e.admin, expires: time.Now().Add(time.Hour),
			conds:    []any{map[string]string{"bucket": "forms"}, []any{"starts-with", "$key", "up/"}, []any{"content-length-range", 1, 3000}},
			fields:   [][2]string{{"key", "up/${filename}"}, {"Content-Type", "text/plain"}, {"x-amz-meta-who", "browser"}},
			filename: "a.txt", file: []byte("hello from a form"), unsignedOf: []string{"key"}}
	}
	exists := func(key string) bool {
		_, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String(key)})
		return err == nil
	}

	resp, body := base().send(t, url)
	if resp.StatusCode != 204 || resp.Header.Get("ETag") == "" {
		t.Fatalf("post: %d %s", resp.StatusCode, body)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String("up/a.txt")})
	if err != nil || aws.ToString(h.ContentType) != "text/plain" || h.Metadata["who"] != "browser" || aws.ToInt64(h.ContentLength) != 17 {
		t.Fatalf("head: %v %+v", err, h)
	}

	// 201 with a PostResponse; a file above the inline size, to the grid.
	f := base()
	f.fields = append(f.fields, [2]string{"success_action_status", "201"})
	f.filename, f.file = "big.bin", bytes.Repeat([]byte("x"), 7000)
	f.conds[2] = []any{"content-length-range", 1, 8000}
	resp, body = f.send(t, url)
	if resp.StatusCode != 201 || !strings.Contains(body, "<Key>up/big.bin</Key>") || !strings.Contains(body, "<Bucket>forms</Bucket>") {
		t.Fatalf("post 201: %d %s", resp.StatusCode, body)
	}
	if !exists("up/big.bin") {
		t.Fatal("201 upload not stored")
	}
	// A redirect.
	f = base()
	f.fields = append(f.fields, [2]string{"success_action_redirect", "https://app.example/done?x=1"})
	resp, body = f.send(t, url)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.HasPrefix(loc, "https://app.example/done?") ||
		!strings.Contains(loc, "key=up%2Fa.txt") || !strings.Contains(loc, "bucket=forms") || !strings.Contains(loc, "x=1") {
		t.Fatalf("redirect: %d %q %s", resp.StatusCode, loc, body)
	}
	// Fields after the file are ignored.
	f = base()
	f.filename = "late.txt"
	f.after = [][2]string{{"x-amz-meta-late", "yes"}}
	if resp, body := f.send(t, url); resp.StatusCode != 204 {
		t.Fatalf("late field: %d %s", resp.StatusCode, body)
	}
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String("up/late.txt")}); err != nil || h.Metadata["late"] != "" {
		t.Fatalf("late field stored: %v %v", err, h.Metadata)
	}

	// The acl field sets the object's ACL, as x-amz-acl.
	f = base()
	f.filename = "public.txt"
	f.fields = append(f.fields, [2]string{"acl", "public-read"})
	if resp, body := f.send(t, url); resp.StatusCode != 204 {
		t.Fatalf("public-read form: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.anon(t, "GET", "/forms/up/public.txt", nil); resp.StatusCode != 200 || string(body) != "hello from a form" {
		t.Fatalf("anonymous GET of a public-read form upload: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.anon(t, "GET", "/forms/up/a.txt", nil); resp.StatusCode != 403 {
		t.Fatalf("anonymous GET of a private form upload: %d %s", resp.StatusCode, body)
	}

	// Refusals: nothing stored.
	for _, bad := range []struct {
		name   string
		mod    func(*postForm)
		status int
		code   string
		msg    string
	}{
		{"expired", func(f *postForm) { f.expires = time.Now().Add(-time.Minute) }, 403, "AccessDenied", "Policy expired"},
		{"key outside the prefix", func(f *postForm) { f.fields[0][1] = "elsewhere/${filename}" }, 403, "AccessDenied", `Policy Condition failed: ["starts-with", "$key", "up/"]`},
		{"wrong bucket", func(f *postForm) { f.conds[0] = map[string]string{"bucket": "other"} }, 403, "AccessDenied", `Policy Condition failed: ["eq", "$bucket", "other"]`},
		{"field not in the policy", func(f *postForm) { f.unsignedOf = append(f.unsignedOf, "x-amz-meta-who") }, 403, "AccessDenied", "Extra input fields: x-amz-meta-who"},
		{"content type", func(f *postForm) { f.conds = append(f.conds, []any{"starts-with", "$Content-Type", "image/"}) }, 403, "AccessDenied", "Policy Condition failed"},
		{"bad signature", func(f *postForm) { f.badSig = true }, 403, "SignatureDoesNotMatch", ""},
		// (Kept below the inline size: a grid upload cut short waits
		// for the object client's stall timeout before it lets go.)
		{"too large", func(f *postForm) { f.file = bytes.Repeat([]byte("y"), 3001) }, 400, "EntityTooLarge", ""},
		{"too small", func(f *postForm) { f.file = nil }, 400, "EntityTooSmall", ""},
		{"no policy", func(f *postForm) { f.noPolicy = true }, 403, "AccessDenied", ""},
		{"no file", func(f *postForm) { f.noFile = true }, 400, "InvalidArgument", "exactly one file"},
		// A part without a form name (minio-go's functional tests send
		// the file so) is not a field: the form is malformed.
		{"file part without a name", func(f *postForm) { f.unnamed = true }, 400, "MalformedPOSTRequest", ""},
		{"bad range", func(f *postForm) { f.conds[2] = []any{"content-length-range", 10, 1} }, 400, "InvalidPolicyDocument", ""},
		{"unknown canned ACL", func(f *postForm) { f.fields = append(f.fields, [2]string{"acl", "public-sometimes"}) }, 400, "InvalidArgument", ""},
		{"customer key", func(f *postForm) {
			f.fields = append(f.fields, [2]string{"x-amz-server-side-encryption-customer-algorithm", "AES256"})
		}, 501, "NotImplemented", "takes no customer key"},
	} {
		f := base()
		f.filename = "refused.txt"
		bad.mod(&f)
		resp, body := f.send(t, url)
		if resp.StatusCode != bad.status || !strings.Contains(body, "<Code>"+bad.code+"</Code>") || !strings.Contains(body, bad.msg) {
			t.Errorf("%s: %d %s", bad.name, resp.StatusCode, body)
		}
		if exists("up/refused.txt") || exists("elsewhere/refused.txt") {
			t.Fatalf("%s: stored", bad.name)
		}
	}

	// A key that may only read the bucket cannot sign uploads into it.
	k := e.key(t, false)
	k.Buckets = map[string]gateway.Perm{"forms": gateway.Read}
	if err := e.gw.PutKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	f = base()
	f.k, f.filename = k, "reader.txt"
	if resp, body := f.send(t, url); resp.StatusCode != 403 || !strings.Contains(body, "AccessDenied") || exists("up/reader.txt") {
		t.Fatalf("reader: %d %s", resp.StatusCode, body)
	}
}

// TestPostObjectChecksums checks a form's x-amz-checksum-* fields as a
// PUT's headers: a matching one is kept and returned, a file that does
// not match is BadDigest and not stored, a policy that names another
// value refuses the form with S3's message, and x-amz-checksum-algorithm
// alone names a checksum to compute.
func TestPostObjectChecksums(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("sums")}); err != nil {
		t.Fatal(err)
	}
	url := e.srv.URL + "/sums"
	file := []byte("a file with a checksum")
	crc := func(b []byte) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))))
	}
	form := func(key string, fields ...[2]string) postForm {
		return postForm{k: e.admin, expires: time.Now().Add(time.Hour),
			conds:    []any{map[string]string{"bucket": "sums"}},
			fields:   append([][2]string{{"key", key}}, fields...),
			filename: "f.bin", file: file}
	}
	exists := func(key string) bool {
		_, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String(key)})
		return err == nil
	}

	// As minio-go's PostPolicy.SetChecksum writes it.
	resp, body := form("good", [2]string{"x-amz-checksum-algorithm", "CRC32C"}, [2]string{"x-amz-checksum-crc32c", crc(file)}).send(t, url)
	if resp.StatusCode != 204 || resp.Header.Get("x-amz-checksum-crc32c") != crc(file) {
		t.Fatalf("post with a checksum: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("good"), ChecksumMode: "ENABLED"})
	if err != nil || aws.ToString(h.ChecksumCRC32C) != crc(file) {
		t.Fatalf("head: %v %+v", err, h)
	}

	// The form signs a checksum the file does not have.
	resp, body = form("bad", [2]string{"x-amz-checksum-crc32c", crc([]byte("other"))}).send(t, url)
	if resp.StatusCode != 400 || !strings.Contains(body, "<Code>BadDigest</Code>") || exists("bad") {
		t.Fatalf("post with a wrong checksum: %d %s (stored: %v)", resp.StatusCode, body, exists("bad"))
	}
	// A value that is not base64 never matches.
	resp, body = form("garbled", [2]string{"x-amz-checksum-crc32c", "not base64!"}).send(t, url)
	if resp.StatusCode != 400 || !strings.Contains(body, "<Code>BadDigest</Code>") || exists("garbled") {
		t.Fatalf("post with a garbled checksum: %d %s", resp.StatusCode, body)
	}

	// The policy allows one checksum, the form carries another (minio-go's
	// testPresignedPostPolicyWrongFile): refused by the policy, with the
	// condition as S3 writes it, quotes and all, in the raw body.
	f := form("wrongfile", [2]string{"x-amz-checksum-crc32c", crc(file)})
	f.unsignedOf = []string{"x-amz-checksum-crc32c"}
	f.conds = append(f.conds, []any{"eq", "$x-amz-checksum-crc32c", crc([]byte{1, 2, 3})})
	resp, body = f.send(t, url)
	want := `Policy Condition failed: ["eq", "$x-amz-checksum-crc32c", "` + crc([]byte{1, 2, 3}) + `"]`
	if resp.StatusCode != 403 || !strings.Contains(body, "<Code>AccessDenied</Code>") || !strings.Contains(body, want) || exists("wrongfile") {
		t.Fatalf("post against the policy's checksum: %d %s", resp.StatusCode, body)
	}

	// x-amz-checksum-algorithm alone: computed, kept and returned.
	resp, body = form("computed", [2]string{"x-amz-checksum-algorithm", "SHA256"}).send(t, url)
	sha := sha256.Sum256(file)
	if resp.StatusCode != 204 || resp.Header.Get("x-amz-checksum-sha256") != base64.StdEncoding.EncodeToString(sha[:]) {
		t.Fatalf("post naming an algorithm: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// An algorithm, and the value of another.
	resp, body = form("mixed", [2]string{"x-amz-checksum-algorithm", "SHA256"}, [2]string{"x-amz-checksum-crc32c", crc(file)}).send(t, url)
	if resp.StatusCode != 400 || !strings.Contains(body, "<Code>InvalidRequest</Code>") || exists("mixed") {
		t.Fatalf("post naming one algorithm with another's value: %d %s", resp.StatusCode, body)
	}
	// An algorithm the gateway does not compute.
	resp, body = form("unknown", [2]string{"x-amz-checksum-algorithm", "CRC8"}).send(t, url)
	if resp.StatusCode != 501 || exists("unknown") {
		t.Fatalf("post naming an unknown algorithm: %d %s", resp.StatusCode, body)
	}
}
