// Package fuse mounts a file tree (internal/tree: a gateway bucket, or a
// namespace of the configuration filesystem through cfs.Store) as a
// local filesystem with FUSE (github.com/hanwen/go-fuse/v2): lookups,
// listings and reads go to the tree; files open for writing are spooled
// locally (internal/tree/openfile) and committed as one new version at
// close (each close(2), the kernel's FLUSH), at fsync and at the last
// release. The kernel caches entries and attributes for a short time
// (Options.CacheTimeout); the tree's change events (tree.Subscribe)
// invalidate them at once, so writes through another door (S3, SFTP,
// another gateway) show without waiting. See docs/mounts.md.
package fuse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
)

// Options say how a tree is mounted.
type Options struct {
	// Name is what the mount shows as its source (mount(8), df); default
	// "quilt".
	Name string
	// SpoolDir is where files open for writing are spooled; "" is the
	// system's temporary directory.
	SpoolDir string
	// CacheTimeout is how long the kernel keeps entries and attributes
	// without asking again; default 1 s. Change events of the tree
	// invalidate them sooner. Missing names are not cached.
	CacheTimeout time.Duration
	// OpTimeout bounds each operation on the tree; default 5 minutes.
	OpTimeout time.Duration
	// Logger gets errors the kernel cannot be told of; default slog's.
	Logger *slog.Logger
	// Debug logs every FUSE request (go-fuse's own log).
	Debug bool
	// Symlinks lets symlink(2) make symbolic links (tree.Symlink), for
	// trees whose store has links of its own (the configuration
	// filesystem's); without it symlink(2) is EPERM. Links already in
	// the tree show and resolve either way.
	Symlinks bool
}

// Server is a mounted tree, served until it is unmounted.
type Server struct {
	Dir    string // where the tree is mounted
	srv    *gofuse.Server
	root   *node
	tab    *openfile.Table
	cancel func() // of the event subscription
	done   chan struct{}
}

// statfs is what the mount reports of its space: a constant 1 PiB, all
// free (the grid's real space is not asked yet), as the SFTP server.
const (
	statfsBlock  = 4096
	statfsBlocks = 1 << 50 / statfsBlock
)

// Mount mounts t on dir (an existing empty directory) and serves it until
// it is unmounted (Unmount, or fusermount3 -u). It returns once the
// kernel answers on the mount.
func Mount(t *tree.Tree, dir string, opt Options) (*Server, error) {
	if opt.Name == "" {
		opt.Name = "quilt"
	}
	if opt.CacheTimeout == 0 {
		opt.CacheTimeout = time.Second
	}
	if opt.OpTimeout == 0 {
		opt.OpTimeout = 5 * time.Minute
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("fuse: %w (the fuse kernel module is not loaded, or this container has no /dev/fuse)", err)
	}
	m := &Server{Dir: dir, tab: openfile.NewTable(t, opt.SpoolDir), done: make(chan struct{})}
	m.root = &node{m: m, t: t, opt: &opt}
	timeout := opt.CacheTimeout
	// No negative entries: a name made through another door shows at
	// once, and invalidation never has to guess at what the kernel keeps.
	var negative time.Duration
	srv, err := gofs.Mount(dir, m.root, &gofs.Options{
		MountOptions: gofuse.MountOptions{
			FsName:        opt.Name,
			Name:          "quilt",
			MaxWrite:      1 << 20,
			DisableXAttrs: true,
			Debug:         opt.Debug,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &negative,
		UID:             uint32(os.Getuid()),
		GID:             uint32(os.Getgid()),
	})
	if err != nil {
		return nil, fmt.Errorf("fuse: mounting %s: %w", dir, err)
	}
	m.srv = srv
	events, cancel := t.Subscribe(1024)
	m.cancel = cancel
	go m.invalidate(events)
	go func() {
		srv.Wait()
		m.cancel()
		if n := m.tab.Close(); n > 0 {
			opt.Logger.Warn("fuse: unmounted with files still open; their changes are dropped", "dir", dir, "files", n)
		}
		close(m.done)
	}()
	return m, nil
}

// Wait returns when the mount is gone (Unmount, fusermount3 -u).
func (m *Server) Wait() { <-m.done }

// Done is closed when the mount is gone.
func (m *Server) Done() <-chan struct{} { return m.done }

// Unmount unmounts the tree; files still open drop their changes not
// committed yet. It fails while the mount is busy (a process has a file
// or its working directory on it).
func (m *Server) Unmount() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	if err := m.srv.Unmount(); err != nil {
		return fmt.Errorf("fuse: unmounting %s: %w", m.Dir, err)
	}
	<-m.done
	return nil
}

