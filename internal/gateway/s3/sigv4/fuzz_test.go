package sigv4

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	fuzzKeyID  = "AKIDQUILTFUZZ"
	fuzzSecret = "qu1lt/Fuzz+Secret/0123456789abcdef"
)

var fuzzT0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// fuzzWire is a request as a client sends it, signed by aws-sdk-go-v2
// (presigned if presign, with headers hdr and the given payload hash).
func fuzzWire(f testing.TB, method, target string, body []byte, payload string, hdr map[string]string, presign bool) []byte {
	req, err := http.NewRequest(method, "http://127.0.0.1:9000"+target, bytes.NewReader(body))
	if err != nil {
		f.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	creds := aws.Credentials{AccessKeyID: fuzzKeyID, SecretAccessKey: fuzzSecret}
	opt := func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }
	if presign {
		u, signed, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, payload, "s3", "us-east-1", fuzzT0, opt)
		if err != nil {
			f.Fatal(err)
		}
		if req, err = http.NewRequest(method, u, bytes.NewReader(body)); err != nil {
			f.Fatal(err)
		}
		for k, vs := range signed {
			if !strings.EqualFold(k, "Host") {
				req.Header[k] = vs
			}
		}
	} else {
		req.Header.Set("X-Amz-Content-Sha256", payload)
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payload, "s3", "us-east-1", fuzzT0, opt); err != nil {
			f.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}

// fuzzUnsignedChunked is data as an aws-chunked body of unsigned chunks of
// chunk bytes, with a crc32c trailer.
func fuzzUnsignedChunked(data []byte, chunk int) []byte {
	var b bytes.Buffer
	for off := 0; off < len(data); off += chunk {
		c := data[off:min(off+chunk, len(data))]
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(c), c)
	}
	s := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	fmt.Fprintf(&b, "0\r\nx-amz-checksum-crc32c:%s\r\n\r\n",
		base64.StdEncoding.EncodeToString([]byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}))
	return b.Bytes()
}

// fuzzSignedChunked is data as an aws-chunked body of signed chunks of
// chunk bytes, chained from seed, signed with the package's own
// functions (the signature tests check those against the AWS SDKs).
func fuzzSignedChunked(key []byte, head, seed string, data []byte, chunk int) []byte {
	var b bytes.Buffer
	prev := seed
	for off := 0; ; off += chunk {
		c := data[min(off, len(data)):min(off+chunk, len(data))]
		prev = sign(key, chunkAlgorithm+"\n"+head+prev+"\n"+emptySHA256+"\n"+hexSHA256(c))
		fmt.Fprintf(&b, "%x;chunk-signature=%s\r\n", len(c), prev)
		if len(c) == 0 {
			break
		}
		b.Write(c)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// fuzzErr fails unless err is nil, io.EOF, ErrAnonymous or an *Error:
// what Verify and Result.Body promise.
func fuzzErr(t *testing.T, what string, err error) {
	var e *Error
	if err != nil && err != io.EOF && !errors.Is(err, ErrAnonymous) && !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T) is not an *Error", what, err, err)
	}
}

// fuzzVerifySeeds are requests that verify, and whose bodies read
// without error, one of each kind.
func fuzzVerifySeeds(f testing.TB) [][]byte {
	body := []byte("the quick brown fox jumps over the lazy dog")
	data := bytes.Repeat([]byte("0123456789"), 50)
	return [][]byte{
		fuzzWire(f, "PUT", "/bucket/a%20b?x=1&y", body, hexSHA256(body), map[string]string{"X-Amz-Meta-Color": " deep  blue "}, false),
		fuzzWire(f, "GET", "/bucket/key", nil, unsignedPayload, nil, false),
		fuzzWire(f, "GET", "/bucket/key?X-Amz-Expires=300&versionId=3%2F4+5", nil, unsignedPayload, nil, true),
		fuzzWire(f, "PUT", "/bucket/key", fuzzUnsignedChunked(data, 100), streamingUnsignedTrailer, map[string]string{
			"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": fmt.Sprint(len(data)), "X-Amz-Trailer": "x-amz-checksum-crc32c"}, false),
		fuzzV2Wire(f, "PUT /bucket/a%20b?uploadId=u&partNumber=2&x=1 HTTP/1.1\r\nHost: a\r\nDate: "+fuzzT0.Format(http.TimeFormat)+
			"\r\nContent-Type: text/plain\r\nX-Amz-Meta-Color:  blue \r\nContent-Length: 43\r\n", body, false),
		fuzzV2Wire(f, "GET /bucket/key?versionId=3&AWSAccessKeyId="+fuzzKeyID+"&Expires="+fmt.Sprint(fuzzT0.Unix()+60)+" HTTP/1.1\r\nHost: a\r\n", nil, true),
	}
}

