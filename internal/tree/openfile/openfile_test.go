package openfile_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
)

// countingStore counts the puts and reads that reach the store.
type countingStore struct {
	*tree.MemStore
	mu          sync.Mutex
	puts, opens int
}

func (s *countingStore) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (tree.Object, error) {
	s.mu.Lock()
	s.puts++
	s.mu.Unlock()
	return s.MemStore.Put(ctx, key, r, size, meta)
}

func (s *countingStore) Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	s.opens++
	s.mu.Unlock()
	return s.MemStore.Open(ctx, key, off, length)
}

func (s *countingStore) counts() (puts, opens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts, s.opens
}

func setup(t *testing.T) (*tree.Tree, *countingStore, *openfile.Table) {
	s := &countingStore{MemStore: tree.NewMemStore()}
	tr := tree.New(s)
	return tr, s, openfile.NewTable(tr, t.TempDir())
}

func put(t *testing.T, tr *tree.Tree, name, body string) {
	t.Helper()
	if _, err := tr.Create(context.Background(), name, strings.NewReader(body), tree.CreateOptions{Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, tr *tree.Tree, name string) string {
	t.Helper()
	rc, _, err := tr.Open(context.Background(), name, 0, -1)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, f *openfile.Handle, s string, off int64) {
	t.Helper()
	if n, err := f.WriteAt([]byte(s), off); err != nil || n != len(s) {
		t.Fatalf("write %q at %d: %d, %v", s, off, n, err)
	}
}

func readAt(t *testing.T, f *openfile.Handle, off int64, n int) string {
	t.Helper()
	b := make([]byte, n)
	got, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		t.Fatalf("read %d at %d: %v", n, off, err)
	}
	return string(b[:got])
}

// TestNewFileCommitsAtClose: out-of-order writes to a new file show to
// the session, not to the tree, until the close.
func TestNewFileCommitsAtClose(t *testing.T) {
	ctx := context.Background()
	tr, s, tab := setup(t)
	h, err := tab.Open(ctx, "/f", openfile.Options{Create: true, Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "world", 6)
	write(t, h, "hello ", 0)
	if _, err := tr.Stat(ctx, "f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the tree sees the new file before its close: %v", err)
	}
	if f := tab.Lookup("f"); f == nil || f.Size() != 11 {
		t.Fatalf("the session does not see its file: %v", f)
	}
	if got := readAt(t, h, 0, 20); got != "hello world" {
		t.Fatalf("session reads %q", got)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "hello world" {
		t.Fatalf("tree reads %q", got)
	}
	if st, _ := tr.Stat(ctx, "f"); st.Mode != 0o640 {
		t.Fatalf("mode %v", st.Mode)
	}
	if puts, _ := s.counts(); puts != 1 {
		t.Fatalf("%d puts, want 1", puts)
	}
	if tab.Lookup("f") != nil {
		t.Fatal("closed file still in the table")
	}
	if err := h.Close(); err == nil {
		t.Fatal("second close: no error")
	}
	// Opened and closed with no write: the empty file is there.
	h, err = tab.Open(ctx, "empty", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := tr.Stat(ctx, "empty"); err != nil || st.Size != 0 {
		t.Fatalf("empty file: %+v, %v", st, err)
	}
}

// TestOldBytesSeededLazily: a write in the middle of an existing file
// keeps the old bytes around it; the tree reads the old version until
// the close; the old version is read once, and only when needed.
func TestOldBytesSeededLazily(t *testing.T) {
	ctx := context.Background()
	tr, s, tab := setup(t)
	put(t, tr, "f", "0123456789")
	h, err := tab.Open(ctx, "f", openfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "ab", 3)
	write(t, h, "XYZ", 12) // past the end: a hole of zeros at 10, 11
	if got := read(t, tr, "f"); got != "0123456789" {
		t.Fatalf("tree reads %q before the close", got)
	}
	if _, opens := s.counts(); opens != 1 {
		t.Fatalf("%d reads of the store before any read of old bytes, want the 1 above", opens)
	}
	// A read of written bytes needs nothing old.
	if got := readAt(t, h, 3, 2); got != "ab" {
		t.Fatalf("read of written bytes %q", got)
	}
	if _, opens := s.counts(); opens != 1 {
		t.Fatalf("a read of written bytes read the old version")
	}
	if got := readAt(t, h, 0, 20); got != "012ab56789\x00\x00XYZ" {
		t.Fatalf("session reads %q", got)
	}
	if _, opens := s.counts(); opens != 2 {
		t.Fatalf("%d store reads after seeding, want 2", opens)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "012ab56789\x00\x00XYZ" {
		t.Fatalf("tree reads %q", got)
	}
	if st, _ := tr.Stat(ctx, "f"); st.Mode != 0o600 {
		t.Fatalf("the overwritten file lost its mode: %v", st.Mode)
	}
}

// TestRewrittenOrTruncatedNeverReadsOld: a file rewritten whole, or
// opened with truncation, is committed without reading its old version.
func TestRewrittenOrTruncatedNeverReadsOld(t *testing.T) {
	ctx := context.Background()
	tr, s, tab := setup(t)
	put(t, tr, "f", "old bytes")
	put(t, tr, "g", "old bytes")
	_, opens0 := s.counts()
	h, err := tab.Open(ctx, "f", openfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "news", 4)
	write(t, h, "bytes", 0)
	write(t, h, "!!", 8)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h, err = tab.Open(ctx, "g", openfile.Options{Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	if f := tab.Lookup("g"); f.Size() != 0 {
		t.Fatalf("truncated open has %d bytes", f.Size())
	}
	write(t, h, "short", 0)
	if got := readAt(t, h, 0, 10); got != "short" {
		t.Fatalf("session reads %q", got)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, opens := s.counts(); opens != opens0 {
		t.Fatalf("%d reads of old versions, want none", opens-opens0)
	}
	if got := read(t, tr, "f"); got != "bytesews!!" {
		t.Fatalf("f: %q", got)
	}
	if got := read(t, tr, "g"); got != "short" {
		t.Fatalf("g: %q", got)
	}
}

// TestTruncateThenGrow: bytes cut by a truncation come back as zeros,
// not as the old version's.
func TestTruncateThenGrow(t *testing.T) {
	ctx := context.Background()
	tr, _, tab := setup(t)
	put(t, tr, "f", "0123456789")
	h, err := tab.Open(ctx, "f", openfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Truncate(4); err != nil {
		t.Fatal(err)
	}
	write(t, h, "Z", 7)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "0123\x00\x00\x00Z" {
		t.Fatalf("tree reads %q", got)
	}
	if err := h.Truncate(-1); err == nil {
		t.Fatal("negative truncate: no error")
	}
}

// TestSharedOpensCommitOnce: two opens of one path share the spool and
// commit once, at the last close (sshfs closes a handle after the next
// open of the file).
func TestSharedOpensCommitOnce(t *testing.T) {
	ctx := context.Background()
	tr, s, tab := setup(t)
	puts0, _ := s.counts()
	a, err := tab.Open(ctx, "f", openfile.Options{Create: true, Truncate: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, a, "first ", 0)
	b, err := tab.Open(ctx, "/f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := readAt(t, b, 0, 10); got != "first " {
		t.Fatalf("second open reads %q", got)
	}
	if _, err := tab.Open(ctx, "f", openfile.Options{Create: true, Exclusive: true}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("exclusive open of an open file: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Stat(ctx, "f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("committed before the last close: %v", err)
	}
	write(t, b, "second", 6)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "first second" {
		t.Fatalf("tree reads %q", got)
	}
	if puts, _ := s.counts(); puts-puts0 != 1 {
		t.Fatalf("%d puts, want 1", puts-puts0)
	}
}

// TestSync commits and keeps the file open.
func TestSync(t *testing.T) {
	ctx := context.Background()
	tr, s, tab := setup(t)
	h, err := tab.Open(ctx, "f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "one", 0)
	if err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "one" {
		t.Fatalf("after sync the tree reads %q", got)
	}
	puts0, _ := s.counts()
	write(t, h, "two", 3)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "f"); got != "onetwo" {
		t.Fatalf("after close the tree reads %q", got)
	}
	if puts, opens := s.counts(); puts-puts0 != 1 || opens != 2 {
		t.Fatalf("%d puts after the sync (want 1), %d reads (want the 2 of this test)", puts-puts0, opens)
	}
	// A close with nothing new commits nothing.
	h, err = tab.Open(ctx, "f", openfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	puts0, _ = s.counts()
	if err := h.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if puts, _ := s.counts(); puts != puts0 {
		t.Fatal("an unchanged file was committed")
	}
}

// TestAttrs: a time set after the last write is kept by the commit (scp
// -p sets it before closing); a write after it sets it to the commit's.
func TestAttrs(t *testing.T) {
	ctx := context.Background()
	tr, _, tab := setup(t)
	mt := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	h, err := tab.Open(ctx, "f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "x", 0)
	if err := h.Chtimes(ctx, mt); err != nil {
		t.Fatal(err)
	}
	if err := h.Chmod(ctx, 0o751); err != nil {
		t.Fatal(err)
	}
	if i := h.Info(tree.Info{}); !i.ModTime.Equal(mt) || i.Mode != 0o751 || i.Size != 1 {
		t.Fatalf("session sees %+v", i)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := tr.Stat(ctx, "f")
	if err != nil || !st.ModTime.Equal(mt) || st.Mode != 0o751 {
		t.Fatalf("committed %+v, %v", st, err)
	}
	h, err = tab.Open(ctx, "f", openfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Chtimes(ctx, mt.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if st, _ := tr.Stat(ctx, "f"); !st.ModTime.Equal(mt.Add(time.Hour)) {
		t.Fatalf("chtimes of an unchanged open file not applied: %v", st.ModTime)
	}
	write(t, h, "y", 1)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st, _ := tr.Stat(ctx, "f"); st.ModTime.Equal(mt.Add(time.Hour)) {
		t.Fatal("a write after chtimes kept the old time")
	}
}

// TestRenameAndRemoveWhileOpen: a renamed open file commits at its new
// name; a removed one commits nothing.
func TestRenameAndRemoveWhileOpen(t *testing.T) {
	ctx := context.Background()
	tr, _, tab := setup(t)
	if err := tr.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	h, err := tab.Open(ctx, "d/f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "moved", 0)
	if err := tr.Rename(ctx, "d", "e", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	tab.Rename("d", "e")
	if tab.Lookup("e/f") == nil || tab.Lookup("d/f") != nil {
		t.Fatal("table not renamed")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "e/f"); got != "moved" {
		t.Fatalf("e/f: %q", got)
	}
	if _, err := tr.Stat(ctx, "d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("d/f: %v", err)
	}
	h, err = tab.Open(ctx, "e/g", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "gone", 0)
	tab.Remove("e")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Stat(ctx, "e/g"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removed open file committed: %v", err)
	}
}

// TestOpenErrors: each refused open says why and leaves nothing.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	tr, _, tab := setup(t)
	put(t, tr, "file", "x")
	if err := tr.Mkdir(ctx, "dir", 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  openfile.Options
		want error
	}{
		{"missing", openfile.Options{}, fs.ErrNotExist},
		{"no/such", openfile.Options{Create: true}, fs.ErrNotExist},
		{"file/x", openfile.Options{Create: true}, tree.ErrNotDir},
		{"dir", openfile.Options{Create: true}, tree.ErrIsDir},
		{"/", openfile.Options{Create: true}, tree.ErrIsDir},
		{"file", openfile.Options{Create: true, Exclusive: true}, fs.ErrExist},
		{"a/../b", openfile.Options{Create: true}, fs.ErrInvalid},
	} {
		_, err := tab.Open(ctx, c.name, c.opt)
		if !errors.Is(err, c.want) {
			t.Errorf("open %q %+v: %v, want %v", c.name, c.opt, err, c.want)
		}
		if tab.Lookup(c.name) != nil {
			t.Errorf("open %q left a file in the table", c.name)
		}
	}
	// A commit that fails (its directory went meanwhile) is Close's error.
	if err := tr.Mkdir(ctx, "tmp", 0); err != nil {
		t.Fatal(err)
	}
	h, err := tab.Open(ctx, "tmp/f", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	write(t, h, "x", 0)
	if err := tr.Remove(ctx, "tmp", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("close after the directory went: %v", err)
	}
}

// TestLargeSpool writes a file bigger than any buffer in random-sized
// pieces, backwards, and reads it back whole.
func TestLargeSpool(t *testing.T) {
	ctx := context.Background()
	tr, _, tab := setup(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	h, err := tab.Open(ctx, "big", openfile.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for end := len(want); end > 0; {
		off := max(0, end-(end%7919+1000))
		write(t, h, string(want[off:end]), int64(off))
		end = off
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, tr, "big"); got != string(want) {
		t.Fatalf("read back %d bytes, differing", len(got))
	}
}

// TestSetMeta: metadata set on an open file is written with its commit,
// beside the tree's mode and time, which it cannot replace.
func TestSetMeta(t *testing.T) {
	tr, _, tab := setup(t)
	ctx := context.Background()
	h, err := tab.Open(ctx, "f", openfile.Options{Create: true, Mode: 0o640})
	if err != nil {
		t.Fatal(err)
	}
	h.WriteAt([]byte("body"), 0)
	h.SetMeta(map[string]string{"oc-fileid": "42", tree.MetaMode: "0"})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	i, err := tr.Stat(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if i.Object.Meta["oc-fileid"] != "42" || i.Mode.Perm() != 0o640 || read(t, tr, "f") != "body" {
		t.Fatalf("meta %v, mode %v", i.Object.Meta, i.Mode)
	}
}
