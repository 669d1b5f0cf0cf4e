package sharestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// faultFS is a fileSystem over a real directory that can fail any
// operation and can crash: it remembers what a power loss would keep
// (a file's data as of its last fsync, a directory's entries as of the
// directory's last fsync) and, after the crash, writes that state out as
// a new directory (CrashClone) for a store to be reopened on.
//
// Operations are counted; crashAt > 0 stops the machine before the
// crashAt-th: that operation and every later one fail with errCrashed
// and change nothing durable.
type faultFS struct {
	root string

	mu sync.Mutex
	// inject, if set, is asked before each operation (op is create,
	// write, pwrite, fsync, fallocate, sync_file_range, open_direct,
	// mkdir, rename, remove or fsync_dir); a non-nil error fails it.
	inject  func(op, path string) error
	direct  bool // files may be opened "O_DIRECT" (emulated: the writes go to the file)
	ops     int
	crashAt int
	crashed bool

	ids    map[uint64]int            // live inode number -> file id
	nextID int                       // last file id given
	synced map[int][]byte            // file id -> its data as of its last fsync
	dirs   map[string]map[string]int // directory (relative to root) -> its entries as of its last fsync: name -> file id, or dirEntry
}

// dirEntry marks a directory among a directory's durable entries.
const dirEntry = -1

var errCrashed = errors.New("machine crashed")

// newFaultFS makes a faultFS over root, taking everything in it now as
// durable.
func newFaultFS(t *testing.T, root string, direct bool) *faultFS {
	f := &faultFS{root: root, direct: direct, ids: map[uint64]int{}, synced: map[int][]byte{}, dirs: map[string]map[string]int{}}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			return f.snapshotDir(path, true)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// step counts an operation, and fails it if the machine is down or a
// fault is injected.
func (f *faultFS) step(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops++
	if f.crashAt > 0 && f.ops >= f.crashAt {
		f.crashed = true
	}
	if f.crashed {
		return &os.PathError{Op: op, Path: path, Err: errCrashed}
	}
	if f.inject != nil {
		if err := f.inject(op, path); err != nil {
			return &os.PathError{Op: op, Path: path, Err: err}
		}
	}
	return nil
}

func (f *faultFS) rel(path string) string {
	r, err := filepath.Rel(f.root, path)
	if err != nil {
		panic(err)
	}
	return r
}

// idOf returns the file id of the live file at path, giving one (its
// current data taken as durable) to a file made outside this faultFS.
// f.mu is held.
func (f *faultFS) idOf(path string) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, err
	}
	if id, ok := f.ids[st.Ino]; ok {
		return id, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	f.nextID++
	f.ids[st.Ino] = f.nextID
	f.synced[f.nextID] = b
	return f.nextID, nil
}

