package volume_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/volume"
)

// memCatalog is an in-memory catalog (the gateway's registry is the real
// one, wired in cmd/quilt).
type memCatalog struct {
	mu   sync.Mutex
	recs map[string][]byte
	put  int64 // bytes of records put
}

func (c *memCatalog) Get(_ context.Context, name string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.recs[name]), nil
}

func (c *memCatalog) Put(_ context.Context, name string, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs[name] = bytes.Clone(body)
	c.put += int64(len(body))
	return nil
}

// written returns how many bytes of records were put so far.
func (c *memCatalog) written() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.put
}

func (c *memCatalog) Delete(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recs, name)
	return nil
}

func (c *memCatalog) List(context.Context) (map[string][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range c.recs {
		out[k] = bytes.Clone(v)
	}
	return out, nil
}

type env struct {
	g      *testgrid.Grid
	cat    *memCatalog
	counts []*testgrid.Bytes
	obj    *object.Client
}

// newEnv runs a 4-node grid; extents are 2-of-4.
func newEnv(t *testing.T) *env {
	e := &env{cat: &memCatalog{recs: map[string][]byte{}}}
	for range 4 {
		e.counts = append(e.counts, &testgrid.Bytes{})
	}
	e.g = testgrid.New(t, testgrid.Options{Nodes: 4, Wrap: func(i int, s sharestore.Store) sharestore.Store {
		return testgrid.Count(s, e.counts[i])
	}})
	e.obj = e.g.Objects(object.Options{})
	return e
}

func (e *env) manager(t *testing.T, journal int) *volume.Manager {
	m, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, JournalExtents: journal})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) bytes() (in, out int64) {
	for _, c := range e.counts {
		in += c.In.Load()
		out += c.Out.Load()
	}
	return in, out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, m *volume.Manager, name string) *volume.Volume {
	v, err := m.Open(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readAll(t *testing.T, v *volume.Volume) []byte {
	b := make([]byte, v.Size())
	if err := v.ReadAt(ctxT(t), b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, v *volume.Volume, model []byte, off int64, p []byte) {
	if err := v.WriteAt(ctxT(t), p, off, false); err != nil {
		t.Fatal(err)
	}
	copy(model[off:], p)
}

func random(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

const mib = 1 << 20

func TestVolumeRoundTrip(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	size := int64(10*mib + 3*512) // a short last extent
	if err := m.Create(ctx, "disk", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "disk")
	model := make([]byte, size)
	write(t, v, model, 100, random(5000, 1))       // unaligned, in extent 0
	write(t, v, model, 4*mib-700, random(1400, 2)) // across extents 0 and 1
	write(t, v, model, size-1000, random(1000, 3)) // the short last extent
	write(t, v, model, 2*mib, random(4096, 4))     // aligned
	write(t, v, model, 150, random(10, 5))         // overwrite inside one sector
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("read before flush differs from what was written")
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("read after flush differs")
	}
	// A partial write into a stored extent is read, patched and stored.
	write(t, v, model, 4*mib+512*9+7, random(300, 6))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	v2 := open(t, e.manager(t, 0), "disk") // another host, another journal
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("a new handle reads other bytes than were flushed")
	}
	if in := v2.Info(); in.Stored() != 3 || in.Gen != 2 {
		t.Fatalf("map has %d extents at gen %d, want 3 at 2", in.Stored(), in.Gen)
	}
}

func TestVolumeUnwrittenReadsZerosWithoutGrid(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	if err := m.Create(ctx, "z", 12*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "z")
	defer v.Close()
	model := make([]byte, 12*mib)
	write(t, v, model, 5*mib, random(mib, 7))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, out0 := e.bytes()
	b := make([]byte, 4*mib)
	if err := v.ReadAt(ctx, b, 8*mib); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, make([]byte, len(b))) {
		t.Fatal("unwritten extent is not zeros")
	}
	if _, out := e.bytes(); out != out0 {
		t.Fatalf("reading an unwritten extent read %d share bytes", out-out0)
	}
	// Zeroing the written extent whole drops it from the map.
	if err := v.Zero(ctx, 4*mib, 4*mib, true); err != nil {
		t.Fatal(err)
	}
	if v.Info().Stored() != 0 {
		t.Fatalf("map keeps %d extents after zeroing", v.Info().Stored())
	}
	if got := readAll(t, v); !bytes.Equal(got, make([]byte, 12*mib)) {
		t.Fatal("zeroed range does not read zeros")
	}
}

func TestVolumeZeroPartial(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	if err := m.Create(ctx, "p", 8*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "p")
	defer v.Close()
	model := make([]byte, 8*mib)
	write(t, v, model, 0, random(8*mib, 8))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Zero(ctx, 3*mib+11, mib, false); err != nil {
		t.Fatal(err)
	}
	clear(model[3*mib+11 : 4*mib+11])
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v2 := open(t, e.manager(t, 0), "p")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("partial zero: bytes differ")
	}
}

