package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
)

// ssecKey is a customer key as the SDK takes it: base64 key and MD5.
type ssecKey struct{ raw, b64, md5 string }

func newSSECKey() ssecKey {
	k := make([]byte, 32)
	rand.Read(k)
	sum := md5.Sum(k)
	return ssecKey{string(k), base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(sum[:])}
}

// status is the HTTP status of an SDK error (0 if none).
func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// sseClient is an SDK client of an httptest TLS server.
func sseClient(srv *httptest.Server, k gateway.AccessKey) *awss3.Client {
	return awss3.New(awss3.Options{
		BaseEndpoint: aws.String(srv.URL), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(k.ID, k.Secret, ""),
		HTTPClient:  srv.Client(),
	})
}

// TestSSEC drives SSE-C with aws-sdk-go-v2 over HTTPS: put, get, head,
// ranges, copy (both keys), multipart and UploadPartCopy with the right
// key, no key, a wrong key, a bad key MD5 and another algorithm; a key
// on a plain object; what the gateway stores (ciphertext, no key); and
// other front ends' reads refused.
func TestSSEC(t *testing.T) {
	e := newEnv(t, 4)
	srv := httptest.NewTLSServer(e.s3)
	t.Cleanup(srv.Close)
	c := sseClient(srv, e.admin)
	ctx := context.Background()
	b := aws.String("sec")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	k1, k2 := newSSECKey(), newSSECKey()
	small := []byte("a small secret, inline in the record")
	big := make([]byte, 300_000) // a grid object
	rand.Read(big)

	put := func(key string, body []byte, k *ssecKey) (*awss3.PutObjectOutput, error) {
		in := &awss3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: bytes.NewReader(body)}
		if k != nil {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.b64), aws.String(k.md5)
		}
		return c.PutObject(ctx, in)
	}
	get := func(key string, k *ssecKey, rg string) ([]byte, *awss3.GetObjectOutput, error) {
		in := &awss3.GetObjectInput{Bucket: b, Key: aws.String(key)}
		if k != nil {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.b64), aws.String(k.md5)
		}
		if rg != "" {
			in.Range = aws.String(rg)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		defer out.Body.Close()
		data, err := io.ReadAll(out.Body)
		return data, out, err
	}
	head := func(key string, k *ssecKey) error {
		in := &awss3.HeadObjectInput{Bucket: b, Key: aws.String(key)}
		if k != nil {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.b64), aws.String(k.md5)
		}
		_, err := c.HeadObject(ctx, in)
		return err
	}
	wantErr := func(what string, err error, st int, code string) {
		t.Helper()
		if status(err) != st || code != "" && !strings.Contains(err.Error(), code) {
			t.Errorf("%s: %v, want %d %s", what, err, st, code)
		}
	}

	for name, body := range map[string][]byte{"small": small, "big": big} {
		out, err := put(name, body, &k1)
		if err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
		if aws.ToString(out.SSECustomerAlgorithm) != "AES256" || aws.ToString(out.SSECustomerKeyMD5) != k1.md5 {
			t.Errorf("put %s echoes %q %q", name, aws.ToString(out.SSECustomerAlgorithm), aws.ToString(out.SSECustomerKeyMD5))
		}
		data, gout, err := get(name, &k1, "")
		if err != nil || !bytes.Equal(data, body) {
			t.Fatalf("get %s with its key: %d bytes, %v", name, len(data), err)
		}
		if aws.ToString(gout.SSECustomerKeyMD5) != k1.md5 || aws.ToString(gout.SSECustomerAlgorithm) != "AES256" {
			t.Errorf("get %s echoes %q", name, aws.ToString(gout.SSECustomerKeyMD5))
		}
		if err := head(name, &k1); err != nil {
			t.Errorf("head %s with its key: %v", name, err)
		}
		_, _, err = get(name, nil, "")
		wantErr("get "+name+" without a key", err, 400, "InvalidRequest")
		wantErr("head "+name+" without a key", head(name, nil), 400, "")
		_, _, err = get(name, &k2, "")
		wantErr("get "+name+" with another key", err, 403, "AccessDenied")
		wantErr("head "+name+" with another key", head(name, &k2), 403, "")

		// The gateway holds ciphertext and no key: what it stores
		// (read as if unencrypted) is not the body; its other front
		// ends' reads are refused.
		info, inline, err := e.gw.Lookup(ctx, "sec", name)
		if err != nil || info.Encryption == nil {
			t.Fatalf("lookup %s: %+v %v", name, info.Encryption, err)
		}
		if strings.Contains(string(info.Encryption.MAC)+string(info.Encryption.Salt)+string(inline), k1.raw) {
			t.Errorf("%s: the record holds the key", name)
		}
		stored := info
		stored.Encryption = nil
		var buf bytes.Buffer
		if err := e.gw.ReadVersion(ctx, stored, inline, &buf, 0, info.Size); err != nil || buf.Len() != len(body) || bytes.Equal(buf.Bytes(), body) {
			t.Errorf("%s: stored bytes are the plaintext (%d bytes, %v)", name, buf.Len(), err)
		}
		if _, err := e.gw.Get(ctx, "sec", name, io.Discard, 0, -1); !errors.Is(err, gateway.ErrKeyRequired) {
			t.Errorf("gateway Get of %s without a key: %v", name, err)
		}
		if _, err := e.gw.TreeStore("sec").Open(ctx, name, 0, -1); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("file tree read of %s: %v", name, err)
		}
	}

	// Ranges decrypt from any offset.
	for _, rg := range []struct {
		h        string
		off, end int
	}{{"bytes=0-0", 0, 1}, {"bytes=5-70000", 5, 70001}, {"bytes=131071-131090", 131071, 131091}, {"bytes=-17", len(big) - 17, len(big)}} {
		data, _, err := get("big", &k1, rg.h)
		if err != nil || !bytes.Equal(data, big[rg.off:rg.end]) {
			t.Errorf("range %s: %d bytes, %v", rg.h, len(data), err)
		}
	}

	// A presigned GET: the SDK signs the key headers, which the
	// client sends beside the URL.
	ps, err := awss3.NewPresignClient(c).PresignGetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("small"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil {
		t.Fatal(err)
	}
	for _, withKey := range []bool{true, false} {
		req, _ := http.NewRequest(ps.Method, ps.URL, nil)
		for name, vs := range ps.SignedHeader {
			if withKey || !strings.HasPrefix(strings.ToLower(name), "x-amz-server-side-encryption-customer-key") {
				req.Header[name] = vs
			}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if withKey && (resp.StatusCode != 200 || !bytes.Equal(data, small)) || !withKey && resp.StatusCode/100 != 4 {
			t.Errorf("presigned GET (key sent: %v): %d %s", withKey, resp.StatusCode, data)
		}
	}

	// Malformed keys.
	bad := k1
	bad.md5 = k2.md5
	_, err = put("x", small, &bad)
	wantErr("bad key MD5", err, 400, "InvalidArgument")
	short := ssecKey{b64: base64.StdEncoding.EncodeToString([]byte("short")), md5: k1.md5}
	_, err = put("x", small, &short)
	wantErr("short key", err, 400, "InvalidArgument")
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("x"), Body: bytes.NewReader(small),
		SSECustomerAlgorithm: aws.String("AES128"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	wantErr("algorithm AES128", err, 400, "InvalidEncryptionAlgorithmError")
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("x"), Body: bytes.NewReader(small),
		SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	wantErr("no algorithm", err, 400, "InvalidArgument")
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("x"), Body: bytes.NewReader(small),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5),
		ServerSideEncryption: types.ServerSideEncryptionAes256})
	wantErr("SSE-C and SSE-S3 together", err, 400, "InvalidArgument")
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("x")}); status(err) != 404 {
		t.Errorf("a refused put stored something: %v", err)
	}

	// A key on a plain object.
	if _, err := put("plain", small, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = get("plain", &k1, "")
	wantErr("get plain with a key", err, 400, "InvalidRequest")
	wantErr("head plain with a key", head("plain", &k1), 400, "")

	// Content-MD5 is of the bytes sent.
	sum := md5.Sum(small)
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("md5"), Body: bytes.NewReader(small),
		ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:])), SSECustomerAlgorithm: aws.String("AES256"),
		SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)}); err != nil {
		t.Errorf("put with a right Content-MD5: %v", err)
	}

	// Copies: the source's key to read it, the destination's to write.
	cp := func(dst string, src, dk *ssecKey) error {
		in := &awss3.CopyObjectInput{Bucket: b, Key: aws.String(dst), CopySource: aws.String("sec/big")}
		if src != nil {
			in.CopySourceSSECustomerAlgorithm, in.CopySourceSSECustomerKey, in.CopySourceSSECustomerKeyMD5 = aws.String("AES256"), aws.String(src.b64), aws.String(src.md5)
		}
		if dk != nil {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(dk.b64), aws.String(dk.md5)
		}
		_, err := c.CopyObject(ctx, in)
		return err
	}
	wantErr("copy without the source's key", cp("c", nil, nil), 400, "InvalidRequest")
	wantErr("copy with a wrong source key", cp("c", &k2, nil), 403, "AccessDenied")
	if err := cp("rekeyed", &k1, &k2); err != nil {
		t.Fatalf("copy to another key: %v", err)
	}
	if data, _, err := get("rekeyed", &k2, ""); err != nil || !bytes.Equal(data, big) {
		t.Errorf("get the copy with its key: %v", err)
	}
	_, _, err = get("rekeyed", &k1, "")
	wantErr("get the copy with the source's key", err, 403, "AccessDenied")
	if err := cp("decrypted", &k1, nil); err != nil {
		t.Fatalf("copy to a plain object: %v", err)
	}
	if data, _, err := get("decrypted", nil, ""); err != nil || !bytes.Equal(data, big) {
		t.Errorf("get the plain copy: %v", err)
	}

	// Multipart: every part with the upload's key.
	mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(mp.SSECustomerKeyMD5) != k1.md5 {
		t.Errorf("create upload echoes %q", aws.ToString(mp.SSECustomerKeyMD5))
	}
	part1 := make([]byte, s3.MinPart+100)
	rand.Read(part1)
	part := func(n int32, body []byte, k *ssecKey) (*awss3.UploadPartOutput, error) {
		in := &awss3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(body)}
		if k != nil {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.b64), aws.String(k.md5)
		}
		return c.UploadPart(ctx, in)
	}
	_, err = part(1, part1, nil)
	wantErr("part without the key", err, 400, "InvalidRequest")
	_, err = part(1, part1, &k2)
	wantErr("part with another key", err, 403, "AccessDenied")
	p1, err := part(1, part1, &k1)
	if err != nil {
		t.Fatal(err)
	}
	// Part 2 is copied from the SSE-C object "big", read with its key.
	pc, err := c.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: aws.Int32(2),
		CopySource: aws.String("sec/big"), CopySourceRange: aws.String("bytes=10-20009"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(k1.b64), CopySourceSSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil {
		t.Fatalf("upload part copy: %v", err)
	}
	_, err = c.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: aws.Int32(3),
		CopySource:           aws.String("sec/big"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	wantErr("part copy without the source's key", err, 400, "InvalidRequest")
	// Part 3 is uploaded but not listed in the completion.
	if _, err := part(3, small, &k1); err != nil {
		t.Fatal(err)
	}
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k2.b64), SSECustomerKeyMD5: aws.String(k2.md5),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p1.ETag}}}})
	wantErr("complete with another key", err, 403, "AccessDenied")
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId,
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: p1.ETag}, {PartNumber: aws.Int32(2), ETag: pc.CopyPartResult.ETag}}}}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	whole := append(append([]byte{}, part1...), big[10:20010]...)
	if data, _, err := get("mp", &k1, ""); err != nil || !bytes.Equal(data, whole) {
		t.Errorf("get the multipart object: %d bytes, %v", len(data), err)
	}
	across := len(part1) - 7
	if data, _, err := get("mp", &k1, "bytes="+strconv.Itoa(across)+"-"+strconv.Itoa(len(part1)+9)); err != nil || !bytes.Equal(data, whole[across:len(part1)+10]) {
		t.Errorf("range across parts: %d bytes, %v", len(data), err)
	}
	_, _, err = get("mp", nil, "")
	wantErr("get the multipart object without its key", err, 400, "InvalidRequest")
	_, _, err = get("mp", &k2, "")
	wantErr("get the multipart object with another key", err, 403, "AccessDenied")
	// A tag change keeps the object encrypted.
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("mp"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}}); err != nil {
		t.Fatal(err)
	}
	_, _, err = get("mp", nil, "")
	wantErr("get after a tag change without the key", err, 400, "InvalidRequest")

	// An upload without a key takes no key for its parts.
	plainUp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("pmp")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: aws.String("pmp"), UploadId: plainUp.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(small), SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	wantErr("a key for a part of a plain upload", err, 400, "InvalidRequest")

	// GetObjectAttributes needs the key too.
	_, err = c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: b, Key: aws.String("big"), ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	wantErr("attributes without the key", err, 400, "InvalidRequest")
	at, err := c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: b, Key: aws.String("big"), ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize},
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.b64), SSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil || aws.ToInt64(at.ObjectSize) != int64(len(big)) {
		t.Errorf("attributes with the key: %v", err)
	}
}

