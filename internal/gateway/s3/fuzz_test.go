package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// FuzzParseRange parses Range headers against objects of every size: a
// range that parses lies inside the object and is not empty, and one that
// getObject would honour (rangeSyntaxOK) is parsed as RFC 9110 says.
func FuzzParseRange(f *testing.F) {
	for _, h := range []string{"bytes=0-0", "bytes=0-", "bytes=-1", "bytes=5-9", "bytes=-500", "bytes=9-5",
		"bytes=0-1,3-4", "bytes=", "bytes=-", "bytes=-0", "bytes=+1-2", "items=0-1", "bytes=99999999999999999999-"} {
		f.Add(h, int64(10))
	}
	f.Add("bytes=0-", int64(0))
	f.Add("bytes=9223372036854775806-9223372036854775807", int64(1<<62))
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		syntaxOK := rangeSyntaxOK(h)
		off, n, err := parseRange(h, size)
		if err != nil {
			if err != errRange {
				t.Fatalf("parseRange(%q, %d): error %v, want errRange", h, size, err)
			}
			if sat, known := satisfiable(h, size); syntaxOK && size > 0 && known && sat {
				t.Fatalf("parseRange(%q, %d) refused a satisfiable range", h, size)
			}
			return
		}
		if off < 0 || n < 1 || off > size-n {
			t.Fatalf("parseRange(%q, %d) = %d, %d: not inside the object", h, size, off, n)
		}
		if sat, known := satisfiable(h, size); syntaxOK && known && !sat {
			t.Fatalf("parseRange(%q, %d) = %d, %d for an unsatisfiable range", h, size, off, n)
		}
	})
}

// satisfiable reports, as RFC 9110 section 14.1.2 does, whether a range
// of the syntax rangeSyntaxOK accepts selects any byte of size bytes.
// known is false for a position of more digits than an int64 holds: such
// a range is satisfiable by the RFC, and parseRange refuses it (416), a
// difference left as it is.
func satisfiable(h string, size int64) (sat, known bool) {
	a, b, _ := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if a == "" {
		k, err := strconv.ParseInt(b, 10, 64)
		return k > 0, err == nil
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return false, true // past any object
	}
	if start >= size {
		return false, true
	}
	if b == "" {
		return true, true
	}
	end, err := strconv.ParseInt(b, 10, 64)
	return end >= start, err == nil
}

// FuzzXMLBodies sends the XML request bodies the S3 API decodes
// (DeleteObjects, CompleteMultipartUpload) to a gateway on a 3-node
// in-process grid, through ServeHTTP with signed requests, as clients
// do. Whatever the body, the answer is 200 or a client error with an S3
// error document, never a 500.
func FuzzXMLBodies(f *testing.F) {
	g := testgrid.New(f, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: f.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { gw.Close() })
	key, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		f.Fatal(err)
	}
	srv := New(gw, Options{})
	do := func(t testing.TB, method, target string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:9000"+target, bytes.NewReader(body))
		r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		creds := aws.Credentials{AccessKeyID: key.ID, SecretAccessKey: key.Secret}
		if err := v4.NewSigner().SignHTTP(ctx, creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now(),
			func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	if w := do(f, "PUT", "/data", nil); w.Code != 200 {
		f.Fatalf("create bucket: %d %s", w.Code, w.Body)
	}
	for _, k := range []string{"a", "b/c", "d e"} {
		if w := do(f, "PUT", "/data/"+strings.ReplaceAll(k, " ", "%20"), []byte("x")); w.Code != 200 {
			f.Fatalf("put %s: %d %s", k, w.Code, w.Body)
		}
	}
	w := do(f, "POST", "/data/big?uploads", nil)
	var created struct{ UploadId string }
	if err := xml.Unmarshal(w.Body.Bytes(), &created); err != nil || w.Code != 200 {
		f.Fatalf("create upload: %d %s %v", w.Code, w.Body, err)
	}
	upload := "/data/big?uploadId=" + created.UploadId
	w = do(f, "PUT", "/data/big?partNumber=1&uploadId="+created.UploadId, []byte("part one"))
	if w.Code != 200 {
		f.Fatalf("upload part: %d %s", w.Code, w.Body)
	}
	etag := w.Header().Get("ETag")

	f.Add(false, []byte(`<Delete><Object><Key>a</Key></Object><Object><Key>b/c</Key></Object><Quiet>true</Quiet></Delete>`))
	f.Add(false, []byte(`<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>d e</Key></Object><Object><Key>nope</Key></Object></Delete>`))
	f.Add(false, []byte(`<Delete><Object><Key></Key></Object></Delete>`))
	f.Add(false, []byte(`<Delete><Object><Key>a`))
	// An ETag that is not the part's keeps the upload open for the fuzzer.
	f.Add(true, []byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"00"</ETag></Part></CompleteMultipartUpload>`))
	f.Add(true, []byte(`<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>`+etag+`</ETag></Part><Part><PartNumber>1</PartNumber><ETag>`+etag+`</ETag></Part></CompleteMultipartUpload>`))
	f.Add(true, []byte(`<CompleteMultipartUpload><Part><PartNumber>-1</PartNumber></Part></CompleteMultipartUpload>`))
	f.Add(true, []byte(`<CompleteMultipartUpload></CompleteMultipartUpload>`))
	f.Add(true, []byte(`<!DOCTYPE x [<!ENTITY a "aaaa">]><CompleteMultipartUpload>&a;</CompleteMultipartUpload>`))
	f.Fuzz(func(t *testing.T, complete bool, body []byte) {
		target := "/data?delete"
		if complete {
			target = upload
		}
		w := do(t, "POST", target, body)
		if w.Code >= 500 || w.Code != 200 && w.Code < 400 {
			t.Fatalf("POST %s: %d %s", target, w.Code, w.Body)
		}
		if w.Code == 200 {
			return
		}
		var e struct{ Code, Message string }
		if err := xml.NewDecoder(io.LimitReader(w.Body, 1<<20)).Decode(&e); err != nil || e.Code == "" {
			t.Fatalf("POST %s: %d with %q: %v", target, w.Code, w.Body, err)
		}
		if w.Code == http.StatusInternalServerError {
			t.Fatalf("POST %s: %s", target, e.Code)
		}
	})
}
