package sharestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
)

// testShare is a share and its key.
type testShare struct {
	key  Key
	data []byte
}

// encodeShares returns the n shares (k needed) of a random object of
// size bytes whose storage index does not start with any byte of avoid:
// so that its shares need a prefix directory of their own.
func encodeShares(t *testing.T, k, n, size int, avoid ...byte) []testShare {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for range 100 {
		rc, shares, err := codec.EncodeAll(codec.Params{K: k, N: n, SegmentSize: 1 << 20}, codec.NewKey(), data)
		if err != nil {
			t.Fatal(err)
		}
		si := rc.Key.StorageIndex()
		if bytes.IndexByte(avoid, si[0]) >= 0 {
			continue
		}
		out := make([]testShare, len(shares))
		for i, sh := range shares {
			out[i] = testShare{Key{SI: si, Share: i}, sh}
		}
		return out
	}
	t.Fatal("no storage index outside the prefixes to avoid")
	return nil
}

var testLease = LeaseFor([]byte("s"))

func (s testShare) put(d *Disk) error {
	_, err := d.Put(context.Background(), s.key, bytes.NewReader(s.data), int64(len(s.data)), testLease)
	return err
}

// checkStore checks what a store holds: every file under shares/ is a
// share under its right name that verifies (nothing partial is ever
// served), Walk and Usage agree, and uploads in flight left nothing in
// tmp/. It returns the shares present.
func checkStore(t *testing.T, d *Disk) map[Key]bool {
	t.Helper()
	ctx := context.Background()
	present := map[Key]bool{}
	err := filepath.WalkDir(filepath.Join(d.dir, "shares"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if base, ok := strings.CutSuffix(e.Name(), leaseSuffix); ok {
			// A lease file, beside its share (one without its share is
			// removed on open).
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), base)); err != nil {
				return fmt.Errorf("lease file %s without its share: %v", path, err)
			}
			return nil
		}
		key, ok := parseShareName(e.Name())
		if !ok || filepath.Base(filepath.Dir(path)) != fmt.Sprintf("%02x", key.SI[0]) {
			return fmt.Errorf("stray file %s", path)
		}
		if _, err := d.Scrub(ctx, key); err != nil {
			return fmt.Errorf("share file %s: %v", path, err)
		}
		present[key] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	walked := 0
	if err := d.Walk(ctx, func(i Info) error { used += i.Size; walked++; return nil }); err != nil {
		t.Fatal(err)
	}
	if u := d.Usage(); u.Used != used || u.Shares != walked || walked != len(present) {
		t.Fatalf("usage %+v; Walk finds %d shares of %d bytes; %d share files", u, walked, used, len(present))
	}
	if tmp, err := os.ReadDir(filepath.Join(d.dir, "tmp")); err != nil || len(tmp) > 0 {
		t.Fatalf("tmp/ holds %d files (%v)", len(tmp), err)
	}
	return present
}

// mustHold checks the store serves s, byte for byte, in Open and List.
func mustHold(t *testing.T, d *Disk, s testShare) {
	t.Helper()
	ctx := context.Background()
	sh, err := d.Open(ctx, s.key)
	if err != nil {
		t.Fatalf("share %s: %v", s.key, err)
	}
	defer sh.Close()
	got, err := io.ReadAll(io.NewSectionReader(sh, 0, sh.Info().Size))
	if err != nil || !bytes.Equal(got, s.data) {
		t.Fatalf("share %s: read %d bytes (%v), not the %d stored", s.key, len(got), err, len(s.data))
	}
	list, err := d.List(ctx, s.key.SI)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range list {
		if i.Key == s.key {
			return
		}
	}
	t.Fatalf("share %s missing from List", s.key)
}

func mustLack(t *testing.T, d *Disk, key Key) {
	t.Helper()
	if _, err := d.Open(context.Background(), key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("share %s: Open = %v, want ErrNotFound", key, err)
	}
}

