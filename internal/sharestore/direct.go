package sharestore

import (
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
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
// space for the record, filled in later with WriteHead while the first
// block is still in memory. Close pads the tail that does not fill an
// aligned block with zeros and writes it with the rest: the file ends on
// a block boundary, past the share (see recordSize), and a share that
// fits the buffer is one write.
type directWriter struct {
	f    file       // ordinary descriptor: reads, and writes O_DIRECT refuses
	fd   directFile // O_DIRECT descriptor of the same file; nil once ended
	buf  []byte     // aligned, directBuf long
	n    int        // bytes in buf
	off  int64      // file offset of buf[0]
	head []byte     // the file's first directAlign bytes, written last (see WriteHead)
	// headIn: the record is in buf already (WriteHead came while the
	// file's start was still in buf), so buf is written whole, in one
	// write instead of two.
	headIn bool

	// A full buffer is written in the background while the next fills:
	// the disk works while the share keeps arriving.
	spare    []byte     // the other buffer, being written or free
	inflight chan error // the background write's outcome; nil if none
	err      error      // the first background write's error
}

// wait waits for the background write, if any, and returns the first
// error of any write: once one failed, every later call fails with it.
func (w *directWriter) wait() error {
	if w.inflight != nil {
		if err := <-w.inflight; err != nil && w.err == nil {
			w.err = err
		}
		w.inflight = nil
	}
	return w.err
}

// keepHead keeps the file's first block back (for WriteHead) when buf
// starts the file, and returns how many bytes of buf that leaves out.
func (w *directWriter) keepHead() int {
	if w.off != 0 || w.head != nil || w.headIn {
		return 0
	}
	w.head = alignedBuf(directAlign)
	copy(w.head, w.buf[:directAlign])
	return directAlign
}

// flushFull starts writing the full buffer in the background and swaps
// in the spare one.
func (w *directWriter) flushFull() error {
	if err := w.wait(); err != nil {
		return err
	}
	done := w.keepHead()
	if w.spare == nil {
		w.spare = getBuf()
	}
	full, at := w.buf, w.off
	w.inflight = make(chan error, 1)
	go func() { w.inflight <- w.pwrite(full[done:], at+int64(done)) }()
	w.buf, w.spare = w.spare, full
	w.off += int64(len(full))
	w.n = 0
	return nil
}

// openDirect opens f a second time with O_DIRECT for writing, or
// returns nil if the file system refuses it (tmpfs, some FUSE mounts):
// the caller then writes through f as usual.
func openDirect(f file) *directWriter {
	fd, err := f.OpenDirect()
	if err != nil {
		return nil
	}
	return &directWriter{f: f, fd: fd, buf: getBuf()}
}

// Write gathers p and writes every full buffer with O_DIRECT.
func (w *directWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		c := copy(w.buf[w.n:], p)
		w.n += c
		p = p[c:]
		if w.n == len(w.buf) {
			if err := w.flushFull(); err != nil {
				return total - len(p) - c, err
			}
		}
	}
	return total, nil
}

// Free returns the unfilled rest of the buffer, for a caller to read
// into directly instead of handing bytes to Write; Filled says how much
// of it was filled.
func (w *directWriter) Free() []byte { return w.buf[w.n:] }

// Filled records that the first m bytes of Free were filled, writing the
// buffer out once full.
func (w *directWriter) Filled(m int) error {
	w.n += m
	if w.n == len(w.buf) {
		return w.flushFull()
	}
	return nil
}

// flush writes the first m bytes of buf (m a multiple of directAlign) at
// w.off and moves what follows them to the front. The file's first block
// is kept back, for WriteHead.
func (w *directWriter) flush(m int) error {
	if err := w.wait(); err != nil {
		return err
	}
	done := w.keepHead()
	if err := w.pwrite(w.buf[done:m], w.off+int64(done)); err != nil {
		return err
	}
	w.off += int64(m)
	w.n = copy(w.buf, w.buf[m:w.n])
	return nil
}

// pwrite writes b (aligned) at offset at with O_DIRECT.
func (w *directWriter) pwrite(b []byte, at int64) error {
	for done := 0; done < len(b); {
		k, err := w.fd.Pwrite(b[done:], at+int64(done))
		if errors.Is(err, syscall.EINVAL) {
			// A file system that opened the file with O_DIRECT but
			// refuses the write: write through the page cache.
			_, err := w.f.WriteAt(b[done:], at+int64(done))
			return err
		}
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: err}
		}
		if k == 0 || k%directAlign != 0 && done+k < len(b) {
			return &os.PathError{Op: "write", Path: w.f.Name(), Err: syscall.EIO}
		}
		done += k
	}
	return nil
}

