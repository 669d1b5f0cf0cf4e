package sigv4_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithy "github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

const (
	testKey    = "AKIDQUILTEXAMPLE"
	testSecret = "qu1lt/Secret+Key/EXAMPLE0123456789abcdef"
)

var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func verifier(now time.Time, keys map[string]string) *sigv4.Verifier {
	if keys == nil {
		keys = map[string]string{testKey: testSecret}
	}
	return &sigv4.Verifier{
		Secret: func(id string) (string, bool) { s, ok := keys[id]; return s, ok },
		Now:    func() time.Time { return now },
	}
}

// wire writes a client request as it goes over the wire.
func wire(t *testing.T, req *http.Request) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// serverRequest parses wire bytes as Go's HTTP server does.
func serverRequest(t *testing.T, raw []byte) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	return r
}

// tamper replaces old, which must occur once in raw, with new, of the
// same length (the tests change one byte).
func tamper(t *testing.T, raw []byte, old, new string) []byte {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("tamper %q -> %q: lengths differ", old, new)
	}
	if n := bytes.Count(raw, []byte(old)); n != 1 {
		t.Fatalf("tamper: %q occurs %d times in the request", old, n)
	}
	return bytes.Replace(raw, []byte(old), []byte(new), 1)
}

// wantCode checks that err is an *sigv4.Error with the code.
func wantCode(t *testing.T, err error, code string) *sigv4.Error {
	t.Helper()
	var e *sigv4.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *sigv4.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("error code %s (%v), want %s", e.Code, e, code)
	}
	return e
}

// escapePath escapes a path as the AWS SDKs send it to S3: everything
// outside A-Z a-z 0-9 - . _ ~ and '/' as %XX.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

const testPath = "/bucket/dir/a b+ünï~(x)*.txt"

