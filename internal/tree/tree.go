// Package tree is the file tree that every file front end (WebDAV, SFTP,
// FUSE, ...) shares over an object namespace: paths and directories over
// flat keys, so that the same keys stay readable and writable through S3
// (one tree, several doors).
//
// A file at path "a/b/c" is the object at key "a/b/c". A directory is
// either explicit, an empty object whose key ends in "/" ("a/b/", the
// marker S3 consoles and rclone write), or implied by the keys under it.
// Mode and modification time are kept in the object's metadata ("mode",
// "mtime": x-amz-meta-mode and x-amz-meta-mtime through S3, as s3fs and
// rclone keep them). Renaming a file or a whole directory rewrites
// entries only: each object is copied by reference (its read capability
// reused) and the old key deleted, in one batch; no data moves. See
// docs/tree.md.
//
// The tree needs only a Store; it imports nothing of Quilt.
package tree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Errors besides io/fs's (fs.ErrNotExist, fs.ErrExist, fs.ErrInvalid),
// which the tree uses where they fit. Every error of a path operation is
// an *fs.PathError wrapping one of them (or the store's error); for a
// rename its path is the one at fault.
// They also match the errno a system call would fail with
// (errors.Is(err, syscall.ENOTEMPTY)), which FUSE and SFTP answer with.
var (
	ErrNotEmpty error = &errnoError{"tree: directory not empty", syscall.ENOTEMPTY}
	ErrIsDir    error = &errnoError{"tree: is a directory", syscall.EISDIR}
	ErrNotDir   error = &errnoError{"tree: not a directory", syscall.ENOTDIR}
)

type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }

// Is matches the errno too.
func (e *errnoError) Is(target error) bool { return target == e.errno }

// Metadata keys the tree keeps in objects.
const (
	MetaMode  = "mode"  // decimal st_mode, file type bits included (s3fs's)
	MetaMtime = "mtime" // seconds since 1970 with up to 9 decimals (rclone's)
)

// Unix file type bits, as st_mode carries them in MetaMode.
const (
	sIFREG = 0o100000
	sIFDIR = 0o040000
)

// Default permissions when an object carries no mode.
const (
	DefaultFileMode fs.FileMode = 0o644
	DefaultDirMode  fs.FileMode = 0o755
)

// listPage is how many keys the tree asks a store for at once.
const listPage = 1000

// Info describes a file or a directory. It is an fs.FileInfo.
type Info struct {
	Path    string // clean, without a leading "/"; "" is the root
	Size    int64
	Mode    fs.FileMode // permissions, and fs.ModeDir for a directory
	ModTime time.Time
	// Implied is true for a directory that has no marker, only keys
	// under it.
	Implied bool
	// Object is the file's object, or the directory's marker (zero for
	// an implied directory and the root).
	Object Object
}

// Name returns the last element of the path ("/" for the root).
func (i Info) Name() string {
	if i.Path == "" {
		return "/"
	}
	return path.Base(i.Path)
}

// IsDir reports whether i is a directory.
func (i Info) IsDir() bool { return i.Mode.IsDir() }

// FileInfo returns i as an fs.FileInfo.
func (i Info) FileInfo() fs.FileInfo { return fileInfo{i} }

type fileInfo struct{ i Info }

func (f fileInfo) Name() string       { return f.i.Name() }
func (f fileInfo) Size() int64        { return f.i.Size }
func (f fileInfo) Mode() fs.FileMode  { return f.i.Mode }
func (f fileInfo) ModTime() time.Time { return f.i.ModTime }
func (f fileInfo) IsDir() bool        { return f.i.IsDir() }
func (f fileInfo) Sys() any           { return f.i }

// Tree is a file tree over a store. It is safe for concurrent use.
type Tree struct {
	s   Store
	now func() time.Time

	mu   sync.Mutex // subscribers and the watcher
	subs map[*sub]bool
	stop context.CancelFunc // the store watcher, running while subs is not empty
}

// New returns the tree of store s.
func New(s Store) *Tree {
	return &Tree{s: s, now: time.Now, subs: map[*sub]bool{}}
}

// Store returns the tree's store.
func (t *Tree) Store() Store { return t.s }

