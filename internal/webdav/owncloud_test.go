package webdav_test

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/adler32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/webdav"
)

// req does a request to an absolute path of the server as user (no
// credentials when user is "") and returns the status, the header and
// the body.
func (f *fixture) req(t *testing.T, method, path, user, pw, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	rq, err := http.NewRequestWithContext(ctxT(t), method, f.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		rq.SetBasicAuth(user, pw)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		rq.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(rq)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// must is req that fails the test unless the status is want.
func (f *fixture) must(t *testing.T, want int, method, path, user, pw, body string, hdr ...string) (http.Header, string) {
	t.Helper()
	st, h, b := f.req(t, method, path, user, pw, body, hdr...)
	if st != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, st, want, b)
	}
	return h, b
}

// TestOwnCloudStatusAndOCS: status.php without a login; the OCS
// capabilities and user in JSON and XML, versions 1 and 2, behind the
// login; unknown calls and formats refused.
func TestOwnCloudStatusAndOCS(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "alice-files", "a")
	_, b := f.must(t, 200, "GET", "/status.php", "", "", "")
	var st map[string]any
	if err := json.Unmarshal([]byte(b), &st); err != nil {
		t.Fatal(err)
	}
	if st["installed"] != true || st["maintenance"] != false || st["versionstring"] != webdav.ServerVersion || st["productname"] != "Quilt" {
		t.Fatalf("status.php: %v", st)
	}
	f.must(t, http.StatusMethodNotAllowed, "POST", "/status.php", "", "", "x")

	// Capabilities, JSON, version 1 and 2.
	for v, code := range map[string]float64{"v1": 100, "v2": 200} {
		_, b = f.must(t, 200, "GET", "/ocs/"+v+".php/cloud/capabilities?format=json", "alice", "a", "")
		var caps struct {
			OCS struct {
				Meta struct {
					Status     string
					Statuscode float64
				}
				Data struct {
					Capabilities struct {
						Dav   struct{ Chunking string }
						Files struct {
							Bigfilechunking bool
						}
						Checksums struct{ SupportedTypes []string }
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(b), &caps); err != nil {
			t.Fatal(err)
		}
		c := caps.OCS.Data.Capabilities
		if caps.OCS.Meta.Status != "ok" || caps.OCS.Meta.Statuscode != code || c.Dav.Chunking != "1.0" || !c.Files.Bigfilechunking || len(c.Checksums.SupportedTypes) == 0 {
			t.Fatalf("%s capabilities: %s", v, b)
		}
	}
	// XML (the default), version 2.
	h, b := f.must(t, 200, "GET", "/ocs/v2.php/cloud/capabilities", "alice", "a", "")
	var x struct {
		XMLName xml.Name `xml:"ocs"`
		Meta    struct {
			Statuscode int `xml:"statuscode"`
		} `xml:"meta"`
		Chunking string `xml:"data>capabilities>dav>chunking"`
	}
	if err := xml.Unmarshal([]byte(b), &x); err != nil || x.Meta.Statuscode != 200 || x.Chunking != "1.0" || !strings.Contains(h.Get("Content-Type"), "xml") {
		t.Fatalf("XML capabilities (%v): %s", err, b)
	}
	// The user.
	_, b = f.must(t, 200, "GET", "/ocs/v1.php/cloud/user?format=json", "alice", "a", "")
	if !strings.Contains(b, `"id":"alice"`) {
		t.Fatalf("user: %s", b)
	}
	_, b = f.must(t, 200, "GET", "/ocs/v2.php/cloud/user", "alice", "a", "")
	if !strings.Contains(b, "<id>alice</id>") {
		t.Fatalf("XML user: %s", b)
	}
	// Failures: no login, a wrong password, an unknown call, an unknown
	// format, a write.
	if st, h, _ := f.req(t, "GET", "/ocs/v1.php/cloud/user?format=json", "", "", ""); st != 401 || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("OCS without a login: %d", st)
	}
	f.must(t, 401, "GET", "/ocs/v1.php/cloud/capabilities", "alice", "b", "")
	f.must(t, 404, "GET", "/ocs/v2.php/cloud/users/bob?format=json", "alice", "a", "")
	_, b = f.must(t, 200, "GET", "/ocs/v1.php/apps/files_sharing/api/v1/shares?format=json", "alice", "a", "") // v1: 200, the code in meta
	if !strings.Contains(b, `"statuscode":998`) {
		t.Fatalf("v1 unknown call: %s", b)
	}
	f.must(t, 404, "GET", "/ocs/v3.php/cloud/user", "alice", "a", "")
	f.must(t, 400, "GET", "/ocs/v2.php/cloud/user?format=yaml", "alice", "a", "")
	f.must(t, 405, "POST", "/ocs/v2.php/cloud/user", "alice", "a", "x")
	f.must(t, 404, "GET", "/index.php", "alice", "a", "")
}

// TestOwnCloudURLs: /remote.php/dav/files/USER/ and /remote.php/webdav/
// are the same tree as /dav/USER/, with the same confinement: another
// user's files path, a Destination into another user's tree (in any of
// the spellings) and dot elements are refused.
func TestOwnCloudURLs(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "alice-files", "a")
	f.addUser(t, "bob", "bob-files", "b")
	f.must(t, 201, "PUT", "/remote.php/dav/files/alice/one.txt", "alice", "a", "one")
	f.must(t, 201, "PUT", "/remote.php/webdav/two.txt", "alice", "a", "two")
	f.must(t, 201, "PUT", "/dav/bob/bobs.txt", "bob", "b", "bob's")
	for _, p := range []string{"/dav/alice/one.txt", "/remote.php/webdav/one.txt", "/remote.php/dav/files/alice/one.txt"} {
		if _, b := f.must(t, 200, "GET", p, "alice", "a", ""); b != "one" {
			t.Fatalf("%s: %q", p, b)
		}
	}
	if _, b := f.must(t, 200, "GET", "/dav/alice/two.txt", "alice", "a", ""); b != "two" {
		t.Fatalf("two: %q", b)
	}
	// Bob's legacy URL is bob's tree.
	if _, b := f.must(t, 200, "GET", "/remote.php/webdav/bobs.txt", "bob", "b", ""); b != "bob's" {
		t.Fatalf("bob's: %q", b)
	}
	f.must(t, 404, "GET", "/remote.php/webdav/bobs.txt", "alice", "a", "")
	// A multistatus is application/xml, as the sync clients want it.
	h, b := f.must(t, 207, "PROPFIND", "/remote.php/webdav/", "alice", "a", "", "Depth", "1")
	if h.Get("Content-Type") != "application/xml; charset=utf-8" || !strings.Contains(b, "/remote.php/webdav/one.txt") {
		t.Fatalf("PROPFIND: %v\n%s", h, b)
	}
	// A MOVE and a COPY from one spelling to another.
	f.must(t, 201, "MOVE", "/remote.php/webdav/two.txt", "alice", "a", "", "Destination", f.url+"/remote.php/dav/files/alice/three.txt")
	f.must(t, 201, "COPY", "/remote.php/dav/files/alice/three.txt", "alice", "a", "", "Destination", "/dav/alice/four.txt")
	if _, b := f.must(t, 200, "GET", "/dav/alice/four.txt", "alice", "a", ""); b != "two" {
		t.Fatalf("four: %q", b)
	}
	// Refused: another user's path, Destinations outside one's tree, dot
	// elements, no login.
	f.must(t, 403, "GET", "/remote.php/dav/files/bob/bobs.txt", "alice", "a", "")
	f.must(t, 403, "PROPFIND", "/remote.php/dav/files/bob/", "alice", "a", "", "Depth", "1")
	for _, d := range []string{"/remote.php/dav/files/bob/stolen.txt", "/dav/bob/stolen.txt", "/remote.php/dav/uploads/alice/x", "/elsewhere/x", "/remote.php/dav/files/alice/a/%2e%2e/x"} {
		f.must(t, 403, "COPY", "/remote.php/webdav/one.txt", "alice", "a", "", "Destination", d)
	}
	f.must(t, 404, "GET", "/dav/bob/stolen.txt", "bob", "b", "")
	for _, p := range []string{"/remote.php/dav/files/alice/../bob/bobs.txt", "/remote.php/webdav/%2e%2e/x", "/remote.php/webdav/a//b", "/remote.php/dav/uploads/alice/../../files/bob/x"} {
		if st := f.raw(t, "GET", p, "alice", "a"); st != 400 {
			t.Fatalf("%s: %d, want 400", p, st)
		}
	}
	f.must(t, 401, "GET", "/remote.php/webdav/one.txt", "", "", "")
	f.must(t, 401, "GET", "/remote.php/dav/files/alice/one.txt", "alice", "b", "")
	f.must(t, 404, "GET", "/remote.php/dav/files/", "alice", "a", "")
	f.must(t, 404, "GET", "/remote.php/webdavx/one.txt", "alice", "a", "")
}

