package openstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ErrExited is returned when a server exits while Start waits for the
// cluster to come up.
var ErrExited = errors.New("openstack: server exited")

// stopGrace is how long a server has to exit after SIGTERM before its
// process group gets SIGKILL.
const stopGrace = 5 * time.Second

// process is one server. It runs in a process group of its own, so that
// stopping it also stops anything it forked, and gets SIGKILL when this
// program's thread that started it dies (Pdeathsig), so a Go program
// killed before Close leaves no server behind.
type process struct {
	name string
	log  string // path of the file holding its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // what cmd.Wait returned; read after done
}

// startProcess runs argv, appending its output to logPath.
func startProcess(name, logPath string, argv ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("openstack: %s: %w", name, err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("openstack: start %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// cleanEnv is this program's environment without HTTP proxy settings,
// which would send the servers' and swift-bench's loopback requests
// elsewhere, and without Swift's own client settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "all_proxy", "no_proxy", "st_auth", "st_user", "st_key":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// exited returns an error wrapping ErrExited if p has exited, else nil.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%w: %s (%v; log %s%s)", ErrExited, p.name, p.err, p.log, logTail(p.log))
	default:
		return nil
	}
}

// stop sends SIGTERM to p's process group, SIGKILL after stopGrace, and
// waits until p is reaped. Signals go to the group only while its leader
// has not been reaped, so a recycled process ID is never hit.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("openstack: stop %s: %w", p.name, err)
	}
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("openstack: kill %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// logTail returns the last lines of the log at path, for error messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	return ":\n" + tail(b)
}

// runBounded runs a short-lived command with a time limit, in a process
// group of its own that is killed as a whole when the limit or ctx ends,
// and returns its combined output.
func runBounded(ctx context.Context, limit time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return out, fmt.Errorf("openstack: %s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}

// tail returns the end of a command's output, for error messages.
func tail(out []byte) string {
	const max = 2000
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return string(bytes.TrimSpace(out))
}