// TestDiskFaults fails each file operation of a Put, once, with ENOSPC
// and with EIO, with and without O_DIRECT: the Put returns an error
// (ErrFull for ENOSPC), nothing half-written is served, the space
// accounting is what it was, and the store takes the same share next.
func TestDiskFaults(t *testing.T) {
	small := encodeShares(t, 2, 3, 3000)
	// Shares of 4.5 MiB: past flushEvery (sync_file_range) and directBuf
	// (O_DIRECT writes in the background), in a prefix of their own
	// (mkdir).
	big := encodeShares(t, 2, 3, 9<<20, small[0].key.SI[0])
	// op#n: the n-th such operation of the Put fails (the first rename
	// finds no prefix directory; the second directory sync is the one
	// after the share is in place).
	ops := []string{"create", "fallocate", "open_direct", "write", "pwrite", "pwrite#4", "sync_file_range", "fsync", "mkdir", "rename", "rename#2", "fsync_dir", "fsync_dir#2"}
	for _, direct := range []bool{false, true} {
		// The operations each kind of Put makes: the test fails if one
		// is not reached.
		reached := map[string]bool{"create": true, "fallocate": true, "open_direct": true, "fsync": true, "mkdir": true, "rename": true, "fsync_dir": true}
		if direct {
			reached["pwrite"] = true
			reached["pwrite#4"] = true // the last in the background
		} else {
			reached["write"], reached["sync_file_range"] = true, true
		}
		for _, opn := range ops {
			op, nth := opn, 1
			if o, n, ok := strings.Cut(opn, "#"); ok {
				op, nth = o, int(n[0]-'0')
			}
			for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
				t.Run(fmt.Sprintf("direct=%v/%s/%s", direct, opn, errno), func(t *testing.T) {
					root := t.TempDir()
					ffs := newFaultFS(t, root, direct)
					d, err := openDisk(root, DiskOptions{}, ffs)
					if err != nil {
						t.Fatal(err)
					}
					if err := small[0].put(d); err != nil {
						t.Fatal(err)
					}
					before := d.Usage()
					seen, hits := 0, 0
					ffs.mu.Lock()
					ffs.inject = func(o, _ string) error {
						if o != op {
							return nil
						}
						if seen++; seen == nth {
							hits++
							return errno
						}
						return nil
					}
					ffs.mu.Unlock()
					err = big[0].put(d)
					ffs.mu.Lock()
					ffs.inject = nil
					ffs.mu.Unlock()
					if hits == 0 {
						if reached[opn] {
							t.Fatalf("a Put made no %s", op)
						}
						if err != nil {
							t.Fatal(err)
						}
						return
					}
					// Failures a Put works around: a refused fallocate
					// (but for a full disk), O_DIRECT, writeback hint.
					tolerated := op == "open_direct" || op == "sync_file_range" || op == "fallocate" && errno == syscall.EIO
					switch {
					case err == nil && !tolerated:
						t.Fatalf("Put succeeded through a failed %s", op)
					case err != nil && tolerated:
						t.Fatalf("Put failed on a %s failure it can work around: %v", op, err)
					case errors.Is(err, ErrCorrupt):
						t.Fatalf("a failed %s blamed on the share: %v", op, err)
					case err != nil && errno == syscall.ENOSPC && !errors.Is(err, ErrFull):
						t.Fatalf("Put on a full disk: %v, not ErrFull", err)
					case err != nil && !errors.Is(err, errno):
						t.Fatalf("Put: %v, does not say %v", err, errno)
					}
					present := checkStore(t, d)
					mustHold(t, d, small[0])
					want := before.Used
					switch {
					case err == nil:
						mustHold(t, d, big[0])
						want += int64(len(big[0].data))
					case opn == "fsync_dir#2":
						// The last directory sync failed after the share
						// was in place: whole, and counted.
						if !present[big[0].key] {
							t.Fatal("share renamed into place is not there")
						}
						mustHold(t, d, big[0])
						want += int64(len(big[0].data))
					default:
						mustLack(t, d, big[0].key)
					}
					if u := d.Usage(); u.Used != want {
						t.Fatalf("%d bytes used after the fault, want %d", u.Used, want)
					}
					// The store goes on: the same share, and another.
					for _, s := range []testShare{big[0], small[1]} {
						if err := s.put(d); err != nil {
							t.Fatal(err)
						}
						mustHold(t, d, s)
					}
					checkStore(t, d)
					d2, err := OpenDisk(root, DiskOptions{})
					if err != nil {
						t.Fatal(err)
					}
					if len(checkStore(t, d2)) != 3 {
						t.Fatal("reopened store lacks a share")
					}
				})
			}
		}
	}
}

