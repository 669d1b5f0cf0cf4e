package sharestore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
)

// recordSize is the node's own prefix before the share bytes in a share
// file: "QSR2", the lease, the object root, the arrival time, and the
// share's length. The file may end in zeros past the share, up to a
// whole 4 KiB block (the length says where the share ends): so its last
// block goes to the disk with the rest in one O_DIRECT write. A "QSR1"
// record (before 2026-11-24) has no length, and its share ends where the
// file does.
const recordSize = 128

// Disk is a Store in a directory:
//
//	DIR/shares/ab/<storage index hex>.<share number>   record + share
//	DIR/tmp/                                           uploads in flight
//
// An upload is written to DIR/tmp, checked, fsynced and renamed into
// place, and the directory is fsynced, so a share is either absent or
// whole and durable. Leftovers in DIR/tmp from a crash are removed on open.
// Where the file system allows it, share bytes are written with O_DIRECT
// (see directWriter), past the page cache.
//
// Storing a share makes one file and syncs one directory, DIR/shares/ab
// (the storage index's first byte; each of the 256 is made by the first
// share that needs it): a node usually holds one share of an object, and
// a directory per object (Tahoe-LAFS's layout, and this store's until
// 2026-11) cost a mkdir and a second directory sync per share. Stores in
// that layout are moved to this one on open.
type Disk struct {
	dir         string
	noSync      bool
	checkBlocks bool
	space       space
	fs          fileSystem // the writes' file operations: osFS but in tests
	mu          sync.Mutex // serialises commits and deletes of one store
}

// DiskOptions configure a Disk store.
type DiskOptions struct {
	// Capacity is the most bytes of shares to hold; 0: what the disk has.
	Capacity int64
	// NoSync skips fsync: a share is still renamed into place only when
	// whole, so a crashed process never leaves a partial share, but a
	// power loss may lose shares stored in the last seconds. Tahoe-LAFS
	// storage servers work this way; Quilt's default is to sync.
	NoSync bool
	// CheckBlocks hashes every block of every upload on arrival and
	// refuses a share with a block that does not match its hash. Without
	// it, an upload's frame is checked (see the package doc) and its
	// blocks are checked by readers and by Scrub: the transport (TLS)
	// already authenticates every byte, so the hashing only catches an
	// uploader's own mistakes.
	CheckBlocks bool
}

var _ Store = (*Disk)(nil)

// OpenDisk opens (creating if needed) a store in dir.
func OpenDisk(dir string, opt DiskOptions) (*Disk, error) {
	return openDisk(dir, opt, osFS{})
}

