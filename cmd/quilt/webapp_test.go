package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/webapp"
)

// TestWebappAccounts: the web app's logins are the gateway's accounts
// (home bucket, admin flag, groups) and the users of an older gateway's
// users file; a wrong password, an unknown user and a removed account are
// refused with ErrLogin.
func TestWebappAccounts(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "alice", Password: "alice-password", Admin: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "bob-password"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "webdav-users")
	l, err := sftp.PasswordLine("carol", "carol-files", "carol-password")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(l+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	auth, err := accountsAuth(gw, file)
	if err != nil {
		t.Fatal(err)
	}
	login := webappAccounts(gw, auth)
	if a, err := login(ctx, "alice", "alice-password"); err != nil || !a.Admin || a.Bucket != "home-alice" {
		t.Fatalf("alice: %+v %v", a, err)
	}
	if a, err := login(ctx, "bob", "bob-password"); err != nil || a.Admin || a.Bucket != "home-bob" {
		t.Fatalf("bob: %+v %v", a, err)
	}
	if a, err := login(ctx, "carol", "carol-password"); err != nil || a.Admin || a.Bucket != "carol-files" {
		t.Fatalf("carol (users file): %+v %v", a, err)
	}
	for _, c := range [][2]string{{"bob", "alice-password"}, {"nobody", "bob-password"}, {"bob", ""}, {"carol", "bob-password"}} {
		if _, err := login(ctx, c[0], c[1]); !errors.Is(err, webapp.ErrLogin) {
			t.Fatalf("%s with %q: %v", c[0], c[1], err)
		}
	}
	if err := gw.DeleteUser(ctx, "bob", false); err != nil {
		t.Fatal(err)
	}
	if _, err := login(ctx, "bob", "bob-password"); !errors.Is(err, webapp.ErrLogin) {
		t.Fatalf("bob removed: %v", err)
	}
}

// TestWebappUsersAdmin: the web app's Users page over the gateway's
// accounts: the admin flag as it is now, a user added with its key, the
// gateway's refusals marked as such without their "gateway: " prefix,
// and other failures left as they are.
func TestWebappUsersAdmin(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	ua := webappUsers{gw}
	u, key, err := ua.AddUser(ctx, webapp.NewAccount{Name: "alice", Password: "alice-password", Admin: true, Quota: 1000, Groups: []string{"crew"}})
	if err != nil || u.Home != "home-alice" || key.ID == "" || key.Secret == "" {
		t.Fatalf("add: %+v %v", u, err)
	}
	if ok, err := ua.IsAdmin(ctx, "alice"); !ok || err != nil {
		t.Fatalf("alice admin: %v %v", ok, err)
	}
	if ok, err := ua.IsAdmin(ctx, "nobody"); ok || err != nil {
		t.Fatalf("nobody admin: %v %v", ok, err)
	}
	us, err := ua.Users(ctx)
	if err != nil || len(us) != 1 || us[0].Used != 0 || us[0].Quota != 1000 || us[0].Groups[0] != "crew" {
		t.Fatalf("users: %+v %v", us, err)
	}
	for _, err := range []error{
		func() error {
			_, _, err := ua.AddUser(ctx, webapp.NewAccount{Name: "Bad!", Password: "long-enough"})
			return err
		}(),
		func() error {
			_, _, err := ua.AddUser(ctx, webapp.NewAccount{Name: "alice", Password: "long-enough"})
			return err
		}(),
		ua.SetPassword(ctx, "alice", "short"),
		ua.DeleteUser(ctx, "nobody", false),
		ua.AddGroup(ctx, "crew"),
		ua.DeleteGroup(ctx, "nope"),
	} {
		if !errors.Is(err, webapp.ErrRefused) || strings.HasPrefix(err.Error(), "gateway:") {
			t.Fatalf("not a clean refusal: %v", err)
		}
	}
	if err := refusable(context.Canceled); err != context.Canceled {
		t.Fatalf("another error: %v", err)
	}
}
