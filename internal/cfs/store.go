package cfs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/tree"
)

// Store is a namespace of the configuration filesystem seen as the flat
// keys of a tree.Store, so that the file tree (internal/tree) and every
// front end over it — the FUSE mount first — serve it unchanged. A file
// or symbolic link at /a/b is key "a/b"; a directory /a is its marker
// "a/"; a symbolic link is an object whose bytes are its target and whose
// mode says S_IFLNK (tree.LinkMeta), as s3fs keeps links.
//
// Reads come from the FS's replica and never wait on the network. Each
// change is an entry signed with the FS's key and committed through the
// namespace client (to the replica and a node, which gossips it); a key
// with no grant covering the path is refused with an error wrapping
// fs.ErrPermission (and ErrNoGrant). A change the replica took but no
// node did is kept (the next sync sends it) and is not an error.
//
// What the namespace keeps of a file's mode is its executable bit: a mode
// with any x bit sets it, one without clears it; files show as 0644 or
// 0755, directories as 0755, links as 0777. Modification times are the
// entries' (their hybrid logical clock), so a time set by a client is not
// kept. Every directory is explicit: there are no implied ones.
//
// Store is safe for concurrent use: reads go straight to the replica,
// changes are made one at a time. Follow keeps the replica in step with
// the grid; Watch reports the keys that change, whoever changed them.
type Store struct {
	f   *FS
	log *slog.Logger
	mu  sync.Mutex // changes, one at a time
}

var (
	_ tree.Store        = (*Store)(nil)
	_ tree.WriteChecker = (*Store)(nil)
)

// ErrNotConfig means a namespace of object rules was given where a
// directory tree is needed.
var ErrNotConfig = errors.New("cfs: the namespace has object rules (flat keys), not a directory tree")

// NewStore returns the store view of f, a namespace of config rules. f
// must stay open while the store is used; log gets changes kept locally
// but not yet sent (nil: slog's default).
func NewStore(f *FS, log *slog.Logger) (*Store, error) {
	if f.cap.Rules != dag.ConfigRules {
		return nil, ErrNotConfig
	}
	if log == nil {
		log = slog.Default()
	}
	return &Store{f: f, log: log}, nil
}

// pathOf is the namespace path of a key, and whether the key names a
// directory (its marker).
func pathOf(key string) (string, bool) {
	dir := strings.HasSuffix(key, "/")
	return namespace.Clean(strings.TrimSuffix(key, "/")), dir
}

// keyOf is the key of what the view shows at info.
func keyOf(info namespace.Info) string {
	k := strings.TrimPrefix(info.Path, "/")
	if info.Type == dag.Dir {
		k += "/"
	}
	return k
}

// st_mode values the store reports (tree.MetaMode).
const (
	modeDir  = 0o040755
	modeFile = 0o100644
	modeExec = 0o100755
)

func objectOf(info namespace.Info) tree.Object {
	o := tree.Object{Key: keyOf(info), Size: int64(info.Size), Modified: info.Time.Time()}
	switch {
	case info.Type == dag.Dir:
		o.Size = 0
		o.Meta = map[string]string{tree.MetaMode: strconv.Itoa(modeDir)}
	case info.Type == dag.Symlink:
		o.Size = int64(len(info.Target))
		o.Meta = tree.LinkMeta()
	case info.Exec:
		o.Meta = map[string]string{tree.MetaMode: strconv.Itoa(modeExec)}
	default:
		o.Meta = map[string]string{tree.MetaMode: strconv.Itoa(modeFile)}
	}
	return o
}

// execOf says whether a MetaMode value asks for the executable bit.
func execOf(meta map[string]string) (exec, ok bool) {
	m, err := strconv.ParseUint(meta[tree.MetaMode], 10, 32)
	if err != nil {
		return false, false
	}
	return m&0o111 != 0, true
}

// storeErr gives errors the kinds the tree matches.
func storeErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dag.ErrForbidden), errors.Is(err, dag.ErrRevoked):
		return fmt.Errorf("%w: %w", fs.ErrPermission, err)
	case errors.Is(err, namespace.ErrNotFound):
		return fmt.Errorf("cfs: %s: %w", key, fs.ErrNotExist)
	}
	return err
}

