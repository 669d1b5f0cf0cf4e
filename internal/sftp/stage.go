package sftp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
)

// stage is a staging directory for one rsync command: a copy of the
// paths it names, as the tree had them, for the system's rsync to work
// on, and what was copied, to find what rsync changed.
type stage struct {
	t   *tree.Tree
	dir string
	// snap is what was copied, by tree path ("" is the root).
	snap map[string]staged
	// zeros: files are staged as zeros of their size (newStage).
	zeros bool
	// inPlace: rsync may write into staged files (--inplace, --append).
	inPlace bool
}

// staged is one copied file or directory as it was before rsync ran.
type staged struct {
	dir   bool
	size  int64
	mode  fs.FileMode // permissions staged: the tree's, with u+rw (u+rwx for a directory) for rsync
	mtime time.Time   // the tree's (zero: none)
	sum   [32]byte    // SHA-256 of a file's bytes
	above bool        // a directory above a scope: not all its entries copied
	zeros bool        // a file staged as zeros of its size, not its bytes
	ino   uint64      // of the staged copy after copying
	ctime syscall.Timespec
}

// newStage copies the tree paths scopes (and the directories above them)
// into a new directory under spool. With zeros, files are staged as
// sparse files of their size, without reading their bytes
// (rsyncCommand.sizesOnly). inPlace says rsync may write into the
// staged files.
func newStage(ctx context.Context, t *tree.Tree, spool string, scopes []string, zeros, inPlace bool) (*stage, error) {
	dir, err := os.MkdirTemp(spool, stagePattern)
	if err != nil {
		return nil, err
	}
	st := &stage{t: t, dir: dir, snap: map[string]staged{}, zeros: zeros, inPlace: inPlace}
	var dirs []string // to set their times after their contents
	for _, sc := range scopes {
		if err := st.copyScope(ctx, sc, &dirs); err != nil {
			st.remove()
			return nil, err
		}
	}
	// Deepest first, since filling a directory changes its time.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		s := st.snap[d]
		if err := os.Chtimes(st.local(d), timeOr1970(s.mtime), timeOr1970(s.mtime)); err != nil {
			st.remove()
			return nil, err
		}
	}
	// The identity of each copy, to tell rsync's changes.
	for p, s := range st.snap {
		var sys syscall.Stat_t
		if err := syscall.Lstat(st.local(p), &sys); err != nil {
			st.remove()
			return nil, err
		}
		s.ino, s.ctime = sys.Ino, sys.Ctim
		st.snap[p] = s
	}
	return st, nil
}

func timeOr1970(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0)
	}
	return t
}

// local is the staged path of tree path p.
func (st *stage) local(p string) string {
	return filepath.Join(st.dir, filepath.FromSlash(p))
}

// stagePattern names staging directories in the spool.
const stagePattern = "quilt-rsync-*"

// remove deletes the staging directory.
func (st *stage) remove() { removeAll(st.dir) }

// removeAll deletes dir, read-only directories (rsync may make them) too.
func removeAll(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}

// removeStale deletes the staging directories in spool that a process
// that ended without cleaning up left.
func removeStale(spool string) {
	ms, _ := filepath.Glob(filepath.Join(spool, stagePattern))
	for _, m := range ms {
		removeAll(m)
	}
}