// propOf returns the text of the first property local (any namespace)
// of the response for href in a multistatus.
func propOf(t *testing.T, ms, href, local string) (string, bool) {
	t.Helper()
	var m struct {
		Responses []struct {
			Href      string `xml:"DAV: href"`
			Propstats []struct {
				Prop struct {
					Any []struct {
						XMLName xml.Name
						Inner   string `xml:",innerxml"`
					} `xml:",any"`
				} `xml:"DAV: prop"`
				Status string `xml:"DAV: status"`
			} `xml:"DAV: propstat"`
		} `xml:"DAV: response"`
	}
	if err := xml.Unmarshal([]byte(ms), &m); err != nil {
		t.Fatalf("%v: %s", err, ms)
	}
	for _, r := range m.Responses {
		if r.Href != href {
			continue
		}
		for _, ps := range r.Propstats {
			if !strings.Contains(ps.Status, " 200 ") {
				continue
			}
			for _, p := range ps.Prop.Any {
				if p.XMLName.Local == local {
					return p.Inner, true
				}
			}
		}
	}
	return "", false
}

const ocPropfind = `<?xml version="1.0"?><d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns"><d:prop>
<d:resourcetype/><d:getlastmodified/><d:getcontentlength/><d:getetag/><oc:id/><oc:fileid/><oc:permissions/><oc:size/>
<oc:checksums/><oc:downloadURL/><oc:dDC/><oc:share-types/><nc:has-preview/><d:quota-available-bytes/><d:quota-used-bytes/>
</d:prop></d:propfind>`