// openDisk is OpenDisk with the writes' file operations made through
// fsys.
func openDisk(dir string, opt DiskOptions, fsys fileSystem) (*Disk, error) {
	d := &Disk{dir: dir, noSync: opt.NoSync, checkBlocks: opt.CheckBlocks, fs: fsys}
	d.space.capacity = opt.Capacity
	d.space.diskFree = cachedDiskFree(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sharestore: %w", err)
	}
	made := false
	for _, sub := range []string{"shares", "tmp"} {
		err := fsys.Mkdir(filepath.Join(dir, sub))
		if errors.Is(err, fs.ErrExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("sharestore: %w", err)
		}
		made = true
	}
	// A new store's directories are durable before any share is stored
	// in them: otherwise a power loss could take DIR/shares, and every
	// share acknowledged in it, away.
	if made {
		if err := d.syncDir(dir); err != nil {
			return nil, fmt.Errorf("sharestore: %w", err)
		}
	}
	tmp, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil {
		return nil, fmt.Errorf("sharestore: %w", err)
	}
	for _, e := range tmp {
		fsys.Remove(filepath.Join(dir, "tmp", e.Name()))
	}
	if err := d.movePrefixes(); err != nil {
		return nil, fmt.Errorf("sharestore: %w", err)
	}
	err = d.Walk(context.Background(), func(i Info) error {
		d.space.used += i.Size
		d.space.shares++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// cachedDiskFree returns a function reporting the free bytes of the disk
// under dir, asking the kernel at most every 100 ms: uploads ask on every
// chunk. (Between looks, a full disk still shows as ErrFull: the write
// fails with ENOSPC.)
func cachedDiskFree(dir string) func() int64 {
	var mu sync.Mutex
	var at time.Time
	var free int64
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > 100*time.Millisecond {
			free, at = diskFree(dir), time.Now()
		}
		return free
	}
}

func diskFree(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// prefixDir is the directory of the shares whose storage index begins
// with the byte b.
func (d *Disk) prefixDir(b byte) string {
	return filepath.Join(d.dir, "shares", hex.EncodeToString([]byte{b}))
}

func (d *Disk) path(key Key) string {
	return filepath.Join(d.prefixDir(key.SI[0]), shareName(key))
}

// shareName is a share's file name in its prefix directory.
func shareName(key Key) string {
	return hex.EncodeToString(key.SI[:]) + "." + strconv.Itoa(key.Share)
}

// parseShareName is the inverse of shareName; ok is false for any other
// name.
func parseShareName(name string) (key Key, ok bool) {
	h, n, found := strings.Cut(name, ".")
	if !found {
		return Key{}, false
	}
	si, err := ParseSI(h)
	if err != nil {
		return Key{}, false
	}
	sh, err := strconv.Atoi(n)
	if err != nil || sh < 0 || sh > 255 || strconv.Itoa(sh) != n {
		return Key{}, false
	}
	return Key{SI: si, Share: sh}, true
}

// movePrefixes moves shares stored in the earlier layout (a directory
// per storage index) into their prefix directories. Each step is a
// rename, so a crash part way leaves every share in one place or the
// other, and the next open goes on.
func (d *Disk) movePrefixes() error {
	for b := 0; b < 256; b++ {
		if err := d.moveOldLayout(d.prefixDir(byte(b))); err != nil {
			return err
		}
	}
	return nil
}

// moveOldLayout moves the shares in prefix/<storage index>/<n> to
// prefix/<storage index>.<n> and removes the emptied directories.
func (d *Disk) moveOldLayout(prefix string) error {
	entries, err := os.ReadDir(prefix)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var old []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		si, err := ParseSI(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(prefix, e.Name())
		shares, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, s := range shares {
			n, err := strconv.Atoi(s.Name())
			if err != nil || n < 0 || n > 255 {
				continue
			}
			if err := d.fs.Rename(filepath.Join(dir, s.Name()), filepath.Join(prefix, shareName(Key{SI: si, Share: n}))); err != nil {
				return err
			}
		}
		// The old names gone for good, so a crash cannot leave a share
		// under both.
		if err := d.syncDir(dir); err != nil {
			return err
		}
		old = append(old, dir)
	}
	if len(old) == 0 {
		return nil
	}
	// The new names are durable before the old directories go.
	if err := d.syncDir(prefix); err != nil {
		return err
	}
	for _, dir := range old {
		d.fs.Remove(dir) // only succeeds once empty: anything else is left
	}
	return d.syncDir(prefix)
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Put implements Store.
func (d *Disk) Put(ctx context.Context, key Key, r io.Reader, size int64, lease Lease) (info Info, err error) {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmpPath := filepath.Join(d.dir, "tmp", key.String()[:32]+"."+strconv.Itoa(key.Share)+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := d.fs.Create(tmpPath)
	if isNoSpace(err) {
		return Info{}, fmt.Errorf("%w: %w", ErrFull, err)
	} else if err != nil {
		return Info{}, fmt.Errorf("sharestore: %w", err)
	}
	committed := false
	var n int64
	defer func() {
		if !committed {
			f.Close()
			d.fs.Remove(tmpPath)
		}
		d.space.settle(n, committed)
		if isNoSpace(err) {
			err = fmt.Errorf("%w: %w", ErrFull, err)
		}
	}()
	rec := make([]byte, recordSize)
	if size > 0 {
		// Best effort: allocating the whole file at once is cheaper than
		// block by block, and fails early on a full disk.
		if err := f.Allocate(recordSize + size); isNoSpace(err) {
			return Info{}, err
		}
	}
	// The record is written first as zeros, and for real once the share
	// is checked.
	var w io.Writer
	dw := openDirect(f)
	switch {
	case dw != nil:
		defer dw.abort() // after Close, a no-op
		w = dw
	case d.noSync:
		w = f
	default:
		w = &flusher{f: f}
	}
	if _, err := w.Write(rec); err != nil {
		return Info{}, err
	}
	c, n, err := receive(ctx, key, w, r, size, &d.space, d.checkBlocks)
	if err != nil {
		return Info{}, err
	}
	// The check re-reads the share's tail: from the direct writer's
	// memory where it still is. A write to the disk that failed in the
	// background is the disk's error, not a damaged share.
	var ra io.ReaderAt = f
	if dw != nil {
		if err := dw.wait(); err != nil {
			return Info{}, err
		}
		ra = dw
	}
	si, err := finish(c, io.NewSectionReader(ra, recordSize, n), n)
	if err != nil {
		return Info{}, err
	}
	info = Info{Key: key, Size: n, Root: si.Root, Created: time.Now().UTC()}
	copy(rec, "QSR2")
	copy(rec[4:36], lease[:])
	copy(rec[36:68], si.Root[:])
	binary.BigEndian.PutUint64(rec[68:], uint64(info.Created.UnixNano()))
	binary.BigEndian.PutUint64(rec[76:], uint64(n))
	if dw != nil {
		if err := dw.WriteHead(rec); err != nil {
			return Info{}, err
		}
		if err := dw.Close(); err != nil {
			return Info{}, err
		}
	} else if _, err := f.WriteAt(rec, 0); err != nil {
		return Info{}, err
	}
	if err := d.sync(f); err != nil {
		return Info{}, err
	}
	if err := f.Close(); err != nil {
		return Info{}, err
	}
	// Under the lock: is the share here already, and the rename. The
	// directory fsync comes after it, so that shares arriving together
	// share theirs.
	prefix := d.prefixDir(key.SI[0])
	d.mu.Lock()
	old, serr := d.stat(key)
	if errors.Is(serr, ErrNotFound) {
		err = d.renameIntoPlace(tmpPath, key)
		committed = err == nil
		d.mu.Unlock()
		if err != nil {
			return Info{}, err
		}
		return info, d.syncDir(prefix)
	}
	d.mu.Unlock()
	if serr != nil && !errors.Is(serr, ErrCorrupt) {
		return Info{}, serr
	}
	if serr == nil {
		// A share is here. If it is sound, it stays: the same share again
		// is kept as it is, once durable (the Put that stored it may
		// still be syncing the directory); another is refused.
		_, scrubErr := d.Scrub(ctx, key)
		if scrubErr == nil {
			if old.Root != info.Root {
				return Info{}, ErrExists
			}
			if err := d.syncDir(prefix); err != nil {
				return Info{}, err
			}
			return old, nil
		}
		if !errors.Is(scrubErr, ErrCorrupt) {
			return Info{}, scrubErr
		}
	}
	// The copy here is damaged (or its record is): the new share
	// replaces it, once every block of the new one matches its hash.
	if err := verifyFile(tmpPath, n, info.Root); err != nil {
		return Info{}, err
	}
	d.mu.Lock()
	cur, cerr := d.stat(key)
	same := (serr == nil && cerr == nil && cur == old) || (serr != nil && errors.Is(cerr, ErrCorrupt)) || errors.Is(cerr, ErrNotFound)
	if !same {
		d.mu.Unlock()
		return Info{}, fmt.Errorf("sharestore: share %s changed while a damaged copy of it was being replaced", key)
	}
	err = d.renameIntoPlace(tmpPath, key)
	committed = err == nil
	if committed && cerr == nil {
		// The damaged copy's bytes were counted (one whose record cannot
		// be read was not: Walk skips it).
		d.space.remove(old.Size)
	}
	d.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	return info, d.syncDir(prefix)
}

// renameIntoPlace moves a checked upload to its share's name. d.mu is
// held.
func (d *Disk) renameIntoPlace(tmpPath string, key Key) error {
	err := d.fs.Rename(tmpPath, d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		// The first share under this prefix: the directory is made, and
		// its name made durable, before the share goes in.
		prefix := d.prefixDir(key.SI[0])
		if err = d.fs.Mkdir(prefix); err == nil {
			if err = d.syncDir(filepath.Dir(prefix)); err == nil {
				err = d.fs.Rename(tmpPath, d.path(key))
			}
		}
	}
	return err
}

// verifyFile checks every block of the share of n bytes after the record
// in the file at path, and that it hashes to root.
func verifyFile(path string, n int64, root sharefile.Hash) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return verifyWhole(io.NewSectionReader(f, recordSize, n), n, root)
}

// flusher writes to a file and asks the kernel to start writing each
// completed 4 MiB to disk, so the fsync at the end finds little left to do
// and the disk works while the share arrives.
type flusher struct {
	f       file
	off     int64 // file offset of the next write
	flushed int64 // offset up to which writeback was started
}

const flushEvery = 4 << 20

func (w *flusher) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.flushed >= flushEvery {
		w.f.StartWriteback(w.flushed, w.off-w.flushed)
		w.flushed = w.off
	}
	return n, err
}

func (d *Disk) sync(f file) error {
	if d.noSync {
		return nil
	}
	return f.Sync()
}

func (d *Disk) syncDir(dir string) error {
	if d.noSync {
		return nil
	}
	err := d.fs.SyncDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed meanwhile (its last share deleted): nothing to make durable
	}
	return err
}

// readInfo parses the record at the start of an open share file.
func readInfo(f *os.File, key Key) (Info, Lease, error) {
	st, err := f.Stat()
	if err != nil {
		return Info{}, Lease{}, err
	}
	rec := make([]byte, recordSize)
	if _, err := f.ReadAt(rec, 0); err != nil || string(rec[:4]) != "QSR1" && string(rec[:4]) != "QSR2" {
		return Info{}, Lease{}, fmt.Errorf("%w: %s has no share record", ErrCorrupt, key)
	}
	info := Info{Key: key, Size: st.Size() - recordSize}
	if rec[3] == '2' {
		n := binary.BigEndian.Uint64(rec[76:84])
		if n > uint64(info.Size) {
			return Info{}, Lease{}, fmt.Errorf("%w: %s holds %d bytes of its %d", ErrCorrupt, key, info.Size, n)
		}
		info.Size = int64(n)
	}
	var lease Lease
	copy(lease[:], rec[4:36])
	copy(info.Root[:], rec[36:68])
	info.Created = time.Unix(0, int64(binary.BigEndian.Uint64(rec[68:76]))).UTC()
	return info, lease, nil
}

func (d *Disk) stat(key Key) (Info, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, ErrNotFound
	} else if err != nil {
		return Info{}, err
	}
	defer f.Close()
	info, _, err := readInfo(f, key)
	return info, err
}

type diskShare struct {
	f    *os.File
	info Info
}

func (s *diskShare) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.info.Size {
		return 0, io.EOF
	}
	if rest := s.info.Size - off; int64(len(p)) > rest {
		n, err := s.f.ReadAt(p[:rest], off+recordSize)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.f.ReadAt(p, off+recordSize)
}
func (s *diskShare) Close() error { return s.f.Close() }
func (s *diskShare) Info() Info   { return s.info }

// Open implements Store.
func (d *Disk) Open(ctx context.Context, key Key) (Share, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	} else if err != nil {
		return nil, err
	}
	info, _, err := readInfo(f, key)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &diskShare{f: f, info: info}, nil
}