func TestVolumeCloneIndependent(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	size := int64(16 * mib)
	if err := m.Create(ctx, "base", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "base")
	model := random(int(size), 9)
	write(t, v, make([]byte, size), 0, model)
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	in0, out0 := e.bytes()
	if err := m.Clone(ctx, "base", "copy", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Clone(ctx, "base", "base@s1", true); err != nil {
		t.Fatal(err)
	}
	if in, out := e.bytes(); in != in0 || out != out0 {
		t.Fatalf("clone and snapshot moved %d bytes in, %d out", in-in0, out-out0)
	}
	c := open(t, m, "copy")
	defer c.Close()
	cmodel := bytes.Clone(model)
	write(t, c, cmodel, 5*mib, random(2*mib, 10))
	if err := c.Zero(ctx, 12*mib, 4*mib, false); err != nil {
		t.Fatal(err)
	}
	clear(cmodel[12*mib:])
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p := open(t, e.manager(t, 0), "base")
	defer p.Close()
	if got := readAll(t, p); !bytes.Equal(got, model) {
		t.Fatal("writing the clone changed the parent")
	}
	if got := readAll(t, c); !bytes.Equal(got, cmodel) {
		t.Fatal("clone does not read its own writes")
	}
	s := open(t, m, "base@s1")
	defer s.Close()
	if err := s.WriteAt(ctx, []byte{1}, 0, false); !errors.Is(err, volume.ErrReadOnly) {
		t.Fatalf("write to snapshot: %v, want ErrReadOnly", err)
	}
	if got := readAll(t, s); !bytes.Equal(got, model) {
		t.Fatal("snapshot differs from its origin")
	}
	if err := m.Clone(ctx, "base", "copy", false); !errors.Is(err, volume.ErrExists) {
		t.Fatalf("clone onto an existing volume: %v", err)
	}
	ls, err := m.List(ctx)
	if err != nil || len(ls) != 3 {
		t.Fatalf("list: %v %v", ls, err)
	}
}

func TestVolumeCrashReadsWhatWasFlushed(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 2) // a journal of two extents: the third write evicts
	ctx := ctxT(t)
	size := int64(16 * mib)
	if err := m.Create(ctx, "c", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "c")
	model := make([]byte, size)
	write(t, v, model, 0, random(6*mib, 11))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	flushed := bytes.Clone(model)
	write(t, v, model, 2*mib, random(12*mib, 12)) // four extents: two stored by eviction, not committed
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("read after eviction differs")
	}
	// The handle is dropped without flush or close: the process is gone.
	// A new process opens the volume with the same state directory.
	m2, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	v2 := open(t, m2, "c")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, flushed) {
		t.Fatal("after a crash the volume does not read exactly what was flushed")
	}
}

func TestVolumeReadsWithNodesDown(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	if err := m.Create(ctx, "d", 8*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "d")
	model := make([]byte, 8*mib)
	write(t, v, model, mib, random(5*mib, 13))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	e.g.Kill(0)
	e.g.Kill(3) // n−k = 2 of 4 down
	v2 := open(t, e.manager(t, 0), "d")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("read with n-k nodes down differs")
	}
}

