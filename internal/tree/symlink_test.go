package tree_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
)

// TestTreeSymlink: a link is an object holding its target with mode
// S_IFLNK; it lists and stats as a link, reads back, renames with its
// directory, and cannot be made over something or with no target.
func TestTreeSymlink(t *testing.T) {
	ctx := context.Background()
	s := tree.NewMemStore()
	tr := tree.New(s)
	if err := tr.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.Symlink(ctx, "../f", "d/l"); err != nil {
		t.Fatal(err)
	}
	i, err := tr.Stat(ctx, "d/l")
	if err != nil || i.Mode&fs.ModeSymlink == 0 || i.IsDir() || i.Mode.Perm() != 0o777 {
		t.Fatalf("stat of a link: %+v, %v", i, err)
	}
	if o, err := s.Stat(ctx, "d/l"); err != nil || !tree.IsLinkMeta(o.Meta) {
		t.Errorf("the link's object: %+v, %v", o, err)
	}
	if got, err := tr.Readlink(ctx, "d/l"); err != nil || got != "../f" {
		t.Errorf("readlink: %q, %v", got, err)
	}
	list, err := tr.ReadDirAll(ctx, "d")
	if err != nil || len(list) != 1 || list[0].Mode&fs.ModeSymlink == 0 {
		t.Errorf("listing: %+v, %v", list, err)
	}
	for _, c := range []struct{ target, name string }{{"x", "d/l"}, {"x", "d"}, {"", "d/m"}, {"x", "nodir/m"}} {
		if err := tr.Symlink(ctx, c.target, c.name); err == nil {
			t.Errorf("symlink %q %q: no error", c.target, c.name)
		}
	}
	if _, err := tr.Create(ctx, "f", strings.NewReader("file"), tree.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Readlink(ctx, "f"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("readlink of a file: %v", err)
	}
	if err := tr.Rename(ctx, "d", "e", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Readlink(ctx, "e/l"); err != nil || got != "../f" {
		t.Errorf("readlink after a rename: %q, %v", got, err)
	}
}

// refusing refuses changes under "ro/" (tree.WriteChecker).
type refusing struct{ *tree.MemStore }

func (r refusing) CheckWrite(ctx context.Context, key string) error {
	if strings.HasPrefix(key, "ro/") {
		return fs.ErrPermission
	}
	return nil
}

// TestTreeCheckWrite: a store that refuses a key makes CheckWrite and a
// file opened for writing fail at once with fs.ErrPermission; a store
// without the check allows everything.
func TestTreeCheckWrite(t *testing.T) {
	ctx := context.Background()
	s := refusing{tree.NewMemStore()}
	tr := tree.New(s)
	if err := tr.Mkdir(ctx, "ro", 0); err != nil {
		t.Fatal(err)
	}
	if err := tr.CheckWrite(ctx, "ro/f"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("CheckWrite of a refused key: %v", err)
	}
	if err := tr.CheckWrite(ctx, "rw/f"); err != nil {
		t.Errorf("CheckWrite of an allowed key: %v", err)
	}
	tab := openfile.NewTable(tr, t.TempDir())
	defer tab.Close()
	if _, err := tab.Open(ctx, "ro/f", openfile.Options{Create: true}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("open for writing of a refused key: %v", err)
	}
	h, err := tab.Open(ctx, "f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tree.New(tree.NewMemStore()).CheckWrite(ctx, "ro/f"); err != nil {
		t.Errorf("CheckWrite without a checker: %v", err)
	}
}