// WriteHead replaces the file's first len(rec) bytes (at most a block),
// which Write was given as a placeholder. The first block is still in
// memory, so this costs no read of it back from the disk.
func (w *directWriter) WriteHead(rec []byte) error {
	if err := w.wait(); err != nil {
		return err
	}
	switch {
	case w.head != nil:
		copy(w.head, rec)
	case w.off == 0 && w.n >= len(rec):
		copy(w.buf, rec)
		w.headIn = true
	default:
		_, err := w.f.WriteAt(rec, 0)
		return err
	}
	return nil
}

// ReadAt reads what was written so far, from memory where it still is
// (the kept first block, the buffer) and from the file for the rest.
func (w *directWriter) ReadAt(p []byte, off int64) (int, error) {
	if err := w.wait(); err != nil {
		return 0, err
	}
	end := w.off + int64(w.n)
	total := 0
	for len(p) > 0 {
		if off >= end {
			return total, io.EOF
		}
		var k int
		switch {
		case w.head != nil && off < directAlign:
			k = copy(p, w.head[off:])
		case off >= w.off:
			k = copy(p, w.buf[off-w.off:w.n])
		default:
			q := p[:min(int64(len(p)), w.off-off)]
			n, err := w.f.ReadAt(q, off)
			if n < len(q) {
				return total + n, errors.Join(err, io.ErrUnexpectedEOF)
			}
			k = n
		}
		total += k
		p = p[k:]
		off += int64(k)
	}
	return total, nil
}

// abort ends an upload given up on: it waits for the background write
// and closes the O_DIRECT descriptor, writing nothing more.
func (w *directWriter) abort() {
	if w.fd == nil {
		return // already ended
	}
	w.wait()
	w.fd.Close()
	w.fd = nil
	putBuf(w.buf)
	if w.spare != nil {
		putBuf(w.spare)
	}
	w.buf, w.spare = nil, nil
}

// Close writes what is left, the last block padded with zeros, and
// closes the O_DIRECT descriptor. It does not sync.
func (w *directWriter) Close() error {
	defer w.abort()
	if err := w.wait(); err != nil {
		return err
	}
	if w.n > 0 {
		a := (w.n + directAlign - 1) / directAlign * directAlign
		clear(w.buf[w.n:a])
		w.n = a
		if err := w.flush(a); err != nil {
			return err
		}
	}
	if w.head != nil {
		return w.pwrite(w.head, 0)
	}
	return nil
}

// Sequential is implemented by shares that can stream a long range more
// cheaply than through ReadAt. SequentialReader returns nil if it cannot;
// the caller closes what it returns.
type Sequential interface {
	SequentialReader() io.ReadSeekCloser
}

// SequentialReader implements Sequential: a reader of the share's bytes
// that reads the file with O_DIRECT, in aligned chunks growing from 128
// KiB to 1 MiB, the next chunk read while the current one is consumed.
// Like the writes, these reads bypass the page cache: a node serving an
// object does not fill its memory with it.
func (s *diskShare) SequentialReader() io.ReadSeekCloser {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(s.f.Fd())), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	r := &directReader{f: s.f, fd: fd, size: s.info.Size, chunk: 128 << 10}
	for i := range r.bufs {
		r.bufs[i] = getBuf()
	}
	return r
}

// freeBufs keeps up to 32 aligned directBuf-sized buffers for direct
// I/O between uses. Not a sync.Pool: that is emptied at every garbage
// collection, and a new buffer is fresh memory the kernel (and, on a
// virtual machine, the host) must supply page by page.
var freeBufs = make(chan []byte, 32)

func getBuf() []byte {
	select {
	case b := <-freeBufs:
		return b
	default:
		return alignedBuf(directBuf)
	}
}

func putBuf(b []byte) {
	select {
	case freeBufs <- b:
	default:
	}
}

// alignedBuf returns n bytes starting at a directAlign boundary.
func alignedBuf(n int) []byte {
	raw := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&raw[0])) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return raw[skip : skip+n]
}

