package tahoe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Version is the tahoe-lafs release EnsureVenv installs (the newest on
// PyPI, and the one bench/tahoe/compare.sh uses).
const Version = "1.20.0"

// Time limits of the steps of EnsureVenv.
const (
	venvTimeout    = 5 * time.Minute
	pipTimeout     = 15 * time.Minute
	versionTimeout = time.Minute
)

// DefaultVenv returns the venv directory EnsureVenv uses when given "":
// ~/.cache/quilt-bench/tahoe-venv, the same as bench/tahoe/compare.sh.
func DefaultVenv() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("tahoe: %w", err)
	}
	return filepath.Join(home, ".cache", "quilt-bench", "tahoe-venv"), nil
}

// EnsureVenv makes sure a Python venv with tahoe-lafs Version exists at dir
// (DefaultVenv when "") and returns the path of its tahoe program. If the
// program there does not report Version, it creates the venv with
// `python3 -m venv` (python3 from PATH) unless it exists, and runs
// `pip install tahoe-lafs==Version` in it, which needs PyPI and may take
// minutes. Each step is bounded in time and by ctx. Callers in several
// processes may race: a lock file beside dir (dir + ".lock") lets one
// install at a time.
func EnsureVenv(ctx context.Context, dir string) (string, error) {
	if dir == "" {
		var err error
		if dir, err = DefaultVenv(); err != nil {
			return "", err
		}
	}
	dir = filepath.Clean(dir)
	tahoe := filepath.Join(dir, "bin", "tahoe")
	if installed(ctx, tahoe) {
		return tahoe, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("tahoe: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(ctx, tahoe) { // another process installed it meanwhile
		return tahoe, nil
	}
	pip := filepath.Join(dir, "bin", "pip")
	if _, err := os.Stat(pip); err != nil {
		if out, err := runBounded(ctx, venvTimeout, "python3", "-m", "venv", dir); err != nil {
			return "", fmt.Errorf("%w\n%s", err, tail(out))
		}
	}
	if out, err := runBounded(ctx, pipTimeout, pip, "install", "-q", "--disable-pip-version-check",
		"tahoe-lafs=="+Version); err != nil {
		return "", fmt.Errorf("%w\n%s", err, tail(out))
	}
	if !installed(ctx, tahoe) {
		return "", fmt.Errorf("tahoe: %s does not report tahoe-lafs/%s after pip install", tahoe, Version)
	}
	return tahoe, nil
}

// installed reports whether the program tahoe runs and is Version.
func installed(ctx context.Context, tahoe string) bool {
	if _, err := os.Stat(tahoe); err != nil {
		return false
	}
	out, err := runBounded(ctx, versionTimeout, tahoe, "--version")
	if err != nil {
		return false
	}
	first, _, _ := bytes.Cut(out, []byte("\n"))
	return string(bytes.TrimSpace(first)) == "tahoe-lafs/"+Version
}

// lockFile takes an exclusive flock on path, waiting for it as long as ctx
// allows, and returns the function that releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tahoe: %w", err)
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
			return nil, fmt.Errorf("tahoe: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("tahoe: lock %s: %w", path, ctx.Err())
		case <-tick.C:
		}
	}
}

// tail returns the end of a command's output, for error messages.
func tail(out []byte) string {
	const max = 2000
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return string(bytes.TrimSpace(out))
}