// TestDiskCrashAtEveryStep runs a store's life (open, Puts under a new
// prefix and an existing one, a share past directBuf, the same share
// again, a Delete) and crashes the machine before its first file
// operation, then before its second, and so on to the end, with and
// without O_DIRECT. After each crash the store is reopened on what the
// crash kept (see crashKeeps): every share whose Put returned is there
// and verifies, every share whose Delete returned is gone, the share of
// the operation cut off is absent or whole, never partial; tmp/ is
// empty and the store takes new shares.
func TestDiskCrashAtEveryStep(t *testing.T) {
	small := encodeShares(t, 2, 3, 3000)
	big := encodeShares(t, 2, 3, 2200<<10, small[0].key.SI[0]) // 1.1 MiB shares
	other := encodeShares(t, 2, 3, 1000)
	type action struct {
		del bool
		s   testShare
	}
	life := []action{{s: small[0]}, {s: small[1]}, {s: big[0]}, {s: small[1]}, {del: true, s: small[0]}, {s: small[2]}}
	for _, direct := range []bool{false, true} {
		steps := 0
		for crashAt := 1; ; crashAt++ {
			if crashAt > 500 {
				t.Fatal("the store's life takes over 500 operations")
			}
			root := t.TempDir()
			ffs := newFaultFS(t, root, direct)
			ffs.crashAt = crashAt
			// state: true, the share must be there; false, it must not;
			// missing, it may be either (its operation was cut off).
			state := map[Key]bool{}
			for _, a := range life {
				state[a.s.key] = false
			}
			d, err := openDisk(root, DiskOptions{}, ffs)
			for _, a := range life {
				if err != nil {
					break
				}
				was := state[a.s.key]
				if a.del {
					delete(state, a.s.key)
					_, err = d.Delete(context.Background(), a.s.key, []byte("s"))
				} else {
					if !was {
						delete(state, a.s.key)
					}
					err = a.s.put(d)
				}
				if err == nil {
					state[a.s.key] = !a.del
				}
			}
			if err != nil && !errors.Is(err, errCrashed) {
				t.Fatalf("direct=%v, crash at %d: an error not the crash's: %v", direct, crashAt, err)
			}
			if !ffs.crashed {
				steps = crashAt - 1
				break
			}
			for keep := keepSynced; keep <= keepAll; keep++ {
				clone := filepath.Join(t.TempDir(), "after")
				ffs.crashClone(t, clone, keep)
				d, err := OpenDisk(clone, DiskOptions{})
				if err != nil {
					t.Fatalf("direct=%v, crash at %d, %v: reopen: %v", direct, crashAt, keep, err)
				}
				present := checkStore(t, d)
				for _, s := range append(append([]testShare{}, small...), big[0]) {
					must, known := state[s.key]
					switch {
					case known && must || !known && present[s.key]:
						if !present[s.key] {
							t.Fatalf("direct=%v, crash at %d, %v: acknowledged share %s lost", direct, crashAt, keep, s.key)
						}
						mustHold(t, d, s)
					default:
						mustLack(t, d, s.key)
					}
				}
				if err := other[0].put(d); err != nil {
					t.Fatalf("direct=%v, crash at %d, %v: a Put after reopening: %v", direct, crashAt, keep, err)
				}
				mustHold(t, d, other[0])
			}
		}
		t.Logf("direct=%v: crashed at each of %d steps", direct, steps)
	}
}

