package sftp_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pkgsftp "github.com/pkg/sftp"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"golang.org/x/crypto/ssh"
)

// TestSFTPAccounts: with Config.Authenticate, the gateway's accounts log
// in with their passwords, chrooted to their home; a wrong password, an
// unknown name and a removed account are refused; the users file's key
// logins go on as before.
func TestSFTPAccounts(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	dir := t.TempDir()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	hk, err := sftp.LoadOrCreateKey(filepath.Join(dir, "host-key"))
	if err != nil {
		t.Fatal(err)
	}
	uk, err := sftp.LoadOrCreateKey(filepath.Join(dir, "user-key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.CreateBucket(ctx, "files", ""); err != nil {
		t.Fatal(err)
	}
	users := sftp.KeyLine("keyuser", "files", uk.PublicKey())
	srv, err := sftp.New(sftp.Config{
		HostKey: hk,
		Users:   func() (sftp.Users, error) { return sftp.ParseUsers(strings.NewReader(users)) },
		Authenticate: func(ctx context.Context, user, password string) (string, error) {
			u, err := gw.Authenticate(ctx, user, password)
			return u.Home, err
		},
		Tree:     sftp.GatewayTrees(gw),
		SpoolDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	dial := func(user string, auth ssh.AuthMethod) (*pkgsftp.Client, error) {
		c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{auth},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
		if err != nil {
			return nil, err
		}
		sc, err := pkgsftp.NewClient(c)
		if err != nil {
			c.Close()
			return nil, err
		}
		t.Cleanup(func() { sc.Close(); c.Close() })
		return sc, nil
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "ivy", Password: "ivy's password"}); err != nil {
		t.Fatal(err)
	}
	c, err := dial("ivy", ssh.Password("ivy's password"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Create("/hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "over SFTP")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if _, err := gw.Get(ctx, "home-ivy", "hello.txt", &sb, 0, -1); err != nil || sb.String() != "over SFTP" {
		t.Fatalf("ivy's home: %q %v", sb.String(), err)
	}
	for _, c := range []struct{ user, pw string }{{"ivy", "wrong password"}, {"nobody", "ivy's password"}, {"keyuser", "ivy's password"}} {
		if _, err := dial(c.user, ssh.Password(c.pw)); err == nil {
			t.Errorf("%s/%q logged in", c.user, c.pw)
		}
	}
	if _, err := dial("keyuser", ssh.PublicKeys(uk)); err != nil {
		t.Fatalf("a key login of the users file: %v", err)
	}
	if err := gw.DeleteUser(ctx, "ivy", false); err != nil {
		t.Fatal(err)
	}
	if _, err := dial("ivy", ssh.Password("ivy's password")); err == nil {
		t.Fatal("a removed account logged in")
	}
}
