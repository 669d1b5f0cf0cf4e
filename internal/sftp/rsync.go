package sftp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
	"golang.org/x/crypto/ssh"
)

// rsync over ssh: a client's rsync runs "rsync --server ..." on the far
// side through an exec request (with -s, its paths follow on the channel:
// rsyncCommand.readSecluded). The tree is no local directory and no Go
// rsync library serves an abstract one (gokrazy/rsync works on local
// paths, speaks protocol 27 and its receiver has no --checksum), so the
// server runs the system's rsync on a staging directory:
//
//  1. the paths the command names are copied from the tree into a new
//     staging directory (stage.go), with their modes and times (for an
//     upload that compares only sizes and times, files as zeros of their
//     size: rsyncCommand.sizesOnly);
//  2. rsync --server runs there inside a bubblewrap sandbox (bwrap): its
//     own user, mount, network and process namespaces, /usr read-only,
//     and the staging directory as the only writable place, so no path,
//     "..", symbolic link or option the client sends reaches a file of
//     the server or another bucket;
//  3. when it exits 0 (or 23/24, "some files failed", without options
//     that keep partial files), what changed in the staging directory is
//     committed to the tree (stage.commit): new and changed files as new
//     versions through the same spool and commit as SFTP's writes,
//     removals, directories, modes and times. On any other exit, nothing
//     is committed: an interrupted transfer leaves every old version.

// rsyncExit are rsync's exit codes the server uses.
const (
	exitError   = 1  // syntax or usage error: the command is refused
	exitFileIO  = 11 // error in file I/O: staging failed
	exitPartial = 23 // partial transfer due to error
	exitVanish  = 24 // partial transfer due to vanished source files
	exitIPC     = 14 // error in IPC code: the sandbox could not run
)

// serveExec runs the command of an exec request on a session channel
// and returns its exit status: only rsync's server is served.
func (s *Server) serveExec(ch ssh.Channel, user, bucket, cmdline string) uint32 {
	stderr := ch.Stderr()
	c, err := parseRsync(cmdline)
	if err != nil {
		s.cfg.Logger.Info("sftp: exec refused", "user", user, "command", cmdline, "err", err)
		fmt.Fprintf(stderr, "quilt: %v\n", strings.TrimPrefix(err.Error(), "sftp: "))
		return exitError
	}
	// The client's bytes, after the arguments of -s if any.
	var stdin io.Reader = ch
	if c.secluded {
		br := bufio.NewReader(ch)
		if err := c.readSecluded(br); err != nil {
			s.cfg.Logger.Info("sftp: exec refused", "user", user, "command", cmdline, "err", err)
			fmt.Fprintf(stderr, "quilt: %v\n", strings.TrimPrefix(err.Error(), "sftp: "))
			return exitError
		}
		stdin = br
	}
	t, err := s.treeOf(bucket)
	if err != nil {
		s.cfg.Logger.Error("sftp: bucket", "user", user, "bucket", bucket, "err", err)
		fmt.Fprintf(stderr, "quilt: no bucket for user %s\n", user)
		return exitError
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	c.expand(func(dir string) ([]string, error) {
		is, err := t.ReadDirAll(ctx, dir)
		names := make([]string, len(is))
		for i, e := range is {
			names[i] = e.Name()
		}
		return names, err
	}, func(p string) (bool, bool) {
		i, err := t.Stat(ctx, p)
		return err == nil, err == nil && i.IsDir()
	})
	cancel()
	code, err := s.runRsync(ch, stdin, t, c)
	if err != nil {
		s.cfg.Logger.Warn("sftp: rsync", "user", user, "bucket", bucket, "exit", code, "err", err)
		fmt.Fprintf(stderr, "quilt: rsync: %v\n", err)
	} else {
		s.cfg.Logger.Info("sftp: rsync", "user", user, "bucket", bucket, "sender", c.sender, "exit", code)
	}
	return code
}

// sandboxTools finds rsync and bwrap.
func sandboxTools() (rsync, bwrap string, err error) {
	rsync, err = exec.LookPath("rsync")
	if err != nil {
		return "", "", errors.New("rsync is not installed on the server")
	}
	bwrap, err = exec.LookPath("bwrap")
	if err != nil {
		return "", "", errors.New("bwrap (bubblewrap) is not installed on the server: rsync runs only in its sandbox")
	}
	if rsync, err = filepath.EvalSymlinks(rsync); err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(rsync, "/usr/") {
		return "", "", fmt.Errorf("rsync at %s: the sandbox holds only /usr", rsync)
	}
	return rsync, bwrap, nil
}

// sandboxArgs are bwrap's arguments to run argv with dir as /data, its
// working directory and only writable place.
func sandboxArgs(dir string, argv []string) []string {
	a := []string{"--unshare-all", "--unshare-user", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(os.Getuid()), "--gid", strconv.Itoa(os.Getgid()),
		"--die-with-parent", "--new-session", "--clearenv", "--setenv", "PATH", "/usr/bin",
		"--ro-bind", "/usr", "/usr", "--dev", "/dev", "--tmpfs", "/tmp"}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if to, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", to, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	a = append(a, "--bind", dir, "/data", "--chdir", "/data", "--")
	return append(a, argv...)
}

// runRsync stages the command's paths, runs rsync on them in the sandbox
// with stdin (the channel's bytes) and the channel as its stdout, and
// commits what it changed.
func (s *Server) runRsync(ch ssh.Channel, stdin io.Reader, t *tree.Tree, c *rsyncCommand) (uint32, error) {
	rsync, bwrap, err := sandboxTools()
	if err != nil {
		return exitError, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.CommitTimeout)
	st, err := newStage(ctx, t, s.cfg.SpoolDir, c.scopes, c.sizesOnly, c.inPlace)
	cancel()
	if err != nil {
		return exitFileIO, fmt.Errorf("staging: %w", err)
	}
	defer st.remove()

	// --no-super: rsync does not act as root even when the server runs
	// as root (the files are the server user's, as through SFTP).
	argv := append([]string{rsync}, c.opts...)
	argv = append(argv, "--no-super", ".")
	argv = append(argv, c.args...)
	cmd := exec.CommandContext(s.ctx, bwrap, sandboxArgs(st.dir, argv)...)
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	in, err := cmd.StdinPipe()
	if err != nil {
		return exitIPC, err
	}
	if err := cmd.Start(); err != nil {
		return exitIPC, fmt.Errorf("sandbox: %w", err)
	}
	go func() {
		io.Copy(in, stdin) // ends at the client's EOF, or when Wait closes in
		in.Close()
	}()
	err = cmd.Wait()
	code := exitIPC
	var ee *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		code = ee.ExitCode()
	default:
		// Killed: the server closing, or the sandbox failing.
		return exitIPC, fmt.Errorf("ended: %v; nothing committed", err)
	}
	if code != 0 && (c.partial || (code != exitPartial && code != exitVanish)) {
		return uint32(code), nil // rsync said why; nothing committed
	}
	cctx, ccancel := context.WithTimeout(s.ctx, s.cfg.CommitTimeout)
	defer ccancel()
	skipped, err := st.commit(cctx, s.cfg.SpoolDir)
	if err != nil {
		return exitPartial, fmt.Errorf("commit: %w", err)
	}
	if len(skipped) > 0 {
		for _, p := range skipped {
			fmt.Fprintf(ch.Stderr(), "quilt: rsync: not kept: /%s: the tree has only files and directories\n", p)
		}
		return exitPartial, nil
	}
	return uint32(code), nil
}
