// Package atomicfile writes the small files a program keeps (keys, configs,
// registries) so that a crash at any moment leaves either the old complete
// file or the new complete one, and a write that returned nil survives a
// power loss.
//
// A write goes to a temporary file in the same directory, which is written,
// fsynced and closed, renamed over the target, and then the directory is
// fsynced so the rename itself is durable. The filesystem calls go through
// FS so that tests can inject faults and crashes.
package atomicfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is the part of an open temporary file a write uses.
type File interface {
	Name() string
	Write(b []byte) (int, error)
	Sync() error
	Close() error
}

// FS is the filesystem operations a write needs. OS is the real one.
type FS interface {
	// CreateTemp creates a new file in dir with the given permissions,
	// its name made from pattern as os.CreateTemp does.
	CreateTemp(dir, pattern string, perm fs.FileMode) (File, error)
	// Rename replaces newpath by oldpath.
	Rename(oldpath, newpath string) error
	// Remove deletes a file.
	Remove(name string) error
	// SyncDir makes the directory's entries (renames, creations) durable.
	SyncDir(dir string) error
}

// OS is the operating system's filesystem.
type OS struct{}

// CreateTemp implements FS.
func (OS) CreateTemp(dir, pattern string, perm fs.FileMode) (File, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if perm != 0o600 {
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
	}
	return f, nil
}

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// SyncDir implements FS.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile replaces path by data on the real filesystem, atomically and
// durably. The directory must exist.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(OS{}, path, data, perm)
}

// Write replaces path by data through fsys: when it returns nil the new
// content is durable; when it returns an error, or the machine crashes
// during it, path holds its old content or the new, complete.
func Write(fsys FS, path string, data []byte, perm fs.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := fsys.CreateTemp(dir, "."+base+".tmp-*", perm)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		fsys.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		fsys.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("writing %s: syncing its directory: %w", path, err)
	}
	return nil
}

// WriteJSON writes v as indented JSON, atomically and durably.
func WriteJSON(path string, v any, perm fs.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return WriteFile(path, append(b, '\n'), perm)
}

// ReadJSON reads the JSON file at path into v. A missing file is not an
// error: it returns false. A file that is not valid JSON is an error
// naming the file, so that a damaged file is never silently replaced.
func ReadJSON(path string, v any) (found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("%s is damaged (%v): repair or remove it", path, err)
	}
	return true, nil
}
