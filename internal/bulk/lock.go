package bulk

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrBusy is a file another copy is working on (two runs of the same
// copy at once, say from cron): the second stops rather than mixing its
// parts with the first's.
var ErrBusy = errors.New("bulk: another copy is working on this file")

// lockFile opens path (creating it, never truncating it) and takes an
// exclusive lock on it without waiting. The lock goes with the process,
// even if it is killed; closing the file drops it.
func lockFile(path string, what string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrBusy, what)
		}
		return nil, fmt.Errorf("bulk: locking %s: %w", path, err)
	}
	return f, nil
}
