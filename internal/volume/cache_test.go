package volume_test

import (
	"bytes"
	"context"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/volume"
)

// cached is a manager of e with a read cache of size bytes.
func (e *env) cached(t *testing.T, size int64) *volume.Manager {
	m, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, ReadCache: size})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stored makes volume name of size bytes of random data, flushed, and
// returns its contents.
func (e *env) stored(t *testing.T, name string, size int64, seed int64) []byte {
	m := e.manager(t, 0)
	if err := m.Create(ctxT(t), name, size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, name)
	defer v.Close()
	model := make([]byte, size)
	write(t, v, model, 0, random(int(size), seed))
	if err := v.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return model
}

// A sequential reader in nbdcopy's 256 KiB requests reads each extent from
// the grid once (with read-ahead), not once per request: the share bytes
// read are about what k shares of the data hold, where a read per request
// decodes a whole 1 MiB segment for each 256 KiB.
func TestVolumeReadCacheSequential(t *testing.T) {
	e := newEnv(t)
	model := e.stored(t, "seq", 16*mib, 21)
	for _, c := range []struct {
		cache    int64
		min, max float64 // share bytes read, as multiples of the volume's size
	}{{-1, 3, 5}, {0, 1, 1.3}} {
		v := open(t, e.cached(t, c.cache), "seq")
		_, out0 := e.bytes()
		got := make([]byte, len(model))
		for off := 0; off < len(got); off += 256 << 10 {
			if err := v.ReadAt(ctxT(t), got[off:off+256<<10], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
		v.Close()
		if !bytes.Equal(got, model) {
			t.Fatalf("cache %d: sequential read differs", c.cache)
		}
		_, out := e.bytes()
		read := float64(out-out0) / float64(len(model))
		t.Logf("cache %d: read %.2f× the volume's size in share bytes", c.cache, read)
		if read < c.min || read > c.max {
			t.Errorf("cache %d: read %.2f× the volume's size in share bytes, want %.1f to %.1f", c.cache, read, c.min, c.max)
		}
	}
}

// Eight readers take the next 256 KiB of a volume in turn, as nbdcopy's
// requests in flight do: they wait for the extents another one is
// fetching ahead, and read every byte right.
func TestVolumeReadCacheParallelSequential(t *testing.T) {
	e := newEnv(t)
	model := e.stored(t, "par", 20*mib, 24)
	v := open(t, e.cached(t, 6*mib), "par")
	defer v.Close()
	got := make([]byte, len(model))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off := next.Add(256<<10) - 256<<10
				if off >= int64(len(got)) {
					return
				}
				if err := v.ReadAt(ctxT(t), got[off:off+256<<10], off); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		t.Fatal("parallel sequential read differs")
	}
}

// Readers and a writer at once, on a cache smaller than the volume, read
// what the model holds: stored extents through the cache, the journal's
// writes over them, extents stored again under new capabilities.
func TestVolumeReadCacheConcurrent(t *testing.T) {
	e := newEnv(t)
	const size = 12 * mib
	model := e.stored(t, "con", size, 22)
	v := open(t, e.cached(t, 3*mib), "con")
	defer v.Close()
	ctx := ctxT(t)
	// Readers of a range the writer leaves alone check every byte while it
	// writes and flushes the rest.
	stable := model[:4*mib]
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for range 60 {
				off := r.Int63n(int64(len(stable)) - 1)
				n := 1 + r.Int63n(min(int64(len(stable))-off, 600<<10))
				b := make([]byte, n)
				if err := v.ReadAt(ctx, b, off); err != nil {
					errs <- err.Error()
					return
				}
				if !bytes.Equal(b, stable[off:off+n]) {
					errs <- "a concurrent read differs"
					return
				}
			}
		}()
	}
	r := rand.New(rand.NewSource(9))
	for i := range 12 {
		off := 4*mib + r.Int63n(size-4*mib-70000)
		p := random(1+r.Intn(70000), int64(100+i))
		if err := v.WriteAt(ctx, p, off, i%4 == 3); err != nil {
			t.Fatal(err)
		}
		copy(model[off:], p)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("read after concurrent writes differs")
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v2 := open(t, e.cached(t, 3*mib), "con")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("another handle reads other bytes than were flushed")
	}
}

// A read that fails (more than n−k nodes down) is not cached: once the
// nodes are back, the same read succeeds.
func TestVolumeReadCacheKeepsNoFailure(t *testing.T) {
	e := newEnv(t)
	model := e.stored(t, "f", 8*mib, 23)
	v := open(t, e.cached(t, 0), "f")
	defer v.Close()
	for _, i := range []int{0, 1, 2} {
		e.g.Kill(i)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 20e9)
	b := make([]byte, mib)
	err := v.ReadAt(ctx, b, 5*mib)
	cancel()
	if err == nil {
		t.Fatal("read with 3 of 4 nodes down succeeded")
	}
	t.Logf("with 3 of 4 nodes down: %v", err)
	for _, i := range []int{0, 1, 2} {
		e.g.Restart(i)
	}
	if err := v.ReadAt(ctxT(t), b, 5*mib); err != nil {
		t.Fatalf("read after the nodes came back: %v", err)
	}
	if !bytes.Equal(b, model[5*mib:6*mib]) {
		t.Fatal("read after the nodes came back differs")
	}
}