// TestDiskDeleteFaults fails the removal, and the directory sync after
// it, of a Delete: the Delete fails; the share is there whole and
// counted, or (once removed) gone and not counted; the store goes on.
func TestDiskDeleteFaults(t *testing.T) {
	shares := encodeShares(t, 2, 3, 3000)
	for _, op := range []string{"remove", "fsync_dir"} {
		for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EIO} {
			t.Run(op+"/"+errno.Error(), func(t *testing.T) {
				root := t.TempDir()
				ffs := newFaultFS(t, root, false)
				d, err := openDisk(root, DiskOptions{}, ffs)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range shares[:2] {
					if err := s.put(d); err != nil {
						t.Fatal(err)
					}
				}
				before := d.Usage()
				ffs.mu.Lock()
				ffs.inject = func(o, _ string) error {
					if o == op {
						return errno
					}
					return nil
				}
				ffs.mu.Unlock()
				_, err = d.Delete(context.Background(), shares[0].key, []byte("s"))
				ffs.mu.Lock()
				ffs.inject = nil
				ffs.mu.Unlock()
				if !errors.Is(err, errno) {
					t.Fatalf("Delete = %v, want an error saying %v", err, errno)
				}
				present := checkStore(t, d)
				mustHold(t, d, shares[1])
				want := before.Used
				if op == "remove" {
					mustHold(t, d, shares[0])
				} else {
					if present[shares[0].key] {
						t.Fatal("the share is still there after its removal")
					}
					want -= int64(len(shares[0].data))
				}
				if u := d.Usage(); u.Used != want {
					t.Fatalf("%d bytes used after the failed Delete, want %d", u.Used, want)
				}
				if _, err := d.Delete(context.Background(), shares[1].key, []byte("s")); err != nil {
					t.Fatal(err)
				}
				if err := shares[2].put(d); err != nil {
					t.Fatal(err)
				}
				mustHold(t, d, shares[2])
			})
		}
	}
}

// TestDiskCrashSameShareTwice: a share arrives twice at once; the second
// Put finds it renamed into place while the first is still to sync its
// directory, and returns. The machine crashes before the first's sync:
// the share, acknowledged by the second Put, must still be there.
func TestDiskCrashSameShareTwice(t *testing.T) {
	shares := encodeShares(t, 2, 3, 3000)
	s := shares[0]
	root := t.TempDir()
	ffs := newFaultFS(t, root, false)
	d, err := openDisk(root, DiskOptions{}, ffs)
	if err != nil {
		t.Fatal(err)
	}
	if err := shares[1].put(d); err != nil { // the prefix directory exists
		t.Fatal(err)
	}
	prefix := d.prefixDir(s.key.SI[0])
	held, release := make(chan struct{}), make(chan struct{})
	first := true
	ffs.mu.Lock()
	ffs.inject = func(op, path string) error {
		if op != "fsync_dir" || path != prefix || !first {
			return nil
		}
		// The first Put's directory sync waits (ffs.mu held by step is
		// let go meanwhile), and finds the machine down.
		first = false
		ffs.mu.Unlock()
		close(held)
		<-release
		ffs.mu.Lock()
		if ffs.crashed {
			return errCrashed
		}
		return nil
	}
	ffs.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- s.put(d) }()
	select {
	case <-held:
	case err := <-errc:
		t.Fatalf("the first Put returned (%v) without syncing the directory", err)
	}
	if err := s.put(d); err != nil {
		t.Fatalf("the second Put: %v", err)
	}
	ffs.mu.Lock()
	ffs.crashed = true
	ffs.mu.Unlock()
	close(release)
	if err := <-errc; !errors.Is(err, errCrashed) {
		t.Fatalf("the first Put: %v, want the crash", err)
	}
	clone := filepath.Join(t.TempDir(), "after")
	ffs.crashClone(t, clone, keepSynced)
	d2, err := OpenDisk(clone, DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, d2)
	mustHold(t, d2, s)
	mustHold(t, d2, shares[1])
}