// fuzzV2Wire signs a request's head with Signature V2 (in the header, or
// presigned: its query has AWSAccessKeyId and Expires) and returns it
// with the body.
func fuzzV2Wire(f testing.TB, head string, body []byte, presign bool) []byte {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head + "\r\n")))
	if err != nil {
		f.Fatal(err)
	}
	sig := base64.StdEncoding.EncodeToString(v2Sign(fuzzSecret, StringToSignV2(r, "", presign)))
	if presign {
		line, rest, _ := strings.Cut(head, " HTTP/1.1")
		return append([]byte(line+"&Signature="+url.QueryEscape(sig)+" HTTP/1.1"+rest+"\r\n"), body...)
	}
	return append([]byte(head+"Authorization: AWS "+fuzzKeyID+":"+sig+"\r\n\r\n"), body...)
}

func fuzzVerifier() *Verifier {
	return &Verifier{
		Secret: func(id string) (string, bool) { return fuzzSecret, id == fuzzKeyID },
		Now:    func() time.Time { return fuzzT0 },
	}
}

// TestFuzzVerifySeeds checks that FuzzVerify's seeds verify, so that the
// fuzzer starts from requests that reach the body.
func TestFuzzVerifySeeds(t *testing.T) {
	for i, raw := range fuzzVerifySeeds(t) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := fuzzVerifier().Verify(r)
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if _, err := io.ReadAll(res.Body); err != nil {
			t.Fatalf("seed %d: body: %v", i, err)
		}
	}
}

// FuzzVerify verifies requests as the gateway's HTTP server parses them
// from the wire, and reads their bodies: signed in the header or the
// query, with signed, unsigned and aws-chunked payloads.
func FuzzVerify(f *testing.F) {
	for _, raw := range fuzzVerifySeeds(f) {
		f.Add(raw)
	}
	f.Add([]byte("GET /bucket?AWSAccessKeyId=x&Signature=y HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: AWS4-HMAC-SHA256 Credential=a/b/c/s3/aws4_request\r\n\r\n"))
	v := fuzzVerifier()
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			return // the HTTP server answers 400 before the gateway sees it
		}
		res, err := v.Verify(r)
		fuzzErr(t, "Verify", err)
		if err != nil {
			return
		}
		out, err := io.ReadAll(io.LimitReader(res.Body, int64(len(raw))+1))
		fuzzErr(t, "reading the body", err)
		if len(out) > len(raw) {
			t.Fatalf("body of %d bytes decoded from a request of %d", len(out), len(raw))
		}
	})
}