// snapshotDir records dir's live entries as its durable ones. With
// lock false, f.mu is held.
func (f *faultFS) snapshotDir(dir string, lock bool) error {
	if lock {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	m := map[string]int{}
	for _, e := range entries {
		if e.IsDir() {
			m[e.Name()] = dirEntry
			continue
		}
		id, err := f.idOf(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		m[e.Name()] = id
	}
	f.dirs[f.rel(dir)] = m
	return nil
}

func (f *faultFS) Create(path string) (file, error) {
	if err := f.step("create", path); err != nil {
		return nil, err
	}
	osf, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(osf.Fd()), &st); err != nil {
		osf.Close()
		return nil, err
	}
	f.mu.Lock()
	f.nextID++
	f.ids[st.Ino] = f.nextID // a reused inode number is a new file
	f.synced[f.nextID] = nil
	id := f.nextID
	f.mu.Unlock()
	return &faultFile{fs: f, f: osf, id: id}, nil
}

func (f *faultFS) Mkdir(path string) error {
	if err := f.step("mkdir", path); err != nil {
		return err
	}
	return os.Mkdir(path, 0o700)
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.step("rename", newpath); err != nil {
		return err
	}
	return os.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(path string) error {
	if err := f.step("remove", path); err != nil {
		return err
	}
	return os.Remove(path)
}

// SyncDir implements fileSystem. No real fsync: the durable state is
// the one kept here.
func (f *faultFS) SyncDir(dir string) error {
	if err := f.step("fsync_dir", dir); err != nil {
		return err
	}
	return f.snapshotDir(dir, true)
}

// faultFile is a file of a faultFS.
type faultFile struct {
	fs *faultFS
	f  *os.File
	id int
}

func (w *faultFile) Name() string { return w.f.Name() }

func (w *faultFile) Write(p []byte) (int, error) {
	if err := w.fs.step("write", w.f.Name()); err != nil {
		return 0, err
	}
	return w.f.Write(p)
}

func (w *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := w.fs.step("write", w.f.Name()); err != nil {
		return 0, err
	}
	return w.f.WriteAt(p, off)
}

func (w *faultFile) ReadAt(p []byte, off int64) (int, error) { return w.f.ReadAt(p, off) }

// Sync implements file: the file's data as it is now becomes what a
// crash keeps.
func (w *faultFile) Sync() error {
	if err := w.fs.step("fsync", w.f.Name()); err != nil {
		return err
	}
	st, err := w.f.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, st.Size())
	if _, err := w.f.ReadAt(b, 0); err != nil {
		return err
	}
	w.fs.mu.Lock()
	w.fs.synced[w.id] = b
	w.fs.mu.Unlock()
	return nil
}

func (w *faultFile) Close() error { return w.f.Close() }

func (w *faultFile) Allocate(size int64) error {
	if err := w.fs.step("fallocate", w.f.Name()); err != nil {
		return err
	}
	return syscall.Fallocate(int(w.f.Fd()), 0, 0, size)
}

func (w *faultFile) StartWriteback(off, n int64) error {
	return w.fs.step("sync_file_range", w.f.Name())
}

func (w *faultFile) OpenDirect() (directFile, error) {
	if err := w.fs.step("open_direct", w.f.Name()); err != nil {
		return nil, err
	}
	if !w.fs.direct {
		return nil, syscall.EINVAL
	}
	return faultDirect{w}, nil
}

// faultDirect stands for an O_DIRECT descriptor of a faultFile: it
// checks the alignment O_DIRECT asks for and writes to the file.
type faultDirect struct{ w *faultFile }

func (d faultDirect) Pwrite(b []byte, at int64) (int, error) {
	if err := d.w.fs.step("pwrite", d.w.f.Name()); err != nil {
		return 0, err
	}
	if at%directAlign != 0 || len(b)%directAlign != 0 {
		return 0, fmt.Errorf("pwrite of %d bytes at %d: not aligned for O_DIRECT", len(b), at)
	}
	return d.w.f.WriteAt(b, at)
}

func (d faultDirect) Close() error { return nil }

// crashKeeps is what survives a crash.
type crashKeeps int

const (
	// keepSynced: only what was fsynced (data) and directory-fsynced
	// (names): a power loss on a file system that keeps no more.
	keepSynced crashKeeps = iota
	// keepNames: every name as it was (the file system's journal got
	// them to the disk), file data only as of its fsync.
	keepNames
	// keepAll: everything as it was: the process was killed, the
	// machine kept running.
	keepAll
)

func (k crashKeeps) String() string {
	return [...]string{"synced only", "names kept", "process killed"}[k]
}

// crashClone writes the file system as a crash leaves it into dst (a new
// directory).
func (f *faultFS) crashClone(t *testing.T, dst string, keep crashKeeps) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if keep == keepSynced {
		var clone func(rel string)
		clone = func(rel string) {
			if err := os.MkdirAll(filepath.Join(dst, rel), 0o700); err != nil {
				t.Fatal(err)
			}
			for name, id := range f.dirs[rel] { // a directory never synced: empty
				p := filepath.Join(rel, name)
				if id == dirEntry {
					clone(p)
				} else if err := os.WriteFile(filepath.Join(dst, p), f.synced[id], 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		clone(".")
		return
	}
	err := filepath.WalkDir(f.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out := filepath.Join(dst, f.rel(path))
		if e.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if keep == keepNames {
			id, err := f.idOf(path)
			if err != nil {
				return err
			}
			b = f.synced[id]
		}
		return os.WriteFile(out, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}
