// Package sftp serves the file tree of gateway buckets over SFTP (SSH's
// file transfer subsystem), for sftp, scp and sshfs, and to rsync -e ssh:
// each user logs in with a key or a password from a users file and sees
// one bucket's tree as their whole filesystem, chrooted to it. Files open
// for writing are spooled locally and committed as one new object version
// when their last handle closes (internal/tree/openfile). rsync's server
// is the system's rsync, run in a bubblewrap sandbox on a staging copy of
// the paths it names (rsync.go). See docs/mounts.md.
package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
	"golang.org/x/crypto/ssh"
)

// Config is what a Server needs.
type Config struct {
	// HostKey is the server's SSH host key (LoadOrCreateKey).
	HostKey ssh.Signer
	// Users are the accounts; Users() is called at each login, so a
	// users file may be read again.
	Users func() (Users, error)
	// Authenticate, if set, checks the password logins of the names
	// that have no password line in Users (the gateway's accounts) and
	// returns the bucket the user sees; an error refuses the login. Key
	// logins are Users' only.
	Authenticate func(ctx context.Context, user, password string) (bucket string, err error)
	// Tree returns the tree of a bucket, or an error if there is none.
	// The server calls it once per bucket and shares the tree between
	// sessions.
	Tree func(ctx context.Context, bucket string) (*tree.Tree, error)
	// SpoolDir is where files open for writing are spooled, and rsync's
	// staging directories made ("": the system's temporary directory).
	// New removes the staging directories a crash left in it.
	SpoolDir string
	// Logger gets one line per login and per failure; nil: none.
	Logger *slog.Logger
	// CommitTimeout bounds the commit of a file at its close (0: 10 minutes).
	CommitTimeout time.Duration
}

// Server serves SFTP on listeners. It is safe for concurrent use.
type Server struct {
	cfg Config
	ssh *ssh.ServerConfig

	ctx    context.Context // ends with Close
	cancel context.CancelFunc

	mu    sync.Mutex
	trees map[string]*tree.Tree
	lns   map[net.Listener]bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// permBucket is where the login's bucket travels from authentication to
// the session.
const permBucket = "quilt-bucket"

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.HostKey == nil || cfg.Users == nil || cfg.Tree == nil {
		return nil, errors.New("sftp: config needs HostKey, Users and Tree")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 10 * time.Minute
	}
	if cfg.SpoolDir != "" {
		removeStale(cfg.SpoolDir)
	}
	s := &Server{cfg: cfg, trees: map[string]*tree.Tree{}, lns: map[net.Listener]bool{}, conns: map[net.Conn]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ssh = &ssh.ServerConfig{
		MaxAuthTries: 6,
		PasswordCallback: func(c ssh.ConnMetadata, password []byte) (*ssh.Permissions, error) {
			u, err := s.user(c.User())
			if s.cfg.Authenticate != nil && (err != nil || len(u.PasswordHashes) == 0) {
				bucket, err := s.cfg.Authenticate(s.ctx, c.User(), string(password))
				if err != nil {
					s.cfg.Logger.Warn("sftp: login refused", "user", c.User(), "from", c.RemoteAddr(), "err", err)
					return nil, errAuth
				}
				return &ssh.Permissions{Extensions: map[string]string{permBucket: bucket}}, nil
			}
			if err != nil {
				return nil, err
			}
			if !u.checkPassword(password) {
				s.cfg.Logger.Warn("sftp: wrong password", "user", c.User(), "from", c.RemoteAddr())
				return nil, errAuth
			}
			return &ssh.Permissions{Extensions: map[string]string{permBucket: u.Bucket}}, nil
		},
		PublicKeyCallback: func(c ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			u, err := s.user(c.User())
			if err != nil {
				return nil, err
			}
			if !u.hasKey(k) {
				return nil, errAuth
			}
			return &ssh.Permissions{Extensions: map[string]string{permBucket: u.Bucket}}, nil
		},
	}
	s.ssh.AddHostKey(cfg.HostKey)
	return s, nil
}

var errAuth = errors.New("sftp: access denied")

func (s *Server) user(name string) (*User, error) {
	us, err := s.cfg.Users()
	if err != nil {
		s.cfg.Logger.Error("sftp: users", "err", err)
		return nil, errAuth
	}
	u := us[name]
	if u == nil {
		return nil, errAuth
	}
	return u, nil
}

// Serve accepts connections on ln until it fails or the server closes.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.lns[ln] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return err
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops the listeners and ends every connection; files open for
// writing that were not closed are dropped, not committed.
func (s *Server) Close() error {
	s.mu.Lock()
	s.cancel()
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) treeOf(bucket string) (*tree.Tree, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.trees[bucket]; t != nil {
		return t, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	t, err := s.cfg.Tree(ctx, bucket)
	if err != nil {
		return nil, err
	}
	s.trees[bucket] = t
	return t, nil
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // the handshake
	sc, chans, reqs, err := ssh.NewServerConn(c, s.ssh)
	if err != nil {
		s.cfg.Logger.Info("sftp: handshake", "from", c.RemoteAddr(), "err", err)
		return
	}
	defer sc.Close()
	c.SetDeadline(time.Time{})
	bucket := sc.Permissions.Extensions[permBucket]
	s.cfg.Logger.Info("sftp: login", "user", sc.User(), "bucket", bucket, "from", c.RemoteAddr())
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveSession(ch, creqs, sc.User(), bucket)
		}()
	}
}

