package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharelink"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestShareLinksEndToEnd runs the WebDAV listener as quilt up starts it
// and drives share links over real HTTP: the owner writes files over
// WebDAV and makes links with Basic auth; an anonymous client downloads a
// file and a folder's zip, unlocks a password link with a cookie jar as a
// browser does, and uploads through an upload link (the file then reads
// back over WebDAV); a revoked link answers 404; a stranger's password
// makes no link; a folder shared with a second account reads with theirs.
func TestShareLinksEndToEnd(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	svc, err := startWebDAV(ctx, gw, nil, dir, "127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	pwb, err := os.ReadFile(filepath.Join(dir, webdavPassword))
	if err != nil {
		t.Fatal(err)
	}
	pw := strings.TrimSpace(string(pwb))
	base := strings.TrimSuffix(svc.url, "/dav/")
	dav := svc.url + webdavDefault + "/"
	client := &http.Client{Timeout: 2 * time.Minute}

	call := func(c *http.Client, method, u string, body io.Reader, hdr map[string]string, auth bool) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth(webdavDefault, pw)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	api := map[string]string{"X-Requested-With": "quilt", "Content-Type": "application/json"}
	mkLink := func(body string) sharelink.Link {
		t.Helper()
		code, _, resp := call(client, "POST", base+"/api/shares", strings.NewReader(body), api, true)
		if code != http.StatusCreated {
			t.Fatalf("make link %s: %d %s", body, code, resp)
		}
		var l sharelink.Link
		if err := json.Unmarshal([]byte(resp), &l); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(l.URL, base+"/s/") {
			t.Fatalf("link URL %s is not on %s", l.URL, base)
		}
		return l
	}

	report := strings.Repeat("the grid's report\n", 400)
	for _, step := range []struct{ method, path, body string }{
		{"MKCOL", "docs", ""}, {"PUT", "docs/report.txt", report}, {"PUT", "docs/notes.md", "# notes\n"}, {"MKCOL", "inbox", ""},
	} {
		if code, _, b := call(client, step.method, dav+step.path, strings.NewReader(step.body), nil, true); code >= 300 {
			t.Fatalf("%s %s: %d %s", step.method, step.path, code, b)
		}
	}

	// A read link to a file.
	file := mkLink(`{"path":"/docs/report.txt"}`)
	if code, _, b := call(client, "GET", file.URL, nil, nil, false); code != 200 || !strings.Contains(b, "report.txt") {
		t.Fatalf("link page: %d %s", code, b)
	}
	code, hdr, b := call(client, "GET", file.URL+"/download", nil, nil, false)
	if code != 200 || b != report || !strings.HasPrefix(hdr.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d, %d bytes, %v", code, len(b), hdr)
	}
	if code, _, b := call(client, "GET", base+"/api/shares/"+file.Token+"/qr.svg", nil, nil, true); code != 200 || !strings.HasPrefix(b, "<svg") {
		t.Fatalf("QR: %d %.80s", code, b)
	}

	// A folder's zip.
	folder := mkLink(`{"path":"/docs"}`)
	code, _, b = call(client, "GET", folder.URL+"/download", nil, nil, false)
	zr, err := zip.NewReader(strings.NewReader(b), int64(len(b)))
	if code != 200 || err != nil || len(zr.File) != 2 {
		t.Fatalf("zip: %d %v", code, err)
	}

	// A password link, unlocked by a browser-like client with a cookie jar.
	locked := mkLink(`{"path":"/docs/notes.md","password":"open sesame"}`)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 2 * time.Minute}
	if code, _, _ := call(browser, "GET", locked.URL+"/download", nil, nil, false); code != http.StatusForbidden {
		t.Fatalf("locked download: %d", code)
	}
	form := "application/x-www-form-urlencoded"
	if code, _, _ := call(browser, "POST", locked.URL+"/unlock", strings.NewReader(url.Values{"password": {"nope"}}.Encode()), map[string]string{"Content-Type": form}, false); code != http.StatusForbidden {
		t.Fatalf("wrong password: %d", code)
	}
	code, _, b = call(browser, "POST", locked.URL+"/unlock", strings.NewReader(url.Values{"password": {"open sesame"}}.Encode()), map[string]string{"Content-Type": form}, false)
	if code != 200 || !strings.Contains(b, "notes.md") { // followed the redirect to the page
		t.Fatalf("right password: %d %s", code, b)
	}
	if code, _, b := call(browser, "GET", locked.URL+"/download", nil, nil, false); code != 200 || b != "# notes\n" {
		t.Fatalf("unlocked download: %d %q", code, b)
	}

	// An upload link: the file lands in the folder and reads back over WebDAV.
	up := mkLink(`{"path":"/inbox","mode":"upload"}`)
	var mb bytes.Buffer
	mw := multipart.NewWriter(&mb)
	fw, _ := mw.CreateFormFile("file", "from-a-phone.txt")
	io.WriteString(fw, "sent through a link")
	mw.Close()
	if code, _, b := call(client, "POST", up.URL+"/upload", &mb, map[string]string{"Content-Type": mw.FormDataContentType()}, false); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, b)
	}
	if code, _, b := call(client, "GET", dav+"inbox/from-a-phone.txt", nil, nil, true); code != 200 || b != "sent through a link" {
		t.Fatalf("uploaded file over WebDAV: %d %q", code, b)
	}
	if code, _, _ := call(client, "GET", up.URL+"/download", nil, nil, false); code != http.StatusForbidden {
		t.Fatalf("download through an upload link: %d", code)
	}

	// The owner lists and revokes; a revoked link is 404 at once.
	code, _, b = call(client, "GET", base+"/api/shares", nil, nil, true)
	var ls []sharelink.Link
	if code != 200 || json.Unmarshal([]byte(b), &ls) != nil || len(ls) != 4 {
		t.Fatalf("list: %d %s", code, b)
	}
	if code, _, _ := call(client, "DELETE", base+"/api/shares/"+file.Token, nil, map[string]string{"X-Requested-With": "quilt"}, true); code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code, _, b := call(client, "GET", file.URL+"/download", nil, nil, false); code != http.StatusNotFound || strings.Contains(b, "report\n") {
		t.Fatalf("revoked: %d", code)
	}

	// A folder shared with another account, who reads it with their own
	// password.
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "bobs password"}); err != nil {
		t.Fatal(err)
	}
	code, _, b = call(client, "POST", base+"/api/shares/grants", strings.NewReader(`{"path":"/docs","with":"user:bob"}`), api, true)
	var gr sharelink.GrantInfo
	if code != http.StatusCreated || json.Unmarshal([]byte(b), &gr) != nil {
		t.Fatalf("grant: %d %s", code, b)
	}
	if code, _, b := call(client, "POST", base+"/api/shares/grants", strings.NewReader(`{"path":"/docs","with":"user:mallory"}`), api, true); code != http.StatusBadRequest {
		t.Fatalf("grant to a stranger: %d %s", code, b)
	}
	asBob := func(u string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		req.SetBasicAuth("bob", "bobs password")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := asBob(base + "/api/shares/with-me"); code != 200 || !strings.Contains(b, gr.ID) {
		t.Fatalf("bob's with-me: %d %s", code, b)
	}
	if code, b := asBob(base + "/api/shares/with-me/" + gr.ID + "/files/notes.md"); code != 200 || b != "# notes\n" {
		t.Fatalf("bob reads: %d %q", code, b)
	}
	// The web app's trash stays its owner's, even with the whole drive
	// shared.
	if code, _, b := call(client, "MKCOL", dav+".quilt-trash", nil, nil, true); code != http.StatusCreated {
		t.Fatalf("MKCOL .quilt-trash: %d %s", code, b)
	}
	if code, _, b := call(client, "PUT", dav+".quilt-trash/deleted.txt", strings.NewReader("deleted"), nil, true); code != http.StatusCreated {
		t.Fatalf("PUT .quilt-trash/deleted.txt: %d %s", code, b)
	}
	code, _, b = call(client, "POST", base+"/api/shares/grants", strings.NewReader(`{"path":"/","with":"user:bob"}`), api, true)
	var all sharelink.GrantInfo
	if code != http.StatusCreated || json.Unmarshal([]byte(b), &all) != nil {
		t.Fatalf("grant of the drive: %d %s", code, b)
	}
	if code, b := asBob(base + "/api/shares/with-me/" + all.ID + "/files"); code != 200 || !strings.Contains(b, `"docs"`) || strings.Contains(b, "quilt-trash") {
		t.Fatalf("bob lists the drive: %d %s", code, b)
	}
	if code, b := asBob(base + "/api/shares/with-me/" + all.ID + "/files/.quilt-trash/deleted.txt"); code != http.StatusNotFound {
		t.Fatalf("bob reads the trash: %d %q", code, b)
	}

	// No link without the owner's password; WebDAV still answers beside.
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/shares", strings.NewReader(`{"path":"/docs"}`))
	req.Header.Set("X-Requested-With", "quilt")
	req.SetBasicAuth(webdavDefault, "wrong")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong owner password: %d", resp.StatusCode)
	}
	if code, _, _ := call(client, "PROPFIND", dav, nil, map[string]string{"Depth": "1"}, true); code != http.StatusMultiStatus {
		t.Fatalf("WebDAV beside the links: %d", code)
	}
}
