package sharestore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/sharestore/sharestoretest"
)

func TestMem(t *testing.T) {
	sharestoretest.Run(t, func(t *testing.T, capacity int64) sharestoretest.Corruptible {
		return sharestore.NewMem(capacity)
	}, sharestoretest.Options{})
}

func TestMemCheckBlocks(t *testing.T) {
	sharestoretest.Run(t, func(t *testing.T, capacity int64) sharestoretest.Corruptible {
		m := sharestore.NewMem(capacity)
		m.CheckBlocks = true
		return m
	}, sharestoretest.Options{ChecksBlocks: true})
}

// disks makes disk stores with opt, and the capacity the suite asks for.
func disks(opt sharestore.DiskOptions) sharestoretest.Factory {
	return func(t *testing.T, capacity int64) sharestoretest.Corruptible {
		opt.Capacity = capacity
		d, err := sharestore.OpenDisk(t.TempDir(), opt)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// The store without fsync keeps every other guarantee.
func TestDiskNoSync(t *testing.T) {
	sharestoretest.Run(t, disks(sharestore.DiskOptions{NoSync: true}), sharestoretest.Options{})
}

func TestDisk(t *testing.T) {
	sharestoretest.Run(t, disks(sharestore.DiskOptions{}), sharestoretest.Options{})
}

func TestDiskCheckBlocks(t *testing.T) {
	sharestoretest.Run(t, disks(sharestore.DiskOptions{CheckBlocks: true}), sharestoretest.Options{ChecksBlocks: true})
}

// A reopened store finds its shares and usage again, and clears what a
// crash left half-written.
func TestDiskReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 2, N: 4, SegmentSize: 1000}, codec.NewKey(), bytes.Repeat([]byte("q"), 3000))
	if err != nil {
		t.Fatal(err)
	}
	for i, sh := range shares {
		if _, err := d.Put(ctx, sharestore.Key{SI: rc.Key.StorageIndex(), Share: i}, bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor([]byte("s"))); err != nil {
			t.Fatal(err)
		}
	}
	// A crash mid-upload leaves a temp file behind.
	leftover := filepath.Join(dir, "tmp", "crashed.tmp")
	if err := os.WriteFile(leftover, shares[0][:100], 0o600); err != nil {
		t.Fatal(err)
	}
	before := d.Usage()
	d2, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after := d2.Usage(); after.Used != before.Used || after.Shares != 4 {
		t.Fatalf("usage after reopen %+v, before %+v", after, before)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file not removed: %v", err)
	}
	for i := range shares {
		if _, err := d2.Scrub(ctx, sharestore.Key{SI: rc.Key.StorageIndex(), Share: i}); err != nil {
			t.Fatalf("share %d after reopen: %v", i, err)
		}
	}
}

// TestDiskConcurrentShares: many shares of one object and of others,
// arriving at once on one store, are all stored whole; the store reopens
// with all of them.
func TestDiskConcurrentShares(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := codec.Params{K: 3, N: 12, SegmentSize: 1 << 20} // 2 MiB shares: several direct-write buffers each
	type obj struct {
		si     [16]byte
		shares [][]byte
	}
	var objs []obj
	for i := range 3 {
		rc, shares, err := codec.EncodeAll(p, codec.NewKey(), bytes.Repeat([]byte{byte(i)}, 6<<20))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, obj{rc.Key.StorageIndex(), shares})
	}
	errs := make(chan error, 36)
	for _, o := range objs {
		for i, sh := range o.shares {
			go func() {
				_, err := d.Put(ctx, sharestore.Key{SI: o.si, Share: i}, bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor([]byte("s")))
				errs <- err
			}()
		}
	}
	for range 36 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	d2, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := d2.Usage(); u.Shares != 36 {
		t.Fatalf("%d shares after reopen, want 36", u.Shares)
	}
	for _, o := range objs {
		for i := range o.shares {
			if _, err := d2.Scrub(ctx, sharestore.Key{SI: o.si, Share: i}); err != nil {
				t.Fatalf("share %d: %v", i, err)
			}
		}
	}
}

