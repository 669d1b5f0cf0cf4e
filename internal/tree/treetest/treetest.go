// Package treetest is the conformance suite of the file tree, written once
// and run on every way to reach it: the tree over the in-memory store, the
// tree over a gateway bucket on a test grid, and each file front end
// (WebDAV, SFTP, FUSE, ...) through its own protocol, by an adapter that
// implements FS.
package treetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// FS is what the suite drives: *tree.Tree, or a front end's client that
// does the same through its protocol.
type FS interface {
	Stat(ctx context.Context, name string) (tree.Info, error)
	ReadDir(ctx context.Context, name, after string, limit int) ([]tree.Info, string, error)
	Create(ctx context.Context, name string, r io.Reader, opt tree.CreateOptions) (tree.Info, error)
	Open(ctx context.Context, name string, off, length int64) (io.ReadCloser, tree.Info, error)
	Mkdir(ctx context.Context, name string, mode fs.FileMode) error
	Rename(ctx context.Context, from, to string, opt tree.RenameOptions) error
	Remove(ctx context.Context, name string, opt tree.RemoveOptions) error
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
	Chtimes(ctx context.Context, name string, mtime time.Time) error
}

// Subscriber is an FS with change events (tree.Tree.Subscribe); the
// events tests run only on one.
type Subscriber interface {
	Subscribe(buf int) (<-chan tree.Event, func())
}

// Env is one fresh, empty tree under test.
type Env struct {
	FS FS
	// Store, if not nil, is the store below FS: the suite writes and
	// reads keys through it directly, as S3 would (another door).
	Store tree.Store
}

var _ FS = (*tree.Tree)(nil)
var _ Subscriber = (*tree.Tree)(nil)