// TestDiskLeasesCrashAtEveryStep runs a share's lease life (a Put with a
// lease that expires, a second lease added, the first renewed, the
// second cancelled, the first cancelled, which deletes the share) and
// crashes the machine before each of its file operations in turn. After
// each crash the reopened store holds the share with the leases of the
// last change acknowledged, or of the change cut off, whole; or, once
// the last cancel was reached, no share and no lease file.
func TestDiskLeasesCrashAtEveryStep(t *testing.T) {
	sh := encodeShares(t, 2, 3, 3000)[0]
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Lease{ID: SecretHash([]byte("ra")), Cancel: SecretHash([]byte("ca")), Expires: t0}
	b := Lease{ID: SecretHash([]byte("rb")), Cancel: SecretHash([]byte("cb")), Expires: t0.Add(time.Hour)}
	a2 := a
	a2.Expires = t0.Add(2 * time.Hour)
	// states[i] is the leases once step i has been acknowledged; nil:
	// no share.
	states := [][]Lease{{a}, {a, b}, {a2, b}, {a2}, nil}
	steps := []func(d *Disk) error{
		func(d *Disk) error {
			_, err := d.Put(ctx, sh.key, bytes.NewReader(sh.data), int64(len(sh.data)), a)
			return err
		},
		func(d *Disk) error { return d.AddLease(ctx, sh.key, b) },
		func(d *Disk) error { return d.Renew(ctx, sh.key, []byte("ra"), a2.Expires) },
		func(d *Disk) error { _, err := d.Delete(ctx, sh.key, []byte("cb")); return err },
		func(d *Disk) error { _, err := d.Delete(ctx, sh.key, []byte("ca")); return err },
	}
	same := func(x, y []Lease) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].ID != y[i].ID || x[i].Cancel != y[i].Cancel || !x[i].Expires.Equal(y[i].Expires) {
				return false
			}
		}
		return true
	}
	for crashAt := 1; ; crashAt++ {
		if crashAt > 200 {
			t.Fatal("the lease life takes over 200 operations")
		}
		root := t.TempDir()
		ffs := newFaultFS(t, root, false)
		ffs.crashAt = crashAt
		done := -1 // the last step acknowledged
		d, err := openDisk(root, DiskOptions{}, ffs)
		for i, step := range steps {
			if err != nil {
				break
			}
			if err = step(d); err == nil {
				done = i
			}
		}
		if err != nil && !errors.Is(err, errCrashed) {
			t.Fatalf("crash at %d: an error not the crash's: %v", crashAt, err)
		}
		if !ffs.crashed {
			t.Logf("crashed at each of %d steps", crashAt-1)
			break
		}
		for keep := keepSynced; keep <= keepAll; keep++ {
			clone := filepath.Join(t.TempDir(), "after")
			ffs.crashClone(t, clone, keep)
			d, err := OpenDisk(clone, DiskOptions{})
			if err != nil {
				t.Fatalf("crash at %d, %v: reopen: %v", crashAt, keep, err)
			}
			present := checkStore(t, d)
			var allowed [][]Lease
			if done >= 0 {
				allowed = append(allowed, states[done])
			}
			if done+1 < len(states) {
				allowed = append(allowed, states[done+1])
			}
			if done < 0 {
				allowed = append(allowed, nil) // the Put cut off
			}
			var got []Lease
			if present[sh.key] {
				if got, err = d.Leases(ctx, sh.key); err != nil {
					t.Fatalf("crash at %d, %v: leases: %v", crashAt, keep, err)
				}
			}
			ok := false
			for _, want := range allowed {
				ok = ok || (want == nil) == (got == nil) && same(got, want)
			}
			if !ok {
				t.Fatalf("crash at %d (step %d acknowledged), %v: leases %+v, want one of %+v", crashAt, done, keep, got, allowed)
			}
		}
	}
}