// signedRequest signs a PUT with aws-sdk-go-v2's signer, in the
// Authorization header, with a signed sha256 payload.
func signedRequest(t *testing.T, sdkEscaped bool, key string, at time.Time, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://s3.example.test:9000/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Path = testPath
	if sdkEscaped {
		req.URL.RawPath = escapePath(testPath)
	}
	req.URL.RawQuery = "prefix=a%20b%2Fc&marker=%E2%9C%93+ok&empty=&flag&plus=1%2B2&star=*&tilde=~&eq=a%3Db&amp=x%26y&prefix=a-b"
	req.Header.Set("X-Amz-Meta-Color", "  deep   blue  ")
	req.Header.Add("X-Amz-Meta-Multi", "one")
	req.Header.Add("X-Amz-Meta-Multi", "two")
	req.Header.Set("Content-Type", "text/plain")
	hash := sha256Hex(body)
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: key, SecretAccessKey: testSecret}
	err = v4.NewSigner().SignHTTP(context.Background(), creds, req, hash, "s3", "eu-central-1", at,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestSignHTTPHeader(t *testing.T) {
	body := []byte("the quick brown fox jumps over the lazy dog")
	for _, sdkEscaped := range []bool{true, false} {
		t.Run(fmt.Sprintf("sdkEscapedPath=%v", sdkEscaped), func(t *testing.T) {
			raw := wire(t, signedRequest(t, sdkEscaped, testKey, t0, body))
			v := verifier(t0.Add(time.Minute), nil)

			r := serverRequest(t, raw)
			res, err := v.Verify(r)
			if err != nil {
				t.Fatalf("Verify: %v\n%s", err, raw)
			}
			if res.AccessKey != testKey || res.Payload != sigv4.Signed || res.Length != int64(len(body)) {
				t.Fatalf("result %+v", res)
			}
			got, err := io.ReadAll(res.Body)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("body %q, %v", got, err)
			}

			// One byte changed anywhere the signature covers.
			for _, tc := range []struct{ name, old, new string }{
				{"header", "deep   blue", "deep   blUe"},
				{"path", "/bucket/dir/", "/bucket/dIr/"},
				{"query", "marker=%E2%9C%93%20ok", "marker=%E2%9C%93%20oK"},
				{"repeated key", "prefix=a%20b%2Fc", "prefix=a%20b%2Fd"},
				{"method", "PUT /", "PUP /"},
			} {
				_, err := v.Verify(serverRequest(t, tamper(t, raw, tc.old, tc.new)))
				if tc.name == "method" {
					wantCode(t, err, "SignatureDoesNotMatch")
					continue
				}
				wantCode(t, err, "SignatureDoesNotMatch")
			}

			// The query as a client that writes a space as '+' sends it.
			if _, err := v.Verify(serverRequest(t, tamper(t, raw, "marker=%E2%9C%93%20ok", "marker=%E2%9C%93+++ok"))); err == nil {
				t.Fatal("three spaces verified as one")
			}
			line, rest, _ := bytes.Cut(raw, []byte("\r\n"))
			target, query, _ := bytes.Cut(line, []byte("?"))
			plus := slices.Concat(target, []byte("?"), bytes.ReplaceAll(query, []byte("%20"), []byte("+")), []byte("\r\n"), rest)
			if _, err := v.Verify(serverRequest(t, plus)); err != nil {
				t.Fatalf("query with '+' for space: %v", err)
			}

			// The wrong secret.
			_, err = verifier(t0, map[string]string{testKey: testSecret + "x"}).Verify(serverRequest(t, raw))
			wantCode(t, err, "SignatureDoesNotMatch")

			// The body changed: the headers verify, the body does not.
			res, err = v.Verify(serverRequest(t, tamper(t, raw, "lazy dog", "lazy cog")))
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(res.Body)
			wantCode(t, err, "XAmzContentSHA256Mismatch")

			// An x-amz header added after signing.
			added := bytes.Replace(raw, []byte("\r\n\r\n"), []byte("\r\nX-Amz-Acl: public-read\r\n\r\n"), 1)
			_, err = v.Verify(serverRequest(t, added))
			wantCode(t, err, "AccessDenied")
		})
	}

	t.Run("unknown key", func(t *testing.T) {
		raw := wire(t, signedRequest(t, true, "AKIDUNKNOWN", t0, body))
		_, err := verifier(t0, nil).Verify(serverRequest(t, raw))
		wantCode(t, err, "InvalidAccessKeyId")
	})
	t.Run("skew", func(t *testing.T) {
		for _, d := range []time.Duration{-20 * time.Minute, 20 * time.Minute} {
			raw := wire(t, signedRequest(t, true, testKey, t0.Add(d), body))
			_, err := verifier(t0, nil).Verify(serverRequest(t, raw))
			wantCode(t, err, "RequestTimeTooSkewed")
		}
		raw := wire(t, signedRequest(t, true, testKey, t0.Add(-14*time.Minute), body))
		if _, err := verifier(t0, nil).Verify(serverRequest(t, raw)); err != nil {
			t.Fatalf("14 minutes off: %v", err)
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/bucket/key", nil)
		if _, err := verifier(t0, nil).Verify(req); !errors.Is(err, sigv4.ErrAnonymous) {
			t.Fatalf("Verify = %v, want ErrAnonymous", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		raw := wire(t, signedRequest(t, true, testKey, t0, body))
		_, err := verifier(t0, nil).Verify(serverRequest(t, tamper(t, raw, "/s3/aws4_request", "/s4/aws4_request")))
		wantCode(t, err, "AuthorizationHeaderMalformed")
	})
}

func TestPresignHTTP(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://s3.example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.Path = testPath
	req.URL.RawPath = escapePath(testPath)
	req.URL.RawQuery = "X-Amz-Expires=300&response-content-type=text%2Fplain%3B%20charset%3Dutf-8&versionId=3%2F4+5"
	creds := aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}
	signedURL, signedHeader, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req,
		"UNSIGNED-PAYLOAD", "s3", "ap-southeast-2", t0, func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err != nil {
		t.Fatal(err)
	}
	get, err := http.NewRequest(http.MethodGet, signedURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range signedHeader {
		if !strings.EqualFold(k, "Host") {
			get.Header[k] = vs
		}
	}
	raw := wire(t, get)

	res, err := verifier(t0.Add(time.Minute), nil).Verify(serverRequest(t, raw))
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, raw)
	}
	if res.AccessKey != testKey || res.Payload != sigv4.Unsigned {
		t.Fatalf("result %+v", res)
	}

	e := wantCode(t, verifyErr(t, t0.Add(301*time.Second), raw), "AccessDenied")
	if e.Message != "Request has expired" || e.Status != http.StatusForbidden {
		t.Fatalf("expired: %+v", e)
	}
	wantCode(t, verifyErr(t, t0.Add(time.Minute), tamper(t, raw, "X-Amz-Expires=300", "X-Amz-Expires=900")), "SignatureDoesNotMatch")
	wantCode(t, verifyErr(t, t0.Add(time.Minute), tamper(t, raw, "X-Amz-Expires=300", "X-Amz-Expires=9e9")), "AuthorizationQueryParametersError")
	wantCode(t, verifyErr(t, t0.Add(time.Minute), tamper(t, raw, "versionId=3%2F4%205", "versionId=3%2F4%206")), "SignatureDoesNotMatch")
	// Still valid under a tampered expiry that would have been the right one.
	wantCode(t, verifyErr(t, t0.Add(10*time.Minute), tamper(t, raw, "X-Amz-Expires=300", "X-Amz-Expires=900")), "SignatureDoesNotMatch")
}

func verifyErr(t *testing.T, now time.Time, raw []byte) error {
	t.Helper()
	_, err := verifier(now, nil).Verify(serverRequest(t, raw))
	return err
}

// The example of the S3 API reference, "Signature Calculations for the
// Authorization Header: Transferring Payload in Multiple Chunks (Chunked
// Upload)": 66560 bytes of 'a' in chunks of 65536, 1024 and 0 bytes.
const (
	docKey          = "AKIAIOSFODNN7EXAMPLE"
	docSecret       = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	docSeed         = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
	docChunk1       = "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
	docChunk2       = "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
	docFinal        = "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
	docTrailerSig   = "df5735bd9f3295cd9386572292562fefc93ba94e80a0a1ddcbd652c4e0a75e6c"
	docScope        = "20130524/us-east-1/s3/aws4_request"
	docTimestamp    = "20130524T000000Z"
	docDecodedLen   = 66560
	docContentLen   = 66824
	docChunkedFinal = "0;chunk-signature=" + docFinal + "\r\n\r\n"
)

var docTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func docRequest(body []byte) []byte {
	head := "PUT /examplebucket/chunkObject.txt HTTP/1.1\r\n" +
		"Host: s3.amazonaws.com\r\n" +
		"x-amz-date: 20130524T000000Z\r\n" +
		"x-amz-storage-class: REDUCED_REDUNDANCY\r\n" +
		"Authorization: AWS4-HMAC-SHA256 Credential=" + docKey + "/" + docScope + ",SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=" + docSeed + "\r\n" +
		"x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n" +
		"Content-Encoding: aws-chunked\r\n" +
		"x-amz-decoded-content-length: 66560\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n", docContentLen) +
		"\r\n"
	return append([]byte(head), body...)
}