// invalidate tells the kernel to forget what it caches of each path the
// tree reports changed.
func (m *Server) invalidate(events <-chan tree.Event) {
	for e := range events {
		switch e.Kind {
		case tree.KindOverflow:
			m.forgetAll(&m.root.Inode)
		default:
			m.forget(e.Path)
			if e.To != "" {
				m.forget(e.To)
			}
		}
	}
}

// forget invalidates what the kernel caches of p: its attributes and
// data, its parent's listing, and its entry when the tree no longer has
// it as the kernel does (gone, or a file now a directory). An entry that
// stays is not invalidated: the kernel would unhash a directory that is
// some process's working directory (getcwd then fails), and the mount's
// own changes come back as events too.
func (m *Server) forget(p string) {
	p = strings.Trim(p, "/")
	if p == "" {
		m.root.NotifyContent(0, 0)
		return
	}
	dir, name := path.Split(p)
	parent := m.inode(strings.Trim(dir, "/"))
	if parent == nil {
		return
	}
	parent.NotifyContent(0, 0) // its listing
	ch := parent.GetChild(name)
	if ch == nil {
		// Nothing cached: negative entries are not kept. (An entry
		// invalidated here could be the mount's own new one, whose
		// operation has committed but not yet answered the kernel.)
		return
	}
	ch.NotifyContent(0, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	i, err := m.root.stat(ctx, p)
	switch {
	case err == nil && typeOf(i) == ch.StableAttr().Mode:
	case err == nil || errors.Is(err, fs.ErrNotExist):
		parent.NotifyEntry(name)
	}
}

// forgetAll invalidates the attributes, data and listings of every inode
// under in (events were lost); entries expire after Options.CacheTimeout.
func (m *Server) forgetAll(in *gofs.Inode) {
	in.NotifyContent(0, 0)
	for _, ch := range in.Children() {
		m.forgetAll(ch)
	}
}

// inode returns the inode of p the kernel knows, or nil.
func (m *Server) inode(p string) *gofs.Inode {
	in := &m.root.Inode
	if p == "" {
		return in
	}
	for _, name := range strings.Split(p, "/") {
		if in = in.GetChild(name); in == nil {
			return nil
		}
	}
	return in
}

// node is a file or directory of the mount; its path is where the kernel
// has it now.
type node struct {
	gofs.Inode
	m   *Server
	t   *tree.Tree
	opt *Options

	mu sync.Mutex
	// unlinked is the file open for writing at this node when it was
	// unlinked: what fchmod or futimens of it, which come without a
	// handle, change.
	unlinked *openfile.File
}

var (
	_ gofs.NodeLookuper   = (*node)(nil)
	_ gofs.NodeGetattrer  = (*node)(nil)
	_ gofs.NodeSetattrer  = (*node)(nil)
	_ gofs.NodeReaddirer  = (*node)(nil)
	_ gofs.NodeOpener     = (*node)(nil)
	_ gofs.NodeCreater    = (*node)(nil)
	_ gofs.NodeMkdirer    = (*node)(nil)
	_ gofs.NodeRmdirer    = (*node)(nil)
	_ gofs.NodeUnlinker   = (*node)(nil)
	_ gofs.NodeRenamer    = (*node)(nil)
	_ gofs.NodeStatfser   = (*node)(nil)
	_ gofs.NodeLinker     = (*node)(nil)
	_ gofs.NodeSymlinker  = (*node)(nil)
	_ gofs.NodeMknoder    = (*node)(nil)
	_ gofs.NodeReadlinker = (*node)(nil)
)

// path is the node's tree path ("" for the root).
func (n *node) path() string { return n.Path(n.Root()) }

func (n *node) child(name string) string { return path.Join(n.path(), name) }

// ctx bounds an operation on the tree.
func (n *node) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.opt.OpTimeout)
}

