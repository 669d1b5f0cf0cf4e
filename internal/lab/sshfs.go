package lab

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// sshfsPaperOptions are the Tahoe-LAFS paper's sshfs options (§5: "-o
// cache=no, big_writes, direct_io, and sshfs_sync") that sshfs 3 takes:
// no directory cache, no page cache, synchronous writes. big_writes is
// left out: sshfs 3 refuses it as an unknown option, since FUSE 3 always
// lets the kernel send writes larger than a page.
var sshfsPaperOptions = []string{"cache=no", "direct_io", "sshfs_sync"}

// sshfsRefused are the paper's options that sshfs 3 refuses.
var sshfsRefused = []string{"big_writes"}

// sshTarget is an SFTP server and the login sshfs uses on it.
type sshTarget struct {
	Addr       string // "127.0.0.1:port"
	User       string
	KeyFile    string // private key, OpenSSH form
	KnownHosts string // a known_hosts file naming the server's host key
}

// clientKey makes an Ed25519 key for sshfs to log in with, writes its
// private half to path (mode 0600) and returns its public half.
func clientKey(path string) (ssh.PublicKey, error) {
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(sk, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewPublicKey(pk)
}

// writeKnownHosts writes a known_hosts file at path naming key as the
// host key of the server at addr.
func writeKnownHosts(path, addr string, key ssh.PublicKey) error {
	return os.WriteFile(path, []byte(knownhosts.Line([]string{addr}, key)+"\n"), 0o600)
}

// sshfsArgs returns the sshfs command line that mounts t's "/" on dir in
// the foreground with the paper's options: no ssh configuration file,
// key login only, the host key checked strictly against t.KnownHosts.
func sshfsArgs(t sshTarget, dir string) ([]string, error) {
	host, port, err := net.SplitHostPort(t.Addr)
	if err != nil {
		return nil, fmt.Errorf("lab: sshfs to %q: %w", t.Addr, err)
	}
	for _, s := range []string{t.User, t.KeyFile, t.KnownHosts, dir} {
		if s == "" || strings.ContainsAny(s, ", \t\n") {
			return nil, fmt.Errorf("lab: sshfs: %q: empty or holds a comma or space", s)
		}
	}
	return []string{
		"-f", "-F", "/dev/null", "-p", port,
		"-o", "BatchMode=yes,IdentitiesOnly=yes,IdentityFile=" + t.KeyFile +
			",UserKnownHostsFile=" + t.KnownHosts + ",StrictHostKeyChecking=yes,ServerAliveInterval=15,ServerAliveCountMax=8",
		"-o", strings.Join(sshfsPaperOptions, ","),
		t.User + "@" + host + ":/", dir,
	}, nil
}

// sshfsMount is a running `sshfs -f` and the directory it mounted.
type sshfsMount struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when sshfs has exited
	log  string
}

// mountSSHFS mounts t's "/" on dir (created) with sshfs in the
// foreground, its output in logPath, and waits until the mount is in
// /proc/self/mountinfo, sshfs exits, or 30 s pass.
func mountSSHFS(ctx context.Context, t sshTarget, dir, logPath string) (*sshfsMount, error) {
	args, err := sshfsArgs(t, dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("sshfs", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab: sshfs: %w", err)
	}
	m := &sshfsMount{dir: dir, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(m.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ok, err := mounted(dir); err != nil || ok {
			if err != nil {
				m.unmount()
			}
			return m, err
		}
		select {
		case <-m.done:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("lab: sshfs %s exited before mounting: %s", t.Addr, clip(b))
		case <-ctx.Done():
			m.unmount()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.unmount()
			return nil, fmt.Errorf("lab: sshfs %s did not mount %s within 30s (log %s)", t.Addr, dir, logPath)
		}
	}
}

// mounted reports whether an sshfs file system is mounted on dir.
func mounted(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE ...
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[4] != dir {
			continue
		}
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "fuse.sshfs" {
				return true, nil
			}
		}
	}
	return false, sc.Err()
}

// unmount unmounts the directory (fusermount3 -u) and waits for sshfs to
// exit; if it has not within 20 s, the mount is detached lazily and the
// sshfs process group killed.
func (m *sshfsMount) unmount() error {
	out, uerr := exec.Command("fusermount3", "-u", m.dir).CombinedOutput()
	select {
	case <-m.done:
		return nil
	case <-time.After(20 * time.Second):
	}
	exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.done
	if uerr != nil {
		return fmt.Errorf("lab: fusermount3 -u %s: %v: %s", m.dir, uerr, clip(out))
	}
	return errors.New("lab: sshfs did not exit after unmounting " + m.dir)
}