func docBody() []byte {
	var b bytes.Buffer
	b.WriteString("10000;chunk-signature=" + docChunk1 + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 65536))
	b.WriteString("\r\n400;chunk-signature=" + docChunk2 + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 1024))
	b.WriteString("\r\n" + docChunkedFinal)
	return b.Bytes()
}

func docVerifier() *sigv4.Verifier {
	return verifier(docTime, map[string]string{docKey: docSecret})
}

// readSmall reads r with small reads, returning what was read before the
// error.
func readSmall(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 1000)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func TestChunkedKnownAnswer(t *testing.T) {
	body := docBody()
	if len(body) != docContentLen {
		t.Fatalf("doc body is %d bytes, want %d", len(body), docContentLen)
	}
	res, err := docVerifier().Verify(serverRequest(t, docRequest(body)))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.Payload != sigv4.Streaming || res.Length != docDecodedLen || res.AccessKey != docKey {
		t.Fatalf("result %+v", res)
	}
	got, err := readSmall(res.Body)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte("a"), docDecodedLen)) {
		t.Fatalf("decoded %d bytes, not the 66560 'a's", len(got))
	}

	read := func(body []byte) ([]byte, error) {
		res, err := docVerifier().Verify(serverRequest(t, docRequest(body)))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		return readSmall(res.Body)
	}
	chunk2 := bytes.Index(body, []byte("400;chunk-signature="))

	// A flipped byte in the second chunk: the first chunk's bytes are
	// delivered, then the second chunk fails before any of it is.
	flipped := bytes.Clone(body)
	flipped[chunk2+100] ^= 1
	got, err = read(flipped)
	wantCode(t, err, "SignatureDoesNotMatch")
	if len(got) != 65536 {
		t.Fatalf("read %d bytes before the bad chunk, want 65536", len(got))
	}

	// A flipped byte in the first chunk: nothing at all.
	flipped = bytes.Clone(body)
	flipped[200] ^= 1
	got, err = read(flipped)
	wantCode(t, err, "SignatureDoesNotMatch")
	if len(got) != 0 {
		t.Fatalf("read %d bytes of a bad first chunk", len(got))
	}

	// The final chunk's signature changed.
	got, err = read(tamper(t, body, "0;chunk-signature=b6c6", "0;chunk-signature=b6c7"))
	wantCode(t, err, "SignatureDoesNotMatch")
	if len(got) != docDecodedLen {
		t.Fatalf("read %d bytes before the bad final chunk", len(got))
	}

	// Truncated: the connection ends before the declared Content-Length.
	for _, cut := range []int{len(docChunkedFinal), len(docChunkedFinal) + 1100, 40000} {
		r := serverRequest(t, docRequest(body[:len(body)-cut]))
		res, err := docVerifier().Verify(r)
		if err != nil {
			t.Fatal(err)
		}
		_, err = readSmall(res.Body)
		wantCode(t, err, "IncompleteBody")
	}
}

