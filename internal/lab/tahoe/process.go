package tahoe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before its
// process group gets SIGKILL.
const stopGrace = 5 * time.Second

// process is one `tahoe run` node. It runs in a process group of its own,
// so that stopping it also stops anything it started. Its stdin is a pipe
// that only this process holds: `tahoe run` exits when its stdin closes,
// so the node dies with the Go program even if that is killed outright
// and Close never runs.
type process struct {
	name  string
	log   string // path of the file holding its stdout and stderr
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed once the process has exited and been reaped
	err   error         // what cmd.Wait returned; read after done
}

// launcher is the Python program that runs `tahoe run`: the tahoe
// program's own two lines, after one change. Every Tahoe node (1.20) opens
// a Foolscap "log tub" for `flogtool tail` on an ephemeral port bound to
// all interfaces (allmydata/util/iputil.py, listenOnUnused, called by
// Node.create_log_tub, whatever tahoe.cfg says); the lab keeps to
// loopback, so listenOnUnused binds 127.0.0.1 here. The rest is as
// iputil does it: bind and listen first, then hand the socket to Twisted,
// so no other program can take the port in between.
const launcher = `
import fcntl, os, socket, sys
from twisted.internet import reactor
from twisted.internet.endpoints import AdoptedStreamServerEndpoint
from allmydata.util import iputil

def listenOnUnused(tub, portnum=None):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", portnum or 0))
        portnum = s.getsockname()[1]
        s.listen(1)
        fd = os.dup(s.fileno())
    finally:
        s.close()
    os.set_blocking(fd, False)
    fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.fcntl(fd, fcntl.F_GETFD) | fcntl.FD_CLOEXEC)
    tub.listenOn(AdoptedStreamServerEndpoint(reactor, fd, socket.AF_INET))
    tub.setLocation("127.0.0.1:%d" % portnum)
    return portnum

iputil.listenOnUnused = listenOnUnused
from allmydata.scripts.runner import run
sys.argv[0] = "tahoe"
sys.exit(run())
`

// interpreter returns the Python interpreter of the tahoe program: the
// one its "#!" line names (pip writes an absolute path into the scripts
// it installs).
func interpreter(tahoe string) (string, error) {
	f, err := os.Open(tahoe)
	if err != nil {
		return "", fmt.Errorf("tahoe: %w", err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 4096)).ReadString('\n')
	python, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if fields := strings.Fields(python); ok && len(fields) == 1 && filepath.IsAbs(fields[0]) {
		return fields[0], nil
	}
	return "", fmt.Errorf("tahoe: %s does not start with #!/path/to/python: %q", tahoe, line)
}

// startProcess runs `tahoe run nodeDir` with the Python interpreter
// python (through launcher), appending its output to logPath.
func startProcess(python, name, nodeDir, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tahoe: %s: %w", name, err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(python, "-c", launcher, "run", nodeDir)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("tahoe: %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		return nil, fmt.Errorf("tahoe: start %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
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
	defer p.stdin.Close()
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("tahoe: stop %s: %w", p.name, err)
	}
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("tahoe: kill %s: %w", p.name, err)
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
	const max = 1500
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return ":\n" + strings.TrimRight(string(b), "\n")
}

// runBounded runs a short-lived command with a time limit, in a process
// group of its own that is killed as a whole when the limit or ctx ends,
// and returns its combined output.
func runBounded(ctx context.Context, limit time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return out, fmt.Errorf("tahoe: %s %s: %w", name, strings.Join(args, " "), err)
	}
	return out, nil
}