// clean turns a path of a front end ("/a/b", "a/b/", "") into the tree's
// form ("a/b", "" for the root). Paths with empty, "." or ".." elements,
// or that are not UTF-8, are invalid: keys with them stay reachable
// through S3 only.
func clean(op, name string) (string, error) {
	p := strings.Trim(name, "/")
	if p == "" || p == "." {
		return "", nil
	}
	if !fs.ValidPath(p) || strings.ContainsRune(p, 0) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return p, nil
}

func perr(op, p string, err error) error {
	return &fs.PathError{Op: op, Path: "/" + p, Err: err}
}

// validName reports whether n can be one element of a path.
func validName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\x00") && utf8.ValidString(n)
}

// dirKey is the marker key of a directory, and the prefix of the keys
// under it ("" for the root).
func dirKey(p string) string {
	if p == "" {
		return ""
	}
	return p + "/"
}

func parent(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// infoOf describes the object at key as a file or a directory marker.
func infoOf(p string, o Object, dir bool) Info {
	i := Info{Path: p, Size: o.Size, ModTime: o.Modified, Object: o}
	if v, ok := o.Meta[MetaMtime]; ok {
		if t, ok := parseMtime(v); ok {
			i.ModTime = t
		}
	}
	i.Mode = DefaultFileMode
	if dir {
		i.Mode, i.Size = DefaultDirMode|fs.ModeDir, 0
	}
	if v, ok := o.Meta[MetaMode]; ok {
		if m, err := strconv.ParseUint(v, 10, 32); err == nil {
			i.Mode = i.Mode&^fs.ModePerm | fs.FileMode(m)&fs.ModePerm
		}
		if !dir && isLink(v) {
			i.Mode |= fs.ModeSymlink
		}
	}
	return i
}

// parseMtime reads seconds since 1970 with an optional fraction.
func parseMtime(v string) (time.Time, bool) {
	sec, frac, _ := strings.Cut(v, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
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

func formatMtime(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

func formatMode(m fs.FileMode, dir bool) string {
	v := uint32(m.Perm())
	if dir {
		v |= sIFDIR
	} else {
		v |= sIFREG
	}
	return strconv.FormatUint(uint64(v), 10)
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// stat finds what p is: a file (its key), a directory with a marker, a
// directory implied by keys under it, or nothing (fs.ErrNotExist). A key
// "a" and keys "a/..." may both exist (S3 allows it): the file wins.
func (t *Tree) stat(ctx context.Context, p string) (Info, error) {
	if p == "" {
		return Info{Path: "", Mode: DefaultDirMode | fs.ModeDir}, nil
	}
	o, err := t.s.Stat(ctx, p)
	if err == nil {
		return infoOf(p, o, false), nil
	}
	if !notExist(err) {
		return Info{}, err
	}
	if o, err := t.s.Stat(ctx, p+"/"); err == nil {
		return infoOf(p, o, true), nil
	} else if !notExist(err) {
		return Info{}, err
	}
	l, err := t.s.List(ctx, p+"/", "/", "", 1)
	if err != nil {
		return Info{}, err
	}
	if len(l.Objects)+len(l.Prefixes) == 0 {
		return Info{}, fs.ErrNotExist
	}
	// An implied directory has no time of its own: zero, in Stat as in
	// ReadDir (front ends show what their protocol wants).
	return Info{Path: p, Mode: DefaultDirMode | fs.ModeDir, Implied: true}, nil
}

// Stat describes the file or directory at name.
func (t *Tree) Stat(ctx context.Context, name string) (Info, error) {
	p, err := clean("stat", name)
	if err != nil {
		return Info{}, err
	}
	i, err := t.stat(ctx, p)
	if err != nil {
		return Info{}, perr("stat", p, err)
	}
	return i, nil
}

// needDir checks that p is a directory: fs.ErrNotExist if nothing is
// there, ErrNotDir if a file is.
func (t *Tree) needDir(ctx context.Context, p string) error {
	i, err := t.stat(ctx, p)
	if err != nil {
		return err
	}
	if !i.IsDir() {
		return ErrNotDir
	}
	return nil
}

// ReadDir lists directory name in the byte order of keys, S3's (a
// directory sorts as its name and a "/"), up to limit entries (limit <= 0:
// all). after is "" for the first page, then the next it returned; next is
// "" after the last page. Keys under the directory that are not valid
// paths (an empty, "." or ".." element) are not listed.
func (t *Tree) ReadDir(ctx context.Context, name, after string, limit int) (entries []Info, next string, err error) {
	p, err := clean("readdir", name)
	if err != nil {
		return nil, "", err
	}
	if err := t.needDir(ctx, p); err != nil {
		return nil, "", perr("readdir", p, err)
	}
	prefix := dirKey(p)
	if after != "" && !strings.HasPrefix(after, prefix) {
		return nil, "", perr("readdir", p, fmt.Errorf("%w: cursor %q is not of this directory", fs.ErrInvalid, after))
	}
	cursor := after
	files := map[string]bool{} // files listed, each hiding a directory of its name
	for range 1 << 20 {
		want := listPage
		if limit > 0 {
			want = min(want, limit-len(entries)+1)
		}
		l, err := t.s.List(ctx, prefix, "/", cursor, want)
		if err != nil {
			return nil, "", perr("readdir", p, err)
		}
		// Objects and prefixes, merged in key order.
		oi, pi := 0, 0
		for oi < len(l.Objects) || pi < len(l.Prefixes) {
			var key string
			var obj *Object
			if pi >= len(l.Prefixes) || oi < len(l.Objects) && l.Objects[oi].Key < l.Prefixes[pi] {
				obj, key = &l.Objects[oi], l.Objects[oi].Key
				oi++
			} else {
				key = l.Prefixes[pi]
				pi++
			}
			if limit > 0 && len(entries) == limit {
				return entries, cursor, nil
			}
			if !strings.HasPrefix(key, prefix) || key <= cursor {
				continue // not what was asked for: a store's mistake
			}
			cursor = key
			rest := key[len(prefix):]
			if obj != nil {
				if !validName(rest) {
					continue // the directory's own marker, or an odd key
				}
				entries = append(entries, infoOf(prefix+rest, *obj, false))
				files[rest] = true
				continue
			}
			sub := strings.TrimSuffix(rest, "/")
			if !validName(sub) {
				continue
			}
			if files[sub] {
				continue
			}
			if after >= prefix+sub {
				// The file of this name, if any, was on an earlier page.
				if _, err := t.s.Stat(ctx, prefix+sub); err == nil {
					continue
				}
			}
			// Keys under it make it a directory; its marker, if any,
			// has its mode and time.
			i := Info{Path: prefix + sub, Mode: DefaultDirMode | fs.ModeDir, Implied: true}
			if o, err := t.s.Stat(ctx, key); err == nil {
				i = infoOf(prefix+sub, o, true)
			} else if !notExist(err) {
				return nil, "", perr("readdir", p, err)
			}
			entries = append(entries, i)
		}
		if !l.More {
			return entries, "", nil
		}
	}
	return entries, cursor, nil
}

// ReadDirAll lists a whole directory (all pages of ReadDir).
func (t *Tree) ReadDirAll(ctx context.Context, name string) ([]Info, error) {
	var all []Info
	after := ""
	for range 1 << 20 {
		page, next, err := t.ReadDir(ctx, name, after, listPage)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" {
			break
		}
		after = next
	}
	return all, nil
}

// CreateOptions are what a file is written with besides its bytes.
type CreateOptions struct {
	// Mode is the file's permissions; 0 keeps an overwritten file's, or
	// DefaultFileMode.
	Mode fs.FileMode
	// ModTime is the file's modification time; zero is now.
	ModTime time.Time
	// Exclusive refuses to overwrite a file (fs.ErrExist), as O_EXCL.
	Exclusive bool
	// Size is the length of the body if known; 0 or less is unknown.
	// A body of another length than a known Size is refused.
	Size int64
	// Meta is more user metadata for the new version (a WebDAV file ID);
	// the tree's mode and mtime keys are its own and win.
	Meta map[string]string
}

// Create writes a file from r, streaming, creating or overwriting it. Its
// directory must exist (fs.ErrNotExist, ErrNotDir); name must not be a
// directory (ErrIsDir). The file appears whole when Create returns, never
// in part; the checks and the write are not one atomic step.
func (t *Tree) Create(ctx context.Context, name string, r io.Reader, opt CreateOptions) (Info, error) {
	p, err := clean("create", name)
	if err != nil {
		return Info{}, err
	}
	if p == "" {
		return Info{}, perr("create", p, ErrIsDir)
	}
	if err := t.needDir(ctx, parent(p)); err != nil {
		return Info{}, perr("create", p, err)
	}
	old, err := t.stat(ctx, p)
	switch {
	case err == nil && old.IsDir():
		return Info{}, perr("create", p, ErrIsDir)
	case err == nil && opt.Exclusive:
		return Info{}, perr("create", p, fs.ErrExist)
	case err != nil && !notExist(err):
		return Info{}, perr("create", p, err)
	}
	mode := opt.Mode.Perm()
	if mode == 0 {
		mode = DefaultFileMode
		if err == nil {
			mode = old.Mode.Perm()
		}
	}
	mt := opt.ModTime
	if mt.IsZero() {
		mt = t.now()
	}
	size := opt.Size
	if size <= 0 {
		size = -1
	}
	meta := maps.Clone(opt.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaMode], meta[MetaMtime] = formatMode(mode, false), formatMtime(mt)
	o, err := t.s.Put(ctx, p, r, size, meta)
	if err != nil {
		return Info{}, perr("create", p, err)
	}
	t.publish(Event{Kind: KindWrite, Path: p})
	return infoOf(p, o, false), nil
}

// Open reads length bytes of file name from off (length < 0: to the end),
// streaming. A range past the end is cut at the end; an offset past it is
// fs.ErrInvalid.
func (t *Tree) Open(ctx context.Context, name string, off, length int64) (io.ReadCloser, Info, error) {
	p, err := clean("open", name)
	if err != nil {
		return nil, Info{}, err
	}
	i, err := t.stat(ctx, p)
	if err != nil {
		return nil, Info{}, perr("open", p, err)
	}
	if i.IsDir() {
		return nil, i, perr("open", p, ErrIsDir)
	}
	if off < 0 || off > i.Size {
		return nil, i, perr("open", p, fmt.Errorf("%w: offset %d of %d bytes", fs.ErrInvalid, off, i.Size))
	}
	if length < 0 || off+length > i.Size {
		length = i.Size - off
	}
	if length == 0 {
		return io.NopCloser(strings.NewReader("")), i, nil
	}
	rc, err := t.s.Open(ctx, p, off, length)
	if err != nil {
		return nil, i, perr("open", p, err)
	}
	return rc, i, nil
}

// Mkdir makes directory name with a marker: fs.ErrExist if something is
// there, fs.ErrNotExist or ErrNotDir if its parent is not a directory.
// mode 0 is DefaultDirMode.
func (t *Tree) Mkdir(ctx context.Context, name string, mode fs.FileMode) error {
	return t.MkdirMeta(ctx, name, mode, nil)
}

// MkdirMeta is Mkdir with more user metadata on the directory's marker
// (a WebDAV file ID); the tree's mode and mtime keys are its own and win.
func (t *Tree) MkdirMeta(ctx context.Context, name string, mode fs.FileMode, meta map[string]string) error {
	p, err := clean("mkdir", name)
	if err != nil {
		return err
	}
	if p == "" {
		return perr("mkdir", p, fs.ErrExist)
	}
	if err := t.needDir(ctx, parent(p)); err != nil {
		return perr("mkdir", p, err)
	}
	if _, err := t.stat(ctx, p); err == nil {
		return perr("mkdir", p, fs.ErrExist)
	} else if !notExist(err) {
		return perr("mkdir", p, err)
	}
	if mode.Perm() == 0 {
		mode = DefaultDirMode
	}
	m := maps.Clone(meta)
	if m == nil {
		m = map[string]string{}
	}
	m[MetaMode], m[MetaMtime] = formatMode(mode, true), formatMtime(t.now())
	if err := t.s.Apply(ctx, []Op{{Key: p + "/", Meta: m}}); err != nil {
		return perr("mkdir", p, err)
	}
	t.publish(Event{Kind: KindMkdir, Path: p})
	return nil
}

// MkdirAll makes directory name and the missing ones above it.
func (t *Tree) MkdirAll(ctx context.Context, name string, mode fs.FileMode) error {
	p, err := clean("mkdir", name)
	if err != nil {
		return err
	}
	if p == "" {
		return nil
	}
	elems := strings.Split(p, "/")
	for i := range elems {
		d := strings.Join(elems[:i+1], "/")
		err := t.Mkdir(ctx, d, mode)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if errors.Is(err, fs.ErrExist) {
			if st, err := t.stat(ctx, d); err == nil && !st.IsDir() {
				return perr("mkdir", d, ErrNotDir)
			}
		}
	}
	return nil
}

// keepParent returns the op that keeps directory d in place once the
// keys under it go: its marker, if it has none (an implied directory
// would vanish with its last key).
func (t *Tree) keepParent(ctx context.Context, d string) ([]Op, error) {
	if d == "" {
		return nil, nil
	}
	if _, err := t.s.Stat(ctx, d+"/"); err == nil {
		return nil, nil
	} else if !notExist(err) {
		return nil, err
	}
	return []Op{{Key: d + "/", Meta: map[string]string{MetaMode: formatMode(DefaultDirMode, true), MetaMtime: formatMtime(t.now())}}}, nil
}

// RemoveOptions say how far Remove goes.
type RemoveOptions struct {
	// Recursive removes a directory and everything under it; without
	// it, a directory that holds anything is ErrNotEmpty.
	Recursive bool
}

// Remove removes file or directory name. The root cannot be removed
// (fs.ErrInvalid). The directory that held name stays, with a marker if
// it had none.
func (t *Tree) Remove(ctx context.Context, name string, opt RemoveOptions) error {
	p, err := clean("remove", name)
	if err != nil {
		return err
	}
	if p == "" {
		return perr("remove", p, fmt.Errorf("%w: the root cannot be removed", fs.ErrInvalid))
	}
	i, err := t.stat(ctx, p)
	if err != nil {
		return perr("remove", p, err)
	}
	ops, err := t.keepParent(ctx, parent(p))
	if err != nil {
		return perr("remove", p, err)
	}
	if !i.IsDir() {
		ops = append(ops, Op{Key: p, Delete: true})
	} else {
		keys, err := t.under(ctx, p)
		if err != nil {
			return perr("remove", p, err)
		}
		if !opt.Recursive && (len(keys) > 1 || len(keys) == 1 && keys[0].Key != p+"/") {
			return perr("remove", p, ErrNotEmpty)
		}
		for _, o := range keys {
			ops = append(ops, Op{Key: o.Key, Delete: true})
		}
	}
	if err := t.s.Apply(ctx, ops); err != nil {
		return perr("remove", p, err)
	}
	t.publish(Event{Kind: KindRemove, Path: p})
	return nil
}

// under lists every key under directory p, its marker included.
func (t *Tree) under(ctx context.Context, p string) ([]Object, error) {
	var out []Object
	after := ""
	for range 1 << 20 {
		l, err := t.s.List(ctx, p+"/", "", after, listPage)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Objects...)
		if !l.More || len(l.Objects) == 0 {
			return out, nil
		}
		after = l.Objects[len(l.Objects)-1].Key
	}
	return out, nil
}

// RenameOptions say what a rename may replace.
type RenameOptions struct {
	// NoReplace refuses to replace anything at the new name (fs.ErrExist).
	NoReplace bool
}

// Rename moves file or directory from to to, by entries only: every
// object is copied by reference to its new key and its old key deleted,
// in one batch (Store.Apply); no data moves. As POSIX rename: a file
// replaces a file; a directory replaces an empty directory (else
// ErrNotEmpty); a file onto a directory is ErrIsDir, a directory onto a
// file ErrNotDir; a directory into itself or under itself is
// fs.ErrInvalid; the new name's parent must be a directory. Modification
// times stay.
func (t *Tree) Rename(ctx context.Context, from, to string, opt RenameOptions) error {
	src, err := clean("rename", from)
	if err != nil {
		return err
	}
	dst, err := clean("rename", to)
	if err != nil {
		return err
	}
	if src == "" || dst == "" {
		return perr("rename", src, fmt.Errorf("%w: the root cannot be renamed or replaced", fs.ErrInvalid))
	}
	si, err := t.stat(ctx, src)
	if err != nil {
		return perr("rename", src, err)
	}
	if src == dst {
		return nil
	}
	if si.IsDir() && strings.HasPrefix(dst, src+"/") {
		return perr("rename", src, fmt.Errorf("%w: a directory cannot move into itself", fs.ErrInvalid))
	}
	if err := t.needDir(ctx, parent(dst)); err != nil {
		return perr("rename", dst, err)
	}
	var ops []Op
	di, err := t.stat(ctx, dst)
	switch {
	case err != nil && !notExist(err):
		return perr("rename", dst, err)
	case err == nil && opt.NoReplace:
		return perr("rename", dst, fs.ErrExist)
	case err == nil && !si.IsDir() && di.IsDir():
		return perr("rename", dst, ErrIsDir)
	case err == nil && si.IsDir() && !di.IsDir():
		return perr("rename", dst, ErrNotDir)
	case err == nil && di.IsDir():
		keys, err := t.under(ctx, dst)
		if err != nil {
			return perr("rename", dst, err)
		}
		if len(keys) > 1 || len(keys) == 1 && keys[0].Key != dst+"/" {
			return perr("rename", dst, ErrNotEmpty)
		}
		// The empty directory's marker is replaced by src's, or goes.
		ops = append(ops, Op{Key: dst + "/", Delete: true})
	}
	keep, err := t.keepParent(ctx, parent(src))
	if err != nil {
		return perr("rename", src, err)
	}
	var copies, deletes []Op
	move := func(o Object, newKey string) {
		op := Op{Key: newKey, From: o.Key}
		if _, ok := o.Meta[MetaMtime]; !ok {
			// Written through S3 without an mtime: keep its time.
			op.Meta = maps.Clone(o.Meta)
			if op.Meta == nil {
				op.Meta = map[string]string{}
			}
			op.Meta[MetaMtime] = formatMtime(o.Modified)
		}
		copies = append(copies, op)
		deletes = append(deletes, Op{Key: o.Key, Delete: true})
	}
	if !si.IsDir() {
		move(si.Object, dst)
	} else {
		keys, err := t.under(ctx, src)
		if err != nil {
			return perr("rename", src, err)
		}
		for _, o := range keys {
			if rest, ok := strings.CutPrefix(o.Key, src+"/"); ok {
				move(o, dst+"/"+rest)
			}
		}
	}
	// A replaced directory's marker goes unless src brings one.
	var all []Op
	for _, op := range ops {
		if !(si.IsDir() && !si.Implied && op.Key == dst+"/") {
			all = append(all, op)
		}
	}
	all = append(append(append(keep, copies...), all...), deletes...)
	if err := t.s.Apply(ctx, all); err != nil {
		return perr("rename", src, err)
	}
	t.publish(Event{Kind: KindRename, Path: src, To: dst})
	return nil
}

// Chmod sets the permissions of file or directory name (an implied
// directory gets a marker to hold them).
func (t *Tree) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return t.setMeta(ctx, "chmod", name, func(m map[string]string, dir bool) {
		m[MetaMode] = formatMode(mode, dir)
	})
}

// Chtimes sets the modification time of file or directory name.
func (t *Tree) Chtimes(ctx context.Context, name string, mtime time.Time) error {
	return t.setMeta(ctx, "chtimes", name, func(m map[string]string, dir bool) {
		m[MetaMtime] = formatMtime(mtime)
	})
}

// setMeta rewrites the metadata of name's object (copying it onto itself
// by reference), or of its marker.
func (t *Tree) setMeta(ctx context.Context, op, name string, f func(map[string]string, bool)) error {
	p, err := clean(op, name)
	if err != nil {
		return err
	}
	if p == "" {
		return perr(op, p, fmt.Errorf("%w: the root has no metadata", fs.ErrInvalid))
	}
	i, err := t.stat(ctx, p)
	if err != nil {
		return perr(op, p, err)
	}
	meta := maps.Clone(i.Object.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	if _, ok := meta[MetaMtime]; !ok {
		meta[MetaMtime] = formatMtime(i.ModTime)
	}
	if _, ok := meta[MetaMode]; !ok {
		meta[MetaMode] = formatMode(i.Mode, i.IsDir())
	}
	f(meta, i.IsDir())
	o := Op{Key: p, From: p, Meta: meta}
	switch {
	case i.Implied:
		o = Op{Key: p + "/", Meta: meta}
	case i.IsDir():
		o.Key, o.From = p+"/", p+"/"
	}
	if err := t.s.Apply(ctx, []Op{o}); err != nil {
		return perr(op, p, err)
	}
	t.publish(Event{Kind: KindAttr, Path: p})
	return nil
}
