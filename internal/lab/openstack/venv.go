package openstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The releases EnsureVenv installs: the newest Swift on PyPI, and the
// swift-bench and python-swiftclient that test/swift-clients.sh pins.
const (
	SwiftVersion       = "2.38.3"
	SwiftBenchVersion  = "2.0.0"
	SwiftClientVersion = "4.11.0"
)

// Time limits of the steps of EnsureVenv.
const (
	venvTimeout  = 5 * time.Minute
	pipTimeout   = 15 * time.Minute
	checkTimeout = time.Minute
)

// Venv is a Python venv holding Swift, swift-bench and python-swiftclient.
type Venv struct {
	Dir string
}

// Bin returns the path of the program name in the venv, such as
// "swift-bench" or "swift-proxy-server".
func (v *Venv) Bin(name string) string { return filepath.Join(v.Dir, "bin", name) }

// DefaultVenv returns the venv directory EnsureVenv uses when given "":
// ~/.cache/quilt-bench/swift-venv-VERSIONS (the versions in the name, so
// that a change of pins makes a new venv).
func DefaultVenv() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("openstack: %w", err)
	}
	return filepath.Join(home, ".cache", "quilt-bench",
		fmt.Sprintf("swift-venv-swift%s-swiftbench%s-swiftclient%s", SwiftVersion, SwiftBenchVersion, SwiftClientVersion)), nil
}

// pipRequirements are what EnsureVenv asks pip for.
func pipRequirements() []string {
	return []string{"swift==" + SwiftVersion, "swift-bench==" + SwiftBenchVersion, "python-swiftclient==" + SwiftClientVersion}
}

// versionsScript prints the installed versions of the three packages,
// one line, space-separated.
const versionsScript = `from importlib.metadata import version
print(version("swift"), version("swift-bench"), version("python-swiftclient"))`

// EnsureVenv makes sure a venv with the pinned Swift, swift-bench and
// python-swiftclient exists at dir (DefaultVenv when "") and returns it.
// If the venv's Python does not report those versions, it creates the
// venv with `python3 -m venv` unless it exists and runs `pip install` in
// it, which needs PyPI and may take minutes. Each step is bounded in time
// and by ctx. A lock file beside dir (dir + ".lock") lets one process
// install at a time.
func EnsureVenv(ctx context.Context, dir string) (*Venv, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultVenv(); err != nil {
			return nil, err
		}
	}
	v := &Venv{Dir: filepath.Clean(dir)}
	if v.installed(ctx) {
		return v, nil
	}
	if err := os.MkdirAll(filepath.Dir(v.Dir), 0o755); err != nil {
		return nil, fmt.Errorf("openstack: %w", err)
	}
	unlock, err := lockFile(ctx, v.Dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if v.installed(ctx) {
		return v, nil
	}
	if _, err := os.Stat(v.Bin("pip")); err != nil {
		if out, err := runBounded(ctx, venvTimeout, "python3", "-m", "venv", v.Dir); err != nil {
			return nil, fmt.Errorf("%w\n%s", err, tail(out))
		}
	}
	args := append([]string{"install", "-q", "--disable-pip-version-check"}, pipRequirements()...)
	if out, err := runBounded(ctx, pipTimeout, v.Bin("pip"), args...); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, tail(out))
	}
	if got := v.versions(ctx); got != wantVersions() {
		return nil, fmt.Errorf("openstack: %s reports %q after pip install, want %q", v.Dir, got, wantVersions())
	}
	return v, nil
}

func wantVersions() string {
	return strings.Join([]string{SwiftVersion, SwiftBenchVersion, SwiftClientVersion}, " ")
}

// versions returns what the venv's Python reports, or "" if it cannot.
func (v *Venv) versions(ctx context.Context) string {
	if _, err := os.Stat(v.Bin("python3")); err != nil {
		return ""
	}
	out, err := runBounded(ctx, checkTimeout, v.Bin("python3"), "-c", versionsScript)
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(out))
}

func (v *Venv) installed(ctx context.Context) bool {
	for _, p := range []string{"swift-bench", "swift-proxy-server", "swift-object-server", "swift-ring-builder"} {
		if _, err := os.Stat(v.Bin(p)); err != nil {
			return false
		}
	}
	return v.versions(ctx) == wantVersions()
}

// lockFile takes an exclusive flock on path, waiting for it as long as ctx
// allows, and returns the function that releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("openstack: %w", err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("openstack: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("openstack: lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}
