package lab

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCopyEtc: the experiment's source copy keeps files (with their
// bytes and mode), links and directories, skips special files, and the
// quick sample takes one file or link in three and every directory.
func TestCopyEtc(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a/b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a/f1", "a/f2", "a/b/f3", "a/b/f4", "f5"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(name), 0o640+os.FileMode(i%2)*0o100); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("f1", filepath.Join(src, "a/l")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "all")
	st, err := copyEtc(src, dst, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.files != 5 || st.links != 1 || st.dirs != 3 || st.bytes != int64(len("a/f1a/f2a/b/f3a/b/f4f5")) {
		t.Errorf("copy of everything: %+v", st)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a/b/f3")); err != nil || string(b) != "a/b/f3" {
		t.Errorf("a/b/f3: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "a/f2")); err != nil || fi.Mode().Perm() != 0o740 {
		t.Errorf("a/f2's mode: %v, %v", fi, err)
	}
	if tg, err := os.Readlink(filepath.Join(dst, "a/l")); err != nil || tg != "f1" {
		t.Errorf("a/l: %q, %v", tg, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !os.IsNotExist(err) {
		t.Errorf("the FIFO was copied: %v", err)
	}
	st, err = copyEtc(src, filepath.Join(t.TempDir(), "sample"), 3)
	if err != nil {
		t.Fatal(err)
	}
	// Walk order: a/b/f3 a/b/f4 a/f1 a/f2 a/l f5 (and the FIFO, counted
	// and skipped): the 1st, 4th and 7th.
	if st.files+st.links != 2 || st.dirs != 3 {
		t.Errorf("the sample: %+v", st)
	}
}
