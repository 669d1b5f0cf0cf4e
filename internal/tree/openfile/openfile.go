// Package openfile is a file of the tree open for writing, as file front
// ends (SFTP, a FUSE mount) need it: writes at any offset go to a local
// spool file, never to memory, and the file is committed as one new
// version of its object (tree.Create, streamed from the spool) when its
// last handle closes or when it is synced.
//
// The spool is a sparse temporary file. A file opened without truncation
// keeps its old bytes where nothing was written: they are copied into the
// spool from the version current at that moment (one streamed read of the
// whole old object) only when first needed, by a read of a range not
// written yet or by the commit, so a file rewritten from its start, or
// truncated, is never read back.
//
// Until the commit, other readers of the tree (S3, another session, the
// tree itself) see the old version, or nothing for a new file; the
// session that holds the file sees its own writes (Table.Lookup). Two
// opens of one path in one Table share one File: it commits once, when
// the last closes. See docs/mounts.md.
package openfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// Options say how a file is opened for writing.
type Options struct {
	// Create makes the file if it does not exist (O_CREAT); without it a
	// missing file is fs.ErrNotExist.
	Create bool
	// Exclusive refuses a file that exists (O_EXCL), at the open and again
	// at the commit.
	Exclusive bool
	// Truncate starts from zero bytes (O_TRUNC): the old version is never
	// read.
	Truncate bool
	// Mode is a new file's permissions (0: tree.DefaultFileMode); an
	// existing file keeps its own.
	Mode fs.FileMode
}

// Table is the files open for writing in one session (an SFTP
// connection, a mount): two opens of one path share one File. It is safe
// for concurrent use.
type Table struct {
	t   *tree.Tree
	dir string // where spools go; "" is os.TempDir

	mu    sync.Mutex
	files map[string]*File // by clean path
}

// NewTable returns an empty table over t, spooling in directory dir (""
// for the system's temporary directory).
func NewTable(t *tree.Tree, dir string) *Table {
	return &Table{t: t, dir: dir, files: map[string]*File{}}
}

// key is the table's form of a path: the tree's, without slashes around.
func key(name string) string { return strings.Trim(name, "/") }

// File is a file open for writing, shared by the handles of one Table. Its
// methods are safe for concurrent use.
type File struct {
	tab *Table

	mu      sync.Mutex
	name    string // clean path, updated by Table.Rename
	refs    int    // open handles
	removed bool   // Table.Remove: the last close commits nothing
	spool   *os.File
	size    int64 // logical size
	// base is how many bytes of the old version still show where nothing
	// was written (0 once truncated to 0, or for a new file); seeded says
	// they are in the spool already. written are the ranges of [0, base)
	// written since, sorted and disjoint.
	base    int64
	seeded  bool
	written []span
	existed bool // the file was in the tree at the open (or committed since)
	excl    bool
	dirty   bool // bytes or size changed since the open or the last commit
	mode    fs.FileMode
	mtime   time.Time         // set by Chtimes after the last write; zero: now at commit
	meta    map[string]string // SetMeta's, written with each commit
	closed  bool
}

type span struct{ off, end int64 }

// Handle is one open of a File; Close it once.
type Handle struct {
	*File
	once sync.Once
}

