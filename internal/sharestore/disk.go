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
// file: "QSR3", the lease's ID, the object root, the arrival time, the
// share's length, the lease's cancel hash and its expiry (Unix
// nanoseconds, 0: never). The file may end in zeros past the share, up
// to a whole 4 KiB block (the length says where the share ends): so its
// last block goes to the disk with the rest in one O_DIRECT write. A
// "QSR2" record (before leases expired) has the same layout up to the
// length, and one lease, which never expires and which the delete
// secret both renews and cancels; a "QSR1" record (before 2026-11-24)
// has no length either, and its share ends where the file does.
//
// Once a share's leases change after its Put (a second lease, a renewal,
// a cancellation that leaves some), they are all in a file of their own
// beside the share, <share file>.leases, which then stands for the
// record's lease (see leaseFileMagic).
const recordSize = 128

// leaseFileMagic begins a lease file; then a 2-byte count, then each
// lease as its ID, its cancel hash and its expiry (8 bytes, as in the
// record).
const leaseFileMagic = "QSL1"

// leaseSuffix names a share's lease file after its share file.
const leaseSuffix = ".leases"

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
	if err := d.removeOrphanLeases(); err != nil {
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
	copy(rec, "QSR3")
	copy(rec[4:36], lease.ID[:])
	copy(rec[36:68], si.Root[:])
	binary.BigEndian.PutUint64(rec[68:], uint64(info.Created.UnixNano()))
	binary.BigEndian.PutUint64(rec[76:], uint64(n))
	copy(rec[84:116], lease.Cancel[:])
	binary.BigEndian.PutUint64(rec[116:], expiryNanos(lease.Expires))
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
		// A lease file without its share is a crash's leftover (of a
		// Delete): it must not give this share its leases.
		if err := d.removeLeaseFile(key); err != nil {
			d.mu.Unlock()
			return Info{}, err
		}
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
			d.mu.Lock()
			defer d.mu.Unlock()
			_, leases, err := d.readLeases(key)
			if err != nil {
				return Info{}, err
			}
			if err := d.putLeases(key, leases, lease); err != nil {
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
	defer d.mu.Unlock()
	cur, cerr := d.stat(key)
	same := (serr == nil && cerr == nil && cur == old) || (serr != nil && errors.Is(cerr, ErrCorrupt)) || errors.Is(cerr, ErrNotFound)
	if !same {
		return Info{}, fmt.Errorf("sharestore: share %s changed while a damaged copy of it was being replaced", key)
	}
	// The damaged copy's leases stay, where they can be read.
	var oldLeases []Lease
	if cerr == nil {
		if _, ls, err := d.readLeases(key); err == nil {
			oldLeases = ls
		}
	}
	err = d.renameIntoPlace(tmpPath, key)
	committed = err == nil
	if committed && cerr == nil {
		// The damaged copy's bytes were counted (one whose record cannot
		// be read was not: Walk skips it).
		d.space.remove(old.Size)
	}
	if err != nil {
		return Info{}, err
	}
	if len(oldLeases) > 0 {
		if err := d.putLeases(key, oldLeases, lease); err != nil {
			return Info{}, err
		}
	} else if err := d.removeLeaseFile(key); err != nil {
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

// expiryNanos is an expiry as the record and lease file keep it.
func expiryNanos(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

func nanosExpiry(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// readInfo parses the record at the start of an open share file, and
// returns the lease it holds.
func readInfo(f *os.File, key Key) (Info, Lease, error) {
	st, err := f.Stat()
	if err != nil {
		return Info{}, Lease{}, err
	}
	rec := make([]byte, recordSize)
	if _, err := f.ReadAt(rec, 0); err != nil || string(rec[:4]) != "QSR1" && string(rec[:4]) != "QSR2" && string(rec[:4]) != "QSR3" {
		return Info{}, Lease{}, fmt.Errorf("%w: %s has no share record", ErrCorrupt, key)
	}
	info := Info{Key: key, Size: st.Size() - recordSize}
	if rec[3] >= '2' {
		n := binary.BigEndian.Uint64(rec[76:84])
		if n > uint64(info.Size) {
			return Info{}, Lease{}, fmt.Errorf("%w: %s holds %d bytes of its %d", ErrCorrupt, key, info.Size, n)
		}
		info.Size = int64(n)
	}
	var lease Lease
	copy(lease.ID[:], rec[4:36])
	lease.Cancel = lease.ID
	if rec[3] == '3' {
		copy(lease.Cancel[:], rec[84:116])
		lease.Expires = nanosExpiry(binary.BigEndian.Uint64(rec[116:124]))
	}
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

// leasePath is the path of a share's lease file.
func (d *Disk) leasePath(key Key) string { return d.path(key) + leaseSuffix }

// readLeases reads a share's record and its leases: those of its lease
// file if it has one, else the record's. d.mu is held.
func (d *Disk) readLeases(key Key) (Info, []Lease, error) {
	f, err := os.Open(d.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, nil, ErrNotFound
	} else if err != nil {
		return Info{}, nil, err
	}
	info, lease, err := readInfo(f, key)
	f.Close()
	if err != nil {
		return Info{}, nil, err
	}
	b, err := os.ReadFile(d.leasePath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return info, []Lease{lease}, nil
	} else if err != nil {
		return Info{}, nil, err
	}
	leases, err := parseLeases(b)
	if err != nil {
		return Info{}, nil, fmt.Errorf("%w: lease file of %s: %v", ErrCorrupt, key, err)
	}
	return info, leases, nil
}

const leaseLen = 32 + 32 + 8

func parseLeases(b []byte) ([]Lease, error) {
	if len(b) < 6 || string(b[:4]) != leaseFileMagic {
		return nil, errors.New("no lease file header")
	}
	n := int(binary.BigEndian.Uint16(b[4:6]))
	if n > MaxLeases || len(b) != 6+n*leaseLen {
		return nil, fmt.Errorf("%d bytes for %d leases", len(b), n)
	}
	out := make([]Lease, n)
	for i := range out {
		r := b[6+i*leaseLen:]
		copy(out[i].ID[:], r[:32])
		copy(out[i].Cancel[:], r[32:64])
		out[i].Expires = nanosExpiry(binary.BigEndian.Uint64(r[64:72]))
	}
	return out, nil
}

// putLeases writes leases with add added (see addLease), if that changes
// them. d.mu is held.
func (d *Disk) putLeases(key Key, leases []Lease, add Lease) error {
	out, err := addLease(leases, add)
	if err != nil {
		return err
	}
	if slicesEqual(out, leases) {
		return nil
	}
	return d.writeLeases(key, out)
}

func slicesEqual(a, b []Lease) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Cancel != b[i].Cancel || !a[i].Expires.Equal(b[i].Expires) {
			return false
		}
	}
	return true
}

// writeLeases replaces a share's lease file, durably: written in tmp/,
// synced, renamed beside the share, and the directory synced. d.mu is
// held.
func (d *Disk) writeLeases(key Key, leases []Lease) error {
	b := make([]byte, 6, 6+len(leases)*leaseLen)
	copy(b, leaseFileMagic)
	binary.BigEndian.PutUint16(b[4:], uint16(len(leases)))
	for _, l := range leases {
		b = append(b, l.ID[:]...)
		b = append(b, l.Cancel[:]...)
		b = binary.BigEndian.AppendUint64(b, expiryNanos(l.Expires))
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(d.dir, "tmp", shareName(key)+"."+hex.EncodeToString(rnd[:])+leaseSuffix)
	f, err := d.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("sharestore: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = d.sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(tmp, d.leasePath(key))
	}
	if err != nil {
		d.fs.Remove(tmp)
		return fmt.Errorf("sharestore: leases of %s: %w", key, err)
	}
	return d.syncDir(d.prefixDir(key.SI[0]))
}

// removeLeaseFile removes a share's lease file, if it has one. d.mu is
// held.
func (d *Disk) removeLeaseFile(key Key) error {
	err := d.fs.Remove(d.leasePath(key))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("sharestore: %w", err)
}

// removeOrphanLeases removes the lease files whose share is gone (a
// crash between a Delete's two removals leaves one).
func (d *Disk) removeOrphanLeases() error {
	for b := 0; b < 256; b++ {
		names, err := readNames(d.prefixDir(byte(b)))
		if err != nil {
			return err
		}
		for _, name := range names {
			base, ok := strings.CutSuffix(name, leaseSuffix)
			if !ok {
				continue
			}
			if _, ok := parseShareName(base); !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(d.prefixDir(byte(b)), base)); errors.Is(err, fs.ErrNotExist) {
				d.fs.Remove(filepath.Join(d.prefixDir(byte(b)), name))
			}
		}
	}
	return nil
}

// setLeases makes leases a share's leases, removing the share (and then
// its lease file) when there are none; removed says whether it did.
// d.mu is held.
func (d *Disk) setLeases(key Key, info Info, leases []Lease) (removed bool, err error) {
	if len(leases) > 0 {
		return false, d.writeLeases(key, leases)
	}
	if err := d.fs.Remove(d.path(key)); err != nil {
		return false, err
	}
	d.space.remove(info.Size)
	if err := d.removeLeaseFile(key); err != nil {
		return true, err
	}
	return true, d.syncDir(d.prefixDir(key.SI[0]))
}

// Delete implements Store.
func (d *Disk) Delete(ctx context.Context, key Key, secret []byte) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	info, leases, err := d.readLeases(key)
	if err != nil {
		return false, err
	}
	left, err := cancelLease(leases, secret)
	if err != nil {
		return false, err
	}
	return d.setLeases(key, info, left)
}

// Remove implements Store.
func (d *Disk) Remove(ctx context.Context, key Key) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	info, _, err := d.readLeases(key)
	if err != nil {
		return err
	}
	_, err = d.setLeases(key, info, nil)
	return err
}

// Renew implements Store.
func (d *Disk) Renew(ctx context.Context, key Key, secret []byte, expires time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, leases, err := d.readLeases(key)
	if err != nil {
		return err
	}
	out, changed, err := renewLeases(leases, secret, expires)
	if err != nil || !changed {
		return err
	}
	return d.writeLeases(key, out)
}

// AddLease implements Store.
func (d *Disk) AddLease(ctx context.Context, key Key, lease Lease) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, leases, err := d.readLeases(key)
	if err != nil {
		return err
	}
	return d.putLeases(key, leases, lease)
}

// Leases implements Store.
func (d *Disk) Leases(ctx context.Context, key Key) ([]Lease, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, leases, err := d.readLeases(key)
	return leases, err
}

// Expire implements Store. It walks every share; a share whose record or
// lease file cannot be read is left alone (Scrub reports it).
func (d *Disk) Expire(ctx context.Context, before time.Time) (Swept, error) {
	var sw Swept
	err := d.Walk(ctx, func(i Info) error {
		d.mu.Lock()
		defer d.mu.Unlock()
		info, leases, err := d.readLeases(i.Key)
		if err != nil {
			return nil
		}
		left := dropExpired(leases, before)
		if len(left) == len(leases) {
			return nil
		}
		removed, err := d.setLeases(i.Key, info, left)
		if err != nil {
			return err
		}
		sw.Leases += len(leases) - len(left)
		if removed {
			sw.Shares++
			sw.Bytes += info.Size
		}
		return nil
	})
	return sw, err
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
