package sharestore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

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

// TestDiskConcurrentShares: many shares of one object (one new directory)
// and of others arriving at once on one store are all stored whole, the
// ones that did not make a directory waiting for the one that did; the
// store reopens with all of them.
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
