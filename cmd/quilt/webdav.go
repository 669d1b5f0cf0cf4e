package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/webdav"
)

// webdavService is a running WebDAV server over a gateway.
type webdavService struct {
	hs   *http.Server
	url  string // http://HOST:PORT/dav/
	env  string // the webdav.env written
	user string // the default user, if its password is known
}

func (s *webdavService) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.hs.Shutdown(ctx)
	s.hs.Close()
}

// Files of the WebDAV server in the gateway's directory.
const (
	webdavUsersFile = "webdav-users"    // the accounts: the SFTP format, password lines (docs/files.md)
	webdavPassword  = "webdav-password" // the default user's password
	webdavDefault   = "quilt"           // the default user
	webdavBucket    = "files"           // the default user's bucket (the SFTP one's too)
)

// startWebDAV serves gw's buckets over WebDAV at addr/dav/USER/, with its
// users file in dir. The first time (no users file), it makes a default
// user "quilt" of bucket "files" (made if missing) with a new password
// in dir/webdav-password. It writes dir/webdav.env.
func startWebDAV(ctx context.Context, gw *gateway.Gateway, dir, addr string, log *slog.Logger) (*webdavService, error) {
	users := filepath.Join(dir, webdavUsersFile)
	pwFile := filepath.Join(dir, webdavPassword)
	if _, err := os.Stat(users); errors.Is(err, os.ErrNotExist) {
		if err := gw.CreateBucket(ctx, webdavBucket, ""); err != nil && !errors.Is(err, gateway.ErrBucketExists) {
			return nil, fmt.Errorf("webdav: bucket %s: %w", webdavBucket, err)
		}
		b := make([]byte, 18)
		rand.Read(b)
		pw := base64.RawURLEncoding.EncodeToString(b)
		line, err := sftp.PasswordLine(webdavDefault, webdavBucket, pw)
		if err != nil {
			return nil, err
		}
		// The password first: a crash between the two writes leaves no
		// users file, and the next start makes both again.
		if err := writeFileAtomic(pwFile, []byte(pw+"\n"), 0o600); err != nil {
			return nil, err
		}
		head := "# quilt webdav users: NAME BUCKET password BCRYPT_HASH, the format of sftp-users (docs/files.md)\n"
		if err := writeFileAtomic(users, []byte(head+line+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if _, err := sftp.LoadUsers(users); err != nil {
		return nil, err
	}
	spool := filepath.Join(dir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	srv, err := webdav.New(webdav.Config{
		Users:    func() (sftp.Users, error) { return sftp.LoadUsers(users) },
		Tree:     sftp.GatewayTrees(gw),
		Object:   webdav.GatewayObjects(gw),
		SpoolDir: spool,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webdav: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	go hs.Serve(ln)
	svc := &webdavService{hs: hs, url: "http://" + ln.Addr().String() + webdav.Prefix, env: filepath.Join(dir, "webdav.env")}
	// QUILT_WEBDAV_SERVER is the server's root, the URL ownCloud's and
	// Nextcloud's clients take (docs/files.md).
	env := fmt.Sprintf("export QUILT_WEBDAV_URL=%s\nexport QUILT_WEBDAV_SERVER=http://%s\n", svc.url, ln.Addr().String())
	if b, err := os.ReadFile(pwFile); err == nil {
		us, _ := sftp.LoadUsers(users)
		if us[webdavDefault] != nil {
			svc.user = webdavDefault
			env += fmt.Sprintf("export QUILT_WEBDAV_USER=%s\nexport QUILT_WEBDAV_PASSWORD=%s\n", webdavDefault, strings.TrimSpace(string(b)))
		}
	}
	if err := writeFileAtomic(svc.env, []byte(env), 0o600); err != nil {
		svc.Close()
		return nil, err
	}
	return svc, nil
}

// webdavHint is what quilt up and quilt webdav print about the server.
func webdavHint(svc *webdavService) string {
	if svc.user == "" {
		return fmt.Sprintf("WebDAV: %sUSER/  (users in %s)\n", svc.url, webdavUsersFile)
	}
	return fmt.Sprintf("WebDAV: %s%s/  user %s (bucket %s), password in %s\n        . %s; cadaver $QUILT_WEBDAV_URL$QUILT_WEBDAV_USER/\n        ownCloud/Nextcloud clients: server %s\n",
		svc.url, svc.user, svc.user, webdavBucket, filepath.Join(filepath.Dir(svc.env), webdavPassword), svc.env, strings.TrimSuffix(svc.url, webdav.Prefix))
}

func runWebDAV(ctx context.Context, args []string) error {
	fs := newFlagSet("webdav", "Usage: quilt webdav --grid INVITE [flags]\n\nServes the file trees of the gateway's buckets over WebDAV at\nhttp://ADDR/dav/USER/ until interrupted. Each user of DIR/webdav-users\nlogs in with HTTP Basic auth and sees one bucket; the first start makes a\nuser \"quilt\" for bucket \"files\" with a password in DIR/webdav-password.\nPlain HTTP: serve it on 127.0.0.1, or behind a TLS proxy. See docs/files.md.")
	var g gridFlags
	g.register(fs)
	addr := fs.String("listen", "127.0.0.1:7790", "WebDAV address (host:port)")
	dir := fs.String("dir", filepath.Join(home(), "gateway"), "gateway state directory")
	fs.IntVar(&inlineMax, "inline", 4096, "objects up to this many bytes are kept in the bucket's log, not as erasure-coded grid objects")
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	gw, err := openGateway(ctx, s, *dir, s.log)
	if err != nil {
		return err
	}
	defer gw.Close()
	svc, err := startWebDAV(ctx, gw, *dir, *addr, s.log)
	if err != nil {
		return err
	}
	defer svc.Close()
	fmt.Fprintf(os.Stderr, "quilt webdav: serving %s\n%s", *dir, webdavHint(svc))
	<-ctx.Done()
	return nil
}
