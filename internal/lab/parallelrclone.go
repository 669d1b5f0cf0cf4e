package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// rcloneServer is `rclone serve webdav` on a local directory: the
// plain-disk reference parallel-transfers measures beside Quilt's doors,
// driven by the same WebDAV workers.
type rcloneServer struct {
	url  string // the WebDAV root, ending in "/"
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited

	mu   sync.Mutex
	tail []string // its last lines of log, for error messages
}

// rcloneStarted is the line rclone logs once it listens.
var rcloneStarted = regexp.MustCompile(`WebDav Server started on \[?(http://[^\s\]]+)`)

// startRclone runs `rclone serve webdav dir` on a free loopback port
// with Basic auth user:pass, and waits (at most a minute) until it
// listens. The caller stops it with close.
func startRclone(ctx context.Context, dir, user, pass string) (*rcloneServer, error) {
	bin, err := exec.LookPath("rclone")
	if err != nil {
		return nil, fmt.Errorf("lab: the rclone door needs rclone (apt install rclone), or leave it out (--doors webdav,s3): %w", err)
	}
	cmd := exec.Command(bin, "serve", "webdav", dir, "--addr", "127.0.0.1:0", "--user", user, "--pass", pass,
		"--config", os.DevNull, "--log-level", "NOTICE")
	// Without AWS_CA_BUNDLE, which only rclone's S3 backend would read:
	// the reference is a plain local directory.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lab: start rclone: %w", err)
	}
	s := &rcloneServer{cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.tail = append(s.tail, line)
			if len(s.tail) > 20 {
				s.tail = s.tail[1:]
			}
			s.mu.Unlock()
			if m := rcloneStarted.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(s.done)
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case u := <-found:
		s.url = strings.TrimSuffix(u, "/") + "/"
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("lab: rclone serve webdav exited: %s", s.lastLines())
	case <-t.C:
		s.close()
		return nil, fmt.Errorf("lab: rclone serve webdav did not start in a minute: %s", s.lastLines())
	case <-ctx.Done():
		s.close()
		return nil, ctx.Err()
	}
}

func (s *rcloneServer) lastLines() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, " / ")
}

// close stops rclone: an interrupt, then after 10 s a kill.
func (s *rcloneServer) close() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}
