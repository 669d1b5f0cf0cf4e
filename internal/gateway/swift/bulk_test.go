package swift_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
)

// bobClient adds project "team" acting as a new non-admin key, with user
// team:bob, and returns bob's client.
func (e *env) bobClient(t *testing.T) *client {
	t.Helper()
	ctx := context.Background()
	k, err := e.gw.CreateKey(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ids.AddProject(ctx, "team", k.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ids.AddUser(ctx, "team", "bob", "bobs-password"); err != nil {
		t.Fatal(err)
	}
	tok, base := e.login(t, "team:bob", "bobs-password")
	return &client{e, tok, base}
}

// bulkJSON is a bulk operation's JSON answer.
type bulkJSON struct {
	Deleted  int        `json:"Number Deleted"`
	NotFound int        `json:"Number Not Found"`
	Created  int        `json:"Number Files Created"`
	Status   string     `json:"Response Status"`
	Body     string     `json:"Response Body"`
	Errors   [][]string `json:"Errors"`
}

func decodeBulk(t *testing.T, what string, body []byte) bulkJSON {
	t.Helper()
	var b bulkJSON
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%s: %v in %q", what, err, body)
	}
	return b
}

// TestBulkDelete: POST ?bulk-delete deletes objects and empty containers
// named one a line (URL-encoded), counts those not there, lists those
// that failed (a container not empty, one another project may not
// write) with Swift's statuses, answers 200 with the outcome in plain
// text, JSON or XML, and refuses too many names or a body not text (in
// the body, as Swift).
func TestBulkDelete(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	for _, p := range []string{"/bulk", "/bulk/a", "/bulk/b", "/bulk/sp ace", "/empty", "/full", "/full/x"} {
		resp, body := c.do(t, "PUT", strings.ReplaceAll(p, " ", "%20"), []byte("data"))
		if resp.StatusCode != 201 {
			t.Fatalf("PUT %s: %s %s", p, resp.Status, body)
		}
	}
	list := "/bulk/a\n/bulk/sp%20ace\n\n/bulk/missing\n/empty\n/full\n/nope/x\n"
	resp, body := c.do(t, "POST", "?bulk-delete", []byte(list), "Accept", "application/json", "Content-Type", "text/plain")
	want(t, "bulk delete", resp, body, 200)
	got := decodeBulk(t, "bulk delete", body)
	if got.Deleted != 3 || got.NotFound != 2 || got.Status != "400 Bad Request" ||
		len(got.Errors) != 1 || got.Errors[0][0] != "/full" || got.Errors[0][1] != "409 Conflict" {
		t.Fatalf("bulk delete answered %+v", got)
	}
	for p, code := range map[string]int{"/bulk/a": 404, "/bulk/sp%20ace": 404, "/bulk/b": 200, "/empty": 404, "/full/x": 200} {
		resp, body := c.do(t, "HEAD", p, nil)
		if resp.StatusCode != code && !(code == 200 && resp.StatusCode == 204) {
			t.Fatalf("HEAD %s after the bulk delete: %s %s", p, resp.Status, body)
		}
	}

	// Plain text (the default) and XML; DELETE works as POST does.
	resp, body = c.do(t, "DELETE", "?bulk-delete", []byte("/bulk/b\n/full/x\n/full\n"))
	want(t, "bulk delete, plain", resp, body, 200)
	if string(body) != "Number Deleted: 3\nNumber Not Found: 0\nResponse Body: \nResponse Status: 200 OK\nErrors:\n" {
		t.Fatalf("plain answer %q", body)
	}
	resp, body = c.do(t, "POST", "?bulk-delete", []byte("/bulk/b\n"), "Accept", "application/xml")
	var x struct {
		Deleted  int    `xml:"number_deleted"`
		NotFound int    `xml:"number_not_found"`
		Status   string `xml:"response_status"`
	}
	if err := xml.Unmarshal(body, &x); err != nil || x.NotFound != 1 || x.Deleted != 0 || x.Status != "200 OK" {
		t.Fatalf("XML answer %q: %+v %v", body, x, err)
	}

	// Nothing to delete, too many names, a body that is not text.
	resp, body = c.do(t, "POST", "?bulk-delete", []byte("\n\n"), "Accept", "application/json")
	if got := decodeBulk(t, "empty bulk delete", body); got.Status != "400 Bad Request" || got.Body != "Invalid bulk delete." {
		t.Fatalf("empty bulk delete: %+v", got)
	}
	resp, body = c.do(t, "POST", "?bulk-delete", []byte(strings.Repeat("/bulk/x\n", 10001)), "Accept", "application/json")
	if got := decodeBulk(t, "10001 names", body); got.Status != "413 Request Entity Too Large" || got.Deleted+got.NotFound != 0 {
		t.Fatalf("10001 names: %+v", got)
	}
	resp, body = c.do(t, "POST", "?bulk-delete", []byte(`["/bulk/b"]`), "Content-Type", "application/json", "Accept", "application/json")
	if got := decodeBulk(t, "bulk delete of JSON", body); resp.StatusCode != 200 || got.Status != "406 Not Acceptable" || got.Deleted != 0 {
		t.Fatalf("bulk delete of JSON: %s %+v", resp.Status, got)
	}

	// Another project: its own objects go, others' are 403 (and stay).
	bob := e.bobClient(t)
	resp, body = bob.do(t, "PUT", "/bobs", nil)
	want(t, "bob PUT container", resp, body, 201)
	resp, body = bob.do(t, "PUT", "/bobs/o", []byte("x"))
	want(t, "bob PUT object", resp, body, 201)
	resp, body = c.do(t, "PUT", "/bulk/keep", []byte("x"))
	want(t, "PUT", resp, body, 201)
	resp, body = bob.do(t, "POST", "?bulk-delete", []byte("/bobs/o\n/bulk/keep\n/bulk\n"), "Accept", "application/json")
	got = decodeBulk(t, "bob's bulk delete", body)
	if got.Deleted != 1 || got.Status != "400 Bad Request" || len(got.Errors) != 2 ||
		got.Errors[0][1] != "403 Forbidden" || got.Errors[1][1] != "403 Forbidden" {
		t.Fatalf("bob's bulk delete: %+v", got)
	}
	if resp, _ := c.do(t, "HEAD", "/bulk/keep", nil); resp.StatusCode != 200 {
		t.Fatalf("bob deleted admin's object: %s", resp.Status)
	}
	resp, body = e.do(t, "POST", c.base+"?bulk-delete", []byte("/bulk/keep\n"))
	want(t, "bulk delete without a token", resp, body, 401)
}
