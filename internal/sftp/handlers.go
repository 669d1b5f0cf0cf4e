package sftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
)

// ExtMtime is the extended attribute (SFTP's ATTRS extension pairs) in
// which stat answers carry the modification time to the nanosecond, and
// setstat takes it, as "SECONDS.NANOSECONDS": the protocol's own time has
// whole seconds only. A directory without a time of its own (implied by
// keys under it) has none.
const ExtMtime = "mtime@quilt-grid.org"

// handlers are one SFTP session's: the user's tree and the files the
// session has open for writing.
type handlers struct {
	s   *Server
	t   *tree.Tree
	tab *openfile.Table
}

func newHandlers(s *Server, t *tree.Tree) *handlers {
	return &handlers{s: s, t: t, tab: openfile.NewTable(t, s.cfg.SpoolDir)}
}

func (h *handlers) handlers() sftp.Handlers {
	return sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h}
}

var (
	_ sftp.OpenFileWriter       = (*handlers)(nil)
	_ sftp.PosixRenameFileCmder = (*handlers)(nil)
	_ sftp.StatVFSFileCmder     = (*handlers)(nil)
	_ sftp.LstatFileLister      = (*handlers)(nil)
	_ sftp.ReadlinkFileLister   = (*handlers)(nil)
)

// wire turns an error of the tree into what the request server answers
// with: a missing file is SSH_FX_NO_SUCH_FILE, a refused operation
// SSH_FX_OP_UNSUPPORTED, anything else SSH_FX_FAILURE with the tree's
// message (which names the kind: "file already exists", "directory not
// empty", "is a directory", "not a directory", "invalid argument").
func wire(op, p string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sftp.ErrSSHFxOpUnsupported):
		return sftp.ErrSSHFxOpUnsupported
	case errors.Is(err, fs.ErrNotExist):
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist}
	case errors.Is(err, fs.ErrPermission):
		return &fs.PathError{Op: op, Path: p, Err: fs.ErrPermission}
	}
	return errors.New(err.Error())
}

// safe turns a panic of a handler into its error, so that no request
// takes the server down (pkg/sftp does not recover).
func safe(err *error) {
	if v := recover(); v != nil {
		*err = fmt.Errorf("sftp: internal error: %v", v)
	}
}

// ctx is the context of a request that may outlive it (a commit at close).
func (h *handlers) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(h.s.ctx, h.s.cfg.CommitTimeout)
}

// Fileread opens a file for reading: the spool if this session has it
// open for writing, else the tree's current version.
func (h *handlers) Fileread(r *sftp.Request) (_ io.ReaderAt, err error) {
	defer safe(&err)
	p := r.Filepath
	if f := h.tab.Lookup(p); f != nil {
		return &spoolReader{h: h, f: f}, nil
	}
	i, err := h.t.Stat(r.Context(), p)
	if err != nil {
		return nil, wire("open", p, err)
	}
	if i.IsDir() {
		return nil, wire("open", p, &fs.PathError{Op: "open", Path: p, Err: tree.ErrIsDir})
	}
	return &treeReader{t: h.t, tab: h.tab, name: p, size: i.Size, ctx: h.s.ctx}, nil
}

// Filewrite opens a file for writing only.
func (h *handlers) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return h.OpenFile(r)
}

// OpenFile opens a file for writing (and reading): a spool shared by this
// session's opens of the path, committed at the last close.
func (h *handlers) OpenFile(r *sftp.Request) (_ sftp.WriterAtReaderAt, err error) {
	defer safe(&err)
	fl := r.Pflags()
	opt := openfile.Options{Create: fl.Creat, Exclusive: fl.Excl, Truncate: fl.Trunc}
	opt.Mode = openMode(r.Attrs)
	hd, err := h.tab.Open(r.Context(), r.Filepath, opt)
	if err != nil {
		return nil, wire("open", r.Filepath, err)
	}
	return &writer{h: h, hd: hd, appendOnly: fl.Append}, nil
}

// openMode is the permissions an open asks a new file to have: the
// request server gives the open's attributes without their flags, so only
// attributes of exactly 4 bytes are read, which can be nothing but the
// permissions (what OpenSSH's sftp and sshfs send); 0 otherwise.
func openMode(attrs []byte) fs.FileMode {
	if len(attrs) != 4 {
		return 0
	}
	return fs.FileMode(binary.BigEndian.Uint32(attrs)).Perm()
}

