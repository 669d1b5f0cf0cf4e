package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// memFS is a filesystem of one directory that remembers what is durable:
// a file's data survives a crash only once fsynced, a directory entry
// (creation, rename, removal) only once the directory is fsynced. It can
// crash before any operation, and inject an error into one kind of call.
type memFS struct {
	dir      string
	inodes   map[int]*inode
	names    map[string]int // directory as the running system sees it
	durable  map[string]int // directory as it is on disk
	next     int
	ops      int // operations done so far
	crashAt  int // crash before this operation (-1: never)
	crashed  bool
	failOn   string // "write", "sync", "rename", "syncdir": fail that call
	failWith error
}

type inode struct {
	data, synced []byte
}

var errCrashed = errors.New("machine crashed")

func newMemFS(dir string) *memFS {
	return &memFS{dir: dir, inodes: map[int]*inode{}, names: map[string]int{}, durable: map[string]int{}, crashAt: -1}
}

// put makes a durable file.
func (m *memFS) put(name string, data []byte) {
	m.next++
	m.inodes[m.next] = &inode{data: append([]byte(nil), data...), synced: append([]byte(nil), data...)}
	m.names[name] = m.next
	m.durable[name] = m.next
}

// step counts an operation and says whether the machine is down.
func (m *memFS) step() error {
	if m.crashed {
		return errCrashed
	}
	if m.ops == m.crashAt {
		m.crashed = true
		return errCrashed
	}
	m.ops++
	return nil
}

// afterCrash returns the filesystem as it is after a reboot. With
// keepDir, directory changes not yet fsynced happen to have reached the
// disk too (file data never does unless fsynced).
func (m *memFS) afterCrash(keepDir bool) map[string][]byte {
	names := m.durable
	if keepDir {
		names = m.names
	}
	out := map[string][]byte{}
	for n, ino := range names {
		out[n] = m.inodes[ino].synced
	}
	return out
}

func (m *memFS) base(p string) (string, error) {
	if filepath.Dir(p) != filepath.Clean(m.dir) {
		return "", fmt.Errorf("%s: not in %s", p, m.dir)
	}
	return filepath.Base(p), nil
}

func (m *memFS) CreateTemp(dir, pattern string, perm fs.FileMode) (File, error) {
	if err := m.step(); err != nil {
		return nil, err
	}
	if filepath.Clean(dir) != filepath.Clean(m.dir) {
		return nil, fmt.Errorf("CreateTemp in %s, not %s", dir, m.dir)
	}
	m.next++
	m.inodes[m.next] = &inode{}
	name := strings.Replace(pattern, "*", fmt.Sprint(m.next), 1)
	m.names[name] = m.next
	return &memFile{fs: m, name: filepath.Join(m.dir, name), ino: m.inodes[m.next]}, nil
}

func (m *memFS) Rename(oldpath, newpath string) error {
	if err := m.step(); err != nil {
		return err
	}
	if m.failOn == "rename" {
		return m.failWith
	}
	o, err := m.base(oldpath)
	if err != nil {
		return err
	}
	n, err := m.base(newpath)
	if err != nil {
		return err
	}
	ino, ok := m.names[o]
	if !ok {
		return fs.ErrNotExist
	}
	delete(m.names, o)
	m.names[n] = ino
	return nil
}

func (m *memFS) Remove(name string) error {
	if err := m.step(); err != nil {
		return err
	}
	b, err := m.base(name)
	if err != nil {
		return err
	}
	if _, ok := m.names[b]; !ok {
		return fs.ErrNotExist
	}
	delete(m.names, b)
	return nil
}

func (m *memFS) SyncDir(dir string) error {
	if err := m.step(); err != nil {
		return err
	}
	if m.failOn == "syncdir" {
		return m.failWith
	}
	m.durable = map[string]int{}
	for n, ino := range m.names {
		m.durable[n] = ino
	}
	return nil
}

type memFile struct {
	fs     *memFS
	name   string
	ino    *inode
	closed bool
}

func (f *memFile) Name() string { return f.name }

func (f *memFile) Write(b []byte) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	if f.closed {
		return 0, os.ErrClosed
	}
	if f.fs.failOn == "write" {
		// Part of the data may have gone in before the error.
		f.ino.data = append(f.ino.data, b[:len(b)/2]...)
		return len(b) / 2, f.fs.failWith
	}
	f.ino.data = append(f.ino.data, b...)
	return len(b), nil
}

func (f *memFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	if f.fs.failOn == "sync" {
		return f.fs.failWith
	}
	f.ino.synced = append([]byte(nil), f.ino.data...)
	return nil
}

