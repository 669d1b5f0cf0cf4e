// Package sharestoretest is the conformance suite for sharestore.Store:
// every implementation (the disk store, the in-memory fake) must pass it,
// which is what makes the fake trustworthy in other packages' unit tests.
package sharestoretest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Corruptible is a store a test can damage, as a failing disk would.
type Corruptible interface {
	sharestore.Store
	Corrupt(key sharestore.Key, off int64) error
}

// Factory returns a new empty store of at most capacity bytes (0: no
// limit).
type Factory func(t *testing.T, capacity int64) Corruptible

// object returns the shares of a random object of size bytes.
func object(t *testing.T, size int) (codec.ReadCap, [][]byte) {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	rc, shares, err := codec.EncodeAll(codec.Params{K: 3, N: 10, SegmentSize: 4096}, codec.NewKey(), data)
	if err != nil {
		t.Fatal(err)
	}
	return rc, shares
}

// damagedBlocks returns copies of share sh with one bit of a block
// flipped: in the first block, and at the end of the last.
func damagedBlocks(rc codec.ReadCap, sh []byte) map[string][]byte {
	first, last := bytes.Clone(sh), bytes.Clone(sh)
	first[100] ^= 4
	last[rc.Verify().Layout().TrailerOffset()-1] ^= 1
	return map[string][]byte{"flipped block": first, "flipped block end": last}
}

func key(rc codec.ReadCap, share int) sharestore.Key {
	return sharestore.Key{SI: rc.Key.StorageIndex(), Share: share}
}

var secret = []byte("uploader's delete secret")

// failingReader delivers n bytes of b, then fails as a dropped
// connection does.
type failingReader struct {
	b []byte
	n int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, io.ErrUnexpectedEOF
	}
	m := copy(p[:min(len(p), f.n)], f.b)
	f.b, f.n = f.b[m:], f.n-m
	return m, nil
}

func mustAbsent(t *testing.T, s sharestore.Store, k sharestore.Key) {
	t.Helper()
	if _, err := s.Open(context.Background(), k); !errors.Is(err, sharestore.ErrNotFound) {
		t.Fatalf("share %s is visible after a failed put (err %v)", k, err)
	}
	infos, _ := s.List(context.Background(), k.SI)
	for _, i := range infos {
		if i.Share == k.Share {
			t.Fatalf("share %s is listed after a failed put", k)
		}
	}
}

