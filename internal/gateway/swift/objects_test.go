package swift_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
)

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// TestContainersAndObjects: containers are buckets; objects round-trip
// with their metadata, ranges and conditions, POST replaces metadata,
// copies (COPY and X-Copy-From), deletes; errors as Swift's.
func TestContainersAndObjects(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	resp, body := c.do(t, "PUT", "/photos", nil, "X-Container-Meta-Owner", "alice")
	want(t, "PUT container", resp, body, 201)
	resp, body = c.do(t, "PUT", "/photos", nil)
	want(t, "PUT container again", resp, body, 202)
	resp, body = c.do(t, "PUT", "/.hidden", nil)
	want(t, "PUT container with a bad name", resp, body, 400)
	resp, body = c.do(t, "PUT", "/"+strings.Repeat("x", 256), nil)
	want(t, "PUT container with a name too long", resp, body, 400)
	resp, body = c.do(t, "PUT", "/photos", nil, "X-Versions-Location", "old-photos")
	want(t, "versioned container", resp, body, 501)

	data := []byte("hello, swift")
	resp, body = c.do(t, "PUT", "/photos/a/b.txt", data, "X-Object-Meta-Color", "blue", "Content-Type", "text/plain", "ETag", md5hex(data))
	want(t, "PUT object", resp, body, 201)
	if resp.Header.Get("ETag") != md5hex(data) {
		t.Fatalf("ETag %q", resp.Header.Get("ETag"))
	}
	resp, body = c.do(t, "PUT", "/photos/bad", data, "ETag", md5hex([]byte("other")))
	want(t, "PUT with a wrong ETag", resp, body, 422)
	resp, body = c.do(t, "PUT", "/nope/x", data)
	want(t, "PUT into a missing container", resp, body, 404)

	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil)
	want(t, "GET", resp, body, 200)
	if !bytes.Equal(body, data) || resp.Header.Get("X-Object-Meta-Color") != "blue" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET: %q %v", body, resp.Header)
	}
	// The same object through the gateway (as S3 sees it): Swift's
	// metadata is S3's.
	info, err := e.gw.Head(context.Background(), "photos", "a/b.txt")
	if err != nil || info.Meta["color"] != "blue" || info.ETag != md5hex(data) {
		t.Fatalf("through the gateway: %+v %v", info, err)
	}
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil, "Range", "bytes=7-")
	want(t, "GET range", resp, body, 206)
	if string(body) != "swift" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 7-11/%d", len(data)) {
		t.Fatalf("range: %q %q", body, resp.Header.Get("Content-Range"))
	}
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil, "Range", "bytes=100-")
	want(t, "unsatisfiable range", resp, body, 416)
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil, "If-None-Match", md5hex(data))
	want(t, "If-None-Match", resp, body, 304)
	resp, body = c.do(t, "HEAD", "/photos/a/b.txt", nil, "If-Match", "nope")
	want(t, "If-Match", resp, body, 412)
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil, "If-Modified-Since", "Fri, 01 Jan 2100 00:00:00 GMT")
	want(t, "If-Modified-Since", resp, body, 304)
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil, "If-Unmodified-Since", "Fri, 01 Jan 2000 00:00:00 GMT")
	want(t, "If-Unmodified-Since", resp, body, 412)
	resp, body = c.do(t, "GET", "/photos/missing", nil)
	want(t, "GET a missing object", resp, body, 404)
	resp, body = c.do(t, "GET", "/nope/missing", nil)
	want(t, "GET in a missing container", resp, body, 404)
	resp, body = c.do(t, "PUT", "/photos/a/b.txt", data, "If-None-Match", "*")
	want(t, "If-None-Match: * on an existing object", resp, body, 412)

	// POST replaces the metadata, keeps the bytes.
	resp, body = c.do(t, "POST", "/photos/a/b.txt", nil, "X-Object-Meta-Shape", "round")
	want(t, "POST", resp, body, 202)
	resp, body = c.do(t, "GET", "/photos/a/b.txt", nil)
	if !bytes.Equal(body, data) || resp.Header.Get("X-Object-Meta-Shape") != "round" || resp.Header.Get("X-Object-Meta-Color") != "" {
		t.Fatalf("after POST: %q %v", body, resp.Header)
	}

	// Copies.
	resp, body = c.do(t, "PUT", "/photos/copy1", nil, "X-Copy-From", "/photos/a/b.txt", "X-Object-Meta-Extra", "1")
	want(t, "X-Copy-From", resp, body, 201)
	resp, body = c.do(t, "COPY", "/photos/a/b.txt", nil, "Destination", "photos/copy2")
	want(t, "COPY", resp, body, 201)
	for _, k := range []string{"copy1", "copy2"} {
		resp, body = c.do(t, "GET", "/photos/"+k, nil)
		if !bytes.Equal(body, data) || resp.Header.Get("X-Object-Meta-Shape") != "round" || resp.Header.Get("ETag") != md5hex(data) {
			t.Fatalf("%s: %q %v", k, body, resp.Header)
		}
	}
	if resp, _ := c.do(t, "HEAD", "/photos/copy1", nil); resp.Header.Get("X-Object-Meta-Extra") != "1" {
		t.Fatalf("copy1 lost the request's metadata")
	}
	resp, body = c.do(t, "COPY", "/photos/missing", nil, "Destination", "photos/copy3")
	want(t, "COPY of a missing object", resp, body, 404)

	// Container metadata and counts.
	resp, body = c.do(t, "POST", "/photos", nil, "X-Container-Meta-Kind", "pictures")
	want(t, "POST container", resp, body, 204)
	resp, body = c.do(t, "HEAD", "/photos", nil)
	want(t, "HEAD container", resp, body, 204)
	if resp.Header.Get("X-Container-Meta-Owner") != "alice" || resp.Header.Get("X-Container-Meta-Kind") != "pictures" ||
		resp.Header.Get("X-Container-Object-Count") != "3" || resp.Header.Get("X-Container-Bytes-Used") != fmt.Sprint(3*len(data)) {
		t.Fatalf("container headers %v", resp.Header)
	}
	resp, body = c.do(t, "POST", "/", nil, "X-Account-Meta-Team", "blue")
	want(t, "POST account", resp, body, 204)
	resp, body = c.do(t, "HEAD", "", nil)
	if resp.Header.Get("X-Account-Meta-Team") != "blue" || resp.Header.Get("X-Account-Container-Count") != "1" || resp.Header.Get("X-Account-Object-Count") != "3" {
		t.Fatalf("account headers %v", resp.Header)
	}

	// Deletes.
	resp, body = c.do(t, "DELETE", "/photos", nil)
	want(t, "DELETE a container that is not empty", resp, body, 409)
	for _, k := range []string{"a/b.txt", "copy1", "copy2"} {
		resp, body = c.do(t, "DELETE", "/photos/"+k, nil)
		want(t, "DELETE "+k, resp, body, 204)
	}
	resp, body = c.do(t, "DELETE", "/photos/copy1", nil)
	want(t, "DELETE again", resp, body, 404)
	resp, body = c.do(t, "DELETE", "/photos", nil)
	want(t, "DELETE container", resp, body, 204)
	resp, body = c.do(t, "HEAD", "/photos", nil)
	want(t, "HEAD a deleted container", resp, body, 404)
}