func (f *memFile) Close() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Crash before every operation of a write, with and without the
// unsynced directory changes reaching the disk: the file always holds the
// old content or the new, whole, and the new once the write returned nil.
func TestCrashAtEveryStep(t *testing.T) {
	const dir = "/d"
	target := filepath.Join(dir, "state.json")
	old := []byte(`{"old": "content of the previous version"}`)
	neu := []byte(`{"new": "content, longer than the old one was, to tell them apart"}`)
	for _, existed := range []bool{true, false} {
		// Count the operations of an uninterrupted write.
		full := newMemFS(dir)
		if err := Write(full, target, neu, 0o600); err != nil {
			t.Fatal(err)
		}
		if full.ops < 5 {
			t.Fatalf("a write took %d operations; want at least create, write, sync, close, rename, syncdir", full.ops)
		}
		for at := 0; at <= full.ops; at++ {
			for _, keepDir := range []bool{false, true} {
				m := newMemFS(dir)
				if existed {
					m.put("state.json", old)
				}
				m.crashAt = at
				err := Write(m, target, neu, 0o600)
				if at < full.ops && err == nil {
					t.Fatalf("crash before operation %d: Write returned nil", at)
				}
				got, ok := m.afterCrash(keepDir)["state.json"]
				name := fmt.Sprintf("existed=%v, crash before op %d of %d, unsynced dir changes kept=%v", existed, at, full.ops, keepDir)
				switch {
				case err == nil && (!ok || !bytes.Equal(got, neu)):
					t.Errorf("%s: write acknowledged, but after the crash the file is %q (present %v)", name, got, ok)
				case ok && !bytes.Equal(got, neu) && !bytes.Equal(got, old):
					t.Errorf("%s: after the crash the file is %q, neither old nor new", name, got)
				case !ok && existed:
					t.Errorf("%s: after the crash the file is gone", name)
				}
			}
		}
	}
}

// A write that fails (full disk, I/O error) returns the error and leaves
// the old file as it was, and no temporary file behind.
func TestFaultsLeaveOldFile(t *testing.T) {
	const dir = "/d"
	target := filepath.Join(dir, "key")
	old := []byte("old key")
	for _, c := range []struct {
		op  string
		err error
	}{
		{"write", syscall.ENOSPC},
		{"write", syscall.EIO},
		{"sync", syscall.ENOSPC},
		{"sync", syscall.EIO},
		{"rename", syscall.EIO},
	} {
		m := newMemFS(dir)
		m.put("key", old)
		m.failOn, m.failWith = c.op, c.err
		err := Write(m, target, []byte("new key, longer"), 0o600)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), target) {
			t.Errorf("%v on %s: Write returned %v; want the error, naming %s", c.err, c.op, err, target)
		}
		live := map[string][]byte{}
		for n, ino := range m.names {
			live[n] = m.inodes[ino].data
		}
		for view, files := range map[string]map[string][]byte{
			"now": live, "after a crash": m.afterCrash(false), "after a crash keeping unsynced renames": m.afterCrash(true),
		} {
			if got := files["key"]; !bytes.Equal(got, old) {
				t.Errorf("%v on %s: %s the file is %q, want the old %q", c.err, c.op, view, got, old)
			}
			if len(files) != 1 {
				t.Errorf("%v on %s: %s files left behind: %v", c.err, c.op, view, files)
			}
		}
	}
}

// An fsync of the directory that fails is reported: the rename may not be
// durable.
func TestSyncDirFailureReported(t *testing.T) {
	m := newMemFS("/d")
	m.failOn, m.failWith = "syncdir", syscall.EIO
	if err := Write(m, "/d/f", []byte("x"), 0o600); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Write returned %v; want EIO", err)
	}
}

// On the real filesystem: the content replaced, the mode kept, no
// temporary file left; a damaged JSON file is an error naming it.
func TestRealFS(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	if err := WriteJSON(p, map[string]int{"a": 1}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte(`{"a": 2}`), 0o640); err != nil {
		t.Fatal(err)
	}
	var v map[string]int
	if found, err := ReadJSON(p, &v); !found || err != nil || v["a"] != 2 {
		t.Fatalf("ReadJSON: %v %v %v", found, err, v)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode: %v %v", st.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("files in the directory: %v", ents)
	}
	if found, err := ReadJSON(filepath.Join(dir, "missing"), &v); found || err != nil {
		t.Fatalf("missing file: %v %v", found, err)
	}
	os.WriteFile(p, []byte(`{"a": 2`), 0o600) // torn by something else
	if _, err := ReadJSON(p, &v); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("damaged file: %v; want an error naming %s", err, p)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir"), nil, 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