// writer is a handle open for writing.
type writer struct {
	h          *handlers
	hd         *openfile.Handle
	appendOnly bool
	mu         sync.Mutex
	aborted    bool
}

func (w *writer) WriteAt(p []byte, off int64) (_ int, err error) {
	defer safe(&err)
	if w.appendOnly {
		off = w.hd.Size()
	}
	return w.hd.WriteAt(p, off)
}

func (w *writer) ReadAt(p []byte, off int64) (int, error) {
	return w.hd.ReadAtContext(w.h.s.ctx, p, off)
}

// TransferError: the session ended with the handle open; its writes are
// dropped, not committed in part.
func (w *writer) TransferError(err error) {
	w.mu.Lock()
	w.aborted = true
	w.mu.Unlock()
}

// Close commits the file if this is its last handle.
func (w *writer) Close() (err error) {
	defer safe(&err)
	w.mu.Lock()
	aborted := w.aborted
	w.mu.Unlock()
	if aborted {
		name := w.hd.Name()
		w.hd.Abort()
		w.h.s.cfg.Logger.Warn("sftp: session ended with a file open for writing; not committed", "file", "/"+name)
		return nil
	}
	ctx, cancel := w.h.ctx()
	defer cancel()
	name := w.hd.Name()
	return wire("close", "/"+name, w.hd.CloseContext(ctx))
}

// spoolReader reads a file this session has open for writing: its
// spool, and once the file is committed and closed, the tree's version.
type spoolReader struct {
	h *handlers
	f *openfile.File

	mu   sync.Mutex
	tree *treeReader // after the file closed
}

func (r *spoolReader) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	tr := r.tree
	r.mu.Unlock()
	if tr == nil {
		n, err := r.f.ReadAtContext(r.h.s.ctx, p, off)
		if !errors.Is(err, openfile.ErrClosed) {
			return n, err
		}
		i, err := r.h.t.Stat(r.h.s.ctx, r.f.Name())
		if err != nil {
			return 0, wire("read", "/"+r.f.Name(), err)
		}
		r.mu.Lock()
		if r.tree == nil {
			r.tree = &treeReader{t: r.h.t, tab: r.h.tab, name: i.Path, size: i.Size, ctx: r.h.s.ctx}
		}
		tr = r.tree
		r.mu.Unlock()
	}
	return tr.ReadAt(p, off)
}

func (r *spoolReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tree != nil {
		return r.tree.Close()
	}
	return nil
}

// treeReader reads a file of the tree from one stream while the reads
// go forward, as clients read: they keep many requests in flight, which
// the request server answers out of order, so the last bytes of the
// stream are kept (window) for the reads that come late, and a read a
// little ahead reads on to it. Only a jump opens another stream.
//
// While the session has the file open for writing (it opened it after
// this reader), reads come from that spool, as the reads of a handle
// opened after the write do: a reader of a file another handle of the
// session writes sees the writes (a local file system's page cache does
// the same). Once the writer is gone the reader reads the tree's version
// afresh, the committed one.
type treeReader struct {
	t    *tree.Tree
	tab  *openfile.Table // the session's files open for writing
	name string
	size int64
	ctx  context.Context

	mu    sync.Mutex
	stale bool // a read came from the spool: stat and open the tree again
	rc    io.ReadCloser
	pos   int64  // the stream's position
	win   []byte // the bytes of the stream just before pos
	eof   bool   // the stream ended (the version read is shorter than size)
}

// readWindow is how many bytes behind the stream a read is still served
// from memory, and how far ahead of it one is reached by reading on:
// more than the 2 MiB clients keep in flight (64 requests of 32 KiB).
const readWindow = 4 << 20