func TestVolumeBadInput(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	for _, n := range []string{"", "a/b", "../x", ".hidden", string(make([]byte, 200))} {
		if err := m.Create(ctx, n, mib); !errors.Is(err, volume.ErrBadName) {
			t.Errorf("create %q: %v", n, err)
		}
	}
	for _, s := range []int64{0, -512, 1000} {
		if err := m.Create(ctx, "x", s); !errors.Is(err, volume.ErrBadSize) {
			t.Errorf("create size %d: %v", s, err)
		}
	}
	if err := m.Create(ctx, "x", mib); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, "x", mib); !errors.Is(err, volume.ErrExists) {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := m.Open(ctx, "nope"); !errors.Is(err, volume.ErrNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	v := open(t, m, "x")
	if err := v.WriteAt(ctx, make([]byte, 10), mib-5, false); !errors.Is(err, volume.ErrRange) {
		t.Fatalf("write past the end: %v", err)
	}
	if err := v.ReadAt(ctx, make([]byte, 1), -1); !errors.Is(err, volume.ErrRange) {
		t.Fatalf("read before the start: %v", err)
	}
	if err := m.Remove(ctx, "x"); err == nil {
		t.Fatal("removed an open volume")
	}
	v.Close()
	if err := v.Flush(ctx); !errors.Is(err, volume.ErrClosed) {
		t.Fatalf("flush after close: %v", err)
	}
	if err := m.Remove(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	e.cat.Put(ctx, "bad", []byte(`{"size":12,"extent":4194304}`))
	if _, err := m.Open(ctx, "bad"); err == nil {
		t.Fatal("opened a damaged record")
	}
}

func TestVolumeFlushFailsUnhappyAndRetries(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	if err := m.Create(ctx, "f", 8*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "f")
	defer v.Close()
	model := make([]byte, 8*mib)
	write(t, v, model, 3*mib, random(2*mib, 14))
	e.g.Kill(2) // happiness 4 cannot be met
	if err := v.Flush(ctx); err == nil {
		t.Fatal("flush succeeded with a node of four down and happiness 4")
	}
	if v.Info().Gen != 0 {
		t.Fatal("a failed flush committed the map")
	}
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("a failed flush lost written bytes")
	}
	e.g.Restart(2)
	e.g.WaitAlive(4)
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v2 := open(t, e.manager(t, 0), "f")
	defer v2.Close()
	if got := readAll(t, v2); !bytes.Equal(got, model) {
		t.Fatal("after the retried flush a new handle reads other bytes")
	}
}

// Reads of one volume run side by side with each other and with writes
// and flushes of other handles of it (the connections of an NBD client
// with multi-conn): each write of a whole extent is read whole before or
// whole after it, and a flush through one handle makes every handle's
// writes durable.
func TestVolumeConcurrentHandles(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 2)
	ctx := ctxT(t)
	if err := m.Create(ctx, "v", 3*volume.ExtentSize); err != nil {
		t.Fatal(err)
	}
	writer, reader := open(t, m, "v"), open(t, m, "v")
	versions := [][]byte{make([]byte, volume.ExtentSize)}
	for i := range 4 {
		versions = append(versions, random(volume.ExtentSize, int64(10+i)))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, volume.ExtentSize)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := reader.ReadAt(ctx, buf, volume.ExtentSize); err != nil {
					errs <- err
					return
				}
				known := false
				for _, v := range versions {
					known = known || bytes.Equal(buf, v)
				}
				if !known {
					errs <- errors.New("a reader saw a torn extent")
					return
				}
			}
		}()
	}
	for i, v := range versions[1:] {
		if err := writer.WriteAt(ctx, v, volume.ExtentSize, false); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if err := reader.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The last flush went through the other handle; a new Manager (a
	// restarted server) reads the last write.
	reader.Close()
	writer.Close()
	v2 := open(t, e.manager(t, 2), "v")
	got := make([]byte, volume.ExtentSize)
	if err := v2.ReadAt(ctx, got, volume.ExtentSize); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, versions[len(versions)-1]) {
		t.Fatal("a flush through one handle did not make the other's writes durable")
	}
}

// extents lists v's runs over [off, off+n) as "S<len>" (stored) and
// "H<len>" (hole), in MiB.
func extents(t *testing.T, v *volume.Volume, off, n int64) string {
	t.Helper()
	var s []string
	err := v.Extents(off, n, func(l int64, stored bool) {
		k := "H"
		if stored {
			k = "S"
		}
		s = append(s, fmt.Sprintf("%s%g", k, float64(l)/mib))
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(s, " ")
}

// TestVolumeExtents: Extents reports extents with writes in the journal
// and extents stored on the grid as stored, never-written and whole-zeroed
// ones as holes, clipped to the range asked; a clone reports its parent's;
// a range past the end and a closed handle are errors.
func TestVolumeExtents(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	if err := m.Create(ctx, "x", 18*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "x")
	model := make([]byte, 18*mib)
	if got := extents(t, v, 0, 18*mib); got != "H4 H4 H4 H4 H2" {
		t.Fatalf("new volume: %s", got)
	}
	write(t, v, model, 5*mib, random(mib, 9)) // extent 1, in the journal
	if got := extents(t, v, 0, 18*mib); got != "H4 S4 H4 H4 H2" {
		t.Fatalf("after a write: %s", got)
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, v, model, 16*mib+5, []byte("tail")) // extent 4, in the journal
	if got := extents(t, v, 2*mib, 15*mib); got != "H2 S4 H4 H4 S1" {
		t.Fatalf("after a flush and another write: %s", got)
	}
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Clone(ctx, "x", "y", false); err != nil {
		t.Fatal(err)
	}
	c := open(t, m, "y")
	if got := extents(t, c, 0, 18*mib); got != "H4 S4 H4 H4 S2" {
		t.Fatalf("clone: %s", got)
	}
	c.Close()
	if err := v.Zero(ctx, 4*mib, 4*mib, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Zero(ctx, 16*mib, mib, false); err != nil { // part of an extent: written zeros, stored
		t.Fatal(err)
	}
	if got := extents(t, v, 0, 18*mib); got != "H4 H4 H4 H4 S2" {
		t.Fatalf("after zeroing: %s", got)
	}
	if err := v.Extents(17*mib, 2*mib, func(int64, bool) {}); !errors.Is(err, volume.ErrRange) {
		t.Fatalf("range past the end: %v", err)
	}
	v.Close()
	if err := v.Extents(0, mib, func(int64, bool) {}); err == nil {
		t.Fatal("Extents of a closed handle succeeded")
	}
}
