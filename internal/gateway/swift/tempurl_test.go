package swift_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net/url"
	"strings"
	"testing"
	"time"
)

// tempSig signs a temporary URL as a client does (Swift's documented
// recipe): HMAC of "METHOD\nEXPIRES\nPATH" (after "ip=RANGE\n" if given).
func tempSig(alg func() hash.Hash, key, method string, expires int64, path, ip string) []byte {
	body := fmt.Sprintf("%s\n%d\n%s", method, expires, path)
	if ip != "" {
		body = "ip=" + ip + "\n" + body
	}
	m := hmac.New(alg, []byte(key))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// TestTempURL: objects read, written and deleted without a token through
// URLs signed with the account's or the container's Temp-URL-Key (HMAC
// SHA-1, SHA-256 in hex, SHA-512 in base64), for one object or a prefix,
// until a time (Unix or ISO 8601), from an IP range; anything else is
// 401, and the answers hide private metadata and name a file to save.
func TestTempURL(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	for _, p := range []string{"/tmp1", "/tmp2"} {
		resp, body := c.do(t, "PUT", p, nil)
		want(t, "PUT "+p, resp, body, 201)
	}
	data := []byte("temporary bytes")
	resp, body := c.do(t, "PUT", "/tmp1/obj", data, "X-Object-Meta-Secret", "s", "X-Object-Meta-Public-Tag", "t")
	want(t, "PUT object", resp, body, 201)
	resp, body = c.do(t, "PUT", "/tmp2/obj", data)
	want(t, "PUT object", resp, body, 201)
	resp, body = c.do(t, "POST", "", nil, "X-Account-Meta-Temp-URL-Key", "k1")
	want(t, "POST account key", resp, body, 204)
	now := e.clock.Now().Unix()
	exp := now + 60
	// get sends a request on a temporary URL: path under the storage
	// URL, then query parameters as name, value pairs.
	get := func(method, p string, body []byte, params ...string) (int, map[string][]string, []byte) {
		t.Helper()
		v := url.Values{}
		for i := 0; i+1 < len(params); i += 2 {
			v.Add(params[i], params[i+1])
		}
		resp, b := e.do(t, method, c.base+p+"?"+v.Encode(), body)
		return resp.StatusCode, resp.Header, b
	}
	full := c.base + "/tmp1/obj"
	hexSig := func(key, method string, exp int64, path string) string {
		return hex.EncodeToString(tempSig(sha1.New, key, method, exp, path, ""))
	}

	code, h, b := get("GET", "/tmp1/obj", nil, "temp_url_sig", hexSig("k1", "GET", exp, full), "temp_url_expires", fmt.Sprint(exp))
	if code != 200 || string(b) != string(data) {
		t.Fatalf("GET with a SHA-1 temporary URL: %d %q", code, b)
	}
	if http := h; http["Content-Disposition"][0] != `attachment; filename="obj"; filename*=UTF-8''obj` ||
		http["Expires"][0] != time.Unix(exp, 0).UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT") ||
		len(http["X-Object-Meta-Secret"]) != 0 || http["X-Object-Meta-Public-Tag"][0] != "t" {
		t.Fatalf("GET with a temporary URL: headers %v", h)
	}
	sig256 := hex.EncodeToString(tempSig(sha256.New, "k1", "GET", exp, full, ""))
	code, h, _ = get("GET", "/tmp1/obj", nil, "temp_url_sig", sig256, "temp_url_expires", fmt.Sprint(exp), "filename", "my file.txt", "inline", "")
	if code != 200 || h["Content-Disposition"][0] != `inline; filename="my file.txt"; filename*=UTF-8''my%20file.txt` {
		t.Fatalf("GET with SHA-256, filename and inline: %d %v", code, h["Content-Disposition"])
	}
	sig512 := "sha512:" + base64.URLEncoding.EncodeToString(tempSig(sha512.New, "k1", "GET", exp, full, ""))
	iso := time.Unix(exp, 0).UTC().Format("2006-01-02T15:04:05Z")
	if code, _, _ := get("GET", "/tmp1/obj", nil, "temp_url_sig", sig512, "temp_url_expires", iso); code != 200 {
		t.Fatalf("GET with SHA-512 in base64 and an ISO 8601 time: %d", code)
	}
	if code, _, _ := get("HEAD", "/tmp1/obj", nil, "temp_url_sig", hexSig("k1", "GET", exp, full), "temp_url_expires", fmt.Sprint(exp)); code != 200 {
		t.Fatalf("HEAD with a GET signature: %d", code)
	}

	// Refused: another method, an expired URL, another key, another
	// object or container, a listing, an altered expiry, a bad signature.
	for _, bad := range []struct {
		what, method, path, sig string
		exp                     int64
	}{
		{"PUT with a GET signature", "PUT", "/tmp1/obj", hexSig("k1", "GET", exp, full), exp},
		{"expired", "GET", "/tmp1/obj", hexSig("k1", "GET", now-1, full), now - 1},
		{"another key", "GET", "/tmp1/obj", hexSig("k2", "GET", exp, full), exp},
		{"another object", "GET", "/tmp2/obj", hexSig("k1", "GET", exp, full), exp},
		{"a listing", "GET", "/tmp1", hexSig("k1", "GET", exp, c.base+"/tmp1"), exp},
		{"an altered expiry", "GET", "/tmp1/obj", hexSig("k1", "GET", exp, full), exp + 1},
		{"a short signature", "GET", "/tmp1/obj", "abcd", exp},
	} {
		code, _, b := get(bad.method, bad.path, []byte("x"), "temp_url_sig", bad.sig, "temp_url_expires", fmt.Sprint(bad.exp))
		if code != 401 || (bad.method != "HEAD" && !strings.Contains(string(b), "Temp URL invalid")) {
			t.Fatalf("%s: %d %q", bad.what, code, b)
		}
	}

	// PUT and DELETE, each with its own signature.
	newPath := c.base + "/tmp1/new"
	code, _, b = get("PUT", "/tmp1/new", []byte("uploaded"), "temp_url_sig", hexSig("k1", "PUT", exp, newPath), "temp_url_expires", fmt.Sprint(exp))
	if code != 201 {
		t.Fatalf("PUT with a temporary URL: %d %s", code, b)
	}
	if resp, body := c.do(t, "GET", "/tmp1/new", nil); string(body) != "uploaded" {
		t.Fatalf("the object put with a temporary URL: %s %q", resp.Status, body)
	}
	code, _, b = get("PUT", "/tmp1/new", []byte("x"), "temp_url_sig", hexSig("k1", "PUT", exp, newPath), "temp_url_expires", fmt.Sprint(exp))
	if code != 201 {
		t.Fatalf("second PUT: %d %s", code, b)
	}
	resp, body = e.do(t, "PUT", newPath+"?temp_url_sig="+hexSig("k1", "PUT", exp, newPath)+"&temp_url_expires="+fmt.Sprint(exp), []byte("x"),
		"X-Object-Manifest", "tc/seg")
	want(t, "PUT with X-Object-Manifest on a temporary URL", resp, body, 400)
	if code, _, _ := get("DELETE", "/tmp1/new", nil, "temp_url_sig", hexSig("k1", "DELETE", exp, newPath), "temp_url_expires", fmt.Sprint(exp)); code != 204 {
		t.Fatalf("DELETE with a temporary URL: %d", code)
	}

	// A prefix, an IP range, a container's key.
	resp, body = c.do(t, "PUT", "/tmp1/dir/a", data)
	want(t, "PUT", resp, body, 201)
	pre := "prefix:" + c.base + "/tmp1/dir/"
	psig := hexSig("k1", "GET", exp, pre)
	if code, _, _ := get("GET", "/tmp1/dir/a", nil, "temp_url_sig", psig, "temp_url_expires", fmt.Sprint(exp), "temp_url_prefix", "dir/"); code != 200 {
		t.Fatalf("GET under a signed prefix: %d", code)
	}
	if code, _, _ := get("GET", "/tmp1/obj", nil, "temp_url_sig", psig, "temp_url_expires", fmt.Sprint(exp), "temp_url_prefix", "dir/"); code != 401 {
		t.Fatalf("GET outside the signed prefix: %d", code)
	}
	for ip, wantCode := range map[string]int{"127.0.0.1": 200, "127.0.0.0/8": 200, "10.0.0.0/8": 401} {
		sig := hex.EncodeToString(tempSig(sha1.New, "k1", "GET", exp, full, ip))
		if code, _, _ := get("GET", "/tmp1/obj", nil, "temp_url_sig", sig, "temp_url_expires", fmt.Sprint(exp), "temp_url_ip_range", ip); code != wantCode {
			t.Fatalf("GET from 127.0.0.1 signed for %s: %d, want %d", ip, code, wantCode)
		}
	}
	resp, body = c.do(t, "POST", "/tmp2", nil, "X-Container-Meta-Temp-URL-Key", "ck")
	want(t, "POST container key", resp, body, 204)
	if code, _, _ := get("GET", "/tmp2/obj", nil, "temp_url_sig", hexSig("ck", "GET", exp, c.base+"/tmp2/obj"), "temp_url_expires", fmt.Sprint(exp)); code != 200 {
		t.Fatalf("GET signed with the container's key: %d", code)
	}
	if code, _, _ := get("GET", "/tmp1/obj", nil, "temp_url_sig", hexSig("ck", "GET", exp, full), "temp_url_expires", fmt.Sprint(exp)); code != 401 {
		t.Fatalf("another container's key: %d", code)
	}

	// Once the time has passed, the URL is refused.
	e.clock.Add(61 * time.Second)
	if code, _, _ := get("GET", "/tmp1/obj", nil, "temp_url_sig", hexSig("k1", "GET", exp, full), "temp_url_expires", fmt.Sprint(exp)); code != 401 {
		t.Fatalf("GET after the URL's time: %d", code)
	}
	// A project without a key has no temporary URLs.
	bob := e.bobClient(t)
	resp, body = bob.do(t, "PUT", "/bobs", nil)
	want(t, "bob PUT container", resp, body, 201)
	resp, body = bob.do(t, "PUT", "/bobs/o", data)
	want(t, "bob PUT object", resp, body, 201)
	exp = e.clock.Now().Unix() + 60
	resp, body = e.do(t, "GET", bob.base+"/bobs/o?temp_url_sig="+hexSig("", "GET", exp, bob.base+"/bobs/o")+"&temp_url_expires="+fmt.Sprint(exp), nil)
	want(t, "temporary URL of a project without a key", resp, body, 401)
}