// errno is the kernel's form of a tree error.
func (n *node) errno(op, p string, err error) syscall.Errno {
	var e syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, tree.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, tree.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, tree.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, fs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.As(err, &e):
		return e
	}
	n.opt.Logger.Warn("fuse: "+op, "path", "/"+p, "err", err)
	return syscall.EIO
}

// stat is what this mount sees of p: the tree's info, with the changes
// of a file open for writing here over it.
func (n *node) stat(ctx context.Context, p string) (tree.Info, error) {
	i, err := n.t.Stat(ctx, p)
	if f := n.m.tab.Lookup(p); f != nil && (err == nil && !i.IsDir() || errors.Is(err, fs.ErrNotExist)) {
		if err != nil {
			i = tree.Info{}
		}
		return f.Info(i), nil
	}
	return i, err
}

// fill sets out from i.
func (n *node) fill(i tree.Info, out *gofuse.Attr) {
	out.Size = uint64(i.Size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = statfsBlock
	out.Mode = uint32(i.Mode.Perm()) | typeOf(i)
	if i.IsDir() {
		out.Size, out.Blocks = statfsBlock, 8
	}
	out.Nlink = 1 // find(1) then does not count subdirectories by links
	out.Owner = gofuse.Owner{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if !i.ModTime.IsZero() {
		out.SetTimes(&i.ModTime, &i.ModTime, &i.ModTime)
	}
}

// typeOf is the file type bits of i's st_mode.
func typeOf(i tree.Info) uint32 {
	switch {
	case i.IsDir():
		return syscall.S_IFDIR
	case i.Mode&fs.ModeSymlink != 0:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}

// newChild returns the inode for child name of info i: the one the
// kernel knows if it is of the same type, else a new one.
func (n *node) newChild(ctx context.Context, name string, i tree.Info) *gofs.Inode {
	mode := typeOf(i)
	if ch := n.GetChild(name); ch != nil && ch.StableAttr().Mode == mode {
		return ch
	}
	return n.NewInode(ctx, &node{m: n.m, t: n.t, opt: n.opt}, gofs.StableAttr{Mode: mode})
}

// Lookup finds a child.
func (n *node) Lookup(ctx context.Context, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	i, err := n.stat(ctx, p)
	if err != nil {
		return nil, n.errno("lookup", p, err)
	}
	n.fill(i, &out.Attr)
	return n.newChild(ctx, name, i), 0
}

// Getattr stats the node.
func (n *node) Getattr(ctx context.Context, fh gofs.FileHandle, out *gofuse.AttrOut) syscall.Errno {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.path()
	n.mu.Lock()
	f := n.unlinked
	n.mu.Unlock()
	if w, ok := fh.(*writer); ok {
		f = w.h.File
	}
	if f != nil {
		// An open file, even unlinked: what its handles see.
		i, err := n.t.Stat(ctx, p)
		if err != nil || i.IsDir() || f.Name() != p {
			i = tree.Info{}
		}
		n.fill(f.Info(i), &out.Attr)
		return 0
	}
	i, err := n.stat(ctx, p)
	if err != nil {
		return n.errno("getattr", p, err)
	}
	n.fill(i, &out.Attr)
	return 0
}

// Setattr truncates, chmods and sets the time; owners and the access
// time are ignored.
func (n *node) Setattr(ctx context.Context, fh gofs.FileHandle, in *gofuse.SetAttrIn, out *gofuse.AttrOut) syscall.Errno {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.path()
	// The file open for writing: the handle's own (an ftruncate or
	// fchmod, even of an unlinked file), else the mount's at p.
	open := func() *openfile.File {
		if w, ok := fh.(*writer); ok {
			return w.h.File
		}
		if f := n.m.tab.Lookup(p); f != nil {
			return f
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.unlinked
	}
	if size, ok := in.GetSize(); ok {
		var err error = openfile.ErrClosed
		if f := open(); f != nil {
			err = f.Truncate(int64(size)) // ErrClosed: its last release came meanwhile
		}
		if err != nil && !errors.Is(err, openfile.ErrClosed) {
			return n.errno("truncate", p, err)
		}
		if err != nil {
			h, err := n.m.tab.Open(ctx, p, openfile.Options{Truncate: size == 0})
			if err != nil {
				return n.errno("truncate", p, err)
			}
			err = h.Truncate(int64(size))
			if cerr := h.CloseContext(ctx); err == nil {
				err = cerr
			}
			if err != nil {
				return n.errno("truncate", p, err)
			}
		}
	}
	if mode, ok := in.GetMode(); ok {
		var err error
		if f := open(); f != nil {
			err = f.Chmod(ctx, fs.FileMode(mode).Perm())
		} else {
			err = n.t.Chmod(ctx, p, fs.FileMode(mode).Perm())
		}
		if err != nil {
			return n.errno("chmod", p, err)
		}
	}
	if mtime, ok := in.GetMTime(); ok {
		var err error
		if f := open(); f != nil {
			err = f.Chtimes(ctx, mtime)
		} else {
			err = n.t.Chtimes(ctx, p, mtime)
		}
		if err != nil {
			return n.errno("utimens", p, err)
		}
	}
	// Every change of attributes is committed now, a truncation too:
	// the last release of a writer may be on its way, and a release that
	// has left the table but not yet committed shows the old version to
	// a new open. So a file rewritten with O_TRUNC (which the kernel sends
	// as a truncation after the open, without the handle) is committed
	// empty first, then with its content at its close.
	if f := open(); f != nil && f.Pending() {
		// Committed now, as a change of attributes shows at once: the
		// last release may be on its way, and a release that has left
		// the table but not yet committed shows the old version.
		if err := f.Sync(ctx); err != nil && !errors.Is(err, openfile.ErrClosed) {
			return n.errno("setattr", p, err)
		}
	}
	return n.Getattr(ctx, fh, out)
}

// Readdir lists the directory: the tree's entries and the new files open
// for writing here.
func (n *node) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.path()
	list, err := n.t.ReadDirAll(ctx, p)
	if err != nil {
		return nil, n.errno("readdir", p, err)
	}
	seen := make(map[string]bool, len(list))
	out := make([]gofuse.DirEntry, 0, len(list))
	for _, i := range list {
		seen[i.Name()] = true
		out = append(out, gofuse.DirEntry{Name: i.Name(), Mode: typeOf(i)})
	}
	for _, f := range n.m.tab.Files() {
		name := f.Name()
		if path.Dir("/"+name) == "/"+p && !seen[path.Base(name)] {
			out = append(out, gofuse.DirEntry{Name: path.Base(name), Mode: syscall.S_IFREG})
		}
	}
	return gofs.NewListDirStream(out), 0
}

// Open opens a file: for reading, a stream of the tree's version (or the
// spool of a file open for writing here); for writing, a spool.
func (n *node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.path()
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&syscall.O_TRUNC == 0 {
		i, err := n.stat(ctx, p)
		if err != nil {
			return nil, 0, n.errno("open", p, err)
		}
		if i.IsDir() {
			return nil, 0, syscall.EISDIR
		}
		return &reader{n: n}, 0, 0
	}
	h, err := n.m.tab.Open(ctx, p, openfile.Options{Truncate: flags&syscall.O_TRUNC != 0})
	if err != nil {
		return nil, 0, n.errno("open", p, err)
	}
	return &writer{n: n, h: h}, 0, 0
}

// Create makes and opens a new file.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *gofuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	h, err := n.m.tab.Open(ctx, p, openfile.Options{
		Create:    true,
		Exclusive: flags&syscall.O_EXCL != 0,
		Truncate:  flags&syscall.O_TRUNC != 0,
		Mode:      fs.FileMode(mode).Perm(),
	})
	if err != nil {
		return nil, nil, 0, n.errno("create", p, err)
	}
	i := h.Info(tree.Info{})
	if h.InTree() {
		if ti, err := n.t.Stat(ctx, p); err == nil {
			i = h.Info(ti)
		}
	}
	n.fill(i, &out.Attr)
	return n.newChild(ctx, name, i), &writer{n: n, h: h}, 0, 0
}

