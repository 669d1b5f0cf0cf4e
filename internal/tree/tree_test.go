package tree_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/treetest"
)

// TestTreeMem runs the conformance suite on the in-memory store.
func TestTreeMem(t *testing.T) {
	treetest.Run(t, func(t *testing.T) treetest.Env {
		s := tree.NewMemStore()
		return treetest.Env{FS: tree.New(s), Store: s}
	})
}

// TestTreeRenameIsOneBatch: a directory rename reaches the store as one
// Apply that copies every key by reference and deletes the old ones, and
// no Put (no bytes written).
func TestTreeRenameIsOneBatch(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{MemStore: tree.NewMemStore()}
	tr := tree.New(s)
	if err := tr.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	for i := range 250 {
		if _, err := tr.Create(ctx, "d/"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), strings.NewReader("body"), tree.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	puts := s.puts
	if err := tr.Rename(ctx, "d", "e", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.puts != puts || len(s.batches) == 0 {
		t.Fatalf("rename made %d puts", s.puts-puts)
	}
	last := s.batches[len(s.batches)-1]
	copies, deletes := 0, 0
	for _, op := range last {
		switch {
		case op.From != "":
			copies++
		case op.Delete:
			deletes++
		}
	}
	if copies != 251 || deletes != 251 {
		t.Fatalf("rename batch: %d copies, %d deletes, want 251 each (250 files and the marker)", copies, deletes)
	}
	if n := len(names(t, tr, "e")); n != 250 {
		t.Fatalf("e lists %d entries", n)
	}
}

func names(t *testing.T, tr *tree.Tree, dir string) []tree.Info {
	all, err := tr.ReadDirAll(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

type countingStore struct {
	*tree.MemStore
	puts    int
	batches [][]tree.Op
}

func (c *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (tree.Object, error) {
	c.puts++
	return c.MemStore.Put(ctx, key, r, size, meta)
}

func (c *countingStore) Apply(ctx context.Context, ops []tree.Op) error {
	c.batches = append(c.batches, ops)
	return c.MemStore.Apply(ctx, ops)
}

// TestTreeEventsOverflow: a subscriber that does not read loses events
// and is told so with KindOverflow; the tree never blocks on it.
func TestTreeEventsOverflow(t *testing.T) {
	ctx := context.Background()
	tr := tree.New(tree.NewMemStore())
	ch, cancel := tr.Subscribe(1)
	defer cancel()
	for i := range 20 {
		if _, err := tr.Create(ctx, "f"+string(rune('a'+i)), strings.NewReader("x"), tree.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	<-ch // the buffer's one event; later ones were lost
	if _, err := tr.Create(ctx, "last", strings.NewReader("x"), tree.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == tree.KindOverflow {
				return
			}
		case <-deadline:
			t.Fatal("no overflow event")
		}
	}
}

// TestTreeMetadataFromS3: mode and mtime as s3fs and rclone write them are
// read; bad values fall back to the defaults and the object's time.
func TestTreeMetadataFromS3(t *testing.T) {
	ctx := context.Background()
	s := tree.NewMemStore()
	tr := tree.New(s)
	put := func(k string, meta map[string]string) {
		if _, err := s.Put(ctx, k, strings.NewReader("x"), 1, meta); err != nil {
			t.Fatal(err)
		}
	}
	put("s3fs", map[string]string{"mode": "33261", "mtime": "1700000000"})
	put("rclone", map[string]string{"mtime": "1700000000.5"})
	put("bad", map[string]string{"mode": "rwx", "mtime": "yesterday"})
	for _, c := range []struct {
		name  string
		mode  uint32
		mtime time.Time
	}{
		{"s3fs", 0o755, time.Unix(1700000000, 0)},
		{"rclone", 0o644, time.Unix(1700000000, 500000000)},
	} {
		st, err := tr.Stat(ctx, c.name)
		if err != nil || uint32(st.Mode) != c.mode || !st.ModTime.Equal(c.mtime) {
			t.Errorf("%s: mode %v, mtime %v, %v", c.name, st.Mode, st.ModTime, err)
		}
	}
	st, err := tr.Stat(ctx, "bad")
	o, _ := s.Stat(ctx, "bad")
	if err != nil || st.Mode != tree.DefaultFileMode || !st.ModTime.Equal(o.Modified) {
		t.Errorf("bad metadata: %+v, %v", st, err)
	}
}

// TestTreeErrno: the tree's errors match the errnos front ends answer
// with, and io/fs's where they have one.
func TestTreeErrno(t *testing.T) {
	ctx := context.Background()
	tr := tree.New(tree.NewMemStore())
	if err := tr.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Create(ctx, "d/f", strings.NewReader("x"), tree.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Remove(ctx, "d", tree.RemoveOptions{}); !errors.Is(err, syscall.ENOTEMPTY) || !errors.Is(err, tree.ErrNotEmpty) {
		t.Errorf("remove a full directory: %v", err)
	}
	if _, err := tr.Create(ctx, "d", strings.NewReader("x"), tree.CreateOptions{}); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("create onto a directory: %v", err)
	}
	if err := tr.Mkdir(ctx, "d/f/g", 0); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("mkdir under a file: %v", err)
	}
	if _, err := tr.Stat(ctx, "nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of nothing: %v", err)
	}
	if errors.Is(tree.ErrIsDir, syscall.ENOTDIR) {
		t.Error("ErrIsDir matches ENOTDIR")
	}
}