// List implements Store. It reads all the names in the storage index's
// prefix directory, a 256th of the store's shares: cheap for the stores
// of today (a million shares: ~4,000 names), and the price of making no
// directory per object.
func (d *Disk) List(ctx context.Context, si sharefile.SI) ([]Info, error) {
	names, err := readNames(d.prefixDir(si[0]))
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, name := range names {
		key, ok := parseShareName(name)
		if !ok || key.SI != si {
			continue
		}
		info, err := d.stat(key)
		if err != nil {
			continue // removed meanwhile, or damaged: Scrub reports it
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Share < out[j].Share })
	return out, nil
}

// readNames lists a directory's names, unsorted; none if it is missing.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Walk implements Store.
func (d *Disk) Walk(ctx context.Context, fn func(Info) error) error {
	for b := 0; b < 256; b++ {
		names, err := readNames(d.prefixDir(byte(b)))
		if err != nil {
			return err
		}
		for _, name := range names {
			if err := ctx.Err(); err != nil {
				return err
			}
			key, ok := parseShareName(name)
			if !ok {
				continue
			}
			info, err := d.stat(key)
			if err != nil {
				continue // removed meanwhile, or damaged: Scrub reports it
			}
			if err := fn(info); err != nil {
				return err
			}
		}
	}
	return nil
}

// Delete implements Store.
func (d *Disk) Delete(ctx context.Context, key Key, secret []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	} else if err != nil {
		return err
	}
	info, lease, err := readInfo(f, key)
	f.Close()
	if err != nil {
		return err
	}
	if !lease.opens(secret) {
		return ErrForbidden
	}
	if err := d.fs.Remove(d.path(key)); err != nil {
		return err
	}
	d.space.remove(info.Size)
	return d.syncDir(d.prefixDir(key.SI[0]))
}

// Scrub implements Store.
func (d *Disk) Scrub(ctx context.Context, key Key) (Info, error) {
	s, err := d.Open(ctx, key)
	if err != nil {
		return Info{}, err
	}
	defer s.Close()
	return scrub(s, s.Info())
}

// Usage implements Store.
func (d *Disk) Usage() Usage { return d.space.usage() }

// Corrupt flips one bit of a stored share's byte at off, as a failing disk
// would. It is for tests.
func (d *Disk) Corrupt(key Key, off int64) error {
	f, err := os.OpenFile(d.path(key), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off+recordSize); err != nil {
		return err
	}
	b[0] ^= 1
	_, err = f.WriteAt(b, off+recordSize)
	return err
}