// copyScope copies the directories above tree path sc that exist, and sc
// with everything under it if it exists.
func (st *stage) copyScope(ctx context.Context, sc string, dirs *[]string) error {
	var above []string
	for d := path.Dir(sc); sc != "" && d != "."; d = path.Dir(d) {
		above = append(above, d)
	}
	slices.Reverse(above)
	for _, d := range above {
		if _, ok := st.snap[d]; ok {
			continue
		}
		i, err := st.t.Stat(ctx, d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !i.IsDir() {
			return nil // rsync will say "not a directory"
		}
		if err := st.copyDir(i, dirs); err != nil {
			return err
		}
		s := st.snap[d]
		s.above = true
		st.snap[d] = s
	}
	i, err := st.t.Stat(ctx, sc)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return st.copyTree(ctx, i, dirs)
}

// copyDir makes the staged copy of directory i (without its contents).
func (st *stage) copyDir(i tree.Info, dirs *[]string) error {
	if _, ok := st.snap[i.Path]; ok {
		return nil
	}
	if i.Path != "" {
		if err := os.Mkdir(st.local(i.Path), 0o700); err != nil {
			return err
		}
	}
	// The root has no mode of its own in the tree; 0755 as a new one.
	mode := i.Mode.Perm()
	if i.Path == "" || mode == 0 {
		mode = tree.DefaultDirMode.Perm()
	}
	if err := os.Chmod(st.local(i.Path), mode|0o700); err != nil {
		return err
	}
	st.snap[i.Path] = staged{dir: true, mode: mode | 0o700, mtime: i.ModTime}
	*dirs = append(*dirs, i.Path)
	return nil
}

// copyTree copies file or directory i and everything under it.
func (st *stage) copyTree(ctx context.Context, i tree.Info, dirs *[]string) error {
	if !i.IsDir() {
		return st.copyFile(ctx, i)
	}
	if s, ok := st.snap[i.Path]; ok {
		if !s.above {
			return nil
		}
		s.above = false // copied whole now
		st.snap[i.Path] = s
	} else if err := st.copyDir(i, dirs); err != nil {
		return err
	}
	ents, err := st.t.ReadDirAll(ctx, i.Path)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := st.copyTree(ctx, e, dirs); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies file i, its bytes, mode and time.
func (st *stage) copyFile(ctx context.Context, i tree.Info) error {
	if _, ok := st.snap[i.Path]; ok {
		return nil
	}
	if st.zeros {
		return st.zeroFile(i)
	}
	rc, _, err := st.t.Open(ctx, i.Path, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	l := st.local(i.Path)
	f, err := os.OpenFile(l, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy /%s: %w", i.Path, err)
	}
	mode := i.Mode.Perm()
	if err := os.Chmod(l, mode|0o600); err != nil {
		return err
	}
	if err := os.Chtimes(l, timeOr1970(i.ModTime), timeOr1970(i.ModTime)); err != nil {
		return err
	}
	s := staged{size: n, mode: mode | 0o600, mtime: i.ModTime}
	copy(s.sum[:], h.Sum(nil))
	st.snap[i.Path] = s
	return nil
}

// zeroFile stages file i as a sparse file of its size, with its mode and
// time.
func (st *stage) zeroFile(i tree.Info) error {
	l := st.local(i.Path)
	f, err := os.OpenFile(l, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(i.Size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	mode := i.Mode.Perm()
	if err := os.Chmod(l, mode|0o600); err != nil {
		return err
	}
	if err := os.Chtimes(l, timeOr1970(i.ModTime), timeOr1970(i.ModTime)); err != nil {
		return err
	}
	st.snap[i.Path] = staged{size: i.Size, mode: mode | 0o600, mtime: i.ModTime, zeros: true}
	return nil
}

// commit puts what rsync changed in the staging directory into the tree:
// new and changed files as new versions, through a spool as SFTP's
// writes; new directories; modes and times; and removes from the tree
// what rsync removed. It returns the paths it could not keep (symbolic
// links, special files).
func (st *stage) commit(ctx context.Context, spool string) (skipped []string, err error) {
	tab := openfile.NewTable(st.t, spool)
	defer tab.Close()
	seen := map[string]bool{}
	type dirTime struct {
		p string
		t time.Time
	}
	var dirTimes []dirTime
	err = filepath.WalkDir(st.dir, func(l string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(st.dir, l)
		if err != nil {
			return err
		}
		p := filepath.ToSlash(rel)
		if p == "." {
			p = ""
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var sys syscall.Stat_t
		if err := syscall.Lstat(l, &sys); err != nil {
			return err
		}
		old, had := st.snap[p]
		seen[p] = true
		// The change time alone may miss a change made within the
		// clock tick of the staging; the mode, time and size do not. A
		// file written in place (--inplace, --append) may keep all of
		// them: its bytes are compared.
		unchanged := had && sys.Ino == old.ino && sys.Ctim == old.ctime &&
			fi.Mode().Perm() == old.mode && fi.ModTime().Equal(timeOr1970(old.mtime)) &&
			(old.dir || fi.Size() == old.size && !st.inPlace)
		switch {
		case fi.IsDir():
			if unchanged || p == "" {
				return nil // the root has no mode or time in the tree
			}
			if had && !old.dir {
				if err := st.t.Remove(ctx, p, tree.RemoveOptions{}); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			if !had || !old.dir {
				if err := st.t.Mkdir(ctx, p, fi.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
					return err
				}
			} else if fi.Mode().Perm() != old.mode {
				if err := st.t.Chmod(ctx, p, fi.Mode().Perm()); err != nil {
					return err
				}
			}
			if !had || !fi.ModTime().Equal(timeOr1970(old.mtime)) {
				dirTimes = append(dirTimes, dirTime{p, fi.ModTime()})
			}
			return nil
		case fi.Mode().IsRegular():
			if unchanged {
				return nil
			}
			if had && old.dir {
				if err := st.t.Remove(ctx, p, tree.RemoveOptions{Recursive: true}); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				had = false
			}
			// A file staged as zeros and still the same inode holds
			// zeros: rsync changed its mode or time only (it replaces a
			// file it rewrites). Else compare the bytes.
			same := had && old.zeros && sys.Ino == old.ino
			if had && !old.zeros && fi.Size() == old.size {
				sum, err := fileSum(l)
				if err != nil {
					return err
				}
				same = bytes.Equal(sum[:], old.sum[:])
			}
			if !same {
				return st.commitFile(ctx, tab, p, l, fi)
			}
			if fi.Mode().Perm() != old.mode {
				if err := st.t.Chmod(ctx, p, fi.Mode().Perm()); err != nil {
					return err
				}
			}
			if !fi.ModTime().Equal(timeOr1970(old.mtime)) {
				if err := st.t.Chtimes(ctx, p, fi.ModTime()); err != nil {
					return err
				}
			}
			return nil
		default:
			if !had {
				skipped = append(skipped, p)
			}
			return nil
		}
	})
	if err != nil {
		return skipped, err
	}
	// What rsync removed (--delete, --remove-source-files), deepest first.
	var gone []string
	for p := range st.snap {
		if !seen[p] && p != "" {
			gone = append(gone, p)
		}
	}
	slices.SortFunc(gone, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, p := range gone {
		// A directory above a scope goes only if empty in the tree too.
		err := st.t.Remove(ctx, p, tree.RemoveOptions{Recursive: !st.snap[p].above})
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, tree.ErrNotDir) {
			return skipped, err
		}
	}
	slices.SortFunc(dirTimes, func(a, b dirTime) int { return strings.Count(b.p, "/") - strings.Count(a.p, "/") })
	for _, d := range dirTimes {
		if err := st.t.Chtimes(ctx, d.p, d.t); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// commitFile writes the staged file l as the new version of p, with its
// mode and time: through a spool, committed at its close, as SFTP's
// writes.
func (st *stage) commitFile(ctx context.Context, tab *openfile.Table, p, l string, fi fs.FileInfo) error {
	f, err := os.Open(l)
	if err != nil {
		return err
	}
	defer f.Close()
	hd, err := tab.Open(ctx, p, openfile.Options{Create: true, Truncate: true, Mode: fi.Mode().Perm()})
	if err != nil {
		return err
	}
	if _, err := io.Copy(io.NewOffsetWriter(hd, 0), f); err != nil {
		hd.Abort()
		return fmt.Errorf("/%s: %w", p, err)
	}
	if err := hd.Chmod(ctx, fi.Mode().Perm()); err != nil {
		hd.Abort()
		return err
	}
	if err := hd.Chtimes(ctx, fi.ModTime()); err != nil {
		hd.Abort()
		return err
	}
	return hd.CloseContext(ctx)
}

// fileSum is the SHA-256 of file l.
func fileSum(l string) ([32]byte, error) {
	var s [32]byte
	f, err := os.Open(l)
	if err != nil {
		return s, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return s, err
	}
	copy(s[:], h.Sum(nil))
	return s, nil
}