// directReader is a share's bytes read through an O_DIRECT descriptor.
// File offset = share offset + recordSize.
type directReader struct {
	// mu makes Close wait for a Read in progress: http.ServeContent reads
	// a multi-range answer from a goroutine of its own, which may still
	// be reading when the handler returns and closes the reader.
	mu     sync.Mutex
	closed bool

	f     *os.File // the ordinary descriptor, if O_DIRECT reads are refused
	fd    int
	size  int64 // share size
	pos   int64 // share offset of the next Read
	bufs  [2][]byte
	cur   []byte // bytes of the current chunk
	curAt int64  // share offset of cur[0]
	chunk int    // size of the next chunk read

	pending chan chunkRead // the read of the next chunk, or nil
	pendAt  int64          // its file offset
}

type chunkRead struct {
	n   int
	err error
}

// readChunk reads up to len(b) bytes at file offset at (aligned).
// A file system that opened the file with O_DIRECT but refuses the read
// (EINVAL) is read through f instead.
func readChunk(fd int, f *os.File, b []byte, at int64) chunkRead {
	done := 0
	for done < len(b) {
		k, err := unix.Pread(fd, b[done:], at+int64(done))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EINVAL) {
			n, err := f.ReadAt(b[done:], at+int64(done))
			if err == io.EOF {
				err = nil
			}
			return chunkRead{done + n, err}
		}
		if err != nil {
			return chunkRead{done, err}
		}
		if k == 0 {
			break
		}
		done += k
		if k%directAlign != 0 {
			break // end of file
		}
	}
	return chunkRead{n: done}
}

// fetch makes cur the chunk holding share offset pos.
func (r *directReader) fetch() error {
	fileAt := (r.pos + recordSize) &^ (directAlign - 1)
	var res chunkRead
	if r.pending != nil {
		res = <-r.pending
		r.pending = nil
		if r.pendAt != fileAt { // a seek: the prefetched chunk is not wanted
			res = readChunk(r.fd, r.f, r.bufs[1][:r.chunk], fileAt)
		}
	} else {
		res = readChunk(r.fd, r.f, r.bufs[1][:r.chunk], fileAt)
	}
	r.bufs[0], r.bufs[1] = r.bufs[1], r.bufs[0]
	if res.err != nil {
		return &os.PathError{Op: "read", Path: "share", Err: res.err}
	}
	b := r.bufs[0][:res.n]
	start := int64(0)
	if fileAt < recordSize {
		start = recordSize - fileAt
	}
	if int64(len(b)) <= start {
		return io.ErrUnexpectedEOF
	}
	r.cur, r.curAt = b[start:], fileAt+start-recordSize
	if end := r.curAt + int64(len(r.cur)); end > r.size {
		r.cur = r.cur[:r.size-r.curAt]
	}
	if r.pos < r.curAt || r.pos >= r.curAt+int64(len(r.cur)) {
		return io.ErrUnexpectedEOF
	}
	next := fileAt + int64(res.n)
	r.chunk = min(2*r.chunk, directBuf)
	if res.n%directAlign == 0 && next < r.size+recordSize {
		r.pending, r.pendAt = make(chan chunkRead, 1), next
		b, fd, f, done := r.bufs[1][:r.chunk], r.fd, r.f, r.pending
		go func() { done <- readChunk(fd, f, b, next) }()
	}
	return nil
}

// Read implements io.Reader.
func (r *directReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, os.ErrClosed
	}
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.pos < r.curAt || r.pos >= r.curAt+int64(len(r.cur)) {
		if err := r.fetch(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.cur[r.pos-r.curAt:])
	r.pos += int64(n)
	return n, nil
}

// Seek implements io.Seeker.
func (r *directReader) Seek(off int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch whence {
	case io.SeekCurrent:
		off += r.pos
	case io.SeekEnd:
		off += r.size
	}
	if off < 0 {
		return 0, errors.New("sharestore: seek before the start of a share")
	}
	r.pos = off
	return off, nil
}

// Close waits for a read in flight and closes the descriptor.
func (r *directReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return os.ErrClosed
	}
	r.closed = true
	if r.pending != nil {
		<-r.pending
		r.pending = nil
	}
	for i, b := range r.bufs {
		if b != nil {
			putBuf(b)
			r.bufs[i] = nil
		}
	}
	r.cur = nil
	return unix.Close(r.fd)
}