// The trailer half of the same example ("sigv4-streaming-trailers"): the
// trailer signature chains from the final chunk's.
func TestTrailerKnownAnswer(t *testing.T) {
	key := docSigningKey()
	got := trailerSignature(key, docTimestamp, docScope, docFinal, "first:1st\nsecond:2nd\nthird:3rd\n")
	if got != docTrailerSig {
		t.Fatalf("test helper's trailer signature %s, want %s", got, docTrailerSig)
	}
	if got := chunkSignature(key, docTimestamp, docScope, docSeed, bytes.Repeat([]byte("a"), 65536)); got != docChunk1 {
		t.Fatalf("test helper's chunk signature %s, want %s", got, docChunk1)
	}
}

func docSigningKey() []byte {
	k := hmacSHA256([]byte("AWS4"+docSecret), "20130524")
	for _, s := range []string{"us-east-1", "s3", "aws4_request"} {
		k = hmacSHA256(k, s)
	}
	return k
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// chunkSignature and trailerSignature are the test's own client side of
// the chunk chain, checked against the documented values above.
func chunkSignature(key []byte, ts, scope, prev string, data []byte) string {
	return hex.EncodeToString(hmacSHA256(key, "AWS4-HMAC-SHA256-PAYLOAD\n"+ts+"\n"+scope+"\n"+prev+"\n"+sha256Hex(nil)+"\n"+sha256Hex(data)))
}

func trailerSignature(key []byte, ts, scope, prev, trailers string) string {
	return hex.EncodeToString(hmacSHA256(key, "AWS4-HMAC-SHA256-TRAILER\n"+ts+"\n"+scope+"\n"+prev+"\n"+sha256Hex([]byte(trailers))))
}

// signedTrailerRequest is a STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
// upload, its seed signed by aws-sdk-go-v2's signer and its chunks and
// trailer by the helpers above; crc is the trailer's checksum value.
func signedTrailerRequest(t *testing.T, data []byte, crc string) []byte {
	t.Helper()
	return signedTrailerRequestSep(t, data, crc, "\r\n")
}

// signedTrailerRequestSep is signedTrailerRequest with sep between the
// checksum's value and the signature line: "\r\n" as AWS documents and
// its SDKs send, "\n\r\n" as minio-go does.
func signedTrailerRequestSep(t *testing.T, data []byte, crc, sep string) []byte {
	t.Helper()
	const chunk = 8192
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:9000/bucket/key", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
	req.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(len(data)))
	req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
	creds := aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "s3", "us-west-2", t0,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }); err != nil {
		t.Fatal(err)
	}
	_, seed, _ := strings.Cut(req.Header.Get("Authorization"), "Signature=")

	k := hmacSHA256([]byte("AWS4"+testSecret), t0.Format("20060102"))
	for _, s := range []string{"us-west-2", "s3", "aws4_request"} {
		k = hmacSHA256(k, s)
	}
	ts, scope := t0.Format("20060102T150405Z"), t0.Format("20060102")+"/us-west-2/s3/aws4_request"
	var body bytes.Buffer
	prev := seed
	for off := 0; ; off += chunk {
		c := data[min(off, len(data)):min(off+chunk, len(data))]
		prev = chunkSignature(k, ts, scope, prev, c)
		fmt.Fprintf(&body, "%x;chunk-signature=%s\r\n", len(c), prev)
		if len(c) == 0 {
			break
		}
		body.Write(c)
		body.WriteString("\r\n")
	}
	trailer := "x-amz-checksum-crc32c:" + crc + "\n"
	fmt.Fprintf(&body, "x-amz-checksum-crc32c:%s%sx-amz-trailer-signature:%s\r\n\r\n", crc, sep, trailerSignature(k, ts, scope, prev, trailer))
	req.Body = io.NopCloser(&body)
	req.ContentLength = int64(body.Len())
	return wire(t, req)
}