// Open opens name for writing, or joins the File already open at name in
// this table. The file's directory must exist (fs.ErrNotExist,
// tree.ErrNotDir); name must not be a directory (tree.ErrIsDir).
func (tb *Table) Open(ctx context.Context, name string, opt Options) (*Handle, error) {
	k := key(name)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if f := tb.files[k]; f != nil {
		if opt.Exclusive {
			return nil, &fs.PathError{Op: "open", Path: "/" + k, Err: fs.ErrExist}
		}
		f.mu.Lock()
		var err error
		if opt.Truncate {
			err = f.truncate(0)
		}
		if err == nil {
			f.refs++
		}
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return &Handle{File: f}, nil
	}
	if err := tb.t.CheckWrite(ctx, name); err != nil {
		return nil, err // refused now, not at the commit
	}
	st, err := tb.t.Stat(ctx, name)
	existed := err == nil
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case existed && st.IsDir():
		return nil, &fs.PathError{Op: "open", Path: "/" + k, Err: tree.ErrIsDir}
	case existed && opt.Exclusive:
		return nil, &fs.PathError{Op: "open", Path: "/" + k, Err: fs.ErrExist}
	case !existed && !opt.Create:
		return nil, err
	case !existed:
		if k == "" {
			return nil, &fs.PathError{Op: "open", Path: "/", Err: tree.ErrIsDir}
		}
		d, err := tb.t.Stat(ctx, path.Dir("/"+k))
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: "/" + k, Err: errors.Unwrap(err)}
		}
		if !d.IsDir() {
			return nil, &fs.PathError{Op: "open", Path: "/" + k, Err: tree.ErrNotDir}
		}
	}
	sp, err := os.CreateTemp(tb.dir, "quilt-spool-*")
	if err != nil {
		return nil, fmt.Errorf("openfile: spool for %s: %w", k, err)
	}
	// Unlinked at once: the spool goes with the process, whatever happens.
	os.Remove(sp.Name())
	f := &File{tab: tb, name: k, refs: 1, spool: sp, existed: existed, excl: opt.Exclusive, mode: opt.Mode.Perm()}
	if existed {
		f.size, f.base = st.Size, st.Size
		f.mode = 0 // keep the file's own
		if opt.Truncate {
			if err := f.truncate(0); err != nil {
				sp.Close()
				return nil, err
			}
		}
	} else {
		f.dirty = true // a new file is written at close even if empty
		if f.mode == 0 {
			f.mode = tree.DefaultFileMode
		}
	}
	tb.files[k] = f
	return &Handle{File: f}, nil
}

// Lookup returns the File open at name in this table, or nil: what this
// session sees of name before the commit.
func (tb *Table) Lookup(name string) *File {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.files[key(name)]
}

// Rename moves the open files at from, or under from as a directory, to
// their new names, so they commit there. Call it after the tree's rename
// succeeded.
func (tb *Table) Rename(from, to string) {
	from, to = key(from), key(to)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	moved := map[string]*File{}
	for k, f := range tb.files {
		nk := ""
		switch {
		case k == from:
			nk = to
		case from == "" || strings.HasPrefix(k, from+"/"):
			nk = to + "/" + strings.TrimPrefix(k, from+"/")
		default:
			continue
		}
		delete(tb.files, k)
		f.mu.Lock()
		f.name = nk
		f.mu.Unlock()
		moved[nk] = f
	}
	for k, f := range moved {
		if old := tb.files[k]; old != nil {
			// Replaced by the rename, as its name was: it commits nothing.
			old.mu.Lock()
			old.removed = true
			old.mu.Unlock()
		}
		tb.files[k] = f
	}
}

// Remove forgets the open files at name or under it: their handles keep
// working, but their last close commits nothing (the file was removed, as
// an unlinked file's writes go nowhere). Call it after the tree's remove
// succeeded.
func (tb *Table) Remove(name string) {
	k := key(name)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for n, f := range tb.files {
		if n == k || k == "" || strings.HasPrefix(n, k+"/") {
			delete(tb.files, n)
			f.mu.Lock()
			f.removed = true
			f.mu.Unlock()
		}
	}
}

// Close closes every file of the table without committing (a session
// that ended without closing its handles) and returns how many it
// dropped.
func (tb *Table) Close() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	n := 0
	for k, f := range tb.files {
		delete(tb.files, k)
		f.mu.Lock()
		f.release()
		f.mu.Unlock()
		n++
	}
	return n
}

// ErrClosed is the error of a File used after its last handle closed.
var ErrClosed = errors.New("openfile: file closed")

// Name returns the file's path (without a leading "/").
func (f *File) Name() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.name
}

// Size returns the file's size as this session sees it.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Pending reports whether the file has changes the tree does not have
// yet (it would commit at its last close).
func (f *File) Pending() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending()
}

func (f *File) pending() bool { return f.dirty && !f.removed }

