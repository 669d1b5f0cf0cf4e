package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/webapp"
)

// TestWebappUsers: the web app's logins against the webdav-users file:
// the right password, a wrong one, an unknown user, the admin.
func TestWebappUsers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "webdav-users")
	var lines string
	for _, u := range [][3]string{{"quilt", "files", "pw-q"}, {"bob", "bob-files", "pw-b"}} {
		l, err := sftp.PasswordLine(u[0], u[1], u[2])
		if err != nil {
			t.Fatal(err)
		}
		lines += l + "\n"
	}
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := webappUsers(file)
	ctx := context.Background()
	a, err := auth(ctx, "bob", "pw-b")
	if err != nil || a.Name != "bob" || a.Bucket != "bob-files" || a.Admin {
		t.Fatalf("bob: %+v %v", a, err)
	}
	if a, err := auth(ctx, "quilt", "pw-q"); err != nil || !a.Admin || a.Bucket != "files" {
		t.Fatalf("quilt: %+v %v", a, err)
	}
	for _, c := range [][2]string{{"bob", "pw-q"}, {"nobody", "pw-b"}, {"bob", ""}} {
		if _, err := auth(ctx, c[0], c[1]); !errors.Is(err, webapp.ErrLogin) {
			t.Fatalf("%s with %q: %v", c[0], c[1], err)
		}
	}
}