// TestOwnCloudProps: the oc: and nc: properties, X-OC-Mtime on PUT with
// its answer, OC-FileId and OC-ETag, file IDs that a MOVE and a rewrite
// keep and a COPY does not, directory ETags that change with anything
// below, If-Match on PUT, and the computed properties refused by
// PROPPATCH.
func TestOwnCloudProps(t *testing.T) {
	f := newFixtureWith(t, func(c *webdav.Config) {
		c.Usage = func(ctx context.Context, user string) (int64, int64, error) { return 1000, 5000, nil }
	})
	f.addUser(t, "alice", "alice-files", "a")
	base := "/remote.php/dav/files/alice"
	f.must(t, 201, "MKCOL", base+"/docs", "alice", "a", "")
	f.must(t, 201, "MKCOL", base+"/docs/deep", "alice", "a", "")
	body := "hello, owncloud"
	h, _ := f.must(t, 201, "PUT", base+"/docs/deep/a.txt", "alice", "a", body, "X-OC-Mtime", "1500000000")
	if h.Get("X-OC-MTime") != "accepted" || h.Get("OC-FileId") == "" || h.Get("OC-ETag") == "" || h.Get("OC-ETag") != h.Get("ETag") {
		t.Fatalf("PUT headers: %v", h)
	}
	fileID := h.Get("OC-FileId")
	md := md5.Sum([]byte(body))
	sh := sha1.Sum([]byte(body))

	_, ms := f.must(t, 207, "PROPFIND", base+"/docs/deep/", "alice", "a", ocPropfind, "Depth", "1")
	href := base + "/docs/deep/a.txt"
	want := map[string]string{
		"getlastmodified": time.Unix(1500000000, 0).UTC().Format(http.TimeFormat),
		"id":              fileID,
		"permissions":     "DNVW",
		"size":            fmt.Sprint(len(body)),
		"downloadURL":     "",
		"has-preview":     "false",
	}
	for k, v := range want {
		if got, ok := propOf(t, ms, href, k); !ok || got != v {
			t.Errorf("%s: %q (%v), want %q", k, got, ok, v)
		}
	}
	sums, _ := propOf(t, ms, href, "checksums")
	if !strings.Contains(sums, "SHA1:"+hex.EncodeToString(sh[:])) || !strings.Contains(sums, "MD5:"+hex.EncodeToString(md[:])) {
		t.Errorf("checksums: %q", sums)
	}
	if id, _ := propOf(t, ms, href, "fileid"); !strings.HasPrefix(fileID, fmt.Sprintf("%020s", id)) && !strings.HasPrefix(fileID, strings.Repeat("0", 20-len(id))+id) {
		t.Errorf("fileid %s, id %s", id, fileID)
	}
	if p, _ := propOf(t, ms, base+"/docs/deep/", "permissions"); p != "DNVCK" {
		t.Errorf("directory permissions %q", p)
	}
	if s, _ := propOf(t, ms, base+"/docs/deep/", "size"); s != fmt.Sprint(len(body)) {
		t.Errorf("directory size %q", s)
	}
	if _, ok := propOf(t, ms, href, "quota-used-bytes"); ok {
		t.Errorf("a file with quota properties")
	}
	_, root := f.must(t, 207, "PROPFIND", base+"/", "alice", "a", ocPropfind, "Depth", "0")
	if u, _ := propOf(t, root, base+"/", "quota-used-bytes"); u != "1000" {
		t.Errorf("quota-used-bytes %q", u)
	}
	if a, _ := propOf(t, root, base+"/", "quota-available-bytes"); a != "4000" {
		t.Errorf("quota-available-bytes %q", a)
	}
	if p, _ := propOf(t, root, base+"/", "permissions"); p != "CK" {
		t.Errorf("root permissions %q", p)
	}
	rootTag, ok := propOf(t, root, base+"/", "getetag")
	if !ok || rootTag == "" {
		t.Fatalf("root without an ETag: %s", root)
	}
	dirTag := func(p string) string {
		_, ms := f.must(t, 207, "PROPFIND", p, "alice", "a", ocPropfind, "Depth", "0")
		tag, _ := propOf(t, ms, p, "getetag")
		return tag
	}
	docsTag := dirTag(base + "/docs/")

	// A rewrite keeps the ID and changes the ETags of every directory
	// above.
	h, _ = f.must(t, 201, "PUT", href, "alice", "a", "hello again")
	if h.Get("OC-FileId") != fileID || h.Get("X-OC-MTime") != "" {
		t.Fatalf("rewrite: %v", h)
	}
	if dirTag(base+"/") == rootTag || dirTag(base+"/docs/") == docsTag {
		t.Fatal("directory ETags unchanged by a change below")
	}
	// A directory made with MKCOL keeps its ID when moved.
	dirID := func(p string) string {
		_, ms := f.must(t, 207, "PROPFIND", p, "alice", "a", ocPropfind, "Depth", "0")
		id, _ := propOf(t, ms, p, "id")
		return id
	}
	before := dirID(base + "/docs/deep/")
	f.must(t, 201, "MOVE", base+"/docs/deep/", "alice", "a", "", "Destination", base+"/docs/deeper/")
	if after := dirID(base + "/docs/deeper/"); after != before || before == "" {
		t.Fatalf("moved directory: id %s, was %s", after, before)
	}
	href = base + "/docs/deeper/a.txt"

	// A MOVE keeps a file's; a COPY has a new one.
	f.must(t, 201, "MOVE", href, "alice", "a", "", "Destination", base+"/docs/b.txt")
	_, ms = f.must(t, 207, "PROPFIND", base+"/docs/b.txt", "alice", "a", ocPropfind, "Depth", "0")
	if id, _ := propOf(t, ms, base+"/docs/b.txt", "id"); id != fileID {
		t.Fatalf("moved: id %s, want %s", id, fileID)
	}
	f.must(t, 201, "COPY", base+"/docs/b.txt", "alice", "a", "", "Destination", base+"/docs/c.txt")
	_, ms = f.must(t, 207, "PROPFIND", base+"/docs/c.txt", "alice", "a", ocPropfind, "Depth", "0")
	if id, _ := propOf(t, ms, base+"/docs/c.txt", "id"); id == fileID || id == "" {
		t.Fatalf("copy: id %s, the original's %s", id, fileID)
	}

	// allprop shows no computed property (as ownCloud's does not).
	_, all := f.must(t, 207, "PROPFIND", base+"/docs/", "alice", "a", "", "Depth", "1")
	if strings.Contains(all, webdav.OCNS) || strings.Contains(all, "quota-") {
		t.Fatalf("allprop with computed properties: %s", all)
	}

	// If-Match and If-None-Match on PUT.
	_, ms = f.must(t, 207, "PROPFIND", base+"/docs/b.txt", "alice", "a", ocPropfind, "Depth", "0")
	tag, _ := propOf(t, ms, base+"/docs/b.txt", "getetag")
	f.must(t, 412, "PUT", base+"/docs/b.txt", "alice", "a", "lost update", "If-Match", `"0123"`)
	f.must(t, 412, "PUT", base+"/docs/b.txt", "alice", "a", "lost update", "If-None-Match", "*")
	f.must(t, 412, "PUT", base+"/docs/new.txt", "alice", "a", "x", "If-Match", "*")
	f.must(t, 201, "PUT", base+"/docs/b.txt", "alice", "a", "update", "If-Match", tag)
	if _, b := f.must(t, 200, "GET", base+"/docs/b.txt", "alice", "a", ""); b != "update" {
		t.Fatalf("after If-Match: %q", b)
	}

	// OC-Checksum on PUT: a body that matches is written; one that does
	// not, or an unknown type, is 400 and writes nothing.
	okSum := sha1.Sum([]byte("checked"))
	f.must(t, 201, "PUT", base+"/docs/sum.txt", "alice", "a", "checked", "OC-Checksum", "SHA1:"+hex.EncodeToString(okSum[:]))
	h, _ = f.must(t, 400, "PUT", base+"/docs/sum.txt", "alice", "a", "corrupted", "OC-Checksum", "SHA1:"+hex.EncodeToString(okSum[:]))
	if h.Get("X-Quilt-Error") != "checksum" {
		t.Fatalf("checksum mismatch: %v", h)
	}
	f.must(t, 400, "PUT", base+"/docs/sum.txt", "alice", "a", "x", "OC-Checksum", "CRC9:00")
	if _, b := f.must(t, 200, "GET", base+"/docs/sum.txt", "alice", "a", ""); b != "checked" {
		t.Fatalf("after a bad checksum: %q", b)
	}
	adler := "ADLER32:" + fmt.Sprintf("%x", adler32.Checksum([]byte("also checked"))) // ownCloud's: no leading zeros
	f.must(t, 201, "PUT", base+"/docs/sum2.txt", "alice", "a", "also checked", "OC-Checksum", adler)

	// Bad input: an X-OC-Mtime that is no time; PROPPATCH of a computed
	// property.
	f.must(t, 400, "PUT", base+"/docs/d.txt", "alice", "a", "x", "X-OC-Mtime", "yesterday")
	f.must(t, 404, "GET", base+"/docs/d.txt", "alice", "a", "")
	_, b := f.must(t, 207, "PROPPATCH", base+"/docs/b.txt", "alice", "a",
		`<?xml version="1.0"?><d:propertyupdate xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:set><d:prop><oc:fileid>7</oc:fileid></d:prop></d:set></d:propertyupdate>`)
	if !strings.Contains(b, "403") {
		t.Fatalf("PROPPATCH oc:fileid: %s", b)
	}
	_, ms = f.must(t, 207, "PROPFIND", base+"/docs/b.txt", "alice", "a", ocPropfind, "Depth", "0")
	if id, _ := propOf(t, ms, base+"/docs/b.txt", "id"); id != fileID {
		t.Fatalf("after PROPPATCH: id %s", id)
	}
}