// TestDiskOldLayout: a store written in the earlier layout, a directory
// per storage index (shares/ab/<SI>/<n>), is moved to the flat one on
// open, also when an earlier open was cut short part way; every share
// is found and whole afterwards, and nothing else in the directory is
// touched.
func TestDiskOldLayout(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := codec.Params{K: 2, N: 5, SegmentSize: 4096}
	var sis [][16]byte
	for i := range 3 {
		rc, shares, err := codec.EncodeAll(p, codec.NewKey(), bytes.Repeat([]byte{byte(i)}, 10000))
		if err != nil {
			t.Fatal(err)
		}
		si := rc.Key.StorageIndex()
		sis = append(sis, si)
		for n, sh := range shares {
			if _, err := d.Put(ctx, sharestore.Key{SI: si, Share: n}, bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor([]byte("s"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Back to the old layout, by hand: all of the first two objects, and
	// shares 0-2 of the third (an interrupted move); an unknown file in
	// one old directory must survive.
	for i, si := range sis {
		h := hex.EncodeToString(si[:])
		prefix := filepath.Join(dir, "shares", h[:2])
		if err := os.MkdirAll(filepath.Join(prefix, h), 0o700); err != nil {
			t.Fatal(err)
		}
		for n := range 5 {
			if i == 2 && n > 2 {
				break
			}
			if err := os.Rename(filepath.Join(prefix, h+"."+strconv.Itoa(n)), filepath.Join(prefix, h, strconv.Itoa(n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	h0 := hex.EncodeToString(sis[0][:])
	stray := filepath.Join(dir, "shares", h0[:2], h0, "notes.txt")
	if err := os.WriteFile(stray, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err = sharestore.OpenDisk(dir, sharestore.DiskOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := d.Usage(); u.Shares != 15 {
		t.Fatalf("%d shares after the move, want 15", u.Shares)
	}
	for i, si := range sis {
		infos, err := d.List(ctx, si)
		if err != nil || len(infos) != 5 {
			t.Fatalf("object %d: List = %d shares, %v", i, len(infos), err)
		}
		for n := range 5 {
			if _, err := d.Scrub(ctx, sharestore.Key{SI: si, Share: n}); err != nil {
				t.Fatalf("object %d share %d: %v", i, n, err)
			}
		}
		h := hex.EncodeToString(si[:])
		_, err = os.Stat(filepath.Join(dir, "shares", h[:2], h))
		if i == 0 && err != nil {
			t.Fatalf("the directory holding a stray file was removed: %v", err)
		}
		if i > 0 && !os.IsNotExist(err) {
			t.Fatalf("object %d: old directory left behind (%v)", i, err)
		}
	}
	if b, err := os.ReadFile(stray); err != nil || string(b) != "mine" {
		t.Fatalf("stray file: %q, %v", b, err)
	}
	// A share deleted after the move is gone from List and usage.
	if _, err := d.Delete(ctx, sharestore.Key{SI: sis[1], Share: 3}, []byte("s")); err != nil {
		t.Fatal(err)
	}
	if infos, _ := d.List(ctx, sis[1]); len(infos) != 4 || d.Usage().Shares != 14 {
		t.Fatalf("after delete: List %d, usage %+v", len(infos), d.Usage())
	}
}

// A share file ends on a block boundary, zeros past the share, and its
// record holds the share's length; a file of the earlier format (no
// length, nothing past the share) still reads; a length the file cannot
// hold is corruption.
func TestDiskShareLength(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 3, N: 10, SegmentSize: 1 << 20}, codec.NewKey(), bytes.Repeat([]byte{7}, 1<<20+12345))
	if err != nil {
		t.Fatal(err)
	}
	si := rc.Key.StorageIndex()
	h := hex.EncodeToString(si[:])
	for n, sh := range shares[:3] {
		if _, err := d.Put(ctx, sharestore.Key{SI: si, Share: n}, bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor([]byte("s"))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(n int) {
		t.Helper()
		key := sharestore.Key{SI: si, Share: n}
		s, err := d.Open(ctx, key)
		if err != nil {
			t.Fatalf("share %d: %v", n, err)
		}
		defer s.Close()
		if s.Info().Size != int64(len(shares[n])) {
			t.Fatalf("share %d: size %d, want %d", n, s.Info().Size, len(shares[n]))
		}
		got := make([]byte, len(shares[n])+100)
		if m, _ := s.ReadAt(got, 0); m != len(shares[n]) || !bytes.Equal(got[:m], shares[n]) {
			t.Fatalf("share %d: read %d bytes, want the %d stored", n, m, len(shares[n]))
		}
		if seq, ok := s.(sharestore.Sequential); ok {
			if r := seq.SequentialReader(); r != nil {
				b, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(b, shares[n]) {
					t.Fatalf("share %d: sequential read of %d bytes (%v), want the %d stored", n, len(b), err, len(shares[n]))
				}
			}
		}
		if _, err := d.Scrub(ctx, key); err != nil {
			t.Fatalf("share %d: scrub: %v", n, err)
		}
	}
	path := func(n int) string { return filepath.Join(dir, "shares", h[:2], h+"."+strconv.Itoa(n)) }
	for n := range 3 {
		check(n)
	}
	st, err := os.Stat(path(0))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size()%4096 != 0 && directIO(t, dir) {
		t.Fatalf("share file of %d bytes, not whole blocks", st.Size())
	}
	// Share 1 as the earlier format wrote it: no length, no padding.
	f, err := os.OpenFile(path(1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("QSR1"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 8), 76); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(128 + int64(len(shares[1]))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	check(1)
	// Share 2 cut short: its record says more than the file holds.
	if err := os.Truncate(path(2), 128+int64(len(shares[2]))-1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(ctx, sharestore.Key{SI: si, Share: 2}); !errors.Is(err, sharestore.ErrCorrupt) {
		t.Fatalf("share cut short: Open = %v, want ErrCorrupt", err)
	}
}

// directIO reports whether dir's file system takes O_DIRECT.
func directIO(t *testing.T, dir string) bool {
	p := filepath.Join(dir, "odirect-probe")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	unix.Close(fd)
	os.Remove(p)
	return true
}

// A disk store's leases survive a reopen; a lease file whose share is
// gone (a crash inside a Delete) is removed on open and never given to a
// share stored again; a share of the QSR2 record has one lease that
// never expires, which its delete secret cancels.
func TestDiskLeasesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 3, N: 10, SegmentSize: 4096}, codec.NewKey(), make([]byte, 5000))
	if err != nil {
		t.Fatal(err)
	}
	si := rc.Key.StorageIndex()
	k := func(n int) sharestore.Key { return sharestore.Key{SI: si, Share: n} }
	exp := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	a := sharestore.Lease{ID: sharestore.SecretHash([]byte("ra")), Cancel: sharestore.SecretHash([]byte("ca")), Expires: exp}
	b := sharestore.Lease{ID: sharestore.SecretHash([]byte("rb")), Cancel: sharestore.SecretHash([]byte("cb")), Expires: exp.Add(time.Hour)}
	for n := range 3 {
		if _, err := d.Put(ctx, k(n), bytes.NewReader(shares[n]), int64(len(shares[n])), a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Put(ctx, k(0), bytes.NewReader(shares[0]), -1, b); err != nil {
		t.Fatal(err)
	}
	h := hex.EncodeToString(si[:])
	path := func(n int) string { return filepath.Join(dir, "shares", h[:2], h+"."+strconv.Itoa(n)) }
	// Share 1's lease file left behind by a crash after its share file
	// was removed.
	if err := os.WriteFile(path(1)+".leases", []byte("QSL1\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path(1)); err != nil {
		t.Fatal(err)
	}
	// Share 2 as the QSR2 record wrote it.
	f, err := os.OpenFile(path(2), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("QSR2"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d2, err := sharestore.OpenDisk(dir, sharestore.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path(1) + ".leases"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("orphan lease file after reopen: %v", err)
	}
	got, err := d2.Leases(ctx, k(0))
	if err != nil || len(got) != 2 || got[0].ID != a.ID || !got[1].Expires.Equal(b.Expires) || got[1].Cancel != b.Cancel {
		t.Fatalf("leases after reopen: %+v, %v", got, err)
	}
	got, err = d2.Leases(ctx, k(2))
	if err != nil || len(got) != 1 || !got[0].Expires.IsZero() || got[0].Cancel != a.ID {
		t.Fatalf("leases of a QSR2 share: %+v, %v", got, err)
	}
	if sw, err := d2.Expire(ctx, exp.Add(100*time.Hour)); err != nil || sw.Shares != 1 {
		t.Fatalf("Expire: %+v, %v (want share 0 gone, share 2 kept)", sw, err)
	}
	if _, err := d2.Open(ctx, k(2)); err != nil {
		t.Fatalf("a QSR2 share after expiry: %v", err)
	}
	if _, err := d2.Put(ctx, k(1), bytes.NewReader(shares[1]), -1, b); err != nil {
		t.Fatal(err)
	}
	if got, err := d2.Leases(ctx, k(1)); err != nil || len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("leases of a share stored again: %+v, %v", got, err)
	}
}