// Mkdir makes a directory.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	if n.m.tab.Lookup(p) != nil {
		return nil, syscall.EEXIST
	}
	if err := n.t.Mkdir(ctx, p, fs.FileMode(mode).Perm()); err != nil {
		return nil, n.errno("mkdir", p, err)
	}
	i, err := n.t.Stat(ctx, p)
	if err != nil {
		return nil, n.errno("mkdir", p, err)
	}
	n.fill(i, &out.Attr)
	return n.newChild(ctx, name, i), 0
}

// Rmdir removes an empty directory.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	i, err := n.stat(ctx, p)
	if err != nil {
		return n.errno("rmdir", p, err)
	}
	if !i.IsDir() {
		return syscall.ENOTDIR
	}
	for _, f := range n.m.tab.Files() {
		if strings.HasPrefix(f.Name(), p+"/") {
			return syscall.ENOTEMPTY // a new file not committed yet
		}
	}
	if err := n.t.Remove(ctx, p, tree.RemoveOptions{}); err != nil {
		return n.errno("rmdir", p, err)
	}
	return 0
}

// Unlink removes a file; its handles still open here keep working, but
// commit nothing.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	f := n.m.tab.Lookup(p)
	keep := func() {
		if ch := n.GetChild(name); ch != nil && f != nil {
			if c, ok := ch.Operations().(*node); ok {
				c.mu.Lock()
				c.unlinked = f
				c.mu.Unlock()
			}
		}
	}
	if f != nil && !f.InTree() {
		keep()
		n.m.tab.Remove(p) // a new file not committed yet
		return 0
	}
	i, err := n.t.Stat(ctx, p)
	if err != nil {
		return n.errno("unlink", p, err)
	}
	if i.IsDir() {
		return syscall.EISDIR
	}
	if err := n.t.Remove(ctx, p, tree.RemoveOptions{}); err != nil {
		return n.errno("unlink", p, err)
	}
	keep()
	n.m.tab.Remove(p)
	return 0
}