func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

func crc32c(b []byte) string {
	s := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return base64.StdEncoding.EncodeToString([]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)})
}

func TestSignedTrailer(t *testing.T) {
	data := randomBytes(20000, 1)
	good := crc32c(data)
	raw := signedTrailerRequest(t, data, good)

	res, err := verifier(t0, nil).Verify(serverRequest(t, raw))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.Payload != sigv4.StreamingTrailer || res.Length != int64(len(data)) {
		t.Fatalf("result %+v", res)
	}
	got, err := readSmall(res.Body)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}

	read := func(raw []byte) error {
		res, err := verifier(t0, nil).Verify(serverRequest(t, raw))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		_, err = readSmall(res.Body)
		return err
	}
	// The trailer's value changed after signing.
	bad := []byte(good)
	bad[0] ^= 1
	wantCode(t, read(tamper(t, raw, "crc32c:"+good, "crc32c:"+string(bad))), "SignatureDoesNotMatch")
	// A wrong checksum, correctly signed.
	wantCode(t, read(signedTrailerRequest(t, data, crc32c(data[1:]))), "BadDigest")
}

// minio-go ends its trailer lines with a bare LF and writes a CRLF
// before the signature line (signed) or the final CRLF (unsigned): both
// layouts read, and a wrong checksum or signature in them still fails;
// what follows a complete trailer is still refused.
func TestMinioTrailerLayout(t *testing.T) {
	data := randomBytes(20000, 2)
	read := func(raw []byte) error {
		t.Helper()
		res, err := verifier(t0, nil).Verify(serverRequest(t, raw))
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		got, err := readSmall(res.Body)
		if err == nil && !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, not the data", len(got))
		}
		return err
	}
	if err := read(signedTrailerRequestSep(t, data, crc32c(data), "\n\r\n")); err != nil {
		t.Fatalf("signed trailer as minio-go sends it: %v", err)
	}
	wantCode(t, read(signedTrailerRequestSep(t, data, crc32c(data[1:]), "\n\r\n")), "BadDigest")
	raw := signedTrailerRequestSep(t, data, crc32c(data), "\n\r\n")
	wantCode(t, read(tamper(t, raw, "x-amz-trailer-signature:", "x-amz-trailer-signaturX:")), "SignatureDoesNotMatch")
	if err := read(unsignedTrailerRequestEnd(t, data, "x-amz-checksum-crc32c", "x-amz-checksum-crc32c", crc32c(data), "\n\r\n\r\n")); err != nil {
		t.Fatalf("unsigned trailer as minio-go sends it: %v", err)
	}
	wantCode(t, read(unsignedTrailerRequestEnd(t, data, "x-amz-checksum-crc32c", "x-amz-checksum-crc32c", crc32c(data[1:]), "\n\r\n\r\n")), "BadDigest")
	wantCode(t, read(unsignedTrailerRequestEnd(t, data, "x-amz-checksum-crc32c", "x-amz-checksum-crc32c", crc32c(data), "\r\n\r\nmore")), "IncompleteBody")
}

