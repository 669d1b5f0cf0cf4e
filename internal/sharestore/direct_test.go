package sharestore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDirectWriter writes files of sizes around the alignment and buffer
// boundaries in pieces of random sizes and checks every byte: read back
// before Close, and in the file after it, with the head replaced.
func TestDirectWriter(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	const ext4, xfs = 0xEF53, 0x58465342
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, recordSize, directAlign - 1, directAlign, directAlign + 1,
		directBuf - 1, directBuf, directBuf + 1, 3*directBuf + 777}
	for _, size := range sizes {
		path := filepath.Join(dir, "f")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		w := openDirect(osFile{f})
		if w == nil {
			if st.Type == ext4 || st.Type == xfs {
				t.Fatalf("O_DIRECT refused on %s (ext4 or xfs)", dir)
			}
			f.Close()
			t.Skipf("this file system (type %#x) refuses O_DIRECT; Disk writes through the page cache here", st.Type)
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for p := want; len(p) > 0; {
			m := min(len(p), 1+rng.IntN(300<<10))
			if n, err := w.Write(p[:m]); err != nil || n != m {
				t.Fatalf("size %d: Write = %d, %v", size, n, err)
			}
			p = p[m:]
		}
		// Before Close, ReadAt sees every byte, from memory or the file.
		for range 10 {
			if size == 0 {
				break
			}
			off := rng.IntN(size)
			got := make([]byte, 1+rng.IntN(size-off))
			if n, err := w.ReadAt(got, int64(off)); err != nil || n != len(got) || !bytes.Equal(got, want[off:off+n]) {
				t.Fatalf("size %d: ReadAt(%d bytes at %d) = %d, %v; equal %v", size, len(got), off, n, err, bytes.Equal(got[:n], want[off:off+n]))
			}
		}
		if size >= 4 {
			copy(want, "QSR1")
			if err := w.WriteHead([]byte("QSR1")); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("size %d: Close: %v", size, err)
		}
		// A share that was all in the buffer when its record came is
		// written in one direct write, the first block not held back.
		if size >= directAlign && size < directBuf && w.head != nil {
			t.Errorf("size %d: first block written apart from the rest", size)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, padded(want)) {
			t.Fatalf("size %d: file of %d bytes differs from what was written, padded to a block", size, len(got))
		}
	}
}

// padded returns b followed by zeros up to a whole number of blocks:
// what a directWriter leaves in the file.
func padded(b []byte) []byte {
	return append(bytes.Clone(b), make([]byte, (directAlign-len(b)%directAlign)%directAlign)...)
}

// TestDirectReader reads shares of sizes around the alignment and chunk
// boundaries through SequentialReader, whole and from random offsets
// after seeks, and compares every byte with what the file holds.
func TestDirectReader(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, directAlign - recordSize, directAlign - recordSize + 1, directAlign,
		128<<10 - recordSize, 128 << 10, directBuf, 5*directBuf + 4321} {
		path := filepath.Join(dir, "s")
		file := make([]byte, recordSize+size)
		for i := range file {
			file[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		s := &diskShare{f: f, info: Info{Size: int64(size)}}
		rd := s.SequentialReader()
		if rd == nil {
			t.Skip("O_DIRECT refused here (see TestDirectWriter)")
		}
		want := file[recordSize:]
		got, err := io.ReadAll(rd)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: whole read: %d bytes, %v; equal %v", size, len(got), err, bytes.Equal(got, want))
		}
		for range 20 {
			off := rng.IntN(size)
			n := 1 + rng.IntN(size-off)
			if _, err := rd.Seek(int64(off), io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if _, err := io.ReadFull(rd, got); err != nil {
				t.Fatalf("size %d: read %d at %d: %v", size, n, off, err)
			}
			if !bytes.Equal(got, want[off:off+n]) {
				t.Fatalf("size %d: %d bytes at %d differ", size, n, off)
			}
		}
		if _, err := rd.Seek(0, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		if n, err := rd.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("size %d: read at the end = %d, %v, want EOF", size, n, err)
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestDirectReaderCloseWhileReading: Close waits for a Read in progress
// (http.ServeContent reads multi-range answers from its own goroutine),
// and a Read after Close fails instead of touching returned buffers.
func TestDirectReaderCloseWhileReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(path, make([]byte, recordSize+8*directBuf), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := (&diskShare{f: f, info: Info{Size: 8 * directBuf}}).SequentialReader()
	if rd == nil {
		t.Skip("O_DIRECT refused here (see TestDirectWriter)")
	}
	done := make(chan error)
	go func() {
		buf := make([]byte, 32<<10)
		for {
			if _, err := rd.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(time.Millisecond)
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != io.EOF && !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read ended with %v", err)
	}
	if _, err := rd.Read(make([]byte, 1)); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
}

// TestDirectWriterFilled: the path uploads take (read straight into the
// buffer with Free and Filled, background writes of full buffers) leaves
// the same bytes as Write.
func TestDirectWriterFilled(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{recordSize, directAlign + 1, directBuf, 3*directBuf + 5} {
		path := filepath.Join(dir, "f")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		w := openDirect(osFile{f})
		if w == nil {
			f.Close()
			t.Skip("O_DIRECT refused here (see TestDirectWriter)")
		}
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for p := want; len(p) > 0; {
			free := w.Free()
			m := copy(free[:min(len(free), 1+rng.IntN(200<<10))], p)
			if err := w.Filled(m); err != nil {
				t.Fatal(err)
			}
			p = p[m:]
		}
		got := make([]byte, size)
		if n, err := w.ReadAt(got, 0); err != nil || n != size || !bytes.Equal(got, want) {
			t.Fatalf("size %d: ReadAt before Close = %d, %v", size, n, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, padded(want)) {
			t.Fatalf("size %d: file differs (%v)", size, err)
		}
	}
}