// stat is what the view shows of key: a file or link for a plain key, a
// directory for a marker.
func (s *Store) stat(key string) (namespace.Info, error) {
	p, dir := pathOf(key)
	info, err := s.f.Stat(p)
	if err != nil {
		return info, storeErr(key, err)
	}
	if dir != (info.Type == dag.Dir) {
		return info, fmt.Errorf("cfs: %s: %w", key, fs.ErrNotExist)
	}
	return info, nil
}

// Stat returns the object at key.
func (s *Store) Stat(ctx context.Context, key string) (tree.Object, error) {
	info, err := s.stat(key)
	if err != nil {
		return tree.Object{}, err
	}
	return objectOf(info), nil
}

// List lists the keys under prefix as S3 would: with delimiter "/", one
// directory's entries (subdirectories rolled up into prefixes), without,
// every key below, markers included. Only "/" or no delimiter is
// supported.
func (s *Store) List(ctx context.Context, prefix, delimiter, after string, limit int) (tree.Listing, error) {
	if delimiter != "" && delimiter != "/" {
		return tree.Listing{}, fmt.Errorf("cfs: delimiter %q: %w", delimiter, errors.ErrUnsupported)
	}
	// The directory the prefix is in, and the start of names in it.
	cut := strings.LastIndex(prefix, "/") + 1
	dirKey, start := prefix[:cut], prefix[cut:]
	dir, _ := pathOf(dirKey)
	type item struct {
		key    string
		obj    *tree.Object
		prefix bool
	}
	var items []item
	var walk func(dir string, start string) error
	walk = func(dir string, start string) error {
		list, err := s.f.Ls(dir)
		if err != nil {
			if errors.Is(err, namespace.ErrNotFound) {
				return nil
			}
			return err
		}
		for _, info := range list {
			if !strings.HasPrefix(info.Name, start) {
				continue
			}
			o := objectOf(info)
			if info.Type != dag.Dir {
				items = append(items, item{key: o.Key, obj: &o})
				continue
			}
			if delimiter != "" {
				items = append(items, item{key: o.Key, prefix: true})
				continue
			}
			items = append(items, item{key: o.Key, obj: &o})
			if err := walk(info.Path, ""); err != nil {
				return err
			}
		}
		return nil
	}
	if dirKey != "" && start == "" {
		// The directory's own marker, as S3 lists it.
		if info, err := s.stat(dirKey); err == nil {
			o := objectOf(info)
			items = append(items, item{key: o.Key, obj: &o})
		}
	}
	if info, err := s.f.Stat(dir); err == nil && info.Type == dag.Dir {
		if err := walk(dir, start); err != nil {
			return tree.Listing{}, err
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.key, b.key) })
	var l tree.Listing
	n := 0
	for _, it := range items {
		if it.key <= after {
			continue // with the delimiter, keys under a prefix are rolled up into it
		}
		if limit > 0 && n == limit {
			l.More = true
			break
		}
		n++
		if it.prefix {
			l.Prefixes = append(l.Prefixes, it.key)
		} else {
			l.Objects = append(l.Objects, *it.obj)
		}
	}
	return l, nil
}