// TestSSECNeedsHTTPS: customer keys over plain HTTP are refused (as S3
// does) unless Options.AllowInsecureSSEC; SSE-KMS is refused with why.
func TestSSECNeedsHTTPS(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(e.admin)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("plainhttp")}); err != nil {
		t.Fatal(err)
	}
	k := newSSECKey()
	in := func() *awss3.PutObjectInput {
		return &awss3.PutObjectInput{Bucket: aws.String("plainhttp"), Key: aws.String("o"), Body: strings.NewReader("x"),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.b64), SSECustomerKeyMD5: aws.String(k.md5)}
	}
	_, err := c.PutObject(ctx, in())
	if status(err) != 400 || !strings.Contains(err.Error(), "secure connection") {
		t.Errorf("SSE-C over HTTP: %v", err)
	}
	insecure := httptest.NewServer(s3.New(e.gw, s3.Options{AllowInsecureSSEC: true}))
	t.Cleanup(insecure.Close)
	ic := client(insecure.URL, e.admin.ID, e.admin.Secret)
	if _, err := ic.PutObject(ctx, in()); err != nil {
		t.Fatalf("SSE-C over HTTP allowed: %v", err)
	}
	if _, err := ic.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("plainhttp"), Key: aws.String("o")}); status(err) != 400 {
		t.Errorf("head without the key: %v", err)
	}

	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("plainhttp"), Key: aws.String("kms"), Body: strings.NewReader("x"),
		ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("alias/mine")})
	if status(err) != http.StatusNotImplemented || !strings.Contains(err.Error(), "no key management service") {
		t.Errorf("SSE-KMS: %v", err)
	}
}