func (r *treeReader) ReadAt(p []byte, off int64) (_ int, err error) {
	defer safe(&err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if off < 0 {
		return 0, fmt.Errorf("read %s: %w: negative offset", r.name, fs.ErrInvalid)
	}
	if f := r.tab.Lookup(r.name); f != nil {
		n, err := f.ReadAtContext(r.ctx, p, off)
		if !errors.Is(err, openfile.ErrClosed) {
			r.stale = true
			return n, err
		}
	}
	if r.stale {
		i, err := r.t.Stat(r.ctx, r.name)
		if err != nil {
			return 0, wire("read", r.name, err)
		}
		if r.rc != nil {
			r.rc.Close()
		}
		r.rc, r.size, r.stale = nil, i.Size, false
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	if r.rc == nil || off < r.pos-int64(len(r.win)) || off > r.pos+readWindow {
		if r.rc != nil {
			r.rc.Close()
		}
		rc, _, err := r.t.Open(r.ctx, r.name, off, -1)
		r.rc, r.pos, r.win, r.eof = nil, off, r.win[:0], false
		if err != nil {
			return 0, wire("read", r.name, err)
		}
		r.rc = rc
	}
	if need := end - r.pos; need > 0 && !r.eof {
		n0 := len(r.win)
		r.win = slices.Grow(r.win, int(need))[:n0+int(need)]
		n, err := io.ReadFull(r.rc, r.win[n0:])
		r.win = r.win[:n0+n]
		r.pos += int64(n)
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			r.eof = true
		case err != nil:
			r.rc.Close()
			r.rc, r.win = nil, r.win[:0]
			return 0, wire("read", r.name, err)
		}
	}
	start := off - (r.pos - int64(len(r.win)))
	n := 0
	if start < int64(len(r.win)) {
		n = copy(p[:end-off], r.win[start:])
	}
	if len(r.win) > 2*readWindow {
		r.win = append(r.win[:0], r.win[len(r.win)-readWindow:]...)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (r *treeReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	return nil
}

// Filecmd does setstat, rename, remove, mkdir and rmdir; links are not
// supported.
func (h *handlers) Filecmd(r *sftp.Request) (err error) {
	defer safe(&err)
	ctx := r.Context()
	p := r.Filepath
	switch r.Method {
	case "Setstat":
		return h.setstat(ctx, r)
	case "Rename":
		// SFTP's rename refuses to replace (OpenSSH's too).
		return h.rename(ctx, p, r.Target, tree.RenameOptions{NoReplace: true})
	case "Mkdir":
		// The request server passes no attributes with a mkdir: the
		// default mode, until a setstat.
		return wire("mkdir", p, h.t.Mkdir(ctx, p, 0))
	case "Rmdir":
		i, err := h.t.Stat(ctx, p)
		if err != nil {
			return wire("rmdir", p, err)
		}
		if !i.IsDir() {
			return wire("rmdir", p, &fs.PathError{Op: "rmdir", Path: p, Err: tree.ErrNotDir})
		}
		// A file this session is writing under the directory is in it,
		// committed or not (sshfs may send the rmdir before the close
		// that commits a file it just wrote).
		under := strings.Trim(p, "/") + "/"
		for _, f := range h.tab.Files() {
			if strings.HasPrefix(f.Name(), under) {
				return wire("rmdir", p, &fs.PathError{Op: "rmdir", Path: p, Err: tree.ErrNotEmpty})
			}
		}
		if err := h.t.Remove(ctx, p, tree.RemoveOptions{}); err != nil {
			return wire("rmdir", p, err)
		}
		h.tab.Remove(p)
		return nil
	case "Remove":
		i, err := h.t.Stat(ctx, p)
		if errors.Is(err, fs.ErrNotExist) {
			if f := h.tab.Lookup(p); f != nil && !f.InTree() {
				h.tab.Remove(p) // a new file not committed yet
				return nil
			}
		}
		if err != nil {
			return wire("remove", p, err)
		}
		if i.IsDir() {
			return wire("remove", p, &fs.PathError{Op: "remove", Path: p, Err: tree.ErrIsDir})
		}
		if err := h.t.Remove(ctx, p, tree.RemoveOptions{}); err != nil {
			return wire("remove", p, err)
		}
		h.tab.Remove(p)
		return nil
	}
	// Link, Symlink: the tree has neither hard links nor symbolic links.
	return sftp.ErrSSHFxOpUnsupported
}

// PosixRename is posix-rename@openssh.com: rename(2), replacing.
func (h *handlers) PosixRename(r *sftp.Request) (err error) {
	defer safe(&err)
	return h.rename(r.Context(), r.Filepath, r.Target, tree.RenameOptions{})
}

func (h *handlers) rename(ctx context.Context, from, to string, opt tree.RenameOptions) error {
	if f := h.tab.Lookup(from); f != nil && f.Pending() {
		// Commit first, so the rename moves the bytes the session wrote
		// (and a new file exists to be moved).
		if err := f.Sync(ctx); err != nil {
			return wire("rename", from, err)
		}
	}
	if err := h.t.Rename(ctx, from, to, opt); err != nil {
		return wire("rename", from, err)
	}
	h.tab.Rename(from, to)
	return nil
}

// setstat sets size (truncation), permissions and times; owners are
// ignored (the tree keeps none).
func (h *handlers) setstat(ctx context.Context, r *sftp.Request) error {
	p := r.Filepath
	a := r.Attributes()
	if a == nil {
		return wire("setstat", p, fmt.Errorf("setstat %s: %w: attributes", p, fs.ErrInvalid))
	}
	fl := r.AttrFlags()
	var mtime time.Time
	if fl.Acmodtime {
		mtime = time.Unix(int64(a.Mtime), 0)
	}
	for _, e := range a.Extended {
		if e.ExtType == ExtMtime {
			t, ok := parseMtime(e.ExtData)
			if !ok {
				return wire("setstat", p, fmt.Errorf("setstat %s: %w: %s %q", p, fs.ErrInvalid, ExtMtime, e.ExtData))
			}
			mtime = t
		}
	}
	if fl.Size {
		f := h.tab.Lookup(p)
		if f == nil {
			hd, err := h.tab.Open(ctx, p, openfile.Options{})
			if err != nil {
				return wire("truncate", p, err)
			}
			err = hd.Truncate(int64(a.Size))
			if err == nil {
				cctx, cancel := h.ctx()
				err = hd.CloseContext(cctx)
				cancel()
			} else {
				hd.Abort()
			}
			if err != nil {
				return wire("truncate", p, err)
			}
		} else if err := f.Truncate(int64(a.Size)); err != nil {
			return wire("truncate", p, err)
		}
	}
	f := h.tab.Lookup(p)
	if fl.Permissions {
		mode := fs.FileMode(a.Mode).Perm()
		var err error
		if f != nil {
			err = f.Chmod(ctx, mode)
		} else {
			err = h.t.Chmod(ctx, p, mode)
		}
		if err != nil {
			return wire("chmod", p, err)
		}
	}
	if !mtime.IsZero() {
		var err error
		if f != nil {
			err = f.Chtimes(ctx, mtime)
		} else {
			err = h.t.Chtimes(ctx, p, mtime)
		}
		if err != nil {
			return wire("chtimes", p, err)
		}
	}
	return nil
}

// StatVFS answers statvfs@openssh.com (df on an sshfs mount). The grid's
// space is not known here: it reports a large, constant size.
func (h *handlers) StatVFS(r *sftp.Request) (*sftp.StatVFS, error) {
	const bsize = 1 << 12
	const blocks = 1 << 38 // 1 PiB of 4 KiB blocks
	return &sftp.StatVFS{Bsize: bsize, Frsize: bsize, Blocks: blocks, Bfree: blocks, Bavail: blocks,
		Files: 1 << 32, Ffree: 1 << 32, Favail: 1 << 32, Namemax: 255}, nil
}

// stat is what this session sees at p: the tree's, or its own writes.
func (h *handlers) stat(ctx context.Context, p string) (tree.Info, error) {
	i, err := h.t.Stat(ctx, p)
	if f := h.tab.Lookup(p); f != nil && (err == nil && !i.IsDir() || errors.Is(err, fs.ErrNotExist)) {
		return f.Info(i), nil
	}
	return i, err
}

// Filelist lists a directory, or stats one path.
func (h *handlers) Filelist(r *sftp.Request) (_ sftp.ListerAt, err error) {
	defer safe(&err)
	p := r.Filepath
	switch r.Method {
	case "List":
		// Fails early on a missing directory or a file.
		if _, _, err := h.t.ReadDir(r.Context(), p, "", 1); err != nil {
			return nil, wire("readdir", p, err)
		}
		return &lister{h: h, dir: p}, nil
	case "Stat":
		i, err := h.stat(r.Context(), p)
		if err != nil {
			return nil, wire("stat", p, err)
		}
		return listerOf{infoOf(i)}, nil
	}
	return nil, sftp.ErrSSHFxOpUnsupported
}

// Lstat is Stat: the tree has no symbolic links.
func (h *handlers) Lstat(r *sftp.Request) (_ sftp.ListerAt, err error) {
	defer safe(&err)
	i, err := h.stat(r.Context(), r.Filepath)
	if err != nil {
		return nil, wire("lstat", r.Filepath, err)
	}
	return listerOf{infoOf(i)}, nil
}

// Readlink: there are no symbolic links.
func (h *handlers) Readlink(string) (string, error) {
	return "", sftp.ErrSSHFxOpUnsupported
}

type listerOf []os.FileInfo

func (l listerOf) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if n+int(off) == len(l) {
		return n, io.EOF
	}
	return n, nil
}

// lister pages through a directory as the client reads it, then adds the
// session's new files not committed yet.
type lister struct {
	h    *handlers
	dir  string
	mu   sync.Mutex
	got  []os.FileInfo
	next string
	done bool
}

func (l *lister) ListAt(out []os.FileInfo, off int64) (_ int, err error) {
	defer safe(&err)
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, cancel := context.WithTimeout(l.h.s.ctx, time.Minute)
	defer cancel()
	for range 1 << 20 {
		if l.done || int64(len(l.got)) >= off+int64(len(out)) {
			break
		}
		page, next, err := l.h.t.ReadDir(ctx, l.dir, l.next, 1000)
		if err != nil {
			return 0, wire("readdir", l.dir, err)
		}
		for _, i := range page {
			if f := l.h.tab.Lookup(i.Path); f != nil && !i.IsDir() {
				i = f.Info(i)
			}
			l.got = append(l.got, infoOf(i))
		}
		l.next = next
		if next == "" {
			l.done = true
			d := strings.Trim(l.dir, "/")
			for _, f := range l.h.tab.Files() {
				if !f.InTree() && parentOf(f.Name()) == d {
					l.got = append(l.got, infoOf(f.Info(tree.Info{})))
				}
			}
		}
	}
	if off >= int64(len(l.got)) {
		return 0, io.EOF
	}
	n := copy(out, l.got[off:])
	if l.done && int(off)+n == len(l.got) {
		return n, io.EOF
	}
	return n, nil
}

func parentOf(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// fileInfo is a tree.Info as the request server sends it: owned by the
// server's user, with the time to the nanosecond as ExtMtime.
type fileInfo struct {
	i tree.Info
}

func infoOf(i tree.Info) os.FileInfo { return fileInfo{i} }

func (f fileInfo) Name() string      { return f.i.Name() }
func (f fileInfo) Size() int64       { return f.i.Size }
func (f fileInfo) Mode() fs.FileMode { return f.i.Mode }
func (f fileInfo) IsDir() bool       { return f.i.IsDir() }

// ModTime is the file's time; none (an implied directory) is 1970.
func (f fileInfo) ModTime() time.Time {
	if f.i.ModTime.IsZero() {
		return time.Unix(0, 0)
	}
	return f.i.ModTime
}
func (f fileInfo) Sys() any    { return nil }
func (f fileInfo) Uid() uint32 { return uint32(os.Getuid()) }
func (f fileInfo) Gid() uint32 { return uint32(os.Getgid()) }

func (f fileInfo) Extended() []sftp.StatExtended {
	if f.i.ModTime.IsZero() {
		return nil
	}
	t := f.i.ModTime
	return []sftp.StatExtended{{ExtType: ExtMtime, ExtData: fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())}}
}

// parseMtime reads "SECONDS[.NANOSECONDS]".
func parseMtime(v string) (time.Time, bool) {
	sec, frac, _ := strings.Cut(v, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			return time.Time{}, false
		}
		n, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, false
		}
		for i := len(frac); i < 9; i++ {
			n *= 10
		}
		ns = n
	}
	return time.Unix(s, ns).UTC(), true
}