// TestS3ObjectsInSwift: an object put through the gateway as S3 does
// (x-amz-meta-*) shows through Swift with X-Object-Meta-*, and an S3
// multipart object shows its S3 ETag, quoted, marked a large object.
func TestS3ObjectsInSwift(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.gw.CreateBucket(ctx, "fromS3", e.admin.ID); err == nil {
		t.Fatal("bad bucket name accepted")
	}
	if err := e.gw.CreateBucket(ctx, "from-s3", e.admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.gw.Put(ctx, "from-s3", "k", strings.NewReader("abc"), 3, gateway.PutOptions{ContentType: "text/x", Meta: map[string]string{"who": "s3"}}); err != nil {
		t.Fatal(err)
	}
	u, err := e.gw.CreateUpload(ctx, "from-s3", "mp", gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := e.gw.PutPart(ctx, "from-s3", "mp", u.ID, 1, strings.NewReader("part one "), 9, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := e.gw.PutPart(ctx, "from-s3", "mp", u.ID, 2, strings.NewReader("part two"), 8, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mp, err := e.gw.CompleteUpload(ctx, "from-s3", "mp", u.ID, []gateway.PartRef{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.client(t)
	resp, body := c.do(t, "GET", "/from-s3/k", nil)
	if string(body) != "abc" || resp.Header.Get("X-Object-Meta-Who") != "s3" || resp.Header.Get("ETag") != md5hex([]byte("abc")) {
		t.Fatalf("S3 object through Swift: %q %v", body, resp.Header)
	}
	resp, body = c.do(t, "GET", "/from-s3/mp", nil)
	if string(body) != "part one part two" || resp.Header.Get("ETag") != `"`+mp.ETag+`"` || resp.Header.Get("X-Static-Large-Object") != "True" {
		t.Fatalf("multipart object through Swift: %q %v", body, resp.Header)
	}
	resp, body = c.do(t, "GET", "/from-s3/mp?multipart-manifest=get", nil)
	if string(body) != "[]" {
		t.Fatalf("manifest of a multipart object: %s %q", resp.Status, body)
	}
}

// TestContainerNames: Swift's container names outside S3's bucket rules
// (CONTAINER_segments, upper case) are containers, read through S3
// path-style as any bucket, while S3 still refuses to make them.
func TestContainerNames(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	ctx := context.Background()
	for _, name := range []string{"Photos_segments", "swift_bench_0", "A"} {
		resp, body := c.do(t, "PUT", "/"+name, nil)
		want(t, "PUT container "+name, resp, body, 201)
		resp, body = c.do(t, "PUT", "/"+name+"/seg/00000001", []byte("part of "+name))
		want(t, "PUT object into "+name, resp, body, 201)
		resp, body = c.do(t, "GET", "/"+name+"?format=json", nil)
		want(t, "list "+name, resp, body, 200)
		if !strings.Contains(string(body), `"name":"seg/00000001"`) {
			t.Fatalf("listing of %s: %s", name, body)
		}
		var b bytes.Buffer
		if _, err := e.gw.Get(ctx, name, "seg/00000001", &b, 0, -1); err != nil || b.String() != "part of "+name {
			t.Fatalf("%s through the gateway: %q %v", name, b.String(), err)
		}
		if err := e.gw.CreateBucket(ctx, name+"x", e.admin.ID); !errors.Is(err, gateway.ErrBadBucket) {
			t.Errorf("S3 made bucket %sx: %v", name, err)
		}
	}
}

// TestListings: plain, JSON and XML listings with prefix, delimiter,
// marker, end_marker, limit, reverse and path.
func TestListings(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	resp, body := c.do(t, "PUT", "/list", nil)
	want(t, "PUT container", resp, body, 201)
	resp, body = c.do(t, "GET", "/list", nil)
	want(t, "empty plain listing", resp, body, 204)
	resp, body = c.do(t, "GET", "/list?format=json", nil)
	if resp.StatusCode != 200 || string(body) != "[]" {
		t.Fatalf("empty JSON listing: %s %q", resp.Status, body)
	}
	keys := []string{"a", "b/1", "b/2", "b/c/3", "d"}
	for _, k := range keys {
		resp, body := c.do(t, "PUT", "/list/"+k, []byte(k), "Content-Type", "text/plain")
		want(t, "PUT "+k, resp, body, 201)
	}
	plain := func(q string) string {
		t.Helper()
		resp, body := c.do(t, "GET", "/list"+q, nil)
		if resp.StatusCode != 200 && resp.StatusCode != 204 {
			t.Fatalf("GET %s: %s %s", q, resp.Status, body)
		}
		return strings.TrimSpace(strings.ReplaceAll(string(body), "\n", " "))
	}
	for q, w := range map[string]string{
		"":                         "a b/1 b/2 b/c/3 d",
		"?prefix=b/":               "b/1 b/2 b/c/3",
		"?delimiter=/":             "a b/ d",
		"?prefix=b/&delimiter=/":   "b/1 b/2 b/c/",
		"?marker=b/1":              "b/2 b/c/3 d",
		"?end_marker=b/2":          "a b/1",
		"?limit=2":                 "a b/1",
		"?marker=a&limit=2":        "b/1 b/2",
		"?reverse=true":            "d b/c/3 b/2 b/1 a",
		"?reverse=true&marker=b/2": "b/1 a",
		"?reverse=true&limit=2":    "d b/c/3",
		"?path=b":                  "b/1 b/2",
	} {
		if got := plain(q); got != w {
			t.Errorf("listing %q: %q, want %q", q, got, w)
		}
	}
	resp, body = c.do(t, "GET", "/list?format=json&delimiter=/", nil)
	var js []map[string]any
	if err := json.Unmarshal(body, &js); err != nil || len(js) != 3 || js[0]["name"] != "a" || js[0]["hash"] != md5hex([]byte("a")) ||
		js[0]["bytes"] != 1.0 || js[0]["content_type"] != "text/plain" || js[1]["subdir"] != "b/" {
		t.Fatalf("JSON listing: %s %v", body, err)
	}
	resp, body = c.do(t, "GET", "/list?delimiter=/", nil, "Accept", "application/xml")
	var x struct {
		Name    string `xml:"name,attr"`
		Objects []struct {
			Name string `xml:"name"`
			Hash string `xml:"hash"`
		} `xml:"object"`
		Subdirs []struct {
			Name string `xml:"name,attr"`
		} `xml:"subdir"`
	}
	if err := xml.Unmarshal(body, &x); err != nil || x.Name != "list" || len(x.Objects) != 2 || x.Objects[1].Name != "d" || len(x.Subdirs) != 1 || x.Subdirs[0].Name != "b/" {
		t.Fatalf("XML listing: %s %v %+v", body, err, x)
	}
	resp, body = c.do(t, "GET", "/list?limit=10001", nil)
	want(t, "limit over the maximum", resp, body, 412)
	resp, body = c.do(t, "GET", "?format=json", nil)
	js = nil
	if err := json.Unmarshal(body, &js); err != nil || len(js) != 1 || js[0]["name"] != "list" || js[0]["count"] != 5.0 {
		t.Fatalf("account listing: %s %v", body, err)
	}
	resp, body = c.do(t, "GET", "/missing", nil)
	want(t, "listing a missing container", resp, body, 404)
}

// TestLargeObjects: a dynamic large object (X-Object-Manifest) and a
// static one (multipart-manifest=put) read as their segments
// concatenated, with ranges; the SLO's manifest comes back with
// multipart-manifest=get and goes with its segments on
// multipart-manifest=delete; manifests naming missing segments or the
// wrong ETag are refused.
func TestLargeObjects(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	for _, ct := range []string{"/big", "/big-segments"} {
		resp, body := c.do(t, "PUT", ct, nil)
		want(t, "PUT "+ct, resp, body, 201)
	}
	segs := []string{"first segment, ", "second segment, ", "third"}
	whole := strings.Join(segs, "")
	var manifest []map[string]any
	sum := md5.New()
	for i, s := range segs {
		k := fmt.Sprintf("/big-segments/obj/%08d", i)
		resp, body := c.do(t, "PUT", k, []byte(s))
		want(t, "PUT segment", resp, body, 201)
		manifest = append(manifest, map[string]any{"path": k, "etag": md5hex([]byte(s)), "size_bytes": len(s)})
		sum.Write([]byte(md5hex([]byte(s))))
	}
	resp, body := c.do(t, "PUT", "/big/dlo", nil, "X-Object-Manifest", "big-segments/obj/")
	want(t, "PUT DLO", resp, body, 201)
	resp, body = c.do(t, "GET", "/big/dlo", nil)
	if string(body) != whole || resp.Header.Get("ETag") != `"`+hex.EncodeToString(sum.Sum(nil))+`"` || resp.Header.Get("X-Object-Manifest") != "big-segments/obj/" {
		t.Fatalf("DLO: %s %q %v", resp.Status, body, resp.Header)
	}
	resp, body = c.do(t, "GET", "/big/dlo", nil, "Range", "bytes=10-20")
	if resp.StatusCode != 206 || string(body) != whole[10:21] {
		t.Fatalf("DLO range: %s %q", resp.Status, body)
	}
	mj, _ := json.Marshal(manifest)
	resp, body = c.do(t, "PUT", "/big/slo?multipart-manifest=put", mj)
	want(t, "PUT SLO", resp, body, 201)
	resp, body = c.do(t, "GET", "/big/slo", nil)
	if string(body) != whole || resp.Header.Get("X-Static-Large-Object") != "True" || resp.Header.Get("Content-Length") != fmt.Sprint(len(whole)) {
		t.Fatalf("SLO: %s %q %v", resp.Status, body, resp.Header)
	}
	resp, body = c.do(t, "GET", "/big/slo", nil, "Range", "bytes=-7")
	if resp.StatusCode != 206 || string(body) != whole[len(whole)-7:] {
		t.Fatalf("SLO suffix range: %s %q", resp.Status, body)
	}
	resp, body = c.do(t, "GET", "/big/slo?multipart-manifest=get", nil)
	var stored []map[string]any
	if err := json.Unmarshal(body, &stored); err != nil || len(stored) != 3 || stored[1]["name"] != "/big-segments/obj/00000001" {
		t.Fatalf("manifest: %s %v", body, err)
	}
	resp, body = c.do(t, "GET", "/big?format=json", nil)
	var js []map[string]any
	json.Unmarshal(body, &js)
	if len(js) != 2 || js[1]["name"] != "slo" || js[1]["bytes"] != float64(len(whole)) {
		t.Fatalf("listing with an SLO: %s", body)
	}

	bad := []map[string]any{{"path": "/big-segments/none", "size_bytes": 1}}
	mj, _ = json.Marshal(bad)
	resp, body = c.do(t, "PUT", "/big/bad?multipart-manifest=put", mj)
	want(t, "SLO with a missing segment", resp, body, 400)
	bad = []map[string]any{{"path": "/big-segments/obj/00000000", "etag": md5hex([]byte("x"))}}
	mj, _ = json.Marshal(bad)
	resp, body = c.do(t, "PUT", "/big/bad?multipart-manifest=put", mj)
	want(t, "SLO with a wrong ETag", resp, body, 400)
	resp, body = c.do(t, "PUT", "/big/bad?multipart-manifest=put", []byte("not json"))
	want(t, "SLO that is not JSON", resp, body, 400)

	resp, body = c.do(t, "DELETE", "/big/slo?multipart-manifest=delete", nil, "Accept", "application/json")
	want(t, "DELETE SLO with its segments", resp, body, 200)
	var res map[string]any
	if json.Unmarshal(body, &res); res["Number Deleted"] != 4.0 {
		t.Fatalf("delete: %s", body)
	}
	resp, body = c.do(t, "GET", "/big-segments", nil)
	want(t, "segments gone", resp, body, 204)
	// The DLO has no segments left: it reads empty.
	resp, body = c.do(t, "GET", "/big/dlo", nil)
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("DLO without segments: %s %q", resp.Status, body)
	}
}

// TestInfoAndHealth: /info announces what is supported and leaves out
// what is not; /healthcheck answers OK without a token; unsupported
// requests are 501.
func TestInfoAndHealth(t *testing.T) {
	e := newEnv(t)
	resp, body := e.do(t, "GET", "/info", nil)
	var info map[string]any
	if err := json.Unmarshal(body, &info); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/info: %s %v", resp.Status, err)
	}
	for _, k := range []string{"swift", "slo", "dlo", "tempauth", "bulk_delete", "bulk_upload", "tempurl"} {
		if info[k] == nil {
			t.Errorf("/info lacks %s", k)
		}
	}
	for _, k := range []string{"versioned_writes", "formpost", "symlink"} {
		if info[k] != nil {
			t.Errorf("/info announces %s", k)
		}
	}
	resp, body = e.do(t, "GET", "/healthcheck", nil)
	if resp.StatusCode != 200 || string(body) != "OK" {
		t.Fatalf("/healthcheck: %s %q", resp.Status, body)
	}
	c := e.client(t)
	resp, body = c.do(t, "POST", "/nope", nil, "X-Container-Sync-To", "//elsewhere")
	want(t, "container sync", resp, body, 501)
	if resp.Header.Get("X-Trans-Id") == "" {
		t.Error("no X-Trans-Id")
	}
	resp, body = c.do(t, "PUT", "", nil)
	want(t, "PUT account", resp, body, http.StatusMethodNotAllowed)
}
