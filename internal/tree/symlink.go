package tree

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
)

// Symbolic links are kept as s3fs keeps them: an object whose bytes are
// the link's target and whose MetaMode has the type S_IFLNK. A store with
// links of its own (the configuration filesystem's) shows them so.
const (
	sIFMT  = 0o170000
	sIFLNK = 0o120000
)

// linkMode is MetaMode of a symbolic link.
var linkMode = strconv.FormatUint(sIFLNK|0o777, 10)

// isLink reports whether MetaMode value v is a symbolic link's.
func isLink(v string) bool {
	m, err := strconv.ParseUint(v, 10, 32)
	return err == nil && m&sIFMT == sIFLNK
}

// IsLinkMeta reports whether an object's metadata makes it a symbolic link
// (for stores that turn the tree's objects into their own kinds).
func IsLinkMeta(meta map[string]string) bool { return isLink(meta[MetaMode]) }

// LinkMeta is the metadata of a symbolic link's object (for stores that
// show links of their own).
func LinkMeta() map[string]string { return map[string]string{MetaMode: linkMode} }

// Symlink makes name a symbolic link to target (any non-empty string; it
// need not exist). name's directory must exist; nothing may be at name
// (fs.ErrExist), as symlink(2).
func (t *Tree) Symlink(ctx context.Context, target, name string) error {
	p, err := clean("symlink", name)
	if err != nil {
		return err
	}
	if p == "" {
		return perr("symlink", p, fs.ErrExist)
	}
	if target == "" || strings.ContainsRune(target, 0) {
		return perr("symlink", p, fmt.Errorf("%w: empty target", fs.ErrInvalid))
	}
	if err := t.needDir(ctx, parent(p)); err != nil {
		return perr("symlink", p, err)
	}
	if _, err := t.stat(ctx, p); err == nil {
		return perr("symlink", p, fs.ErrExist)
	} else if !notExist(err) {
		return perr("symlink", p, err)
	}
	meta := LinkMeta()
	meta[MetaMtime] = formatMtime(t.now())
	if _, err := t.s.Put(ctx, p, strings.NewReader(target), int64(len(target)), meta); err != nil {
		return perr("symlink", p, err)
	}
	t.publish(Event{Kind: KindWrite, Path: p})
	return nil
}

// Readlink returns the target of symbolic link name; fs.ErrInvalid if it
// is not one.
func (t *Tree) Readlink(ctx context.Context, name string) (string, error) {
	p, err := clean("readlink", name)
	if err != nil {
		return "", err
	}
	i, err := t.stat(ctx, p)
	if err != nil {
		return "", perr("readlink", p, err)
	}
	if i.Mode&fs.ModeSymlink == 0 {
		return "", perr("readlink", p, fs.ErrInvalid)
	}
	rc, err := t.s.Open(ctx, p, 0, -1)
	if err != nil {
		return "", perr("readlink", p, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 4096))
	if err != nil {
		return "", perr("readlink", p, err)
	}
	return string(b), nil
}

// WriteChecker is what a store implements when it may refuse changes to
// some keys whatever the request (the configuration filesystem, whose
// signing key may write only where it was granted): CheckWrite says
// whether a change of key would be taken, with an error wrapping
// fs.ErrPermission if not.
type WriteChecker interface {
	CheckWrite(ctx context.Context, key string) error
}

// CheckWrite reports whether name may be changed: nil unless the store is
// a WriteChecker that refuses it (an error wrapping fs.ErrPermission).
// Front ends call it before work that would only fail at the commit (a
// file opened for writing).
func (t *Tree) CheckWrite(ctx context.Context, name string) error {
	wc, ok := t.s.(WriteChecker)
	if !ok {
		return nil
	}
	p, err := clean("open", name)
	if err != nil {
		return err
	}
	if err := wc.CheckWrite(ctx, p); err != nil {
		return perr("open", p, err)
	}
	return nil
}
