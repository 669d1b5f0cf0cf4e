package s3_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// v2Client is minio-go's client signing with Signature V2.
func v2Client(t *testing.T, e *env, id, secret string) *minio.Client {
	t.Helper()
	c, err := minio.New(strings.TrimPrefix(e.srv.URL, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV2(id, secret, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// v2Code is the S3 error code of a minio-go error ("" for none).
func v2Code(err error) string {
	if err == nil {
		return ""
	}
	return minio.ToErrorResponse(err).Code
}

// s3Code reads the S3 error code of a raw answer.
func s3Code(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var e struct{ Code, Message string }
	b, _ := io.ReadAll(resp.Body)
	if err := xml.Unmarshal(b, &e); err != nil {
		t.Fatalf("answer %d %q is not an S3 error", resp.StatusCode, b)
	}
	return e.Code
}

// TestSignatureV2 drives the gateway with minio-go's Signature V2 client:
// objects, multipart, copy, listing, presigned GET and PUT, a V2 POST
// policy; and the failures (wrong secret, unknown key, expired or
// changed presigned URL) and the authorization V4 requests get (another
// key is refused, a bucket policy grants it, s3:signatureversion tells
// V2 from V4).
func TestSignatureV2(t *testing.T) {
	e := newEnv(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a := v2Client(t, e, e.admin.ID, e.admin.Secret)
	const bk = "sigv2"
	if err := a.MakeBucket(ctx, bk, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}

	body := "signed the old way"
	if _, err := a.PutObject(ctx, bk, "dir/k 1+", strings.NewReader(body), int64(len(body)), minio.PutObjectOptions{
		ContentType: "text/x-v2", UserMetadata: map[string]string{"Color": "blue"},
	}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	st, err := a.StatObject(ctx, bk, "dir/k 1+", minio.StatObjectOptions{})
	if err != nil || st.Size != int64(len(body)) || st.ContentType != "text/x-v2" || st.UserMetadata["Color"] != "blue" {
		t.Fatalf("StatObject: %v %+v", err, st)
	}
	get := func(c *minio.Client, key string) (string, error) {
		o, err := c.GetObject(ctx, bk, key, minio.GetObjectOptions{})
		if err != nil {
			return "", err
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		return string(b), err
	}
	if got, err := get(a, "dir/k 1+"); err != nil || got != body {
		t.Fatalf("GetObject: %q %v", got, err)
	}

	// Multipart: uploads, uploadId and partNumber are signed subresources.
	big := bytes.Repeat([]byte("0123456789abcdef"), 6<<20/16)
	info, err := a.PutObject(ctx, bk, "big", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{PartSize: 5 << 20})
	if err != nil || !strings.HasSuffix(info.ETag, "-2") {
		t.Fatalf("multipart PutObject: %v %+v", err, info)
	}
	if got, err := get(a, "big"); err != nil || got != string(big) {
		t.Fatalf("GetObject of the multipart object: %d bytes, %v", len(got), err)
	}

	// CopyObject signs x-amz-copy-source among the x-amz-* headers.
	if _, err := a.CopyObject(ctx, minio.CopyDestOptions{Bucket: bk, Object: "copy"}, minio.CopySrcOptions{Bucket: bk, Object: "dir/k 1+"}); err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	var keys []string
	for o := range a.ListObjects(ctx, bk, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects: %v", o.Err)
		}
		keys = append(keys, o.Key)
	}
	if got := strings.Join(keys, ","); got != "big,copy,dir/k 1+" {
		t.Fatalf("ListObjects: %s", got)
	}

	// Presigned GET with a signed response override, and presigned PUT.
	u, err := a.PresignedGetObject(ctx, bk, "dir/k 1+", time.Hour, url.Values{"response-content-type": {"application/x-override"}})
	if err != nil || u.Query().Get("AWSAccessKeyId") != e.admin.ID {
		t.Fatalf("PresignedGetObject: %v %v", err, u)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != body || resp.Header.Get("Content-Type") != "application/x-override" {
		t.Fatalf("presigned GET: %d %q %q", resp.StatusCode, b, resp.Header.Get("Content-Type"))
	}
	u, err = a.PresignedPutObject(ctx, bk, "presigned", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", u.String(), strings.NewReader("put by URL"))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("presigned PUT: %v %v", err, resp)
	}
	resp.Body.Close()
	if got, err := get(a, "presigned"); err != nil || got != "put by URL" {
		t.Fatalf("GetObject of the presigned PUT: %q %v", got, err)
	}

	// An expired URL, and one whose path was changed.
	raw, _ := http.NewRequest("GET", e.srv.URL+"/"+bk+"/copy", nil)
	expired := signer.PreSignV2(*raw, e.admin.ID, e.admin.Secret, -60, false)
	if resp, err = http.DefaultClient.Do(expired); err != nil || resp.StatusCode != 403 || s3Code(t, resp) != "AccessDenied" {
		t.Fatalf("expired presigned GET: %v %v", err, resp)
	}
	u, _ = a.PresignedGetObject(ctx, bk, "copy", time.Hour, nil)
	u.Path = "/" + bk + "/big"
	if resp, err = http.Get(u.String()); err != nil || resp.StatusCode != 403 || s3Code(t, resp) != "SignatureDoesNotMatch" {
		t.Fatalf("changed presigned GET: %v %v", err, resp)
	}

	// A browser form signed with V2 (AWSAccessKeyId, policy, signature).
	p := minio.NewPostPolicy()
	if err := p.SetBucket(bk); err != nil {
		t.Fatal(err)
	}
	_ = p.SetKey("posted")
	_ = p.SetExpires(time.Now().UTC().Add(time.Hour))
	_ = p.SetContentLengthRange(1, 1<<20)
	postURL, form, err := a.PresignedPostPolicy(ctx, p)
	if err != nil || form["signature"] == "" || form["AWSAccessKeyId"] != e.admin.ID {
		t.Fatalf("PresignedPostPolicy: %v %v", err, form)
	}
	post := func(form map[string]string, file string) *http.Response {
		t.Helper()
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range form {
			_ = mw.WriteField(k, v)
		}
		fw, _ := mw.CreateFormFile("file", "f.txt")
		_, _ = fw.Write([]byte(file))
		_ = mw.Close()
		resp, err := http.Post(postURL.String(), mw.FormDataContentType(), &buf)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := post(form, "posted by a form"); resp.StatusCode != 204 {
		t.Fatalf("V2 POST: %d %s", resp.StatusCode, s3Code(t, resp))
	}
	if got, err := get(a, "posted"); err != nil || got != "posted by a form" {
		t.Fatalf("GetObject of the V2 POST: %q %v", got, err)
	}
	bad := map[string]string{}
	for k, v := range form {
		bad[k] = v
	}
	bad["signature"] = signer.PostPresignSignatureV2(form["policy"], "not the secret")
	if resp := post(bad, "x"); resp.StatusCode != 403 || s3Code(t, resp) != "SignatureDoesNotMatch" {
		t.Fatalf("V2 POST with a bad signature: %d", resp.StatusCode)
	}
	delete(bad, "signature")
	if resp := post(bad, "x"); resp.StatusCode != 400 || s3Code(t, resp) != "InvalidArgument" {
		t.Fatalf("V2 POST without a signature: %d", resp.StatusCode)
	}
	if resp := post(form, ""); resp.StatusCode != 400 || s3Code(t, resp) != "EntityTooSmall" {
		t.Fatalf("V2 POST outside the policy's length range: %d", resp.StatusCode)
	}

	// Content-MD5 is signed and checked against the body.
	raw, _ = http.NewRequest("PUT", e.srv.URL+"/"+bk+"/md5", strings.NewReader("the body"))
	raw.Header.Set("Content-Md5", "XUFAKrxLKna5cZ2REBfFkg==") // of "hello"
	if resp, err = http.DefaultClient.Do(signer.SignV2(*raw, e.admin.ID, e.admin.Secret, false)); err != nil || resp.StatusCode != 400 || s3Code(t, resp) != "BadDigest" {
		t.Fatalf("V2 PUT with a wrong Content-MD5: %v %v", err, resp)
	}
	if _, err := a.StatObject(ctx, bk, "md5", minio.StatObjectOptions{}); v2Code(err) != "NoSuchKey" {
		t.Fatalf("StatObject after a BadDigest PUT: %v", err)
	}

	// A wrong secret, an unknown key.
	if _, err := v2Client(t, e, e.admin.ID, "not the secret").StatObject(ctx, bk, "copy", minio.StatObjectOptions{}); err == nil {
		t.Fatal("StatObject with a wrong secret succeeded")
	}
	if _, err := get(v2Client(t, e, e.admin.ID, "not the secret"), "copy"); v2Code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("GetObject with a wrong secret: %v", err)
	}
	if _, err := get(v2Client(t, e, "NOSUCHKEY", "secret"), "copy"); v2Code(err) != "InvalidAccessKeyId" {
		t.Fatalf("GetObject with an unknown key: %v", err)
	}

	// Another key gets what V4 would give it: nothing, until a bucket
	// policy (set over V2) grants it reads under dir/.
	kb := e.key(t, false)
	b2 := v2Client(t, e, kb.ID, kb.Secret)
	if _, err := get(b2, "dir/k 1+"); v2Code(err) != "AccessDenied" {
		t.Fatalf("another key's GetObject: %v", err)
	}
	if _, err := b2.PutObject(ctx, bk, "dir/new", strings.NewReader("x"), 1, minio.PutObjectOptions{}); v2Code(err) != "AccessDenied" {
		t.Fatalf("another key's PutObject: %v", err)
	}
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["` + gateway.KeyIdentity(kb).ID +
		`"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bk + `/dir/*"}]}`
	if err := a.SetBucketPolicy(ctx, bk, policy); err != nil {
		t.Fatalf("SetBucketPolicy: %v", err)
	}
	if got, err := get(b2, "dir/k 1+"); err != nil || got != body {
		t.Fatalf("another key's GetObject under the policy: %q %v", got, err)
	}
	if _, err := get(b2, "copy"); v2Code(err) != "AccessDenied" {
		t.Fatalf("another key's GetObject outside the policy: %v", err)
	}
	if _, err := b2.PutObject(ctx, bk, "dir/new", strings.NewReader("x"), 1, minio.PutObjectOptions{}); v2Code(err) != "AccessDenied" {
		t.Fatalf("another key's PutObject under a read policy: %v", err)
	}

	// s3:signatureversion tells V2 from V4: a Deny for V2 only.
	if _, err := a.PutObject(ctx, bk, "dir/v4only", strings.NewReader("v4"), 2, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	policy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["` + gateway.KeyIdentity(kb).ID +
		`"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bk + `/dir/*"},` +
		`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bk + `/dir/v4only",` +
		`"Condition":{"StringEquals":{"s3:signatureversion":"AWS"}}}]}`
	if err := a.SetBucketPolicy(ctx, bk, policy); err != nil {
		t.Fatalf("SetBucketPolicy: %v", err)
	}
	if _, err := get(b2, "dir/v4only"); v2Code(err) != "AccessDenied" {
		t.Fatalf("V2 GetObject denied for V2: %v", err)
	}
	if got, err := get(b2, "dir/k 1+"); err != nil || got != body {
		t.Fatalf("V2 GetObject of another key under the policy: %q %v", got, err)
	}
	out, err := e.client(kb).GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bk), Key: aws.String("dir/v4only")})
	if err != nil {
		t.Fatalf("V4 GetObject denied for V2 only: %v", err)
	}
	out.Body.Close()

	if err := a.RemoveObject(ctx, bk, "copy", minio.RemoveObjectOptions{}); err != nil {
		t.Fatalf("RemoveObject: %v", err)
	}
	if _, err := a.StatObject(ctx, bk, "copy", minio.StatObjectOptions{}); v2Code(err) != "NoSuchKey" {
		t.Fatalf("StatObject after RemoveObject: %v", err)
	}
}

// With --s3-domain, a V2 signature of a virtual-hosted–style request
// covers "/bucket/key" although the path is "/key": minio-go's V2 client
// in DNS bucket lookup reaches the same objects as path style.
func TestSignatureV2VirtualHosted(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{Domain: "s3.quilt.test"})
	_, port, _ := net.SplitHostPort(e.srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addr := e.srv.Listener.Addr().String()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	vh, err := minio.New("s3.quilt.test:"+port, &minio.Options{
		Creds:        credentials.NewStaticV2(e.admin.ID, e.admin.Secret, ""),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupDNS,
		Transport:    tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	path := v2Client(t, e, e.admin.ID, e.admin.Secret)
	if err := path.MakeBucket(ctx, "photos", minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}
	if _, err := vh.PutObject(ctx, "photos", "dir/a b.jpg", strings.NewReader("a picture"), 9, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("virtual-hosted PutObject: %v", err)
	}
	o, err := path.GetObject(ctx, "photos", "dir/a b.jpg", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(o)
	o.Close()
	if err != nil || string(b) != "a picture" {
		t.Fatalf("path-style GetObject: %q %v", b, err)
	}
	u, err := vh.PresignedGetObject(ctx, "photos", "dir/a b.jpg", time.Hour, nil)
	if err != nil || !strings.HasPrefix(u.Host, "photos.") {
		t.Fatalf("PresignedGetObject: %v %v", err, u)
	}
	resp, err := (&http.Client{Transport: tr}).Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "a picture" {
		t.Fatalf("virtual-hosted presigned GET: %d %q", resp.StatusCode, b)
	}
}
