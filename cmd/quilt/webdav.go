package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/webapp"
	"github.com/quilt-grid/quilt/internal/webdav"
	"golang.org/x/crypto/bcrypt"
)

// webdavService is a running WebDAV server over a gateway.
type webdavService struct {
	hs   *http.Server
	app  *webapp.Handler
	url  string // http://HOST:PORT/dav/
	web  string // http://HOST:PORT/, the web app
	env  string // the webdav.env written
	user string // the default user, if its password is known
}

func (s *webdavService) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.hs.Shutdown(ctx)
	s.hs.Close()
	s.app.Close()
}

// Files of the WebDAV server in the gateway's directory.
const (
	webdavUsersFile = "webdav-users"    // an older gateway's accounts (the SFTP format): still accepted, docs/files.md
	webdavPassword  = "webdav-password" // the first admin's password, as made at the first start
	webdavDefault   = "quilt"           // the first admin (an account)
	webdavBucket    = "files"           // the first admin's home (the SFTP default user's bucket too)
)

// startWebDAV serves gw's buckets over WebDAV at addr/dav/USER/ (and
// the ownCloud and Nextcloud clients' URLs), share links at /s/ and
// /api/shares, and the web app (internal/webapp) at every other path of
// addr, to the gateway's accounts (gateway.Authenticate); nodes, if not
// nil, gives the web app's grid page. The first time (no account in the
// registry), it makes the admin account "quilt" with home bucket "files",
// whose password is dir/webdav-password (made if missing: an older
// gateway's default user keeps its password). A webdav-users file an
// older gateway left in dir is still read: its users log in as before
// unless an account of the same name exists. It writes dir/webdav.env.
func startWebDAV(ctx context.Context, gw *gateway.Gateway, nodes *node.Client, dir, addr string, log *slog.Logger) (*webdavService, error) {
	users := filepath.Join(dir, webdavUsersFile)
	pwFile := filepath.Join(dir, webdavPassword)
	if err := firstAdmin(ctx, gw, pwFile); err != nil {
		return nil, err
	}
	auth, err := accountsAuth(gw, users)
	if err != nil {
		return nil, err
	}
	spool := filepath.Join(dir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return nil, err
	}
	srv, err := webdav.New(webdav.Config{
		Authenticate: auth,
		Usage:        davUsage(gw, users),
		Tree:         sftp.GatewayTrees(gw),
		Object:       webdav.GatewayObjects(gw),
		SpoolDir:     spool,
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	// The share links' user is the web app's logged-in user: app is set
	// below, before the listener serves a request.
	var app *webapp.Handler
	links, err := shareLinks(gw, users, func(r *http.Request) (string, string, bool) { return app.User(r) }, auth, log)
	if err != nil {
		return nil, err
	}
	app, err = webapp.New(webapp.Config{
		Authenticate: webappAccounts(gw, auth),
		Tree:         sharedTrees(sftp.GatewayTrees(gw)),
		Usage:        webappUsage(gw),
		Grid:         webappGrid(nodes),
		Users:        webappUsers{gw},
		Shares:       links,
		SpoolDir:     filepath.Join(dir, "webapp"),
		Logger:       log,
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		app.Close()
		return nil, fmt.Errorf("webdav: listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: filesMux(srv, links, app), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	go hs.Serve(ln)
	svc := &webdavService{hs: hs, app: app, url: "http://" + ln.Addr().String() + webdav.Prefix,
		web: "http://" + ln.Addr().String() + "/", env: filepath.Join(dir, "webdav.env")}
	// QUILT_WEBDAV_SERVER is the server's root, the URL ownCloud's and
	// Nextcloud's clients take (docs/files.md).
	env := fmt.Sprintf("export QUILT_WEBDAV_URL=%s\nexport QUILT_WEBDAV_SERVER=http://%s\nexport QUILT_WEB_URL=%s\n", svc.url, ln.Addr().String(), svc.web)
	if b, err := os.ReadFile(pwFile); err == nil {
		pw := strings.TrimSpace(string(b))
		// Only while it is still the admin's password ('quilt user
		// passwd quilt' ends that).
		if _, err := gw.Authenticate(ctx, webdavDefault, pw); err == nil {
			svc.user = webdavDefault
			env += fmt.Sprintf("export QUILT_WEBDAV_USER=%s\nexport QUILT_WEBDAV_PASSWORD=%s\n", webdavDefault, pw)
		}
	}
	if err := writeFileAtomic(svc.env, []byte(env), 0o600); err != nil {
		svc.Close()
		return nil, err
	}
	return svc, nil
}

// davUsage gives WebDAV's quota properties and OCS user: the bytes a
// user's home bucket holds and their quota (none for a user of an older
// gateway's users file).
func davUsage(gw *gateway.Gateway, usersFile string) func(ctx context.Context, user string) (int64, int64, error) {
	return func(ctx context.Context, user string) (int64, int64, error) {
		bucket := ""
		if gw.KnowsUser(user) {
			u, err := gw.User(ctx, user)
			if err != nil {
				return 0, 0, err
			}
			bucket = u.Home
		} else if us, err := sftp.LoadUsers(usersFile); err == nil && us[user] != nil {
			bucket = us[user].Bucket
		} else {
			return 0, 0, gateway.ErrDenied
		}
		used, err := gw.Usage(ctx, bucket)
		return used, gw.QuotaOf(bucket), err
	}
}

// firstAdmin makes the admin account "quilt" (home "files") when the
// registry has no account yet, with the password in pwFile, made first if
// missing.
func firstAdmin(ctx context.Context, gw *gateway.Gateway, pwFile string) error {
	us, err := gw.Users(ctx)
	if err != nil {
		return err
	}
	if len(us) > 0 {
		return nil
	}
	var pw string
	if b, err := os.ReadFile(pwFile); err == nil && gateway.CheckPassword(strings.TrimSpace(string(b))) == nil {
		pw = strings.TrimSpace(string(b)) // an older gateway's default user's
	} else {
		pw = gateway.NewPassword()
		// The password first: a crash before the account is made makes
		// it at the next start with this password.
		if err := writeFileAtomic(pwFile, []byte(pw+"\n"), 0o600); err != nil {
			return err
		}
	}
	_, _, err = gw.CreateUser(ctx, gateway.NewUser{Name: webdavDefault, Password: pw, Admin: true, Home: webdavBucket})
	if err != nil && !errors.Is(err, gateway.ErrUserExists) {
		return fmt.Errorf("webdav: the first admin account: %w", err)
	}
	return nil
}

// accountsAuth checks logins against the gateway's accounts, except for
// a name of the users file an older gateway left that is no account (in
// this gateway's replica): that one is checked against the file (bcrypt;
// a password that matched is remembered by its SHA-256 while the file
// keeps its hash). It returns the user's bucket.
func accountsAuth(gw *gateway.Gateway, usersFile string) (func(ctx context.Context, user, password string) (string, error), error) {
	if _, err := sftp.LoadUsers(usersFile); err != nil {
		return nil, err // a damaged file is said at the start
	}
	var mu sync.Mutex
	verified := map[string][2]string{} // user: SHA-256 of the password, the hash it matched
	return func(ctx context.Context, name, pw string) (string, error) {
		lus, lerr := sftp.LoadUsers(usersFile)
		lu := lus[name]
		if lerr != nil || lu == nil || len(lu.PasswordHashes) == 0 || gw.KnowsUser(name) {
			u, err := gw.Authenticate(ctx, name, pw) // an account: its own password only
			return u.Home, err
		}
		sum := sha256.Sum256([]byte(pw))
		mu.Lock()
		v, ok := verified[name]
		mu.Unlock()
		if ok && subtle.ConstantTimeCompare([]byte(v[0]), sum[:]) == 1 && slices.Contains(lu.PasswordHashes, v[1]) {
			return lu.Bucket, nil
		}
		for _, h := range lu.PasswordHashes {
			if bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)) == nil {
				mu.Lock()
				verified[name] = [2]string{string(sum[:]), h}
				mu.Unlock()
				return lu.Bucket, nil
			}
		}
		return "", gateway.ErrDenied
	}, nil
}

// webdavHint is what quilt up and quilt webdav print about the server.
func webdavHint(svc *webdavService) string {
	web := fmt.Sprintf("Web app: %s\n", svc.web)
	accounts := "Accounts: quilt user add NAME  (quilt user -h; each user's drive is " + svc.url + "NAME/)\n"
	if svc.user == "" {
		return web + fmt.Sprintf("WebDAV: %sUSER/\n%s", svc.url, accounts)
	}
	return web + fmt.Sprintf("WebDAV: %s%s/  user %s (bucket %s), password in %s\n        . %s; cadaver $QUILT_WEBDAV_URL$QUILT_WEBDAV_USER/\n        ownCloud/Nextcloud clients: server %s\n%s",
		svc.url, svc.user, svc.user, webdavBucket, filepath.Join(filepath.Dir(svc.env), webdavPassword), svc.env, strings.TrimSuffix(svc.url, webdav.Prefix), accounts)
}

func runWebDAV(ctx context.Context, args []string) error {
	fs := newFlagSet("webdav", "Usage: quilt webdav --grid INVITE [flags]\n\nServes the file trees of the gateway's buckets over WebDAV at\nhttp://ADDR/dav/USER/, share links at http://ADDR/s/, and the web app at\nhttp://ADDR/, until interrupted. Each account ('quilt user add') logs in\nwith HTTP Basic auth (the web app: a form) and sees their home bucket; the\nfirst start makes the admin account \"quilt\" with bucket \"files\" and a\npassword in DIR/webdav-password.\nPlain HTTP: serve it on 127.0.0.1, or behind a TLS proxy. See docs/files.md.")
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
	svc, err := startWebDAV(ctx, gw, s.nodes, *dir, *addr, s.log)
	if err != nil {
		return err
	}
	defer svc.Close()
	fmt.Fprintf(os.Stderr, "quilt webdav: serving %s\n%s", *dir, webdavHint(svc))
	<-ctx.Done()
	return nil
}