// Info returns what this session sees of the file: size, mode and time
// of the changes not committed yet over the tree's info i of its path
// (zero if the file is new).
func (f *File) Info(i tree.Info) tree.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	i.Path, i.Size = f.name, f.size
	if f.mode != 0 {
		i.Mode = f.mode
	} else if i.Mode == 0 {
		i.Mode = tree.DefaultFileMode
	}
	switch {
	case !f.mtime.IsZero():
		i.ModTime = f.mtime
	case f.dirty:
		i.ModTime = time.Now()
	}
	return i
}

// WriteAt writes p at off into the spool.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("openfile: %w: negative offset", fs.ErrInvalid)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := f.spool.WriteAt(p, off)
	if n > 0 {
		f.mark(off, off+int64(n))
		f.size = max(f.size, off+int64(n))
		f.dirty = true
		f.mtime = time.Time{}
	}
	return n, err
}

// mark records [off, end) as written, where it covers old bytes.
func (f *File) mark(off, end int64) {
	if f.seeded || off >= f.base {
		return
	}
	end = min(end, f.base)
	w := f.written
	i := sort.Search(len(w), func(i int) bool { return w[i].end >= off })
	j := i
	for j < len(w) && w[j].off <= end {
		off, end = min(off, w[j].off), max(end, w[j].end)
		j++
	}
	f.written = append(w[:i], append([]span{{off, end}}, w[j:]...)...)
}

// covered reports whether [off, end) of the old bytes is all written.
func (f *File) covered(off, end int64) bool {
	end = min(end, f.base)
	if f.seeded || off >= end {
		return true
	}
	i := sort.Search(len(f.written), func(i int) bool { return f.written[i].end > off })
	return i < len(f.written) && f.written[i].off <= off && f.written[i].end >= end
}

// seed copies the old version's bytes into the spool where nothing was
// written, streaming it once.
func (f *File) seed(ctx context.Context) error {
	if f.covered(0, f.base) {
		f.seeded, f.written = true, nil
		return nil
	}
	rc, info, err := f.tab.t.Open(ctx, f.name, 0, f.base)
	if err != nil {
		return fmt.Errorf("openfile: reading the old version of %s: %w", f.name, err)
	}
	defer rc.Close()
	if info.Size < f.base {
		// Another writer shortened it meanwhile: what is gone reads as zeros.
		f.base = info.Size
	}
	buf := make([]byte, 256<<10)
	var off int64
	for off < f.base {
		n, err := io.ReadFull(rc, buf[:min(int64(len(buf)), f.base-off)])
		if n > 0 {
			if err := f.fill(buf[:n], off); err != nil {
				return err
			}
			off += int64(n)
		}
		if err != nil {
			if off < f.base {
				return fmt.Errorf("openfile: reading the old version of %s: %w", f.name, err)
			}
			break
		}
	}
	f.seeded, f.written = true, nil
	return nil
}

// fill writes old bytes b at off into the spool, skipping written ranges.
func (f *File) fill(b []byte, off int64) error {
	end := off + int64(len(b))
	pos := off
	for _, s := range f.written {
		if s.end <= pos || s.off >= end {
			continue
		}
		if s.off > pos {
			if _, err := f.spool.WriteAt(b[pos-off:s.off-off], pos); err != nil {
				return fmt.Errorf("openfile: spool: %w", err)
			}
		}
		pos = max(pos, s.end)
	}
	if pos < end {
		if _, err := f.spool.WriteAt(b[pos-off:], pos); err != nil {
			return fmt.Errorf("openfile: spool: %w", err)
		}
	}
	return nil
}

// ReadAt reads what this session sees of the file: its writes, the old
// bytes elsewhere (copied into the spool on the first such read).
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtContext(context.Background(), p, off)
}

// ReadAtContext is ReadAt with a context for reading the old version.
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("openfile: %w: negative offset", fs.ErrInvalid)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), f.size-off)
	if !f.covered(off, off+want) {
		if err := f.seed(ctx); err != nil {
			return 0, err
		}
	}
	n, err := f.spool.ReadAt(p[:want], off)
	if err == io.EOF && int64(n) < want {
		// A sparse tail the spool never wrote: zeros.
		clear(p[n:want])
		n, err = int(want), nil
	}
	if err == nil && int64(n) < int64(len(p)) {
		err = io.EOF
	}
	return n, err
}

