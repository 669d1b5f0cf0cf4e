package posixtest

import (
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cases is the table, grouped by what they are about: files, truncation,
// writes, handles, renames, removal, directories, attributes, links.
var cases = []testCase{
	// Files: create, read, and the errors of opening.
	{name: "CreateWriteRead", run: func(t *testing.T, d string) error {
		if err := os.WriteFile(d+"/a", []byte("hello"), 0o644); err != nil {
			return err
		}
		if err := content(d+"/a", "hello"); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/a")
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() != 5 {
			return differs("stat: mode %v, size %d", fi.Mode(), fi.Size())
		}
		return nil
	}},
	{name: "CreateEmpty", run: func(t *testing.T, d string) error {
		f, err := os.Create(d + "/a")
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "")
	}},
	{name: "CreateMode", run: func(t *testing.T, d string) error {
		f, err := os.OpenFile(d+"/a", os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			return err
		}
		f.WriteString("x")
		if err := f.Close(); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/a")
		if err != nil {
			return err
		}
		return ensureEqual("the mode", fi.Mode().Perm(), os.FileMode(0o640))
	}},
	{name: "CreateExclusive", run: func(t *testing.T, d string) error {
		f, err := os.OpenFile(d+"/a", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}},
	{name: "CreateExclusiveExisting", want: syscall.EEXIST, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "x")
		f, err := os.OpenFile(d+"/a", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
		}
		return err
	}},
	{name: "CreateInMissingDir", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		f, err := os.Create(d + "/nodir/f")
		if err == nil {
			f.Close()
		}
		return err
	}},
	{name: "CreateUnderFile", want: syscall.ENOTDIR, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/f", "f")
		f, err := os.Create(d + "/f/g")
		if err == nil {
			f.Close()
		}
		return err
	}},
	{name: "OpenMissing", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		f, err := os.Open(d + "/missing")
		if err == nil {
			f.Close()
		}
		return err
	}},
	{name: "StatMissing", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		_, err := os.Stat(d + "/missing")
		return err
	}},
	{name: "OpenDirForWriting", want: syscall.EISDIR, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		f, err := os.OpenFile(d+"/dir", os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		return err
	}},
	{name: "WriteReadMiB", run: func(t *testing.T, d string) error {
		want := pattern(3<<20 + 12345)
		if err := os.WriteFile(d+"/big", want, 0o644); err != nil {
			return err
		}
		got, err := os.ReadFile(d + "/big")
		if err != nil {
			return err
		}
		return mustEqualBytes("big", got, want)
	}},

	// Truncation.
	{name: "TruncateShrink", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "hello world")
		if err := os.Truncate(d+"/a", 5); err != nil {
			return err
		}
		return content(d+"/a", "hello")
	}},
	{name: "TruncateExtend", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "hello")
		if err := os.Truncate(d+"/a", 7); err != nil {
			return err
		}
		return content(d+"/a", "hello\x00\x00")
	}},
	{name: "OpenTruncate", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "hello world")
		f, err := os.OpenFile(d+"/a", os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		f.WriteString("new")
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "new")
	}},
	{name: "FtruncateOpenFile", run: func(t *testing.T, d string) error {
		f := mustOpen(t, d+"/a", os.O_RDWR|os.O_CREATE)
		if _, err := f.WriteString("abcdef"); err != nil {
			return err
		}
		if err := f.Truncate(3); err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if err := ensureEqual("the size after ftruncate", fi.Size(), 3); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "abc")
	}},

	// Writes at offsets.
	{name: "WriteAtOffset", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "0123456789")
		f, err := os.OpenFile(d+"/a", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		f.WriteAt([]byte("XY"), 4)
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "0123XY6789")
	}},
	{name: "WriteBeyondEnd", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "ab")
		f, err := os.OpenFile(d+"/a", os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte("Z"), 5); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "ab\x00\x00\x00Z")
	}},
	{name: "Append", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "start")
		f, err := os.OpenFile(d+"/a", os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		if _, err := f.WriteString("+end"); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return content(d+"/a", "start+end")
	}},
	{name: "Fsync", run: func(t *testing.T, d string) error {
		f := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		f.WriteString("synced")
		if err := f.Sync(); err != nil {
			return err
		}
		if err := content(d+"/a", "synced"); err != nil {
			return err
		}
		return f.Close()
	}},

	// Several handles of one file.
	{name: "ReadWhileAnotherHandleWrites", run: func(t *testing.T, d string) error {
		w := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		w.WriteString("first")
		if err := content(d+"/a", "first"); err != nil {
			return err
		}
		w.WriteString(" second")
		if err := content(d+"/a", "first second"); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		return content(d+"/a", "first second")
	}},
	{name: "ReaderSeesLaterWrites", run: func(t *testing.T, d string) error {
		// A reader opened before another handle writes reads the new bytes.
		mustWrite(t, d+"/a", "old text")
		r := mustOpen(t, d+"/a", os.O_RDONLY)
		if s, err := readAt(r, 3, 0); err != nil || s != "old" {
			return orDiffers(err, "the first read is %q", s)
		}
		w := mustOpen(t, d+"/a", os.O_WRONLY)
		if _, err := w.WriteAt([]byte("NEW"), 0); err != nil {
			return err
		}
		s, err := readAt(r, 8, 0)
		if err != nil {
			return err
		}
		if err := ensureEqual("the reader's second read", s, "NEW text"); err != nil {
			return err
		}
		return w.Close()
	}},
	{name: "ReaderAfterWriterCloses", run: func(t *testing.T, d string) error {
		w := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		w.WriteString("written")
		r := mustOpen(t, d+"/a", os.O_RDONLY)
		if err := w.Close(); err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return ensureEqual("the reader's read", string(b), "written")
	}},
	{name: "TwoWriters", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "..........")
		w1 := mustOpen(t, d+"/a", os.O_WRONLY)
		w2 := mustOpen(t, d+"/a", os.O_WRONLY)
		w1.WriteAt([]byte("11"), 1)
		w2.WriteAt([]byte("22"), 6)
		if err := w1.Close(); err != nil {
			return err
		}
		if err := w2.Close(); err != nil {
			return err
		}
		return content(d+"/a", ".11...22..")
	}},
	{name: "ListWhileOpen", run: func(t *testing.T, d string) error {
		w := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		w.WriteString("data")
		if err := listing(d, "a"); err != nil {
			return err
		}
		return w.Close()
	}},

	// Renames.
	{name: "RenameFile", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		if err := os.Rename(d+"/a", d+"/b"); err != nil {
			return err
		}
		if err := content(d+"/b", "a"); err != nil {
			return err
		}
		return gone(d + "/a")
	}},
	{name: "RenameOverFile", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "new")
		mustWrite(t, d+"/b", "old")
		if err := os.Rename(d+"/a", d+"/b"); err != nil {
			return err
		}
		if err := content(d+"/b", "new"); err != nil {
			return err
		}
		return gone(d + "/a")
	}},
	{name: "RenameOpenFile", run: func(t *testing.T, d string) error {
		// A handle open for writing writes on after a rename; the bytes
		// end up under the new name.
		f := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		f.WriteString("before ")
		if err := os.Rename(d+"/a", d+"/b"); err != nil {
			return err
		}
		if _, err := f.WriteString("after"); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := content(d+"/b", "before after"); err != nil {
			return err
		}
		return gone(d + "/a")
	}},
	{name: "FtruncateAfterRename", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "0123456789")
		f := mustOpen(t, d+"/a", os.O_RDWR)
		if err := os.Rename(d+"/a", d+"/b"); err != nil {
			return err
		}
		if err := f.Truncate(4); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := content(d+"/b", "0123"); err != nil {
			return err
		}
		return gone(d + "/a")
	}},
	{name: "RenameDir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/x/sub")
		mustWrite(t, d+"/x/sub/f", "f")
		if err := os.Rename(d+"/x", d+"/y"); err != nil {
			return err
		}
		if err := content(d+"/y/sub/f", "f"); err != nil {
			return err
		}
		return gone(d + "/x")
	}},
	// syscall.Rename: os.Rename refuses a directory target itself.
	{name: "RenameDirOverEmptyDir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/x/sub", d+"/empty")
		mustWrite(t, d+"/x/sub/f", "f")
		if err := syscall.Rename(d+"/x", d+"/empty"); err != nil {
			return err
		}
		return content(d+"/empty/sub/f", "f")
	}},
	// rename(2) allows EEXIST or ENOTEMPTY; Linux file systems say ENOTEMPTY.
	{name: "RenameDirOverNonEmptyDir", want: syscall.ENOTEMPTY, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/x", d+"/full")
		mustWrite(t, d+"/full/g", "g")
		return syscall.Rename(d+"/x", d+"/full")
	}},
	{name: "RenameFileOverDir", want: syscall.EISDIR, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/empty")
		mustWrite(t, d+"/file", "file")
		return syscall.Rename(d+"/file", d+"/empty")
	}},
	{name: "RenameDirOverFile", want: syscall.ENOTDIR, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/x")
		mustWrite(t, d+"/file", "file")
		return syscall.Rename(d+"/x", d+"/file")
	}},
	{name: "RenameDirIntoItself", want: syscall.EINVAL, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/x/sub")
		return syscall.Rename(d+"/x", d+"/x/sub/in")
	}},
	{name: "RenameMissing", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		return syscall.Rename(d+"/missing", d+"/b")
	}},
	{name: "RenameNoReplace", want: syscall.EEXIST, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		mustWrite(t, d+"/b", "b")
		return unix.Renameat2(unix.AT_FDCWD, d+"/a", unix.AT_FDCWD, d+"/b", unix.RENAME_NOREPLACE)
	}},
	{name: "RenameNoReplaceNew", run: func(t *testing.T, d string) error {
		// RENAME_NOREPLACE onto a free name: the kernel has no target to
		// refuse, so the file system sees the flag.
		mustWrite(t, d+"/a", "a")
		if err := unix.Renameat2(unix.AT_FDCWD, d+"/a", unix.AT_FDCWD, d+"/b", unix.RENAME_NOREPLACE); err != nil {
			return err
		}
		return content(d+"/b", "a")
	}},
	{name: "RenameExchange", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		mustWrite(t, d+"/b", "b")
		if err := unix.Renameat2(unix.AT_FDCWD, d+"/a", unix.AT_FDCWD, d+"/b", unix.RENAME_EXCHANGE); err != nil {
			return err
		}
		return content(d+"/a", "b")
	}},

	// Removal.
	{name: "Unlink", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		if err := syscall.Unlink(d + "/a"); err != nil {
			return err
		}
		return gone(d + "/a")
	}},
	{name: "UnlinkMissing", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		return syscall.Unlink(d + "/missing")
	}},
	{name: "UnlinkDir", want: syscall.EISDIR, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		return syscall.Unlink(d + "/dir")
	}},
	{name: "Rmdir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		if err := syscall.Rmdir(d + "/dir"); err != nil {
			return err
		}
		return gone(d + "/dir")
	}},
	{name: "RmdirNonEmpty", want: syscall.ENOTEMPTY, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		mustWrite(t, d+"/dir/f", "f")
		return syscall.Rmdir(d + "/dir")
	}},
	{name: "RmdirFile", want: syscall.ENOTDIR, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/f", "f")
		return syscall.Rmdir(d + "/f")
	}},
	{name: "RemoveTree", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/t/a/b", d+"/t/c")
		mustWrite(t, d+"/t/a/b/f", "f")
		mustWrite(t, d+"/t/c/g", "g")
		if err := os.RemoveAll(d + "/t"); err != nil {
			return err
		}
		return gone(d + "/t")
	}},
	{name: "UnlinkOpenFile", run: func(t *testing.T, d string) error {
		// The open handle keeps the file's bytes after the name is gone.
		f := mustOpen(t, d+"/a", os.O_RDWR|os.O_CREATE)
		f.WriteString("data")
		if err := os.Remove(d + "/a"); err != nil {
			return err
		}
		s, err := readAt(f, 4, 0)
		if err != nil {
			return err
		}
		if err := ensureEqual("a read of the unlinked file", s, "data"); err != nil {
			return err
		}
		f.Close()
		return gone(d + "/a")
	}},
	{name: "ReadAfterUnlink", run: func(t *testing.T, d string) error {
		// A reader of a file that is removed keeps reading its bytes,
		// here far from where it read before: beyond the kernel's
		// read-ahead and the 4 MiB an SFTP server's reader keeps.
		body := pattern(farFile)
		if err := os.WriteFile(d+"/a", body, 0o644); err != nil {
			t.Fatalf("set-up: %v", err)
		}
		r := mustOpen(t, d+"/a", os.O_RDONLY)
		if _, err := readAt(r, 3, 0); err != nil {
			t.Fatalf("set-up: %v", err)
		}
		if err := os.Remove(d + "/a"); err != nil {
			return err
		}
		s, err := readAt(r, 16, farOffset)
		if err != nil {
			return err
		}
		return ensureEqual("a read of the removed file", []byte(s), body[farOffset:farOffset+16])
	}},
	{name: "ReadAfterReplace", run: func(t *testing.T, d string) error {
		// A reader of a file that a rename replaces reads the old bytes.
		body := pattern(farFile)
		if err := os.WriteFile(d+"/a", body, 0o644); err != nil {
			t.Fatalf("set-up: %v", err)
		}
		mustWrite(t, d+"/new", "replacement")
		r := mustOpen(t, d+"/a", os.O_RDONLY)
		if _, err := readAt(r, 3, 0); err != nil {
			t.Fatalf("set-up: %v", err)
		}
		if err := os.Rename(d+"/new", d+"/a"); err != nil {
			return err
		}
		s, err := readAt(r, 16, farOffset)
		if err != nil {
			return err
		}
		return ensureEqual("a read of the replaced file", []byte(s), body[farOffset:farOffset+16])
	}},
	{name: "UnlinkOpenFileAttrs", run: func(t *testing.T, d string) error {
		f := mustOpen(t, d+"/a", os.O_RDWR|os.O_CREATE)
		f.WriteString("data")
		if err := os.Remove(d + "/a"); err != nil {
			return err
		}
		if err := f.Truncate(2); err != nil {
			return err
		}
		if err := f.Chmod(0o600); err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		return ensureEqual("fstat of the unlinked file", [2]any{fi.Size(), fi.Mode().Perm()}, [2]any{2, os.FileMode(0o600)})
	}},

	// Directories.
	{name: "Mkdir", run: func(t *testing.T, d string) error {
		if err := os.Mkdir(d+"/dir", 0o755); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/dir")
		if err != nil {
			return err
		}
		return ensureEqual("a new directory is a directory", fi.IsDir(), true)
	}},
	{name: "MkdirMode", run: func(t *testing.T, d string) error {
		if err := os.Mkdir(d+"/dir", 0o750); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/dir")
		if err != nil {
			return err
		}
		return ensureEqual("the new directory's mode", fi.Mode().Perm(), os.FileMode(0o750))
	}},
	{name: "MkdirExisting", want: syscall.EEXIST, run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		return os.Mkdir(d+"/dir", 0o755)
	}},
	{name: "MkdirOverFile", want: syscall.EEXIST, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/f", "f")
		return os.Mkdir(d+"/f", 0o755)
	}},
	{name: "MkdirMissingParent", want: syscall.ENOENT, run: func(t *testing.T, d string) error {
		return os.Mkdir(d+"/no/dir", 0o755)
	}},
	{name: "ReadDir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/sub", d+"/sub2/deeper")
		mustWrite(t, d+"/b", "b")
		mustWrite(t, d+"/a", "a")
		mustWrite(t, d+"/sub/inner", "i")
		return listing(d, "a", "b", "sub/", "sub2/")
	}},
	{name: "ReadDirOfFile", want: syscall.ENOTDIR, run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/f", "f")
		_, err := os.ReadDir(d + "/f")
		return err
	}},

	// Attributes.
	{name: "ChmodFile", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		return chmodCheck(d + "/a")
	}},
	{name: "ChmodDir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		return chmodCheck(d + "/dir")
	}},
	{name: "UtimensFile", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		return utimensCheck(d+"/a", time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	}},
	{name: "UtimensDir", run: func(t *testing.T, d string) error {
		mustMkdir(t, d+"/dir")
		return utimensCheck(d+"/dir", time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	}},
	{name: "UtimensNanoseconds", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		return utimensCheck(d+"/a", time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC))
	}},
	{name: "ChmodWhileWriting", run: func(t *testing.T, d string) error {
		// The mode set on a file open with changes outlives its close.
		f := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		f.WriteString("data")
		if err := os.Chmod(d+"/a", 0o600); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/a")
		if err != nil {
			return err
		}
		return ensureEqual("the mode after the close", fi.Mode().Perm(), os.FileMode(0o600))
	}},
	{name: "UtimensBeforeClose", run: func(t *testing.T, d string) error {
		// What cp -p and scp -p do: write, set the time, close.
		f := mustOpen(t, d+"/a", os.O_WRONLY|os.O_CREATE)
		f.WriteString("data")
		mt := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		if err := os.Chtimes(d+"/a", mt, mt); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fi, err := os.Stat(d + "/a")
		if err != nil {
			return err
		}
		return ensureEqual("the time after the close", fi.ModTime().UTC(), mt)
	}},

	// Links and special files.
	{name: "Symlink", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		return os.Symlink("a", d+"/l")
	}},
	{name: "HardLink", run: func(t *testing.T, d string) error {
		mustWrite(t, d+"/a", "a")
		return os.Link(d+"/a", d+"/l")
	}},
	{name: "Fifo", run: func(t *testing.T, d string) error {
		return syscall.Mkfifo(d+"/p", 0o644)
	}},
}

// farFile is the size of the files read far from where they were read
// before, at farOffset.
const (
	farFile   = 10 << 20
	farOffset = 9 << 20
)

// orDiffers is err, or ErrDiffers with what was seen.
func orDiffers(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return differs(format, args...)
}

// listing checks the names in d, a directory's with "/".
func listing(d string, want ...string) error {
	des, err := os.ReadDir(d)
	if err != nil {
		return err
	}
	var got []string
	for _, de := range des {
		n := de.Name()
		if de.IsDir() {
			n += "/"
		}
		got = append(got, n)
	}
	slices.Sort(got)
	return ensureEqual("the listing", got, want)
}

// chmodCheck sets mode 0600 and checks it.
func chmodCheck(p string) error {
	if err := os.Chmod(p, 0o600); err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return ensureEqual("the mode", fi.Mode().Perm(), os.FileMode(0o600))
}

// utimensCheck sets the access and modification times to mt and checks
// the modification time.
func utimensCheck(p string, mt time.Time) error {
	if err := os.Chtimes(p, mt, mt); err != nil {
		return err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return ensureEqual("the modification time", fi.ModTime().UTC(), mt)
}