// Open reads a file's content (from the replica, or from the grid for a
// file kept as a grid object), or a link's target.
func (s *Store) Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	info, err := s.stat(key)
	if err != nil {
		return nil, err
	}
	if info.Type == dag.Dir {
		return nil, fmt.Errorf("cfs: %s: %w", key, tree.ErrIsDir)
	}
	cut := func(b []byte) io.ReadCloser {
		off = min(max(off, 0), int64(len(b)))
		end := int64(len(b))
		if length >= 0 {
			end = min(end, off+length)
		}
		return io.NopCloser(bytes.NewReader(b[off:end]))
	}
	if info.Type == dag.Symlink {
		return cut([]byte(info.Target)), nil
	}
	b, isObject, err := s.f.db.Content(s.f.cap.NS, info.Data)
	if err != nil {
		return nil, storeErr(key, err)
	}
	if !isObject {
		return cut(b), nil
	}
	rc, err := codec.ParseReadCap(string(b))
	if err != nil {
		return nil, err
	}
	if s.f.opt.Objects == nil {
		return nil, fmt.Errorf("cfs: %s is a grid object and this client reads no objects", key)
	}
	pr, pw := io.Pipe()
	go func() {
		_, err := s.f.opt.Objects.Get(ctx, rc, pw, off, length)
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// kept turns ErrNotSent into success: the entry is in the replica, and
// the follower's next sync sends it.
func (s *Store) kept(key string, err error) error {
	if errors.Is(err, ErrNotSent) {
		s.log.Warn("cfs: change kept in the local replica, not yet sent to the grid", "key", key, "err", err)
		return nil
	}
	return storeErr(key, err)
}

// Put writes a file (or a link, if meta says so) at key, with the
// executable bit meta's mode asks for; an empty marker key ("a/") makes
// the directory. The directories above key are made if missing.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (tree.Object, error) {
	p, dir := pathOf(key)
	if p == "/" {
		return tree.Object{}, fmt.Errorf("cfs: %q: %w", key, tree.ErrIsDir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if dir {
		// A directory's marker, as S3 clients make one: no bytes.
		if n, _ := io.Copy(io.Discard, io.LimitReader(r, 1)); n > 0 {
			return tree.Object{}, fmt.Errorf("cfs: %q: %w: a directory's marker holds no bytes", key, fs.ErrInvalid)
		}
		if err := s.apply(ctx, tree.Op{Key: key}); err != nil {
			return tree.Object{}, err
		}
		return s.Stat(ctx, key)
	}
	if tree.IsLinkMeta(meta) {
		target, err := io.ReadAll(io.LimitReader(r, 4097))
		if err != nil {
			return tree.Object{}, err
		}
		if len(target) > 4096 {
			return tree.Object{}, fmt.Errorf("cfs: %s: %w: link target over 4096 bytes", key, fs.ErrInvalid)
		}
		if err := s.kept(key, s.f.Slink(ctx, string(target), p)); err != nil {
			return tree.Object{}, err
		}
	} else {
		if err := s.kept(key, s.f.Write(ctx, p, r)); err != nil {
			return tree.Object{}, err
		}
		if exec, ok := execOf(meta); ok {
			if err := s.setExec(ctx, key, exec); err != nil {
				return tree.Object{}, err
			}
		}
	}
	return s.Stat(ctx, key)
}

// setExec sets or clears a file's executable bit if it differs.
func (s *Store) setExec(ctx context.Context, key string, exec bool) error {
	info, err := s.stat(key)
	if err != nil {
		return err
	}
	if info.Type != dag.File || info.Exec == exec {
		return nil
	}
	return s.kept(key, s.f.Chmod(ctx, info.Path, exec))
}

// Apply makes the copies and markers of ops in their order, then the
// deletes: a copy of a file is a hard link entry (the same content, no
// data moved), of a link a new link, of a marker a directory; a copy onto
// itself changes only the executable bit. A delete of a directory is one
// entry, which takes what is under it along.
func (s *Store) Apply(ctx context.Context, ops []tree.Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A copy from a missing key, or a key the FS's key may not change,
	// fails the batch before anything is written (a rename out of a
	// directory without a grant leaves no copy behind).
	for _, op := range ops {
		if op.From != "" {
			if _, err := s.stat(op.From); err != nil {
				return err
			}
		}
		if err := s.CheckWrite(ctx, op.Key); err != nil {
			return err
		}
	}
	var deletes []string
	for _, op := range ops {
		if op.Delete {
			deletes = append(deletes, op.Key)
			continue
		}
		if err := s.apply(ctx, op); err != nil {
			return err
		}
	}
	// Deepest last, and nothing under a directory that goes anyway.
	paths := make([]string, 0, len(deletes))
	for _, k := range deletes {
		p, _ := pathOf(k)
		paths = append(paths, p)
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	var gone []string
	for _, p := range paths {
		if p == "/" || slices.ContainsFunc(gone, func(d string) bool { return under(p, d) }) {
			continue
		}
		if _, err := s.f.Stat(p); errors.Is(err, namespace.ErrNotFound) {
			continue
		}
		if err := s.kept(p, s.f.Rm(ctx, p, true)); err != nil {
			return err
		}
		gone = append(gone, p)
	}
	return nil
}

// apply makes one copy or marker.
func (s *Store) apply(ctx context.Context, op tree.Op) error {
	p, dir := pathOf(op.Key)
	if op.From == "" {
		if !dir {
			if err := s.kept(op.Key, s.f.Write(ctx, p, bytes.NewReader(nil))); err != nil {
				return err
			}
			if exec, ok := execOf(op.Meta); ok {
				return s.setExec(ctx, op.Key, exec)
			}
			return nil
		}
		if info, err := s.f.Stat(p); err == nil && info.Type == dag.Dir {
			return nil
		}
		return s.kept(op.Key, s.f.Mkdir(ctx, p, true))
	}
	src, err := s.stat(op.From)
	if err != nil {
		return err
	}
	exec := src.Exec
	if op.Meta != nil {
		if e, ok := execOf(op.Meta); ok {
			exec = e
		}
	}
	if op.From != op.Key {
		switch src.Type {
		case dag.Dir:
			if info, err := s.f.Stat(p); err == nil && info.Type == dag.Dir {
				return nil
			}
			err = s.f.Mkdir(ctx, p, false)
		case dag.Symlink:
			err = s.f.Slink(ctx, src.Target, p)
		default:
			err = s.f.Link(ctx, src.Path, p)
		}
		if err := s.kept(op.Key, err); err != nil {
			return err
		}
	}
	if src.Type == dag.File {
		return s.setExec(ctx, op.Key, exec)
	}
	return nil
}

// CheckWrite says whether the FS's key may change key (tree.WriteChecker):
// an error wrapping fs.ErrPermission if it has no live grant covering it.
func (s *Store) CheckWrite(ctx context.Context, key string) error {
	p, _ := pathOf(key)
	if p == "/" {
		return nil
	}
	_, err := s.f.writer(ctx, p)
	return storeErr(key, err)
}

// Watch reports the keys of the paths that new entries change, whoever
// made them — this store, a cfs command sharing the replica, or another
// writer whose entries Follow brought in (tree.Store). It finds new
// records as anti-entropy does: by the log's Merkle digests, reading
// again only the leaves (of 65,536) whose digests changed. Changes that
// come within watchBatch of each other are reported together.
func (s *Store) Watch(ctx context.Context) (<-chan []string, error) {
	db, ns := s.f.db, s.f.cap.NS
	root := db.Root(ns)
	var top [256]namespace.Digest
	var leaves [256][256]namespace.Digest
	scan := func() ([]dag.Hash, error) {
		nt, err := db.Digests(ns, nil)
		if err != nil {
			return nil, err
		}
		var changed [][2]byte
		for i := range nt {
			if nt[i] == top[i] {
				continue
			}
			nl, err := db.Digests(ns, []byte{byte(i)})
			if err != nil {
				return nil, err
			}
			for j := range nl {
				if nl[j] != leaves[i][j] {
					changed = append(changed, [2]byte{byte(i), byte(j)})
				}
			}
			top[i], leaves[i] = nt[i], nl
		}
		return db.Hashes(ns, changed), nil
	}
	known := map[dag.Hash]bool{}
	all, err := scan()
	if err != nil {
		return nil, err
	}
	for _, h := range all {
		known[h] = true
	}
	ch := make(chan []string, 16)
	go func() {
		defer close(ch)
		for {
			r := db.Wait(ctx, ns, root, time.Minute)
			if ctx.Err() != nil {
				return
			}
			if r == root {
				continue
			}
			select { // let a burst of changes land
			case <-ctx.Done():
				return
			case <-time.After(watchBatch):
			}
			root = db.Root(ns)
			hashes, err := scan()
			if err != nil {
				continue
			}
			var keys []string
			for _, h := range hashes {
				if known[h] {
					continue
				}
				known[h] = true
				if v, err := db.Version(ns, h); err == nil {
					keys = append(keys, strings.TrimPrefix(path.Clean("/"+v.Path), "/"))
				}
			}
			if len(keys) == 0 {
				continue
			}
			select {
			case ch <- keys:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// watchBatch is how long Watch lets changes gather before it reads them.
const watchBatch = 10 * time.Millisecond
