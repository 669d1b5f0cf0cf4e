package swift_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/gateway/swift"
)

// TestAuthV1: TempAuth hands out a token and the storage URL of the
// project's account; a wrong password, an unknown user or project and
// missing headers are 401; a bad token is 401 and another project's
// account 403.
func TestAuthV1(t *testing.T) {
	e := newEnv(t)
	tok, base := e.login(t, "demo:alice", e.pass)
	if !strings.HasPrefix(base, "/v1/AUTH_") || tok == "" {
		t.Fatalf("token %q, storage URL %q", tok, base)
	}
	for _, c := range [][2]string{{"demo:alice", "wrong"}, {"demo:bob", e.pass}, {"nope:alice", e.pass}, {"alice", e.pass}, {"", ""}} {
		resp, _ := e.do(t, "GET", "/auth/v1.0", nil, "X-Auth-User", c[0], "X-Auth-Key", c[1])
		if resp.StatusCode != 401 || resp.Header.Get("X-Auth-Token") != "" {
			t.Errorf("auth %q %q: %s", c[0], c[1], resp.Status)
		}
	}
	resp, body := e.do(t, "HEAD", base, nil, "X-Auth-Token", tok)
	want(t, "HEAD account", resp, body, 204)
	resp, body = e.do(t, "HEAD", base, nil, "X-Auth-Token", tok+"x")
	want(t, "bad token", resp, body, 401)
	resp, body = e.do(t, "HEAD", base, nil)
	want(t, "no token", resp, body, 401)
	resp, body = e.do(t, "HEAD", "/v1/AUTH_0123", nil, "X-Auth-Token", tok)
	want(t, "another account", resp, body, 403)
}

// TestAuthV3: Keystone password tokens scoped to a project, with the
// catalog of every registered gateway by region; failures are 401, an
// unscoped request 400; tokens expire and can be revoked.
func TestAuthV3(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.ids.Register(ctx, keystone.Endpoint{Region: "r2", Public: "http://r2.example:8080"}); err != nil {
		t.Fatal(err)
	}
	resp, doc := e.v3(t, v3Body("alice", e.pass, "demo"))
	if resp.StatusCode != 201 {
		t.Fatalf("v3: %s %v", resp.Status, doc)
	}
	tok := resp.Header.Get("X-Subject-Token")
	token := doc["token"].(map[string]any)
	catalog := token["catalog"].([]any)
	if len(catalog) != 1 || catalog[0].(map[string]any)["type"] != "object-store" {
		t.Fatalf("catalog %v", catalog)
	}
	regions := map[string]string{}
	for _, ep := range catalog[0].(map[string]any)["endpoints"].([]any) {
		m := ep.(map[string]any)
		if m["interface"] == "public" {
			regions[m["region_id"].(string)] = m["url"].(string)
		}
	}
	proj := token["project"].(map[string]any)["id"].(string)
	if regions["r1"] != e.srv.URL+"/v1/AUTH_"+proj || regions["r2"] != "http://r2.example:8080/v1/AUTH_"+proj {
		t.Fatalf("endpoints by region %v", regions)
	}
	if _, err := time.Parse(time.RFC3339, token["expires_at"].(string)); err != nil {
		t.Fatalf("expires_at: %v", err)
	}
	// The swift CLI sends ST_USER (PROJECT:USER) to ST_AUTH/v3 when both
	// are set.
	resp, _ = e.do(t, "POST", "/auth/v1.0/v3/auth/tokens", []byte(v3Body("demo:alice", e.pass, "demo")))
	if resp.StatusCode != 201 {
		t.Fatalf("v3 under /auth/v1.0 with PROJECT:USER: %s", resp.Status)
	}
	for _, b := range []string{v3Body("alice", "wrong", "demo"), v3Body("bob", e.pass, "demo"), v3Body("alice", e.pass, "other")} {
		if resp, _ := e.v3(t, b); resp.StatusCode != 401 || resp.Header.Get("X-Subject-Token") != "" {
			t.Errorf("%s: %s", b, resp.Status)
		}
	}
	if resp, _ := e.v3(t, `{"auth":{"identity":{"methods":["password"],"password":{"user":{"name":"alice","password":"x"}}}}}`); resp.StatusCode != 400 {
		t.Errorf("unscoped: %s", resp.Status)
	}
	if resp, _ := e.v3(t, `{not json`); resp.StatusCode != 400 {
		t.Errorf("bad JSON: %s", resp.Status)
	}
	base := "/v1/AUTH_" + proj
	resp, body := e.do(t, "GET", "/v3/auth/tokens", nil, "X-Auth-Token", tok, "X-Subject-Token", tok)
	want(t, "validate", resp, body, 200)
	resp, body = e.do(t, "HEAD", base, nil, "X-Auth-Token", tok)
	want(t, "HEAD account", resp, body, 204)

	// Revoked: refused from then on.
	resp2, _ := e.v3(t, v3Body("alice", e.pass, "demo"))
	tok2 := resp2.Header.Get("X-Subject-Token")
	resp, body = e.do(t, "DELETE", "/v3/auth/tokens", nil, "X-Auth-Token", tok, "X-Subject-Token", tok2)
	want(t, "revoke", resp, body, 204)
	resp, body = e.do(t, "HEAD", base, nil, "X-Auth-Token", tok2)
	want(t, "revoked token", resp, body, 401)

	// Expired: an hour later the first token is refused.
	e.clock.Add(time.Hour + time.Second)
	resp, body = e.do(t, "HEAD", base, nil, "X-Auth-Token", tok)
	want(t, "expired token", resp, body, 401)
}