// unsignedTrailerRequest is a STREAMING-UNSIGNED-PAYLOAD-TRAILER upload as
// aws-sdk-go-v2 sends it over TLS.
func unsignedTrailerRequest(t *testing.T, data []byte, crc string) []byte {
	t.Helper()
	return unsignedTrailerRequestWith(t, data, "x-amz-checksum-crc32c", "x-amz-checksum-crc32c", crc)
}

// unsignedTrailerRequestWith declares one trailer in x-amz-trailer and
// sends another (usually the same) with the value.
func unsignedTrailerRequestWith(t *testing.T, data []byte, declared, trailer, value string) []byte {
	t.Helper()
	return unsignedTrailerRequestEnd(t, data, declared, trailer, value, "\r\n\r\n")
}

// unsignedTrailerRequestEnd is unsignedTrailerRequestWith with end after
// the trailer's value: "\r\n\r\n" as AWS documents and its SDKs send,
// "\n\r\n\r\n" as minio-go does.
func unsignedTrailerRequestEnd(t *testing.T, data []byte, declared, trailer, value, end string) []byte {
	t.Helper()
	var body bytes.Buffer
	for off := 0; off < len(data); off += 1000 {
		c := data[off:min(off+1000, len(data))]
		fmt.Fprintf(&body, "%x\r\n%s\r\n", len(c), c)
	}
	fmt.Fprintf(&body, "0\r\n%s:%s%s", trailer, value, end)
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:9000/bucket/key", &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
	req.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(len(data)))
	req.Header.Set("X-Amz-Trailer", declared)
	creds := aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "s3", "us-east-1", t0,
		func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }); err != nil {
		t.Fatal(err)
	}
	return wire(t, req)
}

func TestUnsignedTrailer(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 350)
	raw := unsignedTrailerRequest(t, data, crc32c(data))
	res, err := verifier(t0, nil).Verify(serverRequest(t, raw))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if res.Payload != sigv4.StreamingUnsigned {
		t.Fatalf("payload %v", res.Payload)
	}
	if got, err := readSmall(res.Body); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}

	flipped := bytes.Clone(raw)
	flipped[bytes.Index(raw, []byte("\r\n\r\n"))+4+len("3e8\r\n")+10] ^= 1
	res, err = verifier(t0, nil).Verify(serverRequest(t, flipped))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	_, err = readSmall(res.Body)
	wantCode(t, err, "BadDigest")
}