// TestOwnCloudChunkedUpload: chunked uploads as ownCloud's client
// (chunks named by offset), Nextcloud's version 2 (1, 2, ...) and
// version 1 (byte ranges) send them; nothing is visible before the MOVE;
// the file keeps its ID when overwritten; and the failure paths: an
// unknown upload, a gap, a wrong OC-Total-Length or OC-Checksum, another
// user's uploads or tree, bad names, and an upload that expired.
func TestOwnCloudChunkedUpload(t *testing.T) {
	f := newFixture(t)
	f.addUser(t, "alice", "alice-files", "a")
	f.addUser(t, "bob", "bob-files", "b")
	up := "/remote.php/dav/uploads/alice/"
	files := "/remote.php/dav/files/alice/"
	data := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	parts := []string{data[:10000], data[10000:40000], data[40000:]}
	sum := md5.Sum([]byte(data))

	// ownCloud: chunks named by offset, zero-padded.
	f.must(t, 201, "MKCOL", up+"oc1", "alice", "a", "")
	f.must(t, 405, "MKCOL", up+"oc1", "alice", "a", "")
	for i, off := range []int{0, 10000, 40000} {
		f.must(t, 201, "PUT", fmt.Sprintf("%s%s/%016d", up, "oc1", off), "alice", "a", parts[i], "OC-Chunk-Offset", fmt.Sprint(off))
	}
	_, ms := f.must(t, 207, "PROPFIND", up+"oc1", "alice", "a", "", "Depth", "1")
	if n, _ := propOf(t, ms, up+"oc1/0000000000010000", "getcontentlength"); n != "30000" {
		t.Fatalf("chunk listing: %s", ms)
	}
	f.must(t, 404, "GET", files+"big.bin", "alice", "a", "") // nothing visible yet
	h, _ := f.must(t, 201, "MOVE", up+"oc1/.file", "alice", "a", "",
		"Destination", f.url+files+"big.bin", "OC-Total-Length", fmt.Sprint(len(data)), "X-OC-Mtime", "1400000000",
		"OC-Checksum", "MD5:"+hex.EncodeToString(sum[:]))
	if h.Get("OC-FileId") == "" || h.Get("ETag") != `"`+hex.EncodeToString(sum[:])+`"` || h.Get("X-OC-MTime") != "accepted" {
		t.Fatalf("MOVE headers: %v", h)
	}
	id := h.Get("OC-FileId")
	if _, b := f.must(t, 200, "GET", files+"big.bin", "alice", "a", ""); b != data {
		t.Fatalf("assembled file: %d bytes", len(b))
	}
	_, ms = f.must(t, 207, "PROPFIND", files+"big.bin", "alice", "a", ocPropfind, "Depth", "0")
	if lm, _ := propOf(t, ms, files+"big.bin", "getlastmodified"); lm != time.Unix(1400000000, 0).UTC().Format(http.TimeFormat) {
		t.Fatalf("mtime %q", lm)
	}
	f.must(t, 404, "PUT", up+"oc1/0", "alice", "a", "late") // committed: gone

	// Nextcloud 2: chunks 1, 2, 3 with a Destination on each request,
	// over the file just written: it keeps its ID, 204.
	dst := f.url + files + "big.bin"
	data2 := strings.ToUpper(data)
	f.must(t, 201, "MKCOL", up+"nc2", "alice", "a", "", "Destination", dst)
	f.must(t, 201, "PUT", up+"nc2/00001", "alice", "a", data2[:30000], "Destination", dst)
	f.must(t, 201, "PUT", up+"nc2/00002", "alice", "a", data2[30000:60000], "Destination", dst)
	f.must(t, 201, "PUT", up+"nc2/00003", "alice", "a", data2[60000:], "Destination", dst)
	h, _ = f.must(t, 204, "MOVE", up+"nc2/.file", "alice", "a", "", "Destination", dst, "OC-Total-Length", fmt.Sprint(len(data2)))
	if h.Get("OC-FileId") != id {
		t.Fatalf("overwritten: id %s, want %s", h.Get("OC-FileId"), id)
	}
	h, b := f.must(t, 200, "GET", files+"big.bin", "alice", "a", "")
	if b != data2 {
		t.Fatal("overwritten file differs")
	}
	if sh := sha1.Sum([]byte(data2)); h.Get("OC-Checksum") != "SHA1:"+hex.EncodeToString(sh[:]) {
		t.Fatalf("GET's OC-Checksum %q", h.Get("OC-Checksum"))
	}

	// Nextcloud 1: byte ranges, into a new directory's file.
	f.must(t, 201, "MKCOL", files+"dir", "alice", "a", "")
	f.must(t, 201, "MKCOL", up+"nc1", "alice", "a", "")
	f.must(t, 201, "PUT", up+"nc1/000000000000000-000000000009999", "alice", "a", parts[0])
	f.must(t, 201, "PUT", up+"nc1/000000000010000-000000000039999", "alice", "a", parts[1])
	f.must(t, 201, "PUT", up+"nc1/000000000040000-000000000065535", "alice", "a", parts[2])
	f.must(t, 201, "MOVE", up+"nc1/.file", "alice", "a", "", "Destination", files+"dir/r.bin")
	if _, b := f.must(t, 200, "GET", "/dav/alice/dir/r.bin", "alice", "a", ""); b != data {
		t.Fatal("ranged upload differs")
	}

	// Failures, none of which writes anything.
	bad := func(name string, chunks map[string]string, code int, hdr ...string) {
		t.Helper()
		f.must(t, 201, "MKCOL", up+name, "alice", "a", "")
		for c, b := range chunks {
			f.must(t, 201, "PUT", up+name+"/"+c, "alice", "a", b)
		}
		f.must(t, code, "MOVE", up+name+"/.file", "alice", "a", "", append([]string{"Destination", files + "fail-" + name}, hdr...)...)
		f.must(t, 404, "GET", files+"fail-"+name, "alice", "a", "")
		f.must(t, 207, "PROPFIND", up+name, "alice", "a", "", "Depth", "0") // kept for a retry
		f.must(t, 204, "DELETE", up+name, "alice", "a", "")
		f.must(t, 404, "PROPFIND", up+name, "alice", "a", "", "Depth", "0")
	}
	bad("gap", map[string]string{"1": "a", "3": "c"}, 400)
	bad("gap0", map[string]string{"2": "b", "3": "c"}, 400)
	bad("rangegap", map[string]string{"0-0": "a", "2-2": "c"}, 400)
	bad("rangesize", map[string]string{"0-9": "abc"}, 400)
	bad("mixed", map[string]string{"0-0": "a", "1": "b"}, 400)
	bad("length", map[string]string{"1": "abc"}, 400, "OC-Total-Length", "4")
	bad("badlength", map[string]string{"1": "abc"}, 400, "OC-Total-Length", "three")
	bad("md5", map[string]string{"1": "abc"}, 400, "OC-Checksum", "MD5:00000000000000000000000000000000")
	bad("sumtype", map[string]string{"1": "abc"}, 400, "OC-Checksum", "CRC64:0")
	bad("mtime", map[string]string{"1": "abc"}, 400, "X-OC-Mtime", "soon")
	bad("etag", map[string]string{"1": "abc"}, 412, "If", `<`+files+`fail-etag> (["nope"])`)

	// Unknown uploads, bad names, wrong methods.
	f.must(t, 404, "PUT", up+"never/1", "alice", "a", "x")
	f.must(t, 404, "MOVE", up+"never/.file", "alice", "a", "", "Destination", files+"x")
	f.must(t, 404, "DELETE", up+"never", "alice", "a", "")
	f.must(t, 400, "MKCOL", up+"a%20b", "alice", "a", "")
	f.must(t, 201, "MKCOL", up+"names", "alice", "a", "")
	f.must(t, 400, "PUT", up+"names/chunk-one", "alice", "a", "x")
	f.must(t, 404, "PUT", up+"names/sub/1", "alice", "a", "x")
	f.must(t, 405, "GET", up+"names/1", "alice", "a", "")
	f.must(t, 400, "MOVE", up+"names/.file", "alice", "a", "")
	f.must(t, 403, "MOVE", up+"names/.file", "alice", "a", "", "Destination", files)
	f.must(t, 201, "PUT", up+"names/1", "alice", "a", "x")
	f.must(t, 409, "MOVE", up+"names/.file", "alice", "a", "", "Destination", files+"dir")         // a directory
	f.must(t, 409, "MOVE", up+"names/.file", "alice", "a", "", "Destination", files+"nodir/x.txt") // no parent

	// Another user's uploads, or a MOVE of one's chunks into another
	// user's tree.
	f.must(t, 403, "MKCOL", "/remote.php/dav/uploads/bob/steal", "alice", "a", "")
	f.must(t, 403, "PUT", "/remote.php/dav/uploads/bob/x/1", "alice", "a", "x")
	for _, d := range []string{"/remote.php/dav/files/bob/planted.txt", "/dav/bob/planted.txt", f.url + "/remote.php/webdav/../../dav/bob/planted.txt"} {
		f.must(t, 403, "MOVE", up+"names/.file", "alice", "a", "", "Destination", d)
	}
	f.must(t, 404, "GET", "/dav/bob/planted.txt", "bob", "b", "")
	f.must(t, 401, "MKCOL", up+"nologin", "", "", "")

}

// TestOwnCloudUploadExpiry: an upload that got no chunk for
// UploadExpiry is dropped, its chunks with it.
func TestOwnCloudUploadExpiry(t *testing.T) {
	f := newFixtureWith(t, func(c *webdav.Config) { c.UploadExpiry = 2 * time.Second })
	f.addUser(t, "alice", "alice-files", "a")
	up := "/remote.php/dav/uploads/alice/"
	f.must(t, 201, "MKCOL", up+"old", "alice", "a", "")
	f.must(t, 201, "PUT", up+"old/1", "alice", "a", "x")
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(time.Second)
		st, _, _ := f.req(t, "PROPFIND", up+"old", "alice", "a", "", "Depth", "0")
		if st == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("an abandoned upload is still there: %d", st)
		}
	}
	f.must(t, 404, "PUT", up+"old/2", "alice", "a", "y")
	f.must(t, 404, "MOVE", up+"old/.file", "alice", "a", "", "Destination", "/dav/alice/old.bin")
	f.must(t, 404, "GET", "/dav/alice/old.bin", "alice", "a", "")
}