// TestTokenAtAnotherGateway: a token issued by one gateway is accepted
// by another sharing the registry (nothing is kept in memory), and a
// revocation at one is seen at the other.
func TestTokenAtAnotherGateway(t *testing.T) {
	e := newEnv(t)
	gw2 := openGW(t, e.grid, e.copyRegistry(t))
	ids2 := keystone.New(gw2, keystone.Config{})
	srv2 := httptest.NewServer(swift.New(gw2, ids2, swift.Options{Region: "r1"}))
	defer srv2.Close()
	tok, base := e.login(t, "demo:alice", e.pass)
	resp, body := doURL(t, "PUT", srv2.URL+base+"/shared", nil, "X-Auth-Token", tok)
	want(t, "PUT container at the second gateway", resp, body, 201)
	resp, body = e.do(t, "PUT", base+"/shared/o", []byte("x"), "X-Auth-Token", tok)
	want(t, "PUT object at the first", resp, body, 201)
	if err := e.ids.Revoke(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, _ := doURL(t, "HEAD", srv2.URL+base, nil, "X-Auth-Token", tok)
		if resp.StatusCode == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still accepted at the second gateway: %s", resp.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProjectsSeeTheirContainers: a project acting as a non-admin access
// key owns the containers it creates, lists only the containers its key
// may read, and gets 403 on another project's container (404 on one
// that does not exist).
func TestProjectsSeeTheirContainers(t *testing.T) {
	e := newEnv(t)
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
	admin := e.client(t)
	tok, base := e.login(t, "team:bob", "bobs-password")
	bob := &client{e, tok, base}
	resp, body := admin.do(t, "PUT", "/admins", nil)
	want(t, "admin PUT container", resp, body, 201)
	resp, body = bob.do(t, "PUT", "/bobs", nil)
	want(t, "bob PUT container", resp, body, 201)
	resp, body = bob.do(t, "PUT", "/bobs/o", []byte("x"))
	want(t, "bob PUT object", resp, body, 201)
	if owner, err := e.gw.Owner(ctx, "bobs"); err != nil || owner != k.ID {
		t.Fatalf("owner of bob's container: %q %v", owner, err)
	}
	resp, body = bob.do(t, "GET", "", nil)
	if strings.TrimSpace(string(body)) != "bobs" {
		t.Fatalf("bob's account lists %q", body)
	}
	resp, body = admin.do(t, "GET", "", nil)
	if strings.TrimSpace(string(body)) != "admins\nbobs" {
		t.Fatalf("admin's account lists %q", body)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/admins"}, {"PUT", "/admins/o"}, {"GET", "/admins/o"}, {"DELETE", "/admins"}, {"PUT", "/admins"}} {
		resp, body = bob.do(t, c.method, c.path, nil)
		want(t, "bob "+c.method+" "+c.path, resp, body, 403)
	}
	resp, body = bob.do(t, "GET", "/nobodys/o", nil)
	want(t, "bob GET in a missing container", resp, body, 404)
	resp, body = bob.do(t, "PUT", "/bobs/copy", nil, "X-Copy-From", "/admins/o")
	want(t, "bob copies from admin's container", resp, body, 403)
}