// serveSession runs the sftp subsystem or rsync's server (rsync.go) on a
// session channel, and refuses everything else (shells, other commands,
// port forwarding): a shell or another command gets a message on its
// stderr and exit status 1.
func (s *Server) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, user, bucket string) {
	defer ch.Close()
	for req := range reqs {
		if req.Type == "exec" || req.Type == "shell" {
			var cmd struct{ Command string }
			if req.Type == "exec" && ssh.Unmarshal(req.Payload, &cmd) != nil {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			code := uint32(exitError)
			if req.Type == "shell" {
				fmt.Fprintf(ch.Stderr(), "quilt: %v\r\n", strings.TrimPrefix(ErrNotServed.Error(), "sftp: "))
			} else {
				code = s.serveExec(ch, user, bucket, cmd.Command)
			}
			ch.CloseWrite()
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
			return
		}
		if req.Type != "subsystem" || len(req.Payload) < 4 || string(req.Payload[4:]) != "sftp" {
			if req.Type == "env" || req.Type == "pty-req" {
				req.Reply(true, nil) // harmless: clients send them first
				continue
			}
			req.Reply(false, nil)
			continue
		}
		t, err := s.treeOf(bucket)
		if err != nil {
			s.cfg.Logger.Error("sftp: bucket", "user", user, "bucket", bucket, "err", err)
			req.Reply(false, nil)
			return
		}
		req.Reply(true, nil)
		go ssh.DiscardRequests(reqs)
		h := newHandlers(s, t)
		rs := sftp.NewRequestServer(ch, h.handlers())
		if err := rs.Serve(); err != nil && !errors.Is(err, io.EOF) {
			s.cfg.Logger.Info("sftp: session", "user", user, "err", err)
		}
		// Clients (scp) take a session without an exit status as failed.
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{0}))
		rs.Close()
		if n := h.tab.Close(); n > 0 {
			s.cfg.Logger.Warn("sftp: session ended with files open for writing; not committed", "user", user, "files", n)
		}
		return
	}
}

// GatewayTrees returns Config.Tree for a gateway's buckets: a bucket that
// does not exist is an error.
func GatewayTrees(gw *gateway.Gateway) func(ctx context.Context, bucket string) (*tree.Tree, error) {
	return func(ctx context.Context, bucket string) (*tree.Tree, error) {
		bs, err := gw.Buckets(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			if b.Name == bucket {
				return gw.Tree(bucket), nil
			}
		}
		return nil, fmt.Errorf("sftp: no bucket %q", bucket)
	}
}
