package sharestore

import (
	"errors"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directAlign is the alignment O_DIRECT asks of file offsets, lengths and
// memory: 4096 covers devices with 512-byte and 4 KiB logical blocks.
const directAlign = 4096

// directBuf is how much a directWriter gathers before one write.
const directBuf = 1 << 20

// directWriter writes a share file through a second descriptor opened
// with O_DIRECT: the bytes go from one reused buffer to the disk, not
// into the page cache. A node fsyncs every share anyway, so caching what
// it writes only costs a copy and fresh page-cache memory per byte (on a
// virtual machine, memory the host must back on first touch); a share is
// read again rarely, and then by offset. It is how large-object stores
// such as MinIO write erasure-coded parts.
//
// The file is written from offset 0: the caller's first bytes are the
// space for the record, written again later through the ordinary
// descriptor. Close writes the tail that does not fill an aligned block
// through that ordinary descriptor (buffered).
type directWriter struct {
	f   *os.File // ordinary descriptor, for the unaligned tail
	fd  int      // O_DIRECT descriptor of the same file
	buf []byte   // aligned, directBuf long
	n   int      // bytes in buf
	off int64    // file offset of buf[0]
}

// openDirect opens path a second time with O_DIRECT for writing, or
// returns nil if the file system refuses it (tmpfs, some FUSE mounts):
// the caller then writes through f as usual.
func openDirect(f *os.File, path string) *directWriter {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	raw := make([]byte, directBuf+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&raw[0])) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return &directWriter{f: f, fd: fd, buf: raw[skip : skip+directBuf]}
}

// Write gathers p and writes every full buffer with O_DIRECT.
func (w *directWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		c := copy(w.buf[w.n:], p)
		w.n += c
		p = p[c:]
		if w.n == len(w.buf) {
			if err := w.flush(w.n); err != nil {
				return total - len(p) - c, err
			}
		}
	}
	return total, nil
}

// flush writes the first m bytes of buf (m a multiple of directAlign) at
// w.off and moves what follows them to the front.
func (w *directWriter) flush(m int) error {
	for done := 0; done < m; {
		k, err := unix.Pwrite(w.fd, w.buf[done:m], w.off+int64(done))
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		}
		if k == 0 || k%directAlign != 0 && done+k < m {
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: syscall.EIO}
		}
		done += k
	}
	w.off += int64(m)
	w.n = copy(w.buf, w.buf[m:w.n])
	return nil
}

// Close writes what is left, the aligned part directly and the rest
// through the ordinary descriptor, and closes the O_DIRECT one. It does
// not sync.
func (w *directWriter) Close() error {
	defer unix.Close(w.fd)
	if a := w.n / directAlign * directAlign; a > 0 {
		if err := w.flush(a); err != nil {
			return err
		}
	}
	if w.n > 0 {
		if _, err := w.f.WriteAt(w.buf[:w.n], w.off); err != nil {
			return err
		}
		w.off += int64(w.n)
		w.n = 0
	}
	return nil
}