// FuzzParseAuth parses the Authorization header and presigned query of a
// request, as Verify does before it checks anything.
func FuzzParseAuth(f *testing.F) {
	auth := func(raw []byte) (string, string, string) {
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			f.Fatal(err)
		}
		return r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date"), r.URL.RawQuery
	}
	for _, raw := range [][]byte{
		fuzzWire(f, "GET", "/bucket/key", nil, unsignedPayload, nil, false),
		fuzzWire(f, "PUT", "/b/k?uploadId=x&partNumber=2", nil, streamingPayload, map[string]string{"X-Amz-Trailer": "x-amz-checksum-sha256"}, false),
		fuzzWire(f, "GET", "/bucket/key?X-Amz-Expires=604800&a=%2F", nil, unsignedPayload, nil, true),
	} {
		a, d, q := auth(raw)
		f.Add(a, d, "", q)
	}
	f.Add("AWS4-HMAC-SHA256 Credential=k/20260314/r/s3/aws4_request, SignedHeaders=host;date, Signature=00", "", "Sat, 14 Mar 2026 15:09:26 GMT", "")
	f.Add("AWS4-HMAC-SHA256 Credential=/, SignedHeaders=;, Signature=", "x", "", "X-Amz-Algorithm=AWS4-HMAC-SHA256")
	f.Add("", "", "", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=k%2F20260314%2Fr%2Fs3%2Faws4_request&X-Amz-Date=20260314T150926Z&X-Amz-Expires=-1&X-Amz-SignedHeaders=host&X-Amz-Signature=0")
	f.Fuzz(func(t *testing.T, authorization, amzDate, date, rawQuery string) {
		r, err := http.NewRequest("GET", "http://127.0.0.1/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.URL.RawQuery = rawQuery
		for k, v := range map[string]string{"Authorization": authorization, "X-Amz-Date": amzDate, "Date": date, "X-Amz-Content-Sha256": unsignedPayload} {
			if v != "" {
				r.Header.Set(k, v)
			}
		}
		query := parseQuery(rawQuery)
		_ = canonicalQuery(query, "X-Amz-Signature")
		a, err := parseAuth(r, query)
		fuzzErr(t, "parseAuth", err)
		if err != nil {
			return
		}
		if a.accessKey == "" || a.scope.region == "" || a.scope.service != service || !slices.Contains(a.signed, "host") {
			t.Fatalf("parseAuth accepted %+v", a)
		}
		if a.scope.date != a.time.UTC().Format(yyyymmdd) {
			t.Fatalf("scope date %s for request time %v", a.scope.date, a.time)
		}
		if a.presigned && (a.expires < 0 || a.expires > MaxExpires) {
			t.Fatalf("presigned for %v", a.expires)
		}
	})
}

// FuzzChunked decodes aws-chunked bodies in the three streaming modes:
// the decoded bytes are never more than the body, every error is an
// *Error, and a body this test encodes decodes to what was encoded.
func FuzzChunked(f *testing.F) {
	sc := scope{date: fuzzT0.Format(yyyymmdd), region: "us-east-1", service: service}
	key := signingKey(fuzzSecret, sc)
	head := fuzzT0.Format(iso8601) + "\n" + sc.String() + "\n"
	const seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
	data := bytes.Repeat([]byte("abcdefghij"), 30)
	f.Add(fuzzUnsignedChunked(data, 64), uint8(2), int64(len(data)), "x-amz-checksum-crc32c")
	f.Add(fuzzUnsignedChunked(nil, 1), uint8(2), int64(-1), "x-amz-checksum-crc32c, x-amz-checksum-sha1")
	f.Add(fuzzSignedChunked(key, head, seed, data, 100), uint8(0), int64(len(data)), "")
	f.Add(fuzzSignedChunked(key, head, seed, nil, 100), uint8(0), int64(0), "")
	f.Add([]byte("ffffffffffffffff;chunk-signature=00\r\n"), uint8(0), int64(-1), "")
	f.Add([]byte("5\r\nabc\r\n0\r\n\r\n"), uint8(2), int64(-1), "")
	f.Fuzz(func(t *testing.T, body []byte, mode uint8, declared int64, trailers string) {
		payload := []string{streamingPayload, streamingPayloadTrailer, streamingUnsignedTrailer}[mode%3]
		decode := func(body []byte, declared int64) ([]byte, error) {
			r, err := http.NewRequest("PUT", "http://127.0.0.1/b/k", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if declared >= 0 {
				r.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(declared))
			}
			if trailers != "" {
				r.Header.Set("X-Amz-Trailer", trailers)
			}
			a := &auth{time: fuzzT0, scope: sc, signature: seed, payloadHash: payload}
			res, err := chunked(r, a, key, r.Body)
			if err != nil {
				return nil, err
			}
			return io.ReadAll(io.LimitReader(res.Body, int64(len(body))+1))
		}
		out, err := decode(body, declared)
		fuzzErr(t, "decoding", err)
		if len(out) > len(body) {
			t.Fatalf("%d bytes decoded from a body of %d", len(out), len(body))
		}
		if err == nil && declared >= 0 && int64(len(out)) != declared {
			t.Fatalf("%d bytes decoded, %d declared", len(out), declared)
		}

		// encode, then decode: the fuzzer's body as the data
		chunk := 1 + int(mode)
		var enc []byte
		switch payload {
		case streamingPayload:
			enc = fuzzSignedChunked(key, head, seed, body, chunk)
		case streamingUnsignedTrailer:
			if trailers != "x-amz-checksum-crc32c" {
				return
			}
			enc = fuzzUnsignedChunked(body, chunk)
		default:
			return
		}
		got, err := decode(enc, int64(len(body)))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("decoding what was encoded in %d-byte chunks: %d bytes, %v", chunk, len(got), err)
		}
	})
}