// renameNoReplace and renameExchange are rename2(2)'s flags.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

// Rename renames a file or directory, replacing as rename(2); a file open
// for writing here is committed first. RENAME_EXCHANGE is not supported.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	if flags&renameExchange != 0 {
		return syscall.EINVAL
	}
	from := n.child(name)
	to := path.Join(newParent.EmbeddedInode().Path(n.Root()), newName)
	if f := n.m.tab.Lookup(from); f != nil && f.Pending() {
		if err := f.Sync(ctx); err != nil {
			return n.errno("rename", from, err)
		}
	}
	if err := n.t.Rename(ctx, from, to, tree.RenameOptions{NoReplace: flags&renameNoReplace != 0}); err != nil {
		return n.errno("rename", from, err)
	}
	n.m.tab.Rename(from, to)
	return 0
}

// Statfs reports a constant 1 PiB, all free.
func (n *node) Statfs(ctx context.Context, out *gofuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = statfsBlock, statfsBlock
	out.Blocks, out.Bfree, out.Bavail = statfsBlocks, statfsBlocks, statfsBlocks
	out.Files, out.Ffree = 1<<40, 1<<40
	out.NameLen = 255
	return 0
}

// Link: the tree has no hard links.
func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Symlink makes a symbolic link if Options.Symlinks allows it, else
// EPERM.
func (n *node) Symlink(ctx context.Context, target, name string, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.opt.Symlinks {
		return nil, syscall.EPERM
	}
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.child(name)
	if n.m.tab.Lookup(p) != nil {
		return nil, syscall.EEXIST
	}
	if err := n.t.Symlink(ctx, target, p); err != nil {
		return nil, n.errno("symlink", p, err)
	}
	i, err := n.t.Stat(ctx, p)
	if err != nil {
		return nil, n.errno("symlink", p, err)
	}
	n.fill(i, &out.Attr)
	return n.newChild(ctx, name, i), 0
}

// Mknod: the tree has no special files.
func (n *node) Mknod(ctx context.Context, name string, mode, dev uint32, out *gofuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// Readlink reads a symbolic link's target.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	p := n.path()
	target, err := n.t.Readlink(ctx, p)
	if err != nil {
		return nil, n.errno("readlink", p, err)
	}
	return []byte(target), 0
}