// Run runs the suite; newEnv returns a fresh, empty tree for each test.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	tests := []struct {
		name string
		f    func(t *testing.T, e Env)
	}{
		{"Root", testRoot},
		{"CreateRead", testCreateRead},
		{"CreateErrors", testCreateErrors},
		{"Mkdir", testMkdir},
		{"ReadDir", testReadDir},
		{"RenameFile", testRenameFile},
		{"RenameDir", testRenameDir},
		{"Remove", testRemove},
		{"Attrs", testAttrs},
		{"InvalidPaths", testInvalidPaths},
		{"Events", testEvents},
		{"OtherDoor", testOtherDoor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, newEnv(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// put writes a file, failing the test on error.
func put(t *testing.T, f FS, name, body string) tree.Info {
	t.Helper()
	i, err := f.Create(ctx(t), name, strings.NewReader(body), tree.CreateOptions{Size: int64(len(body))})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return i
}

func mkdir(t *testing.T, f FS, name string) {
	t.Helper()
	if err := f.Mkdir(ctx(t), name, 0); err != nil {
		t.Fatalf("mkdir %s: %v", name, err)
	}
}

// read returns a file's bytes from off (length < 0: to the end).
func read(t *testing.T, f FS, name string, off, length int64) (string, error) {
	t.Helper()
	rc, _, err := f.Open(ctx(t), name, off, length)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func mustRead(t *testing.T, f FS, name, want string) {
	t.Helper()
	got, err := read(t, f, name, 0, -1)
	if err != nil || got != want {
		t.Fatalf("read %s: %q, %v; want %q", name, got, err, want)
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: %v is not an *fs.PathError", what, err)
	}
}

func gone(t *testing.T, f FS, name string) {
	t.Helper()
	_, err := f.Stat(ctx(t), name)
	wantErr(t, "stat "+name, err, fs.ErrNotExist)
}

// names lists a directory (all pages, limit per page) as "name" and
// "name/" for directories.
func names(t *testing.T, f FS, dir string, limit int) []string {
	t.Helper()
	var out []string
	after := ""
	for range 10000 {
		page, next, err := f.ReadDir(ctx(t), dir, after, limit)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir, err)
		}
		if limit > 0 && len(page) > limit {
			t.Fatalf("readdir %s: %d entries, limit %d", dir, len(page), limit)
		}
		for _, i := range page {
			n := i.Name()
			if i.IsDir() {
				n += "/"
			}
			out = append(out, n)
		}
		if next == "" {
			return out
		}
		after = next
	}
	t.Fatalf("readdir %s: no end", dir)
	return nil
}

func testRoot(t *testing.T, e Env) {
	for _, n := range []string{"", "/", "."} {
		i, err := e.FS.Stat(ctx(t), n)
		if err != nil || !i.IsDir() {
			t.Fatalf("stat %q: %+v, %v", n, i, err)
		}
	}
	if got := names(t, e.FS, "/", 0); len(got) != 0 {
		t.Fatalf("empty root lists %v", got)
	}
	wantErr(t, "mkdir /", e.FS.Mkdir(ctx(t), "/", 0), fs.ErrExist)
	wantErr(t, "remove /", e.FS.Remove(ctx(t), "/", tree.RemoveOptions{Recursive: true}), fs.ErrInvalid)
	wantErr(t, "open /", func() error { _, _, err := e.FS.Open(ctx(t), "/", 0, -1); return err }(), tree.ErrIsDir)
}

func testCreateRead(t *testing.T, e Env) {
	mt := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	body := "hello, tree: " + strings.Repeat("0123456789", 100)
	i, err := e.FS.Create(ctx(t), "/a.txt", strings.NewReader(body), tree.CreateOptions{Mode: 0o600, ModTime: mt, Size: -1})
	if err != nil {
		t.Fatal(err)
	}
	if i.Size != int64(len(body)) {
		t.Fatalf("create says %d bytes, want %d", i.Size, len(body))
	}
	st, err := e.FS.Stat(ctx(t), "a.txt")
	if err != nil || st.IsDir() || st.Size != int64(len(body)) || st.Mode != 0o600 || !st.ModTime.Equal(mt) || st.Name() != "a.txt" {
		t.Fatalf("stat: %+v (mode %v, mtime %v), %v", st, st.Mode, st.ModTime, err)
	}
	mustRead(t, e.FS, "a.txt", body)
	if got, err := read(t, e.FS, "a.txt", 7, 4); err != nil || got != body[7:11] {
		t.Fatalf("range 7+4: %q, %v", got, err)
	}
	if got, err := read(t, e.FS, "a.txt", int64(len(body))-3, 100); err != nil || got != body[len(body)-3:] {
		t.Fatalf("range past the end: %q, %v", got, err)
	}
	if got, err := read(t, e.FS, "a.txt", int64(len(body)), -1); err != nil || got != "" {
		t.Fatalf("range at the end: %q, %v", got, err)
	}
	_, err = read(t, e.FS, "a.txt", int64(len(body))+1, 1)
	wantErr(t, "offset past the end", err, fs.ErrInvalid)

	// Overwrite: new bytes, the mode stays, the time moves.
	put(t, e.FS, "a.txt", "short")
	mustRead(t, e.FS, "a.txt", "short")
	st, err = e.FS.Stat(ctx(t), "a.txt")
	if err != nil || st.Size != 5 || st.Mode != 0o600 || st.ModTime.Equal(mt) {
		t.Fatalf("after overwrite: %+v, %v", st, err)
	}
	// An empty file.
	put(t, e.FS, "empty", "")
	if st, err := e.FS.Stat(ctx(t), "empty"); err != nil || st.Size != 0 || st.IsDir() {
		t.Fatalf("empty file: %+v, %v", st, err)
	}
	mustRead(t, e.FS, "empty", "")
	// A file in a directory.
	mkdir(t, e.FS, "d")
	put(t, e.FS, "d/f", "in d")
	mustRead(t, e.FS, "/d/f", "in d")
	_, err = read(t, e.FS, "nope", 0, -1)
	wantErr(t, "open missing", err, fs.ErrNotExist)
}

func testCreateErrors(t *testing.T, e Env) {
	c := ctx(t)
	create := func(name string, opt tree.CreateOptions) error {
		_, err := e.FS.Create(c, name, strings.NewReader("x"), opt)
		return err
	}
	wantErr(t, "create in a missing directory", create("no/such/file", tree.CreateOptions{}), fs.ErrNotExist)
	put(t, e.FS, "file", "x")
	wantErr(t, "create under a file", create("file/child", tree.CreateOptions{}), tree.ErrNotDir)
	mkdir(t, e.FS, "dir")
	wantErr(t, "create onto a directory", create("dir", tree.CreateOptions{}), tree.ErrIsDir)
	wantErr(t, "create onto the root", create("/", tree.CreateOptions{}), tree.ErrIsDir)
	wantErr(t, "exclusive create of an existing file", create("file", tree.CreateOptions{Exclusive: true}), fs.ErrExist)
	if err := create("new", tree.CreateOptions{Exclusive: true}); err != nil {
		t.Fatalf("exclusive create of a new file: %v", err)
	}
	// A failed create leaves nothing behind.
	gone(t, e.FS, "no/such/file")
	gone(t, e.FS, "no")
	mustRead(t, e.FS, "file", "x")
}

func testMkdir(t *testing.T, e Env) {
	c := ctx(t)
	if err := e.FS.Mkdir(c, "d", 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := e.FS.Stat(c, "d/")
	if err != nil || !st.IsDir() || st.Mode.Perm() != 0o700 || st.Implied {
		t.Fatalf("stat d: %+v, %v", st, err)
	}
	wantErr(t, "mkdir again", e.FS.Mkdir(c, "d", 0), fs.ErrExist)
	put(t, e.FS, "f", "x")
	wantErr(t, "mkdir onto a file", e.FS.Mkdir(c, "f", 0), fs.ErrExist)
	wantErr(t, "mkdir under a missing directory", e.FS.Mkdir(c, "x/y", 0), fs.ErrNotExist)
	wantErr(t, "mkdir under a file", e.FS.Mkdir(c, "f/y", 0), tree.ErrNotDir)
	mkdir(t, e.FS, "d/e")
	if got := names(t, e.FS, "d", 0); len(got) != 1 || got[0] != "e/" {
		t.Fatalf("d lists %v", got)
	}
	if got := names(t, e.FS, "d/e", 0); len(got) != 0 {
		t.Fatalf("empty d/e lists %v", got)
	}
}

func testReadDir(t *testing.T, e Env) {
	c := ctx(t)
	mkdir(t, e.FS, "d")
	for _, n := range []string{"d/b", "d/a", "d/a!", "d/c.txt"} {
		put(t, e.FS, n, n)
	}
	mkdir(t, e.FS, "d/sub")
	put(t, e.FS, "d/sub/deep", "x")
	mkdir(t, e.FS, "d/empty")
	want := []string{"a", "a!", "b", "c.txt", "empty/", "sub/"}
	if got := names(t, e.FS, "d", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("d lists %v, want %v", got, want)
	}
	for _, limit := range []int{1, 2, 4} {
		if got := names(t, e.FS, "/d/", limit); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("d in pages of %d lists %v, want %v", limit, got, want)
		}
	}
	page, _, err := e.FS.ReadDir(c, "d", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range page {
		if i.Name() == "c.txt" && (i.Size != 7 || i.IsDir() || i.Mode != tree.DefaultFileMode) {
			t.Fatalf("c.txt listed as %+v", i)
		}
		if i.Name() == "sub" && !i.IsDir() {
			t.Fatalf("sub listed as %+v", i)
		}
	}
	if got := names(t, e.FS, "/", 0); fmt.Sprint(got) != "[d/]" {
		t.Fatalf("root lists %v", got)
	}
	_, _, err = e.FS.ReadDir(c, "d/b", "", 0)
	wantErr(t, "readdir of a file", err, tree.ErrNotDir)
	_, _, err = e.FS.ReadDir(c, "nope", "", 0)
	wantErr(t, "readdir of nothing", err, fs.ErrNotExist)
}

func testRenameFile(t *testing.T, e Env) {
	c := ctx(t)
	mt := time.Date(2023, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := e.FS.Create(c, "a", strings.NewReader("alpha"), tree.CreateOptions{ModTime: mt, Mode: 0o640}); err != nil {
		t.Fatal(err)
	}
	mkdir(t, e.FS, "d")
	if err := e.FS.Rename(c, "a", "d/b", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, e.FS, "a")
	mustRead(t, e.FS, "d/b", "alpha")
	st, err := e.FS.Stat(c, "d/b")
	if err != nil || !st.ModTime.Equal(mt) || st.Mode != 0o640 {
		t.Fatalf("renamed file: %+v, %v", st, err)
	}
	// Onto an existing file: replaced, unless NoReplace.
	put(t, e.FS, "c", "gamma")
	wantErr(t, "rename with NoReplace", e.FS.Rename(c, "c", "d/b", tree.RenameOptions{NoReplace: true}), fs.ErrExist)
	mustRead(t, e.FS, "c", "gamma")
	if err := e.FS.Rename(c, "c", "d/b", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	mustRead(t, e.FS, "d/b", "gamma")
	gone(t, e.FS, "c")
	// Errors, each changing nothing.
	put(t, e.FS, "x", "x")
	wantErr(t, "rename of nothing", e.FS.Rename(c, "nope", "y", tree.RenameOptions{}), fs.ErrNotExist)
	wantErr(t, "rename into a missing directory", e.FS.Rename(c, "x", "no/y", tree.RenameOptions{}), fs.ErrNotExist)
	wantErr(t, "rename under a file", e.FS.Rename(c, "x", "d/b/y", tree.RenameOptions{}), tree.ErrNotDir)
	wantErr(t, "rename a file onto a directory", e.FS.Rename(c, "x", "d", tree.RenameOptions{}), tree.ErrIsDir)
	wantErr(t, "rename onto the root", e.FS.Rename(c, "x", "/", tree.RenameOptions{}), fs.ErrInvalid)
	mustRead(t, e.FS, "x", "x")
	if err := e.FS.Rename(c, "x", "x", tree.RenameOptions{}); err != nil {
		t.Fatalf("rename onto itself: %v", err)
	}
	mustRead(t, e.FS, "x", "x")
	// The directory a file leaves stays.
	if err := e.FS.Rename(c, "d/b", "b", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.FS.Stat(c, "d"); err != nil || !st.IsDir() {
		t.Fatalf("d after its last file left: %+v, %v", st, err)
	}
}

func testRenameDir(t *testing.T, e Env) {
	c := ctx(t)
	mkdir(t, e.FS, "src")
	mkdir(t, e.FS, "src/sub")
	mkdir(t, e.FS, "src/empty")
	files := map[string]string{"src/f1": "one", "src/f2": "two", "src/sub/f3": "three"}
	for n, b := range files {
		put(t, e.FS, n, b)
	}
	wantErr(t, "rename into itself", e.FS.Rename(c, "src", "src/sub/x", tree.RenameOptions{}), fs.ErrInvalid)
	wantErr(t, "rename onto itself below", e.FS.Rename(c, "src", "src/sub", tree.RenameOptions{}), fs.ErrInvalid)
	mkdir(t, e.FS, "full")
	put(t, e.FS, "full/x", "x")
	wantErr(t, "rename onto a non-empty directory", e.FS.Rename(c, "src", "full", tree.RenameOptions{}), tree.ErrNotEmpty)
	wantErr(t, "rename a directory onto a file", e.FS.Rename(c, "src", "full/x", tree.RenameOptions{}), tree.ErrNotDir)
	mustRead(t, e.FS, "src/sub/f3", "three")

	if err := e.FS.Rename(c, "src", "dst", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, e.FS, "src")
	gone(t, e.FS, "src/f1")
	for n, b := range files {
		mustRead(t, e.FS, "dst"+strings.TrimPrefix(n, "src"), b)
	}
	if got := names(t, e.FS, "dst", 0); fmt.Sprint(got) != "[empty/ f1 f2 sub/]" {
		t.Fatalf("dst lists %v", got)
	}
	// Onto an empty directory: replaced (as POSIX), unless NoReplace.
	mkdir(t, e.FS, "target")
	wantErr(t, "rename onto an empty directory with NoReplace", e.FS.Rename(c, "dst", "target", tree.RenameOptions{NoReplace: true}), fs.ErrExist)
	if err := e.FS.Rename(c, "dst", "target", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	mustRead(t, e.FS, "target/sub/f3", "three")
	gone(t, e.FS, "dst")
	// Into a directory below.
	mkdir(t, e.FS, "deep")
	if err := e.FS.Rename(c, "target", "deep/t", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	mustRead(t, e.FS, "deep/t/f1", "one")
	if got := names(t, e.FS, "/", 0); fmt.Sprint(got) != "[deep/ full/]" {
		t.Fatalf("root lists %v", got)
	}
}

func testRemove(t *testing.T, e Env) {
	c := ctx(t)
	mkdir(t, e.FS, "d")
	put(t, e.FS, "d/f", "x")
	mkdir(t, e.FS, "d/e")
	put(t, e.FS, "d/e/g", "y")
	wantErr(t, "remove a non-empty directory", e.FS.Remove(c, "d", tree.RemoveOptions{}), tree.ErrNotEmpty)
	mustRead(t, e.FS, "d/f", "x")
	if err := e.FS.Remove(c, "d/f", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	gone(t, e.FS, "d/f")
	if err := e.FS.Remove(c, "d/e/g", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.FS.Stat(c, "d/e"); err != nil || !st.IsDir() {
		t.Fatalf("d/e after its last file went: %+v, %v", st, err)
	}
	if err := e.FS.Remove(c, "d/e", tree.RemoveOptions{}); err != nil {
		t.Fatalf("remove an empty directory: %v", err)
	}
	gone(t, e.FS, "d/e")
	wantErr(t, "remove nothing", e.FS.Remove(c, "d/e", tree.RemoveOptions{}), fs.ErrNotExist)
	mkdir(t, e.FS, "d/x")
	put(t, e.FS, "d/x/1", "1")
	put(t, e.FS, "d/2", "2")
	if err := e.FS.Remove(c, "d", tree.RemoveOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	gone(t, e.FS, "d")
	gone(t, e.FS, "d/x/1")
	if got := names(t, e.FS, "/", 0); len(got) != 0 {
		t.Fatalf("root lists %v after removing all", got)
	}
}

func testAttrs(t *testing.T, e Env) {
	c := ctx(t)
	put(t, e.FS, "f", "body")
	mkdir(t, e.FS, "d")
	mt := time.Date(2020, 2, 29, 12, 0, 0, 5, time.UTC)
	for _, n := range []string{"f", "d"} {
		if err := e.FS.Chmod(c, n, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := e.FS.Chtimes(c, n, mt); err != nil {
			t.Fatal(err)
		}
		st, err := e.FS.Stat(c, n)
		if err != nil || st.Mode.Perm() != 0o711 || !st.ModTime.Equal(mt) {
			t.Fatalf("%s after chmod and chtimes: %+v, %v", n, st, err)
		}
	}
	mustRead(t, e.FS, "f", "body")
	wantErr(t, "chmod of nothing", e.FS.Chmod(c, "nope", 0o600), fs.ErrNotExist)
}

func testInvalidPaths(t *testing.T, e Env) {
	c := ctx(t)
	for _, n := range []string{"a/../b", "a//b", "./a/x", "a/.", "..", "a\x00b"} {
		_, err := e.FS.Create(c, n, strings.NewReader("x"), tree.CreateOptions{})
		wantErr(t, "create "+fmt.Sprintf("%q", n), err, fs.ErrInvalid)
		_, err = e.FS.Stat(c, n)
		wantErr(t, "stat "+fmt.Sprintf("%q", n), err, fs.ErrInvalid)
	}
	if got := names(t, e.FS, "/", 0); len(got) != 0 {
		t.Fatalf("root lists %v", got)
	}
}

// await waits for an event that match accepts.
func await(t *testing.T, ch <-chan tree.Event, what string, match func(tree.Event) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: channel closed", what)
			}
			t.Logf("event %v %q %q", ev.Kind, ev.Path, ev.To)
			if match(ev) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no event", what)
		}
	}
}

func testEvents(t *testing.T, e Env) {
	s, ok := e.FS.(Subscriber)
	if !ok {
		t.Skip("no events through this FS")
	}
	ch, cancel := s.Subscribe(256)
	defer cancel()
	mkdir(t, e.FS, "d")
	await(t, ch, "mkdir", func(ev tree.Event) bool { return ev.Kind == tree.KindMkdir && ev.Path == "d" })
	put(t, e.FS, "d/f", "x")
	await(t, ch, "write", func(ev tree.Event) bool { return ev.Kind == tree.KindWrite && ev.Path == "d/f" })
	if err := e.FS.Rename(ctx(t), "d", "e", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "rename", func(ev tree.Event) bool { return ev.Kind == tree.KindRename && ev.Path == "d" && ev.To == "e" })
	if err := e.FS.Remove(ctx(t), "e", tree.RemoveOptions{Recursive: true}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "remove", func(ev tree.Event) bool { return ev.Kind == tree.KindRemove && ev.Path == "e" })
	if e.Store != nil {
		// A write through the other door.
		if _, err := e.Store.Put(ctx(t), "door/k", strings.NewReader("s3"), 2, nil); err != nil {
			t.Fatal(err)
		}
		await(t, ch, "changed", func(ev tree.Event) bool { return ev.Kind == tree.KindChanged && ev.Path == "door/k" })
	}
	cancel()
	for range ch { // drained and closed
	}
}

func testOtherDoor(t *testing.T, e Env) {
	if e.Store == nil {
		t.Skip("no store below this FS")
	}
	c := ctx(t)
	for _, k := range []string{"photos/2026/01/x.jpg", "photos/2026/02/y.jpg", "top.txt"} {
		if _, err := e.Store.Put(c, k, strings.NewReader(k), int64(len(k)), map[string]string{"camera": "z"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Store.Put(c, "marked/", bytes.NewReader(nil), 0, nil); err != nil {
		t.Fatal(err)
	}
	st, err := e.FS.Stat(c, "photos/2026")
	if err != nil || !st.IsDir() || !st.Implied {
		t.Fatalf("implied directory: %+v, %v", st, err)
	}
	if st, err := e.FS.Stat(c, "marked"); err != nil || !st.IsDir() || st.Implied {
		t.Fatalf("marker written through the store: %+v, %v", st, err)
	}
	if got := names(t, e.FS, "/", 0); fmt.Sprint(got) != "[marked/ photos/ top.txt]" {
		t.Fatalf("root lists %v", got)
	}
	if got := names(t, e.FS, "photos/2026", 0); fmt.Sprint(got) != "[01/ 02/]" {
		t.Fatalf("photos/2026 lists %v", got)
	}
	mustRead(t, e.FS, "photos/2026/01/x.jpg", "photos/2026/01/x.jpg")
	// A key "clash" and keys under "clash/": the file wins, listed once,
	// on one page or several. Keys with elements that are not names are
	// not listed.
	for _, k := range []string{"odd/clash", "odd/clash!", "odd/clash/x", "odd/.", "odd/./y", "odd//z", "odd/../w"} {
		if _, err := e.Store.Put(c, k, strings.NewReader(k), int64(len(k)), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, 1, 2} {
		if got := names(t, e.FS, "odd", limit); fmt.Sprint(got) != "[clash clash!]" {
			t.Fatalf("odd in pages of %d lists %v", limit, got)
		}
	}
	if st, err := e.FS.Stat(c, "odd/clash"); err != nil || st.IsDir() {
		t.Fatalf("odd/clash: %+v, %v", st, err)
	}
	// Files written through the tree read back through the store, with
	// their mode and time as metadata.
	mt := time.Date(2025, 12, 24, 18, 0, 0, 0, time.UTC)
	if _, err := e.FS.Create(c, "photos/new.txt", strings.NewReader("from the tree"), tree.CreateOptions{Mode: 0o600, ModTime: mt}); err != nil {
		t.Fatal(err)
	}
	o, err := e.Store.Stat(c, "photos/new.txt")
	if err != nil || o.Size != 13 || o.Meta[tree.MetaMode] != "33152" || o.Meta[tree.MetaMtime] != fmt.Sprintf("%d.000000000", mt.Unix()) {
		t.Fatalf("store sees %+v, %v", o, err)
	}
	rc, err := e.Store.Open(c, "photos/new.txt", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "from the tree" {
		t.Fatalf("store reads %q", b)
	}
	// A directory renamed in the tree shows under its new keys, with the
	// metadata the store wrote.
	if err := e.FS.Rename(c, "photos", "pics", tree.RenameOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err = e.Store.Stat(c, "pics/2026/01/x.jpg")
	if err != nil || o.Meta["camera"] != "z" || o.Size != 20 {
		t.Fatalf("store after rename: %+v, %v", o, err)
	}
	if _, err := e.Store.Stat(c, "photos/2026/01/x.jpg"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old key after rename: %v", err)
	}
	// A batch with a copy from a missing key fails whole, with fs's
	// error, and writes nothing; so does one with an empty key.
	err = e.Store.Apply(c, []tree.Op{{Key: "pics/copy", From: "top.txt"}, {Key: "pics/copy2", From: "missing"}, {Key: "top.txt", Delete: true}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("batch with a missing source: %v", err)
	}
	err = e.Store.Apply(c, []tree.Op{{Key: "pics/copy", From: "top.txt"}, {Key: "", From: "top.txt"}})
	if !errors.Is(err, fs.ErrInvalid) {
		t.Fatalf("batch with an empty key: %v", err)
	}
	gone(t, e.FS, "pics/copy")
	mustRead(t, e.FS, "top.txt", "top.txt")
	// An implied directory whose last file goes stays, with a marker.
	if err := e.FS.Remove(c, "pics/2026/02/y.jpg", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := e.FS.Stat(c, "pics/2026/02"); err != nil || !st.IsDir() || st.Implied {
		t.Fatalf("implied directory after its last file went: %+v, %v", st, err)
	}
}
