package sharestore

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileSystem is the file operations by which a Disk store changes what
// is on its disk: making, writing, syncing, renaming and removing files,
// and syncing directories. Reads (Open, List, Walk, Scrub) use the os
// package directly: they change nothing. osFS is the real one; tests put
// one that injects errors, or crashes and keeps only what was synced,
// in its place (as pebble's errorfs and MemFS.CrashClone do).
type fileSystem interface {
	// Create makes a new file at path (it must not exist), open for
	// reading and writing, readable by the owner only.
	Create(path string) (file, error)
	// Mkdir makes a directory (its parent's sync makes it durable).
	Mkdir(path string) error
	// Rename moves oldpath to newpath, replacing it.
	Rename(oldpath, newpath string) error
	// Remove deletes a file or empty directory.
	Remove(path string) error
	// SyncDir makes the directory's entries (creations, renames,
	// removals) durable.
	SyncDir(dir string) error
}

// file is an open file being written by a Put.
type file interface {
	io.Writer
	io.WriterAt
	io.ReaderAt
	Name() string
	// Sync makes the file's data durable (fsync).
	Sync() error
	Close() error
	// Allocate reserves the file's first size bytes on the disk
	// (fallocate).
	Allocate(size int64) error
	// StartWriteback asks the kernel to start writing n bytes from off to
	// the disk, without waiting (sync_file_range).
	StartWriteback(off, n int64) error
	// OpenDirect opens the file again for O_DIRECT writes, or fails if
	// the file system refuses.
	OpenDirect() (directFile, error)
}

// directFile is a file open with O_DIRECT: aligned writes only.
type directFile interface {
	Pwrite(b []byte, at int64) (int, error)
	Close() error
}

// osFS is the operating system's file system.
type osFS struct{}

func (osFS) Create(path string) (file, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Mkdir(path string) error              { return os.Mkdir(path, 0o700) }
func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (osFS) Remove(path string) error             { return os.Remove(path) }

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// osFile is an *os.File with the calls a Put makes beyond os.File's.
// It is one pointer: held in a file interface, it costs no allocation.
type osFile struct{ *os.File }

func (f osFile) Allocate(size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}

func (f osFile) StartWriteback(off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

func (f osFile) OpenDirect() (directFile, error) {
	fd, err := unix.Open(f.Name(), unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return osDirect(fd), nil
}

// osDirect is a descriptor open with O_DIRECT.
type osDirect int

func (d osDirect) Pwrite(b []byte, at int64) (int, error) { return unix.Pwrite(int(d), b, at) }
func (d osDirect) Close() error                           { return unix.Close(int(d)) }
