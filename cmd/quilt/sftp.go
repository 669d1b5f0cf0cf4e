package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/sftp"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sftpService is a running SFTP server over a gateway.
type sftpService struct {
	srv  *sftp.Server
	addr string
	env  string // the sftp.env written
	user string // the default user, if any
}

func (s *sftpService) Close() { s.srv.Close() }

// Files of the SFTP server in the gateway's directory.
const (
	sftpHostKey    = "sftp-host-key"    // the server's host key
	sftpUsersFile  = "sftp-users"       // the accounts (docs/mounts.md)
	sftpUserKey    = "sftp-user-key"    // the default user's private key
	sftpKnownHosts = "sftp-known_hosts" // the host key as clients check it
	sftpDefault    = "quilt"            // the default user
	sftpBucket     = "files"            // the default user's bucket
)

// startSFTP serves gw's buckets over SFTP on addr, with its host key and
// users file in dir. The first time (no users file), it makes a default
// user chrooted to bucket "files" (made if missing) with a new key. It
// writes dir/sftp-known_hosts and dir/sftp.env.
func startSFTP(ctx context.Context, gw *gateway.Gateway, dir, addr string, log *slog.Logger) (*sftpService, error) {
	hk, err := sftp.LoadOrCreateKey(filepath.Join(dir, sftpHostKey))
	if err != nil {
		return nil, err
	}
	users := filepath.Join(dir, sftpUsersFile)
	if _, err := os.Stat(users); errors.Is(err, os.ErrNotExist) {
		if err := gw.CreateBucket(ctx, sftpBucket, ""); err != nil && !errors.Is(err, gateway.ErrBucketExists) {
			return nil, fmt.Errorf("sftp: bucket %s: %w", sftpBucket, err)
		}
		k, err := sftp.LoadOrCreateKey(filepath.Join(dir, sftpUserKey))
		if err != nil {
			return nil, err
		}
		head := "# quilt sftp users: NAME BUCKET key AUTHORIZED_KEYS_LINE | NAME BUCKET password BCRYPT_HASH (docs/mounts.md)\n"
		if err := writeFileAtomic(users, []byte(head+sftp.KeyLine(sftpDefault, sftpBucket, k.PublicKey())+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if _, err := sftp.LoadUsers(users); err != nil {
		return nil, err
	}
	srv, err := sftp.New(sftp.Config{
		HostKey: hk,
		Users:   func() (sftp.Users, error) { return sftp.LoadUsers(users) },
		// The accounts log in with their passwords too (docs/mounts.md).
		Authenticate: func(ctx context.Context, user, password string) (string, error) {
			u, err := gw.Authenticate(ctx, user, password)
			return u.Home, err
		},
		Tree:     sftp.GatewayTrees(gw),
		SpoolDir: filepath.Join(dir, "spool"),
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "spool"), 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sftp: listen on %s: %w", addr, err)
	}
	go srv.Serve(ln)
	svc := &sftpService{srv: srv, addr: ln.Addr().String(), env: filepath.Join(dir, "sftp.env")}
	host, port, _ := net.SplitHostPort(svc.addr)
	kh := knownhosts.Line([]string{knownhosts.Normalize(svc.addr)}, hk.PublicKey())
	if err := writeFileAtomic(filepath.Join(dir, sftpKnownHosts), []byte(kh+"\n"), 0o644); err != nil {
		srv.Close()
		return nil, err
	}
	env := fmt.Sprintf("export QUILT_SFTP_HOST=%s\nexport QUILT_SFTP_PORT=%s\nexport QUILT_SFTP_KNOWN_HOSTS=%s\n",
		host, port, filepath.Join(dir, sftpKnownHosts))
	if _, err := os.Stat(filepath.Join(dir, sftpUserKey)); err == nil {
		svc.user = sftpDefault
		env += fmt.Sprintf("export QUILT_SFTP_USER=%s\nexport QUILT_SFTP_KEY=%s\n", sftpDefault, filepath.Join(dir, sftpUserKey))
	}
	if err := writeFileAtomic(svc.env, []byte(env), 0o600); err != nil {
		srv.Close()
		return nil, err
	}
	return svc, nil
}

// sftpHint is what quilt up and quilt sftp print about the server.
func sftpHint(svc *sftpService) string {
	host, port, _ := net.SplitHostPort(svc.addr)
	if svc.user == "" {
		return fmt.Sprintf("SFTP:  %s  (users in %s)\n", svc.addr, sftpUsersFile)
	}
	dir := filepath.Dir(svc.env)
	p, _ := strconv.Atoi(port)
	return fmt.Sprintf("SFTP:  %s  user %s (bucket %s)\n       sftp -P %d -i %s -o UserKnownHostsFile=%s %s@%s\n",
		svc.addr, svc.user, sftpBucket, p, filepath.Join(dir, sftpUserKey), filepath.Join(dir, sftpKnownHosts), svc.user, host)
}

func runSFTP(ctx context.Context, args []string) error {
	fs := newFlagSet("sftp", "Usage: quilt sftp --grid INVITE [flags]\n\nServes the file trees of the gateway's buckets over SFTP (sftp, scp, sshfs)\nand to rsync -e ssh until interrupted. Each user of DIR/sftp-users is chrooted to one bucket;\nthe first start makes a user \"quilt\" for bucket \"files\" with a key in\nDIR/sftp-user-key. The host key is DIR/sftp-host-key. See docs/mounts.md.")
	var g gridFlags
	g.register(fs)
	addr := fs.String("listen", "127.0.0.1:7722", "SFTP address (host:port)")
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
	svc, err := startSFTP(ctx, gw, *dir, *addr, s.log)
	if err != nil {
		return err
	}
	defer svc.Close()
	fmt.Fprintf(os.Stderr, "quilt sftp: serving %s\n%s", *dir, sftpHint(svc))
	<-ctx.Done()
	return nil
}