// Options say what the stores under test are made to do.
type Options struct {
	// ChecksBlocks: the stores hash every block on arrival
	// (sharestore.DiskOptions.CheckBlocks), and refuse a damaged block
	// at Put rather than at Scrub.
	ChecksBlocks bool
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore Factory, opt Options) {
	ctx := context.Background()

	t.Run("PutOpenReadRanges", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		for i, sh := range shares {
			info, err := s.Put(ctx, key(rc, i), bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor(secret))
			if err != nil {
				t.Fatalf("put share %d: %v", i, err)
			}
			if info.Size != int64(len(sh)) || info.Root != rc.Root || info.Share != i {
				t.Fatalf("put share %d: info %+v", i, info)
			}
		}
		r, err := s.Open(ctx, key(rc, 4))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Info().Size != int64(len(shares[4])) {
			t.Fatalf("size %d, want %d", r.Info().Size, len(shares[4]))
		}
		for _, rg := range [][2]int{{0, 10}, {64, 1000}, {len(shares[4]) - 7, 7}, {0, len(shares[4])}} {
			got := make([]byte, rg[1])
			if _, err := r.ReadAt(got, int64(rg[0])); err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("range %v: %v", rg, err)
			}
			if !bytes.Equal(got, shares[4][rg[0]:rg[0]+rg[1]]) {
				t.Fatalf("range %v: wrong bytes", rg)
			}
		}
		if n, err := r.ReadAt(make([]byte, 10), int64(len(shares[4])-3)); n != 3 || !errors.Is(err, io.EOF) {
			t.Fatalf("read past the end: n=%d err=%v", n, err)
		}
		infos, err := s.List(ctx, rc.Key.StorageIndex())
		if err != nil || len(infos) != 10 {
			t.Fatalf("list: %d shares, err %v", len(infos), err)
		}
		for i, info := range infos {
			if info.Share != i {
				t.Fatalf("list not in share order: %v", infos)
			}
		}
		u := s.Usage()
		var total int64
		for _, sh := range shares {
			total += int64(len(sh))
		}
		if u.Used != total || u.Shares != 10 {
			t.Fatalf("usage %+v, want %d bytes in 10 shares", u, total)
		}
		n := 0
		if err := s.Walk(ctx, func(sharestore.Info) error { n++; return nil }); err != nil || n != 10 {
			t.Fatalf("walk saw %d shares, err %v", n, err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		s := newStore(t, 0)
		rc, _ := object(t, 100)
		if _, err := s.Open(ctx, key(rc, 0)); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("open: %v", err)
		}
		if _, err := s.Delete(ctx, key(rc, 0), secret); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("delete: %v", err)
		}
		if _, err := s.Scrub(ctx, key(rc, 0)); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("scrub: %v", err)
		}
		if infos, err := s.List(ctx, rc.Key.StorageIndex()); err != nil || len(infos) != 0 {
			t.Fatalf("list: %v %v", infos, err)
		}
	})

	t.Run("CutOffUploadNeverVisible", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		sizes := []int64{-1, int64(len(shares[0]))} // unknown and announced
		for _, cut := range []int{0, 10, 64, 2000, len(shares[0]) - 1, 3001} {
			_, err := s.Put(ctx, key(rc, 0), &failingReader{shares[0], cut}, sizes[cut%2], sharestore.LeaseFor(secret))
			if err == nil {
				t.Fatalf("upload cut at %d succeeded", cut)
			}
			mustAbsent(t, s, key(rc, 0))
		}
		if u := s.Usage(); u.Used != 0 || u.Shares != 0 {
			t.Fatalf("failed uploads left usage %+v", u)
		}
	})

	t.Run("TruncatedOrDamagedShareRefused", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		sh := shares[2]
		cases := map[string][]byte{
			"truncated":   sh[:len(sh)-1],
			"header only": sh[:sharefile.HeaderSize],
			"garbage":     bytes.Repeat([]byte("x"), 5000),
			"empty":       nil,
			"extra byte":  append(bytes.Clone(sh), 0),
			"flipped block hash": func() []byte {
				b := bytes.Clone(sh)
				b[rc.Verify().Layout().TrailerOffset()+20] ^= 1 // the first block hash
				return b
			}(),
			"flipped header": func() []byte { b := bytes.Clone(sh); b[20] ^= 1; return b }(),
			"other share":    shares[3], // uploaded as share 2
		}
		if opt.ChecksBlocks {
			for name, b := range damagedBlocks(rc, sh) {
				cases[name] = b
			}
		}
		for name, b := range cases {
			for _, size := range []int64{-1, int64(len(b))} {
				_, err := s.Put(ctx, key(rc, 2), bytes.NewReader(b), size, sharestore.LeaseFor(secret))
				if !errors.Is(err, sharestore.ErrCorrupt) {
					t.Errorf("%s (size %d): err %v, want ErrCorrupt", name, size, err)
				}
				mustAbsent(t, s, key(rc, 2))
			}
		}
		// A whole, good share that is not the length announced is refused.
		for _, size := range []int64{int64(len(sh)) - 1, int64(len(sh)) + 1, 0} {
			_, err := s.Put(ctx, key(rc, 2), bytes.NewReader(sh), size, sharestore.LeaseFor(secret))
			if !errors.Is(err, sharestore.ErrCorrupt) {
				t.Errorf("announced %d of %d bytes: err %v, want ErrCorrupt", size, len(sh), err)
			}
			mustAbsent(t, s, key(rc, 2))
		}
	})

	// A store that does not hash blocks on arrival stores a share with a
	// damaged block, as it came; Scrub finds it, and it can be deleted.
	// (A store that does hash them refuses such a share at Put: see
	// TruncatedOrDamagedShareRefused.)
	t.Run("DamagedBlockFoundByScrub", func(t *testing.T) {
		if opt.ChecksBlocks {
			return
		}
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		for name, b := range damagedBlocks(rc, shares[2]) {
			info, err := s.Put(ctx, key(rc, 2), bytes.NewReader(b), int64(len(b)), sharestore.LeaseFor(secret))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if info.Root != rc.Root {
				t.Fatalf("%s: stored under root %x, the share claims %x", name, info.Root[:4], rc.Root[:4])
			}
			if _, err := s.Scrub(ctx, key(rc, 2)); !errors.Is(err, sharestore.ErrCorrupt) {
				t.Errorf("%s: scrub: %v, want ErrCorrupt", name, err)
			}
			if _, err := s.Delete(ctx, key(rc, 2), secret); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("CancelledUpload", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		cctx, cancel := context.WithCancel(ctx)
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			_, err := s.Put(cctx, key(rc, 0), pr, -1, sharestore.LeaseFor(secret))
			done <- err
		}()
		pw.Write(shares[0][:1000])
		cancel()
		go pw.Write(shares[0][1000:2000]) // the next read sees the cancel
		if err := <-done; err == nil {
			t.Fatal("cancelled upload succeeded")
		}
		pw.Close()
		mustAbsent(t, s, key(rc, 0))
	})

	t.Run("Capacity", func(t *testing.T) {
		rc, shares := object(t, 20_000)
		size := int64(len(shares[0]))
		s := newStore(t, 2*size+size/2) // room for two shares, not three
		for i := 0; i < 2; i++ {
			if _, err := s.Put(ctx, key(rc, i), bytes.NewReader(shares[i]), -1, sharestore.LeaseFor(secret)); err != nil {
				t.Fatalf("share %d: %v", i, err)
			}
		}
		for _, announced := range []int64{-1, size} {
			_, err := s.Put(ctx, key(rc, 2), bytes.NewReader(shares[2]), announced, sharestore.LeaseFor(secret))
			if !errors.Is(err, sharestore.ErrFull) {
				t.Fatalf("third share (announced %d): err %v, want ErrFull", announced, err)
			}
			mustAbsent(t, s, key(rc, 2))
		}
		// A share announced too large to fit is refused before any byte
		// is read.
		unread := &failingReader{shares[2], 1 << 30}
		if _, err := s.Put(ctx, key(rc, 2), unread, 1<<40, sharestore.LeaseFor(secret)); !errors.Is(err, sharestore.ErrFull) || len(unread.b) != len(shares[2]) {
			t.Fatalf("1 TiB announced: err %v, %d bytes read", err, len(shares[2])-len(unread.b))
		}
		if u := s.Usage(); u.Used != 2*size || u.Free != size/2 {
			t.Fatalf("usage %+v, want used %d free %d", u, 2*size, size/2)
		}
		// Concurrent uploads cannot together go over the capacity.
		s2 := newStore(t, 3*size)
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s2.Put(ctx, key(rc, i), bytes.NewReader(shares[i]), []int64{-1, size}[i%2], sharestore.LeaseFor(secret))
			}()
		}
		wg.Wait()
		if u := s2.Usage(); u.Used > 3*size || u.Shares > 3 || u.Shares < 1 {
			t.Fatalf("concurrent uploads: usage %+v with capacity %d", u, 3*size)
		}
	})

	t.Run("DeleteNeedsSecret", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 5000)
		k := key(rc, 1)
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, sharestore.LeaseFor(secret)); err != nil {
			t.Fatal(err)
		}
		for _, wrong := range [][]byte{nil, []byte("guess"), append(bytes.Clone(secret), 0)} {
			if _, err := s.Delete(ctx, k, wrong); !errors.Is(err, sharestore.ErrForbidden) {
				t.Fatalf("delete with %q: %v, want ErrForbidden", wrong, err)
			}
		}
		if _, err := s.Open(ctx, k); err != nil {
			t.Fatalf("share gone after refused deletes: %v", err)
		}
		if _, err := s.Delete(ctx, k, secret); err != nil {
			t.Fatalf("delete: %v", err)
		}
		mustAbsent(t, s, k)
		if u := s.Usage(); u.Used != 0 || u.Shares != 0 {
			t.Fatalf("usage after delete %+v", u)
		}
	})

	t.Run("RemoveWhateverLeases", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 5000)
		k := key(rc, 1)
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, sharestore.LeaseFor(secret)); err != nil {
			t.Fatal(err)
		}
		if err := s.AddLease(ctx, k, sharestore.LeaseFor([]byte("another"))); err != nil {
			t.Fatal(err)
		}
		if err := s.Remove(ctx, k); err != nil {
			t.Fatalf("remove: %v", err)
		}
		mustAbsent(t, s, k)
		if u := s.Usage(); u.Used != 0 || u.Shares != 0 {
			t.Fatalf("usage after remove %+v", u)
		}
		if err := s.Remove(ctx, k); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("remove of a share not there: %v, want ErrNotFound", err)
		}
	})

	t.Run("PutTwice", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 5000)
		for range 2 {
			if _, err := s.Put(ctx, key(rc, 0), bytes.NewReader(shares[0]), int64(len(shares[0])), sharestore.LeaseFor(secret)); err != nil {
				t.Fatal(err)
			}
		}
		if u := s.Usage(); u.Shares != 1 || u.Used != int64(len(shares[0])) {
			t.Fatalf("same share twice: usage %+v", u)
		}
	})

	t.Run("PutReplacesDamaged", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		var total int64
		for i, sh := range shares[:3] {
			if _, err := s.Put(ctx, key(rc, i), bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor(secret)); err != nil {
				t.Fatal(err)
			}
			total += int64(len(sh))
		}
		// A damaged block, a damaged header, a damaged share root.
		l := rc.Verify().Layout()
		offsets := map[int]int64{0: 2000, 1: 5, 2: l.ShareSize() - 40}
		for i, off := range offsets {
			if err := s.Corrupt(key(rc, i), off); err != nil {
				t.Fatal(err)
			}
		}
		// A damaged share does not replace a damaged copy, even in a
		// store that checks only the frame on arrival.
		for name, bad := range damagedBlocks(rc, shares[0]) {
			if _, err := s.Put(ctx, key(rc, 0), bytes.NewReader(bad), int64(len(bad)), sharestore.LeaseFor(secret)); !errors.Is(err, sharestore.ErrCorrupt) {
				t.Errorf("%s over a damaged copy: %v, want ErrCorrupt", name, err)
			}
		}
		for i, sh := range shares[:3] {
			info, err := s.Put(ctx, key(rc, i), bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor(secret))
			if err != nil {
				t.Fatalf("share %d over its damaged copy: %v", i, err)
			}
			if info.Root != rc.Root || info.Size != int64(len(sh)) {
				t.Fatalf("share %d over its damaged copy: info %+v", i, info)
			}
			if _, err := s.Scrub(ctx, key(rc, i)); err != nil {
				t.Fatalf("share %d after replacing its damaged copy: %v", i, err)
			}
			r, err := s.Open(ctx, key(rc, i))
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(sh))
			r.ReadAt(got, 0)
			r.Close()
			if !bytes.Equal(got, sh) {
				t.Fatalf("share %d after replacing its damaged copy: wrong bytes", i)
			}
		}
		if u := s.Usage(); u.Shares != 3 || u.Used != total {
			t.Fatalf("usage after replacing three damaged copies: %+v, want 3 shares of %d bytes", u, total)
		}
	})

	t.Run("ScrubFindsDamage", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 20_000)
		for i, sh := range shares {
			if _, err := s.Put(ctx, key(rc, i), bytes.NewReader(sh), int64(len(sh)), sharestore.LeaseFor(secret)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range shares {
			if _, err := s.Scrub(ctx, key(rc, i)); err != nil {
				t.Fatalf("scrub of a good share %d: %v", i, err)
			}
		}
		// Damage a block, the header, and another share's root in the
		// trailer: every one is found.
		l := rc.Verify().Layout()
		offsets := map[int]int64{0: 2000, 1: 5, 2: l.ShareSize() - 40}
		for i, off := range offsets {
			if err := s.Corrupt(key(rc, i), off); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Scrub(ctx, key(rc, i)); !errors.Is(err, sharestore.ErrCorrupt) {
				t.Errorf("scrub after damage at %d of share %d: %v, want ErrCorrupt", off, i, err)
			}
		}
		if _, err := s.Scrub(ctx, key(rc, 3)); err != nil {
			t.Fatalf("scrub of an undamaged share: %v", err)
		}
	})

	t.Run("Leases", func(t *testing.T) { runLeases(t, newStore) })
}

