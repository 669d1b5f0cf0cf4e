package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestSwiftStartWritesEnv: starting Swift on a gateway writes swift.env
// with the v1.0 and v3 variables, whose credentials log in; started
// again (on another port) it keeps its user and replaces its endpoint in
// the catalog.
func TestSwiftStartWritesEnv(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 1})
	ctx := context.Background()
	dir := t.TempDir()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	admin, err := adminKey(ctx, gw, dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := swiftConfig{addr: "127.0.0.1:0", region: "r1", ttl: time.Hour}
	first, err := startSwift(ctx, gw, dir, admin, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	sw, err := startSwift(ctx, gw, dir, admin, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	if sw.user != first.user || sw.url == first.url {
		t.Fatalf("restart: user %+v then %+v, URL %s then %s", first.user, sw.user, first.url, sw.url)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "swift.env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		env[k] = v
	}
	for k, want := range map[string]string{"ST_AUTH": sw.url + "/auth/v1.0", "ST_USER": "admin:admin", "ST_KEY": sw.user.Password,
		"OS_AUTH_URL": sw.url + "/v3", "OS_USERNAME": "admin", "OS_PASSWORD": sw.user.Password, "OS_PROJECT_NAME": "admin",
		"OS_USER_DOMAIN_NAME": "Default", "OS_PROJECT_DOMAIN_NAME": "Default", "OS_REGION_NAME": "r1", "OS_IDENTITY_API_VERSION": "3"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	req, _ := http.NewRequest("GET", env["ST_AUTH"], nil)
	req.Header.Set("X-Auth-User", env["ST_USER"])
	req.Header.Set("X-Auth-Key", env["ST_KEY"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("X-Storage-Url"), sw.url+"/v1/AUTH_") {
		t.Fatalf("login with swift.env: %s %v", resp.Status, resp.Header)
	}
	es, err := sw.ids.Endpoints(ctx)
	if err != nil || len(es) != 1 || es[0].Public != sw.url || es[0].Region != "r1" {
		t.Fatalf("catalog after a restart: %+v %v", es, err)
	}

	// A second gateway sharing the registry, in another region: it
	// starts although admin:admin exists, and both are in the catalog.
	dir2 := t.TempDir()
	reg, err := os.ReadFile(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	gw2, err := gateway.Open(ctx, gateway.Config{Dir: dir2, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw2.Close()
	admin2, err := adminKey(ctx, gw2, dir2)
	if err != nil {
		t.Fatal(err)
	}
	sw2, err := startSwift(ctx, gw2, dir2, admin2, swiftConfig{addr: "127.0.0.1:0", region: "r2", ttl: time.Hour}, log)
	if err != nil {
		t.Fatalf("second gateway: %v", err)
	}
	defer sw2.Close()
	if es, err := sw.ids.Endpoints(ctx); err != nil || len(es) != 2 || es[1].Region != "r2" {
		t.Fatalf("catalog with two regions: %+v %v", es, err)
	}
}