// Truncate sets the file's size: bytes past it are gone, and zeros show
// if it grows.
func (f *File) Truncate(size int64) error {
	if size < 0 {
		return fmt.Errorf("openfile: %w: negative size", fs.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.truncate(size)
}

func (f *File) truncate(size int64) error {
	if size == f.size {
		return nil
	}
	if err := f.spool.Truncate(size); err != nil {
		return fmt.Errorf("openfile: spool: %w", err)
	}
	f.base = min(f.base, size)
	f.size = size
	f.dirty = true
	f.mtime = time.Time{}
	return nil
}

// Chmod sets the permissions the file commits with; if it has nothing to
// commit, it sets them in the tree now.
func (f *File) Chmod(ctx context.Context, mode fs.FileMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode.Perm()
	if !f.pending() && !f.removed {
		return f.tab.t.Chmod(ctx, f.name, mode)
	}
	return nil
}

// Chtimes sets the modification time the file commits with (a later
// write sets it to the time of the commit again); if it has nothing to
// commit, it sets it in the tree now.
func (f *File) Chtimes(ctx context.Context, mtime time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mtime = mtime
	if !f.pending() && !f.removed {
		return f.tab.t.Chtimes(ctx, f.name, mtime)
	}
	return nil
}

// SetMeta sets user metadata that each commit writes beside the mode
// and time (tree.CreateOptions.Meta), such as a WebDAV file ID.
func (f *File) SetMeta(meta map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.meta = maps.Clone(meta)
}

// Sync commits the file now if it has changes (fsync); it stays open.
func (f *File) Sync(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	return f.commit(ctx)
}

// commit writes the spool as the file's new version.
func (f *File) commit(ctx context.Context) error {
	if !f.pending() {
		return nil
	}
	if err := f.seed(ctx); err != nil {
		return err
	}
	opt := tree.CreateOptions{Mode: f.mode, ModTime: f.mtime, Size: f.size, Exclusive: f.excl && !f.existed, Meta: f.meta}
	if _, err := f.tab.t.Create(ctx, f.name, io.NewSectionReader(f.spool, 0, f.size), opt); err != nil {
		return err
	}
	f.existed, f.dirty = true, false
	return nil
}

// Close ends this handle; the last handle of the File commits it (unless
// it was removed) and drops the spool. The commit's error is Close's.
func (h *Handle) Close() error { return h.CloseContext(context.Background()) }

// CloseContext is Close with a context for the commit.
func (h *Handle) CloseContext(ctx context.Context) error {
	err := ErrClosed
	h.once.Do(func() { err = h.File.close(ctx) })
	return err
}

func (f *File) close(ctx context.Context) error {
	tb := f.tab
	tb.mu.Lock()
	f.mu.Lock()
	f.refs--
	last := f.refs <= 0
	if last && tb.files[f.name] == f {
		delete(tb.files, f.name)
	}
	tb.mu.Unlock()
	defer f.mu.Unlock()
	if !last || f.closed {
		return nil
	}
	err := f.commit(ctx)
	f.release()
	return err
}

// release drops the spool; f.mu is held.
func (f *File) release() {
	if !f.closed {
		f.closed = true
		f.spool.Close()
	}
}

// Abort ends this handle and drops the File's changes not committed yet:
// its last close commits nothing (a session cut off in mid-write).
func (h *Handle) Abort() {
	h.File.mu.Lock()
	h.File.removed = true
	h.File.mu.Unlock()
	h.Close()
}

// InTree reports whether the file is in the tree already (it existed at
// the open, or was synced since); a new file shows only to its session
// until its commit.
func (f *File) InTree() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.existed
}

// Files returns the files open in the table.
func (tb *Table) Files() []*File {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	out := make([]*File, 0, len(tb.files))
	for _, f := range tb.files {
		out = append(out, f)
	}
	return out
}