// lease returns a lease of renew secret "renew "+name and cancel secret
// "cancel "+name, expiring at exp.
func lease(name string, exp time.Time) sharestore.Lease {
	return sharestore.Lease{
		ID:      sharestore.SecretHash([]byte("renew " + name)),
		Cancel:  sharestore.SecretHash([]byte("cancel " + name)),
		Expires: exp,
	}
}

func mustLeases(t *testing.T, s sharestore.Store, k sharestore.Key, want ...sharestore.Lease) {
	t.Helper()
	got, err := s.Leases(context.Background(), k)
	if err != nil {
		t.Fatalf("leases of %s: %v", k, err)
	}
	if len(got) != len(want) {
		t.Fatalf("leases of %s: %d, want %d: %+v", k, len(got), len(want), got)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g.ID == w.ID && g.Cancel == w.Cancel && g.Expires.Equal(w.Expires)
		}
		if !found {
			t.Fatalf("leases of %s: %+v, want %+v among them", k, got, w)
		}
	}
}

// runLeases adds, renews, cancels and expires leases. Times are given to
// the store (Put's expiry, Renew's, Expire's now), so the suite needs no
// clock: t0 is an arbitrary instant.
func runLeases(t *testing.T, newStore Factory) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	hour := time.Hour

	t.Run("AddRenewCancel", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 9000)
		k := key(rc, 1)
		a, b := lease("a", t0.Add(hour)), lease("b", t0.Add(90*time.Minute))
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, a); err != nil {
			t.Fatal(err)
		}
		mustLeases(t, s, k, a)
		// The same share again adds the second uploader's lease; the
		// first's again moves its expiry only forward.
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, b); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, lease("a", t0.Add(-hour))); err != nil {
			t.Fatal(err)
		}
		mustLeases(t, s, k, a, b)
		// Renewing needs the renew secret: a wrong one, and the cancel
		// secret, renew nothing.
		for _, wrong := range [][]byte{[]byte("renew c"), []byte("cancel a"), nil} {
			if err := s.Renew(ctx, k, wrong, t0.Add(9*hour)); !errors.Is(err, sharestore.ErrForbidden) {
				t.Fatalf("renew with %q: %v, want ErrForbidden", wrong, err)
			}
		}
		if err := s.Renew(ctx, k, []byte("renew a"), t0.Add(3*hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Renew(ctx, k, []byte("renew a"), t0.Add(2*hour)); err != nil {
			t.Fatal(err)
		}
		a.Expires = t0.Add(3 * hour)
		mustLeases(t, s, k, a, b)
		// AddLease adds a third party's lease without the share's bytes,
		// and renews (never shortens) one of the same ID.
		c := lease("c", t0.Add(hour))
		if err := s.AddLease(ctx, k, c); err != nil {
			t.Fatal(err)
		}
		if err := s.AddLease(ctx, k, lease("a", t0)); err != nil {
			t.Fatal(err)
		}
		mustLeases(t, s, k, a, b, c)
		if err := s.AddLease(ctx, key(rc, 2), c); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("AddLease to a missing share: %v", err)
		}
		if removed, err := s.Delete(ctx, k, []byte("cancel c")); err != nil || removed {
			t.Fatalf("cancel of the added lease: %v, %v", removed, err)
		}
		if err := s.Renew(ctx, key(rc, 2), []byte("renew a"), t0); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("renew of a missing share: %v", err)
		}
		// Cancelling needs the cancel secret: a wrong one, and the renew
		// secret, cancel nothing.
		used := s.Usage().Used
		for _, wrong := range [][]byte{[]byte("cancel c"), []byte("renew b"), nil} {
			if removed, err := s.Delete(ctx, k, wrong); !errors.Is(err, sharestore.ErrForbidden) || removed {
				t.Fatalf("cancel with %q: %v, %v; want ErrForbidden", wrong, removed, err)
			}
		}
		mustLeases(t, s, k, a, b)
		if removed, err := s.Delete(ctx, k, []byte("cancel b")); err != nil || removed {
			t.Fatalf("cancel of one of two leases: removed %v, %v", removed, err)
		}
		mustLeases(t, s, k, a)
		if _, err := s.Open(ctx, k); err != nil || s.Usage().Used != used {
			t.Fatalf("share with a lease left: %v, %d bytes used (was %d)", err, s.Usage().Used, used)
		}
		if removed, err := s.Delete(ctx, k, []byte("cancel b")); !errors.Is(err, sharestore.ErrForbidden) || removed {
			t.Fatalf("second cancel of a lease: %v, %v", removed, err)
		}
		if removed, err := s.Delete(ctx, k, []byte("cancel a")); err != nil || !removed {
			t.Fatalf("cancel of the last lease: removed %v, %v", removed, err)
		}
		if _, err := s.Open(ctx, k); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("share after its last lease was cancelled: %v", err)
		}
		if u := s.Usage(); u.Used != 0 || u.Shares != 0 {
			t.Fatalf("usage after the last share went: %+v", u)
		}
		// Stored again, the share has only the new lease.
		if _, err := s.Put(ctx, k, bytes.NewReader(shares[1]), -1, b); err != nil {
			t.Fatal(err)
		}
		mustLeases(t, s, k, b)
	})

	t.Run("Expire", func(t *testing.T) {
		s := newStore(t, 0)
		rc, shares := object(t, 9000)
		short, long := lease("short", t0.Add(hour)), lease("long", t0.Add(5*hour))
		forever := sharestore.LeaseFor([]byte("old uploader"))
		put := func(i int, l sharestore.Lease) {
			t.Helper()
			if _, err := s.Put(ctx, key(rc, i), bytes.NewReader(shares[i]), -1, l); err != nil {
				t.Fatal(err)
			}
		}
		put(0, short)
		put(1, short)
		put(1, long)
		put(2, forever)
		put(3, long)
		before := s.Usage()
		// Nothing has expired yet.
		if sw, err := s.Expire(ctx, t0); err != nil || sw != (sharestore.Swept{}) {
			t.Fatalf("Expire before any lease ends: %+v, %v", sw, err)
		}
		sw, err := s.Expire(ctx, t0.Add(2*hour))
		if err != nil {
			t.Fatal(err)
		}
		want := sharestore.Swept{Leases: 2, Shares: 1, Bytes: int64(len(shares[0]))}
		if sw != want {
			t.Fatalf("Expire: %+v, want %+v", sw, want)
		}
		if _, err := s.Open(ctx, key(rc, 0)); !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("share whose only lease expired: %v", err)
		}
		mustLeases(t, s, key(rc, 1), long)
		if u := s.Usage(); u.Used != before.Used-int64(len(shares[0])) || u.Shares != before.Shares-1 {
			t.Fatalf("usage after expiry %+v, before %+v", u, before)
		}
		// A renewal keeps a share past its first expiry.
		if err := s.Renew(ctx, key(rc, 3), []byte("renew long"), t0.Add(50*hour)); err != nil {
			t.Fatal(err)
		}
		// A lease that never expires (a share stored before leases
		// expired) keeps its share for ever, and needs no renewal.
		if err := s.Renew(ctx, key(rc, 2), []byte("renew long"), t0.Add(50*hour)); err != nil {
			t.Fatalf("renewing a share that never expires: %v", err)
		}
		sw, err = s.Expire(ctx, t0.Add(10*hour))
		if err != nil {
			t.Fatal(err)
		}
		if want := (sharestore.Swept{Leases: 1, Shares: 1, Bytes: int64(len(shares[1]))}); sw != want {
			t.Fatalf("second Expire: %+v, want %+v", sw, want)
		}
		mustLeases(t, s, key(rc, 2), forever)
		mustLeases(t, s, key(rc, 3), lease("long", t0.Add(50*hour)))
		// The old lease's secret cancels it.
		if removed, err := s.Delete(ctx, key(rc, 2), []byte("old uploader")); err != nil || !removed {
			t.Fatalf("cancel of a lease that never expires: %v, %v", removed, err)
		}
	})
}