// reader is a file open for reading. Sequential reads share one stream of
// the tree's version; a read elsewhere opens another.
type reader struct {
	n *node

	mu  sync.Mutex
	rc  io.ReadCloser
	pos int64 // where rc is
}

var (
	_ gofs.FileReader   = (*reader)(nil)
	_ gofs.FileReleaser = (*reader)(nil)
)

// Read reads from the file open for writing here if there is one, else
// from the tree.
func (r *reader) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	ctx, cancel := r.n.ctx(ctx)
	defer cancel()
	p := r.n.path()
	if f := r.n.m.tab.Lookup(p); f != nil {
		k, err := f.ReadAtContext(ctx, dest, off)
		if err != nil && err != io.EOF {
			return nil, r.n.errno("read", p, err)
		}
		return gofuse.ReadResultData(dest[:k]), 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rc == nil || r.pos != off {
		r.close()
		rc, _, err := r.n.t.Open(context.WithoutCancel(ctx), p, off, -1)
		if errors.Is(err, fs.ErrInvalid) {
			return gofuse.ReadResultData(nil), 0 // past the end
		}
		if err != nil {
			return nil, r.n.errno("read", p, err)
		}
		r.rc, r.pos = rc, off
	}
	k, err := io.ReadFull(r.rc, dest)
	r.pos += int64(k)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		r.close()
		return nil, r.n.errno("read", p, err)
	}
	return gofuse.ReadResultData(dest[:k]), 0
}

func (r *reader) close() {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
}

// Release closes the stream.
func (r *reader) Release(ctx context.Context) syscall.Errno {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.close()
	return 0
}

// writer is a file open for writing: a handle of its spool.
type writer struct {
	n *node
	h *openfile.Handle
}

var (
	_ gofs.FileReader   = (*writer)(nil)
	_ gofs.FileWriter   = (*writer)(nil)
	_ gofs.FileFlusher  = (*writer)(nil)
	_ gofs.FileFsyncer  = (*writer)(nil)
	_ gofs.FileReleaser = (*writer)(nil)
)

// Read reads what this mount sees of the file.
func (w *writer) Read(ctx context.Context, dest []byte, off int64) (gofuse.ReadResult, syscall.Errno) {
	ctx, cancel := w.n.ctx(ctx)
	defer cancel()
	k, err := w.h.ReadAtContext(ctx, dest, off)
	if err != nil && err != io.EOF {
		return nil, w.n.errno("read", w.h.Name(), err)
	}
	return gofuse.ReadResultData(dest[:k]), 0
}

// Write writes into the spool.
func (w *writer) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	k, err := w.h.WriteAt(data, off)
	if err != nil {
		return uint32(k), w.n.errno("write", w.h.Name(), err)
	}
	return uint32(k), 0
}

// Flush is each close(2) of the file: it commits the changes, so the
// close reports a failed commit and other doors see the file at once.
func (w *writer) Flush(ctx context.Context) syscall.Errno {
	return w.sync(ctx, "close")
}

// Fsync commits the changes.
func (w *writer) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return w.sync(ctx, "fsync")
}

func (w *writer) sync(ctx context.Context, op string) syscall.Errno {
	ctx, cancel := w.n.ctx(ctx)
	defer cancel()
	if !w.h.Pending() {
		return 0
	}
	if err := w.h.Sync(ctx); err != nil && !errors.Is(err, openfile.ErrClosed) {
		return w.n.errno(op, w.h.Name(), err)
	}
	return 0
}

// Release is the last close of this open: the spool's last handle
// commits what is left (writes through a mapping after the close).
func (w *writer) Release(ctx context.Context) syscall.Errno {
	ctx, cancel := w.n.ctx(ctx)
	defer cancel()
	if err := w.h.CloseContext(ctx); err != nil && !errors.Is(err, openfile.ErrClosed) {
		w.n.opt.Logger.Warn("fuse: commit at release", "path", "/"+w.h.Name(), "err", err)
		return w.n.errno("release", w.h.Name(), err)
	}
	return 0
}
