package swift_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"testing"
)

// tarball is a tar archive of files (name, content pairs); a name ending
// in / is a directory.
func tarball(t *testing.T, gz bool, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w *tar.Writer
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = tar.NewWriter(zw)
	} else {
		w = tar.NewWriter(&buf)
	}
	for i := 0; i+1 < len(files); i += 2 {
		hdr := &tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}
		if files[i][len(files[i])-1] == '/' {
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeDir, 0, 0o755
		}
		if err := w.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			w.Write([]byte(files[i+1]))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		zw.Close()
	}
	return buf.Bytes()
}

// TestExtractArchive: PUT ?extract-archive=tar (or tar.gz) stores every
// regular file of the archive under the upload path; uploaded to the
// account, a file's first directory is its container, made if need be,
// and files at the top are skipped. The answer is 200 with the count and
// failures in the body; a damaged archive, one with no files, an unknown
// format and a container of another project are refused so.
func TestExtractArchive(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	resp, body := c.do(t, "PUT", "/arch", nil)
	want(t, "PUT container", resp, body, 201)

	tb := tarball(t, false, "./docs/", "", "./docs/a.txt", "alpha", "./docs/b.html", "<p>beta</p>", "top.txt", "top")
	resp, body = c.do(t, "PUT", "/arch/pre?extract-archive=tar", tb, "Accept", "application/json")
	want(t, "extract into a container", resp, body, 200)
	if got := decodeBulk(t, "extract", body); got.Created != 3 || got.Status != "201 Created" || len(got.Errors) != 0 {
		t.Fatalf("extract into a container: %+v", got)
	}
	for name, want := range map[string]string{"pre/docs/a.txt": "alpha", "pre/docs/b.html": "<p>beta</p>", "pre/top.txt": "top"} {
		resp, body := c.do(t, "GET", "/arch/"+name, nil)
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("GET %s: %s %q", name, resp.Status, body)
		}
		if name == "pre/docs/b.html" && resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%s: Content-Type %q", name, resp.Header.Get("Content-Type"))
		}
	}

	// Into the account: the first directory is the container (made, or
	// existing); files at the top are skipped.
	tgz := tarball(t, true, "newbox/x", "x bytes", "arch/y", "y bytes", "loose", "skipped")
	resp, body = c.do(t, "PUT", "?extract-archive=tar.gz", tgz, "Accept", "application/json")
	if got := decodeBulk(t, "extract into the account", body); resp.StatusCode != 200 || got.Created != 2 || got.Status != "201 Created" {
		t.Fatalf("extract into the account: %s %+v", resp.Status, got)
	}
	for _, p := range []string{"/newbox/x", "/arch/y"} {
		if resp, _ := c.do(t, "HEAD", p, nil); resp.StatusCode != 200 {
			t.Fatalf("HEAD %s: %s", p, resp.Status)
		}
	}
	if resp, _ := c.do(t, "HEAD", "/newbox", nil); resp.StatusCode != 204 || resp.Header.Get("X-Container-Object-Count") != "1" {
		t.Fatalf("the container made by the extract: %s %v", resp.Status, resp.Header)
	}

	// Refused: a damaged archive, one with no regular file, an unknown
	// format; a container of another project fails its files.
	resp, body = c.do(t, "PUT", "/arch?extract-archive=tar.gz", []byte("not gzip at all"), "Accept", "application/json")
	if got := decodeBulk(t, "damaged", body); resp.StatusCode != 200 || got.Status != "400 Bad Request" || got.Created != 0 || len(got.Body) < len("Invalid Tar File") || got.Body[:16] != "Invalid Tar File" {
		t.Fatalf("damaged archive: %s %+v", resp.Status, got)
	}
	resp, body = c.do(t, "PUT", "/arch?extract-archive=tar", tarball(t, false, "d/", ""), "Accept", "application/json")
	if got := decodeBulk(t, "no files", body); got.Status != "400 Bad Request" || got.Body != "Invalid Tar File: No Valid Files" {
		t.Fatalf("archive without files: %+v", got)
	}
	resp, body = c.do(t, "PUT", "/arch?extract-archive=zip", tb)
	want(t, "extract of a zip", resp, body, 400)
	bob := e.bobClient(t)
	resp, body = bob.do(t, "PUT", "?extract-archive=tar", tarball(t, false, "arch/z", "z", "bobsbox/z", "z"), "Accept", "application/json")
	got := decodeBulk(t, "bob's extract", body)
	if got.Created != 1 || got.Status != "400 Bad Request" || len(got.Errors) != 2 || got.Errors[0][0] != bob.base+"/arch" ||
		got.Errors[0][1] != "403 Forbidden" || got.Errors[1][0] != "arch/z" || got.Errors[1][1] != "403 Forbidden" {
		t.Fatalf("bob's extract: %+v", got)
	}
	if resp, _ := c.do(t, "HEAD", "/arch/z", nil); resp.StatusCode != 404 {
		t.Fatalf("bob wrote into admin's container: %s", resp.Status)
	}
	if resp, _ := bob.do(t, "GET", "/bobsbox/z", nil); resp.StatusCode != 200 {
		t.Fatalf("bob's own container: %s", resp.Status)
	}
}
