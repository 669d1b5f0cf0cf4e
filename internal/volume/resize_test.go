package volume_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/volume"
)

// Rollback makes a volume read as its snapshot again, size included, in
// one commit that moves no share byte; it refuses what is not a snapshot
// of the volume, a volume open here, and one another writer holds.
func TestVolumeRollback(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	size := int64(10*mib + 3*512)
	if err := m.Create(ctx, "v", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "v")
	snapModel := make([]byte, size)
	write(t, v, snapModel, 0, random(int(size), 31))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	if err := m.Clone(ctx, "v", "v@s1", true); err != nil {
		t.Fatal(err)
	}
	if err := m.Resize(ctx, "v", 16*mib); err != nil {
		t.Fatal(err)
	}
	v = open(t, m, "v")
	later := make([]byte, 16*mib)
	copy(later, snapModel)
	write(t, v, later, 3*mib, random(9*mib, 32))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, v, later, 0, random(mib, 33)) // not flushed: dropped by the rollback
	if err := m.Rollback(ctx, "v", "v@s1"); err == nil {
		t.Fatal("rolled back a volume open here")
	}
	v.Close()
	if err := m.Clone(ctx, "v", "other", false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"other", "nope", "v"} {
		if err := m.Rollback(ctx, "v", bad); err == nil {
			t.Errorf("rolled back v to %s", bad)
		}
	}
	in0, out0 := e.bytes()
	if err := m.Rollback(ctx, "v", "v@s1"); err != nil {
		t.Fatal(err)
	}
	if in, out := e.bytes(); in != in0 || out != out0 {
		t.Errorf("rollback moved %d bytes in, %d out", in-in0, out-out0)
	}
	v = open(t, e.manager(t, 0), "v")
	if v.Size() != size {
		t.Errorf("size after rollback %d, want %d", v.Size(), size)
	}
	if got := readAll(t, v); !bytes.Equal(got, snapModel) {
		t.Error("the rolled-back volume does not read as its snapshot")
	}
	v.Close()
	// Another writer's lease refuses it.
	leases := &memCatalog{recs: map[string][]byte{}}
	holder := e.leased(t, leases, time.Minute)
	h := open(t, holder, "v")
	defer h.Close()
	if err := e.leased(t, leases, time.Minute).Rollback(ctx, "v", "v@s1"); !errors.Is(err, volume.ErrLeased) {
		t.Errorf("rollback of a volume another writer holds: %v, want ErrLeased", err)
	}
}

// Resize: a volume made larger reads zeros in what it gained (past its
// short last extent too) and takes writes there; made smaller, it drops
// the extents past its end and zeroes the rest of its new last extent, so
// that growing it again reads zeros; bad sizes and snapshots are refused.
func TestVolumeResize(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	size := int64(6*mib + 512) // a short last extent
	if err := m.Create(ctx, "r", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "r")
	model := make([]byte, size)
	write(t, v, model, 0, random(int(size), 41))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	if err := m.Resize(ctx, "r", 13*mib); err != nil {
		t.Fatal(err)
	}
	model = append(model, make([]byte, 13*mib-size)...)
	v = open(t, e.manager(t, 0), "r")
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("grown volume differs (zeros expected past the old end)")
	}
	write(t, v, model, size-1000, random(3000, 42)) // across the old end
	write(t, v, model, 12*mib, random(mib, 43))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	if err := m.Resize(ctx, "r", 5*mib+1024); err != nil {
		t.Fatal(err)
	}
	if in, _ := m.Stat(ctx, "r"); in.Stored() != 2 || in.Size != 5*mib+1024 {
		t.Fatalf("shrunk: %d extents, size %d", in.Stored(), in.Size)
	}
	if err := m.Resize(ctx, "r", 9*mib); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(model[:5*mib+1024]), make([]byte, 9*mib-(5*mib+1024))...)
	v = open(t, e.manager(t, 0), "r")
	if got := readAll(t, v); !bytes.Equal(got, want) {
		t.Fatal("shrunk then grown volume does not read zeros past the shrunk end")
	}
	v.Close()
	for _, bad := range []int64{0, -512, 1000, volume.MaxSize + 512} {
		if err := m.Resize(ctx, "r", bad); !errors.Is(err, volume.ErrBadSize) {
			t.Errorf("resize to %d: %v, want ErrBadSize", bad, err)
		}
	}
	if err := m.Clone(ctx, "r", "r@s", true); err != nil {
		t.Fatal(err)
	}
	if err := m.Resize(ctx, "r@s", 20*mib); !errors.Is(err, volume.ErrReadOnly) {
		t.Errorf("resize of a snapshot: %v, want ErrReadOnly", err)
	}
	if err := m.Resize(ctx, "nope", 20*mib); !errors.Is(err, volume.ErrNotFound) {
		t.Errorf("resize of no volume: %v, want ErrNotFound", err)
	}
}