// Every trailer checksum S3 knows, against the standard check values of
// "123456789".
func TestTrailerChecksums(t *testing.T) {
	data := []byte("123456789")
	be := func(v uint64, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[n-1-i] = byte(v >> (8 * i))
		}
		return base64.StdEncoding.EncodeToString(b)
	}
	sha1sum := func() string { s := sha1.Sum(data); return base64.StdEncoding.EncodeToString(s[:]) }()
	sha256sum := func() string { s := sha256.Sum256(data); return base64.StdEncoding.EncodeToString(s[:]) }()
	for _, tc := range []struct{ trailer, value string }{
		{"x-amz-checksum-crc32", be(0xCBF43926, 4)},
		{"x-amz-checksum-crc32c", be(0xE3069283, 4)},
		{"x-amz-checksum-crc64nvme", be(0xAE8B14860A799888, 8)},
		{"x-amz-checksum-sha1", sha1sum},
		{"x-amz-checksum-sha256", sha256sum},
	} {
		for _, good := range []bool{true, false} {
			value := tc.value
			if !good {
				value = tc.value[:2] + string(tc.value[2]^1) + tc.value[3:]
			}
			res, err := verifier(t0, nil).Verify(serverRequest(t, unsignedTrailerRequestWith(t, data, tc.trailer, tc.trailer, value)))
			if err != nil {
				t.Fatalf("%s: Verify: %v", tc.trailer, err)
			}
			got, err := io.ReadAll(res.Body)
			if good && (err != nil || !bytes.Equal(got, data)) {
				t.Errorf("%s: read %q, %v", tc.trailer, got, err)
			}
			if !good {
				wantCode(t, err, "BadDigest")
			}
		}
	}

	// A declared trailer that never comes.
	raw := unsignedTrailerRequestWith(t, data, "x-amz-checksum-sha1", "x-amz-checksum-crc32", be(0xCBF43926, 4))
	res, err := verifier(t0, nil).Verify(serverRequest(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(res.Body)
	wantCode(t, err, "IncompleteBody")
}

// s3Server is the least of an S3 server: PutObject and GetObject on a map,
// every request verified. It records the payload mode of each request.
type s3Server struct {
	v sigv4.Verifier

	onPut func(sigv4.Payload)

	mu      sync.Mutex
	objects map[string][]byte
	modes   []string // "METHOD path mode"
}

func newS3Server() *s3Server {
	s := &s3Server{objects: make(map[string][]byte)}
	s.v.Secret = func(id string) (string, bool) { return testSecret, id == testKey }
	return s
}

func (s *s3Server) fail(w http.ResponseWriter, err error) {
	var e *sigv4.Error
	if !errors.As(err, &e) {
		e = &sigv4.Error{Code: "InternalError", Status: http.StatusInternalServerError, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, e.Code, e.Message)
}

func (s *s3Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := s.v.Verify(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	mode := r.Method + " " + res.Payload.String()
	if v := r.Header.Get("X-Amz-Trailer"); v != "" {
		mode += ", trailer " + v
	}
	s.mu.Lock()
	s.modes = append(s.modes, mode)
	s.mu.Unlock()
	key := r.URL.Path
	switch r.Method {
	case http.MethodPut:
		if s.onPut != nil {
			s.onPut(res.Payload)
		}
		data, err := io.ReadAll(res.Body)
		if err != nil {
			s.fail(w, err)
			return
		}
		if res.Length >= 0 && int64(len(data)) != res.Length {
			s.fail(w, fmt.Errorf("read %d bytes, length %d", len(data), res.Length))
			return
		}
		s.mu.Lock()
		s.objects[key] = data
		s.mu.Unlock()
		sum := md5.Sum(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case http.MethodGet:
		s.mu.Lock()
		data, ok := s.objects[key]
		s.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		sum := md5.Sum(data)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *s3Server) takeModes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.modes
	s.modes = nil
	return m
}

// onlyReader hides every method but Read: a non-seekable body.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestSDKEndToEnd(t *testing.T) {
	used := make(map[sigv4.Payload]bool) // by PutObject
	for _, tc := range []struct {
		name     string
		tls      bool
		checksum aws.RequestChecksumCalculation
	}{
		{"http", false, aws.RequestChecksumCalculationWhenSupported},
		{"https", true, aws.RequestChecksumCalculationWhenSupported},
		{"http-checksum-when-required", false, aws.RequestChecksumCalculationWhenRequired},
		{"https-checksum-when-required", true, aws.RequestChecksumCalculationWhenRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newS3Server()
			var srv *httptest.Server
			if tc.tls {
				srv = httptest.NewTLSServer(s)
			} else {
				srv = httptest.NewServer(s)
			}
			defer srv.Close()

			// As config.LoadDefaultConfig would make it, minus everything
			// that reaches for AWS (credential chain, IMDS, endpoints).
			s.onPut = func(p sigv4.Payload) { used[p] = true }
			options := s3.Options{
				Region:                     "us-east-1",
				Credentials:                credentials.NewStaticCredentialsProvider(testKey, testSecret, ""),
				BaseEndpoint:               aws.String(srv.URL),
				UsePathStyle:               true,
				HTTPClient:                 srv.Client(),
				Retryer:                    aws.NopRetryer{},
				Logger:                     logging.Nop{},
				RequestChecksumCalculation: tc.checksum,
				ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
				DisableLogOutputChecksumValidationSkipped: true,
			}
			client := s3.New(options)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			for _, size := range []int{0, 100, 3 << 20} {
				data := randomBytes(size, byte(size))
				for _, seekable := range []bool{true, false} {
					name := fmt.Sprintf("%d bytes, seekable=%v", size, seekable)
					key := fmt.Sprintf("dir/a b+ü %d %v.bin", size, seekable)
					var body io.Reader = bytes.NewReader(data)
					if !seekable {
						body = onlyReader{bytes.NewReader(data)}
					}
					_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key), Body: body})
					put := s.takeModes()
					if err != nil && !seekable && !tc.tls && len(put) == 0 {
						// Over plain HTTP the SDK signs the payload's sha256,
						// and refuses a body it cannot rewind before sending
						// anything.
						t.Logf("%s: PutObject refused by the SDK before sending: %v", name, err)
						continue
					}
					if err != nil {
						t.Fatalf("%s: PutObject: %v", name, err)
					}
					out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key)})
					if err != nil {
						t.Fatalf("%s: GetObject: %v", name, err)
					}
					got, err := io.ReadAll(out.Body)
					out.Body.Close()
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("%s: GetObject returned %d bytes (%v), want the %d put", name, len(got), err, size)
					}
					t.Logf("%s: %v, then %v", name, put, s.takeModes())
				}
			}

			// The wrong secret: the S3 error reaches the SDK.
			wrong := options.Copy()
			wrong.Credentials = credentials.NewStaticCredentialsProvider(testKey, "not the secret", "")
			_, err := s3.New(wrong).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k"), Body: bytes.NewReader([]byte("x"))})
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "SignatureDoesNotMatch" {
				t.Fatalf("PutObject with the wrong secret: %v", err)
			}
			s.takeModes()

			// A presigned GET, fetched with net/http.
			const key = "dir/presigned ü+.txt"
			want := []byte("presigned content")
			if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key), Body: bytes.NewReader(want)}); err != nil {
				t.Fatal(err)
			}
			ps, err := s3.NewPresignClient(client).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key)},
				s3.WithPresignExpires(5*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			req, err := http.NewRequestWithContext(ctx, ps.Method, ps.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, vs := range ps.SignedHeader {
				if !strings.EqualFold(k, "Host") {
					req.Header[k] = vs
				}
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
				t.Fatalf("presigned GET %s: %s %q %v", ps.URL, resp.Status, got, err)
			}
			s.takeModes()

			// And a tampered one is refused.
			req2, _ := http.NewRequestWithContext(ctx, ps.Method, strings.Replace(ps.URL, "X-Amz-Expires=300", "X-Amz-Expires=301", 1), nil)
			resp, err = srv.Client().Do(req2)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("tampered presigned GET: %s", resp.Status)
			}
		})
	}
	// Whatever the SDK changes in its defaults, these are the modes it
	// uses today, and each must have been exercised.
	for _, p := range []sigv4.Payload{sigv4.Signed, sigv4.Unsigned, sigv4.StreamingUnsigned} {
		if !used[p] {
			t.Errorf("no PutObject used %v", p)
		}
	}
}
