package swift_test

import (
	"context"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestContainerACLs: X-Container-Read and -Write name projects, whose
// access keys get read or write on the container, the same grants S3
// keys have (and the grants S3 made show in the ACLs); such a project
// reaches the container through its own account or the owner's. User
// elements (PROJECT:USER, *:*) grant users, in Swift only. .r: elements
// let requests without a token read objects (listings with .rlistings),
// by Referer; only the owner changes ACLs; bad elements are 400.
func TestContainerACLs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(t)
	bob := e.bobClient(t)
	team, err := e.ids.Project(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	perm := func() gateway.Perm {
		t.Helper()
		k, err := e.gw.Key(ctx, team.Key)
		if err != nil {
			t.Fatal(err)
		}
		return k.Buckets["shared"]
	}
	resp, body := admin.do(t, "PUT", "/shared", nil)
	want(t, "PUT container", resp, body, 201)
	resp, body = admin.do(t, "PUT", "/shared/o", []byte("shared bytes"))
	want(t, "PUT object", resp, body, 201)
	resp, body = admin.do(t, "PUT", "/private", nil)
	want(t, "PUT container", resp, body, 201)
	resp, body = admin.do(t, "PUT", "/private/o", []byte("private bytes"))
	want(t, "PUT object", resp, body, 201)
	ownerPath := admin.base + "/shared/o"

	resp, body = bob.do(t, "GET", "/shared/o", nil)
	want(t, "bob reads before any ACL", resp, body, 403)
	resp, body = admin.do(t, "POST", "/shared", nil, "X-Container-Read", "team:*")
	want(t, "POST X-Container-Read", resp, body, 204)
	if perm() != gateway.Read {
		t.Fatalf("team's key after X-Container-Read: %v", perm())
	}
	resp, body = bob.do(t, "GET", "/shared/o", nil)
	if resp.StatusCode != 200 || string(body) != "shared bytes" {
		t.Fatalf("bob reads through his account: %s %q", resp.Status, body)
	}
	resp, body = e.do(t, "GET", ownerPath, nil, "X-Auth-Token", bob.token)
	want(t, "bob reads through the owner's account", resp, body, 200)
	resp, body = bob.do(t, "PUT", "/shared/b", []byte("x"))
	want(t, "bob writes with read only", resp, body, 403)
	resp, body = e.do(t, "GET", admin.base, nil, "X-Auth-Token", bob.token)
	want(t, "bob lists the owner's account", resp, body, 403)
	resp, _ = admin.do(t, "HEAD", "/shared", nil)
	if resp.Header.Get("X-Container-Read") != "team:*" {
		t.Fatalf("X-Container-Read %q", resp.Header.Get("X-Container-Read"))
	}

	resp, body = admin.do(t, "POST", "/shared", nil, "X-Container-Write", "team")
	want(t, "POST X-Container-Write", resp, body, 204)
	if perm() != gateway.Write {
		t.Fatalf("team's key after X-Container-Write: %v", perm())
	}
	resp, body = bob.do(t, "PUT", "/shared/b", []byte("from bob"))
	want(t, "bob writes with write", resp, body, 201)
	resp, body = bob.do(t, "POST", "/shared", nil, "X-Container-Read", ".r:*")
	want(t, "bob changes the ACL", resp, body, 403)
	resp, _ = admin.do(t, "HEAD", "/shared", nil)
	if resp.Header.Get("X-Container-Write") != "team:*" {
		t.Fatalf("X-Container-Write %q", resp.Header.Get("X-Container-Write"))
	}

	for _, bad := range [][]string{
		{"X-Container-Read", "nobody:bob"}, {"X-Container-Read", "team:"}, {"X-Container-Read", "*"}, {"X-Container-Read", ".x:y"},
		{"X-Container-Read", "nobody"}, {"X-Container-Write", ".r:*"}, {"X-Container-Read", ".r:"},
	} {
		resp, body = admin.do(t, "POST", "/shared", nil, bad...)
		want(t, bad[0]+": "+bad[1], resp, body, 400)
	}
	if perm() != gateway.Write {
		t.Fatalf("a refused ACL changed the grant: %v", perm())
	}

	// Public read: objects with .r:*, the listing with .rlistings too;
	// by Referer with hosts.
	anon := func(method, path string, hdr ...string) int {
		resp, _ := e.do(t, method, path, nil, hdr...)
		return resp.StatusCode
	}
	if c := anon("GET", ownerPath); c != 401 {
		t.Fatalf("anonymous GET before .r:*: %d", c)
	}
	resp, body = admin.do(t, "POST", "/shared", nil, "X-Container-Read", ".r:*")
	want(t, "POST .r:*", resp, body, 204)
	if c := anon("GET", ownerPath); c != 200 {
		t.Fatalf("anonymous GET with .r:*: %d", c)
	}
	for _, c := range []struct {
		method, path string
	}{{"GET", admin.base + "/shared"}, {"PUT", ownerPath}, {"DELETE", ownerPath}, {"GET", admin.base + "/private/o"}, {"GET", admin.base}} {
		if code := anon(c.method, c.path); code != 401 {
			t.Fatalf("anonymous %s %s with .r:*: %d", c.method, c.path, code)
		}
	}
	resp, body = admin.do(t, "POST", "/shared", nil, "X-Container-Read", ".r:*,.rlistings")
	want(t, "POST .rlistings", resp, body, 204)
	if c := anon("GET", admin.base+"/shared"); c != 200 {
		t.Fatalf("anonymous listing with .rlistings: %d", c)
	}
	resp, body = admin.do(t, "POST", "/shared", nil, "X-Container-Read", ".r:.example.com,.r:-bad.example.com")
	want(t, "POST referrers", resp, body, 204)
	for ref, code := range map[string]int{"http://www.example.com/page": 200, "http://bad.example.com/": 401, "http://example.org/": 401, "": 401} {
		if c := anon("GET", ownerPath, "Referer", ref); c != code {
			t.Fatalf("anonymous GET with Referer %q: %d, want %d", ref, c, code)
		}
	}
	resp, _ = admin.do(t, "HEAD", "/shared", nil)
	if resp.Header.Get("X-Container-Read") != ".r:.example.com,.r:-bad.example.com" {
		t.Fatalf("X-Container-Read %q", resp.Header.Get("X-Container-Read"))
	}

	// Removing the write ACL takes the grant away (the read ACL no longer
	// names team either).
	resp, body = admin.do(t, "POST", "/shared", nil, "X-Remove-Container-Write", "x")
	want(t, "X-Remove-Container-Write", resp, body, 204)
	if perm() != gateway.None {
		t.Fatalf("team's key after the ACLs were removed: %v", perm())
	}
	resp, body = bob.do(t, "GET", "/shared/o", nil)
	want(t, "bob reads after the ACLs were removed", resp, body, 403)

	// A grant made for S3 (quilt key create --bucket NAME=read) is the
	// same: it shows in the ACL.
	k, _ := e.gw.Key(ctx, team.Key)
	if k.Buckets == nil {
		k.Buckets = map[string]gateway.Perm{}
	}
	k.Buckets["shared"] = gateway.Read
	if err := e.gw.PutKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	resp, _ = admin.do(t, "HEAD", "/shared", nil)
	if resp.Header.Get("X-Container-Read") != ".r:.example.com,.r:-bad.example.com,team:*" {
		t.Fatalf("X-Container-Read with an S3 grant: %q", resp.Header.Get("X-Container-Read"))
	}
	// Users: PROJECT:USER names one user of a project (the key's grant
	// is untouched: S3 has no users), *:* any user with a token.
	if _, _, err := e.ids.AddUser(ctx, "team", "carol", "carols-password"); err != nil {
		t.Fatal(err)
	}
	tok, base := e.login(t, "team:carol", "carols-password")
	carol := &client{e, tok, base}
	resp, body = admin.do(t, "POST", "/private", nil, "X-Container-Read", "team:bob", "X-Container-Write", "*:carol")
	want(t, "POST user ACLs", resp, body, 204)
	resp, body = bob.do(t, "GET", "/private/o", nil)
	if resp.StatusCode != 200 || string(body) != "private bytes" {
		t.Fatalf("bob reads with a user ACL: %s %q", resp.Status, body)
	}
	resp, body = bob.do(t, "PUT", "/private/bob", []byte("x"))
	want(t, "bob writes with a read user ACL", resp, body, 403)
	resp, body = carol.do(t, "PUT", "/private/carol", []byte("from carol"))
	want(t, "carol writes with a write user ACL", resp, body, 201)
	resp, body = e.do(t, "GET", admin.base+"/private/carol", nil, "X-Auth-Token", carol.token)
	want(t, "carol reads (write includes read) through the owner's account", resp, body, 200)
	if k, _ := e.gw.Key(ctx, team.Key); k.Buckets["private"] != gateway.None {
		t.Fatalf("a user ACL changed the project's key: %v", k.Buckets["private"])
	}
	resp, _ = admin.do(t, "HEAD", "/private", nil)
	if resp.Header.Get("X-Container-Read") != "team:bob" || resp.Header.Get("X-Container-Write") != "*:carol" {
		t.Fatalf("user ACLs read back: %q %q", resp.Header.Get("X-Container-Read"), resp.Header.Get("X-Container-Write"))
	}
	resp, body = admin.do(t, "POST", "/private", nil, "X-Container-Read", "*:*", "X-Container-Write", "")
	want(t, "POST *:*", resp, body, 204)
	resp, body = carol.do(t, "GET", "/private/o", nil)
	want(t, "carol reads with *:*", resp, body, 200)
	resp, body = carol.do(t, "PUT", "/private/carol2", []byte("x"))
	want(t, "carol writes after the write ACL was cleared", resp, body, 403)
	resp, body = e.do(t, "GET", admin.base+"/private/o", nil)
	want(t, "a request without a token with *:*", resp, body, 401)

	// A container made with an ACL.
	resp, body = admin.do(t, "PUT", "/made-public", nil, "X-Container-Read", ".r:*")
	want(t, "PUT container with an ACL", resp, body, 201)
	resp, body = admin.do(t, "PUT", "/made-public/x", []byte("x"))
	want(t, "PUT", resp, body, 201)
	if c := anon("GET", admin.base+"/made-public/x"); c != 200 {
		t.Fatalf("anonymous GET in a container made public: %d", c)
	}
}
