package swift_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/gateway/swift"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// clock is a settable clock for token expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a gateway serving Swift on an in-process grid, with project
// "demo" (acting as the admin key) and its user demo:alice.
type env struct {
	grid  *testgrid.Grid
	gw    *gateway.Gateway
	dir   string
	ids   *keystone.Service
	clock *clock
	srv   *httptest.Server
	api   *swift.Server
	admin gateway.AccessKey
	pass  string
}

func openGW(t *testing.T, g *testgrid.Grid, dir string) *gateway.Gateway {
	t.Helper()
	gw, err := gateway.Open(context.Background(), gateway.Config{Dir: dir, Nodes: g.NodeClient(),
		Objects: g.Objects(object.Options{}), NoSync: true, SyncEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

func newEnv(t *testing.T) *env {
	t.Helper()
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	e := &env{grid: g, dir: t.TempDir(), clock: &clock{t: time.Now()}}
	e.gw = openGW(t, g, e.dir)
	ctx := context.Background()
	var err error
	if e.admin, err = e.gw.CreateKey(ctx, true, nil); err != nil {
		t.Fatal(err)
	}
	e.ids = keystone.New(e.gw, keystone.Config{Now: e.clock.Now, Cost: bcrypt.MinCost})
	e.api = swift.New(e.gw, e.ids, swift.Options{Region: "r1", Now: e.clock.Now})
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	if _, err := e.ids.Register(ctx, keystone.Endpoint{Region: "r1", Public: e.srv.URL}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ids.AddProject(ctx, "demo", e.admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, e.pass, err = e.ids.AddUser(ctx, "demo", "alice", ""); err != nil {
		t.Fatal(err)
	}
	return e
}

// do sends a request to the server: method, path (with query), body,
// headers as name, value pairs.
func (e *env) do(t *testing.T, method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return doURL(t, method, e.srv.URL+path, body, hdr...)
}

func doURL(t *testing.T, method, url string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// login authenticates with TempAuth and returns the token and storage
// URL (path only).
func (e *env) login(t *testing.T, user, pass string) (string, string) {
	t.Helper()
	resp, _ := e.do(t, "GET", "/auth/v1.0", nil, "X-Auth-User", user, "X-Auth-Key", pass)
	if resp.StatusCode != 200 {
		t.Fatalf("auth %s: %s", user, resp.Status)
	}
	return resp.Header.Get("X-Auth-Token"), strings.TrimPrefix(resp.Header.Get("X-Storage-Url"), e.srv.URL)
}

// v3 asks for a Keystone token; it returns the answer and the decoded
// body.
func (e *env) v3(t *testing.T, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, b := e.do(t, "POST", "/v3/auth/tokens", []byte(body), "Content-Type", "application/json")
	var doc map[string]any
	json.Unmarshal(b, &doc)
	return resp, doc
}

func v3Body(user, pass, project string) string {
	b, _ := json.Marshal(map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": user, "password": pass, "domain": map[string]string{"name": "Default"}}}},
		"scope": map[string]any{"project": map[string]any{"name": project, "domain": map[string]string{"name": "Default"}}},
	}})
	return string(b)
}

// client is a logged-in user: requests under its storage URL.
type client struct {
	e     *env
	token string
	base  string
}

func (e *env) client(t *testing.T) *client {
	tok, base := e.login(t, "demo:alice", e.pass)
	return &client{e, tok, base}
}

func (c *client) do(t *testing.T, method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return c.e.do(t, method, c.base+path, body, append([]string{"X-Auth-Token", c.token}, hdr...)...)
}

// want fails the test unless resp has status code.
func want(t *testing.T, what string, resp *http.Response, body []byte, code int) {
	t.Helper()
	if resp.StatusCode != code {
		t.Fatalf("%s: %s, want %d (%s)", what, resp.Status, code, body)
	}
}

// copyRegistry makes a second gateway directory sharing e's registry.
func (e *env) copyRegistry(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "registry"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}
