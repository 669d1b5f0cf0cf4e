package volume_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/volume"
)

// overlayManager is e.manager with the overlay bounded to n entries.
func (e *env) overlayManager(t *testing.T, n int) *volume.Manager {
	m, err := volume.New(volume.Config{Catalog: e.cat, Objects: e.obj, Happy: 4, StateDir: t.TempDir(),
		Params: codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, Overlay: n})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// references returns volume.References of every record of the catalog.
func (e *env) references(t *testing.T) []string {
	recs, err := e.cat.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	refs, err := volume.References(ctxT(t), e.obj, recs)
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// A commit keeps changes in the record's overlay up to its bound, and
// past it stores a new base map and empties the overlay; snapshots taken
// at each stage keep reading what they were taken of (their base maps are
// never changed), and new Managers read every volume as written. Only a
// flush past the bound stores a base map.
func TestVolumeBaseMapCompaction(t *testing.T) {
	e := newEnv(t)
	m := e.overlayManager(t, 2)
	ctx := ctxT(t)
	const size = 10*4*mib + 3*512 // 11 extents, the last short
	if err := m.Create(ctx, "v", size); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "v")
	defer v.Close()
	model := make([]byte, size)
	models := map[string][]byte{}
	stage := func(name string, wantBase bool, wantOverlay, wantStored int) {
		t.Helper()
		if err := v.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		in := v.Info()
		if (in.Base != "") != wantBase || len(in.Overlay) != wantOverlay || in.Stored() != wantStored || in.Extents != nil {
			t.Fatalf("%s: base %q, overlay %v, %d stored; want base %v, overlay of %d, %d stored",
				name, in.Base, in.Overlay, in.Stored(), wantBase, wantOverlay, wantStored)
		}
		if err := m.Clone(ctx, "v", "v@"+name, true); err != nil {
			t.Fatal(err)
		}
		models[name] = bytes.Clone(model)
	}
	write(t, v, model, 0, random(3*4*mib, 1)) // three extents: past the bound
	stage("a", true, 0, 3)
	base := v.Info().Base
	write(t, v, model, 5*4*mib+100*512, random(512*3, 2)) // a fourth extent, partly
	write(t, v, model, 1*4*mib+7, random(9, 3))           // one of the base's changed
	stage("b", true, 2, 4)
	if v.Info().Base != base {
		t.Fatal("a flush within the overlay's bound stored a new base map")
	}
	if err := v.Zero(ctx, 0, 4*mib, false); err != nil { // a base extent dropped: a third entry
		t.Fatal(err)
	}
	clear(model[:4*mib])
	stage("c", true, 0, 3)
	if v.Info().Base == base {
		t.Fatal("a flush past the overlay's bound kept the base map")
	}
	base = v.Info().Base
	if err := v.Zero(ctx, 1*4*mib, 4*mib, false); err != nil { // an extent dropped: "" in the overlay
		t.Fatal(err)
	}
	clear(model[4*mib : 8*mib])
	write(t, v, model, size-512, random(512, 4)) // the short last extent
	stage("d", true, 2, 3)
	if in := v.Info(); in.Base != base || !slices.Contains(mapsValues(in.Overlay), "") {
		t.Fatalf("dropping an extent of the base map: overlay %v", in.Overlay)
	}
	// Rebuilt: every stage reads as it was, from Managers that have no
	// base map decoded yet.
	for name, want := range models {
		s := open(t, e.overlayManager(t, 2), "v@"+name)
		if got := readAll(t, s); !bytes.Equal(got, want) {
			t.Fatalf("snapshot %s does not read as the volume did", name)
		}
		s.Close()
	}
	w := open(t, e.manager(t, 0), "v")
	defer w.Close()
	if got := readAll(t, w); !bytes.Equal(got, model) {
		t.Fatal("a new Manager reads the volume otherwise")
	}
	// A flush with nothing written stores nothing.
	in0, out0 := e.bytes()
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if in, out := e.bytes(); in != in0 || out != out0 {
		t.Fatalf("an empty flush moved %d bytes in, %d out", in-in0, out-out0)
	}
	// Rollback copies the snapshot's record: its base map and overlay.
	v.Close()
	if err := m.Rollback(ctx, "v", "v@b"); err != nil {
		t.Fatal(err)
	}
	s, _ := m.Stat(ctx, "v@b")
	r, _ := m.Stat(ctx, "v")
	if r.Base != s.Base || len(r.Overlay) != len(s.Overlay) || r.Stored() != s.Stored() {
		t.Fatalf("rollback: record %+v, snapshot's %+v", r, s)
	}
	v = open(t, e.overlayManager(t, 2), "v")
	if got := readAll(t, v); !bytes.Equal(got, models["b"]) {
		t.Fatal("rolled back: the volume does not read as its snapshot")
	}
	// Shrunk to fewer extents than its base map lists: a new base map,
	// so that growing again reads zeros there.
	v.Close()
	if err := m.Resize(ctx, "v", 4*mib); err != nil {
		t.Fatal(err)
	}
	if err := m.Resize(ctx, "v", size); err != nil {
		t.Fatal(err)
	}
	v = open(t, e.overlayManager(t, 2), "v")
	want := make([]byte, size)
	copy(want, models["b"][:4*mib])
	if got := readAll(t, v); !bytes.Equal(got, want) {
		t.Fatal("shrunk and grown: the volume does not read its first extent and zeros")
	}
}

func mapsValues(m map[int64]string) []string {
	var out []string
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// A record of the old format (every extent's capability in it, no base
// map) reads as before, is cloned as it is, and is migrated to a base map
// at the next flush of the volume; its clone is left as it was and reads
// the same.
func TestVolumeOldFormatRecord(t *testing.T) {
	e := newEnv(t)
	m := e.overlayManager(t, 2)
	ctx := ctxT(t)
	const size = 3*4*mib + 4096
	model := make([]byte, size)
	exts := map[string]string{}
	for _, idx := range []int64{0, 2, 3} {
		n := min(4*mib, size-idx*4*mib)
		data := random(int(n), 70+idx)
		rc, _, err := e.obj.Put(ctx, bytes.NewReader(data), n, codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, 4)
		if err != nil {
			t.Fatal(err)
		}
		copy(model[idx*4*mib:], data)
		exts[fmt.Sprint(idx)] = rc.String()
	}
	raw, err := json.Marshal(map[string]any{"size": size, "extent": volume.ExtentSize, "gen": 7, "extents": exts})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cat.Put(ctx, "old", raw); err != nil {
		t.Fatal(err)
	}
	in, err := m.Stat(ctx, "old")
	if err != nil || in.Stored() != 3 || in.Gen != 7 || in.Base != "" || len(in.Extents) != 3 {
		t.Fatalf("old record: %+v, %v", in, err)
	}
	if refs := e.references(t); len(refs) != 3 {
		t.Fatalf("old record: %d references, want its 3 extents", len(refs))
	}
	if err := m.Clone(ctx, "old", "old2", false); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "old")
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("a volume of the old format reads otherwise")
	}
	write(t, v, model, 4*mib+512, random(1024, 79))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	raw, _ = e.cat.Get(ctx, "old")
	if strings.Contains(string(raw), `"extents"`) {
		t.Fatalf("the flushed record is still of the old format: %s", raw)
	}
	in, err = m.Stat(ctx, "old")
	if err != nil || in.Base == "" || len(in.Overlay) != 0 || in.Stored() != 4 || in.Gen != 8 {
		t.Fatalf("migrated record: %+v, %v", in, err)
	}
	c, _ := m.Stat(ctx, "old2")
	if len(c.Extents) != 3 || c.Base != "" {
		t.Fatalf("the clone's record changed: %+v", c)
	}
	for name, want := range map[string][]byte{"old": model, "old2": nil} {
		v := open(t, e.overlayManager(t, 2), name)
		got := readAll(t, v)
		v.Close()
		if want == nil { // the clone: the old contents
			want = make([]byte, size)
			for idx, sd := range map[int64]int64{0: 70, 2: 72, 3: 73} {
				copy(want[idx*4*mib:], random(int(min(4*mib, size-idx*4*mib)), sd))
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s reads otherwise after the migration", name)
		}
	}
}

// Damaged records and base maps are errors naming the volume: an overlay
// past MaxOverlay, an overlay beside a whole map, a base map that is not
// a capability, one whose object is not a base map.
func TestVolumeBadBaseMap(t *testing.T) {
	e := newEnv(t)
	m := e.manager(t, 0)
	ctx := ctxT(t)
	rc, _, err := e.obj.Put(ctx, strings.NewReader("not a map"), 9, codec.Params{K: 2, N: 4, SegmentSize: 1 << 20}, 4)
	if err != nil {
		t.Fatal(err)
	}
	big := map[string]string{}
	for i := range volume.MaxOverlay + 1 {
		big[fmt.Sprint(i)] = rc.String()
	}
	for name, rec := range map[string]map[string]any{
		"overlay-big":  {"size": 2 << 30, "extent": volume.ExtentSize, "overlay": big},
		"both":         {"size": 8 * mib, "extent": volume.ExtentSize, "overlay": map[string]string{"0": ""}, "extents": map[string]string{"1": rc.String()}},
		"base-bad-cap": {"size": 8 * mib, "extent": volume.ExtentSize, "base": "URI:nope"},
	} {
		raw, _ := json.Marshal(rec)
		e.cat.Put(ctx, name, raw)
		if _, err := m.Stat(ctx, name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: Stat: %v", name, err)
		}
		e.cat.Delete(ctx, name)
	}
	raw, _ := json.Marshal(map[string]any{"size": 8 * mib, "extent": volume.ExtentSize, "base": rc.String()})
	e.cat.Put(ctx, "notmap", raw)
	if _, err := m.Open(ctx, "notmap"); err == nil || !strings.Contains(err.Error(), "base map") {
		t.Fatalf("open with a base map that is not one: %v", err)
	}
	recs, _ := e.cat.List(ctx)
	if refs, err := volume.References(ctx, e.obj, recs); err == nil || !slices.Contains(refs, rc.String()) {
		t.Fatalf("References with a base map that is not one: %v, %d", err, len(refs))
	}
}

// References names a clone's base map and every extent it lists after
// the parent that wrote them is deleted, with the clone's own extents;
// once the clone has written a new base map, the old one and the extents
// only it listed are no longer named.
func TestVolumeReferencesBaseSharedByClone(t *testing.T) {
	e := newEnv(t)
	m := e.overlayManager(t, 1)
	ctx := ctxT(t)
	if err := m.Create(ctx, "parent", 12*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "parent")
	model := make([]byte, 12*mib)
	write(t, v, model, 0, random(12*mib, 90))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	v.Close()
	base := func(name string) string {
		in, err := m.Stat(ctx, name)
		if err != nil || in.Base == "" {
			t.Fatalf("%s: no base map: %+v %v", name, in, err)
		}
		return in.Base
	}
	b1 := base("parent")
	before := e.references(t)
	if len(before) != 4 || !slices.Contains(before, b1) {
		t.Fatalf("parent: %d references, want its base map and 3 extents", len(before))
	}
	if err := m.Clone(ctx, "parent", "child", false); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove(ctx, "parent"); err != nil {
		t.Fatal(err)
	}
	if got := e.references(t); !slices.Equal(got, before) {
		t.Fatalf("parent deleted: the clone's references are %d, were %d", len(got), len(before))
	}
	c := open(t, m, "child")
	write(t, c, model, 0, random(4096, 91)) // in the overlay
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mid := e.references(t)
	if len(mid) != 5 || !slices.Contains(mid, b1) {
		t.Fatalf("child with an overlay: %d references, want 5 with the base map", len(mid))
	}
	write(t, c, model, 4*mib, random(4096, 92)) // past the bound: a new base map
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	after := e.references(t)
	b2 := base("child")
	if len(after) != 4 || slices.Contains(after, b1) || !slices.Contains(after, b2) {
		t.Fatalf("child compacted: %d references (want 4), old base map named %v", len(after), slices.Contains(after, b1))
	}
	var freed int
	for _, r := range before {
		if !slices.Contains(after, r) {
			freed++
		}
	}
	if freed != 3 { // b1 and the first two extents
		t.Fatalf("%d of the parent's objects no longer named, want 3", freed)
	}
	c = open(t, e.manager(t, 0), "child")
	defer c.Close()
	if got := readAll(t, c); !bytes.Equal(got, model) {
		t.Fatal("the clone reads otherwise")
	}
}

// A commit whose new base map cannot be stored (happiness unmet) fails
// and commits nothing: the record still names the old base map, a new
// handle reads what the last commit held, and the handle keeps its
// changes; once the node is back the flush stores the base map and
// commits.
func TestVolumeBaseMapStoreFailsCommitsNothing(t *testing.T) {
	e := newEnv(t)
	m := e.overlayManager(t, 1)
	ctx := ctxT(t)
	if err := m.Create(ctx, "f", 12*mib); err != nil {
		t.Fatal(err)
	}
	v := open(t, m, "f")
	defer v.Close()
	model := make([]byte, 12*mib)
	write(t, v, model, 0, random(12*mib, 15))
	if err := v.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	old := v.Info()
	// Dropping two extents needs no grid but overflows the overlay: the
	// commit must store a base map.
	if err := v.Zero(ctx, 0, 8*mib, false); err != nil {
		t.Fatal(err)
	}
	e.g.Kill(2) // happiness 4 cannot be met
	if err := v.Flush(ctx); err == nil || !strings.Contains(err.Error(), "base map") {
		t.Fatalf("flush with the base map not storable: %v", err)
	}
	if in, _ := m.Stat(ctx, "f"); in.Gen != old.Gen || in.Base != old.Base {
		t.Fatalf("a failed base map store committed: %+v, was %+v", in, old)
	}
	w := open(t, e.manager(t, 0), "f")
	got := readAll(t, w)
	w.Close()
	if !bytes.Equal(got, model) {
		t.Fatal("after the failed commit a new handle does not read the last commit")
	}
	clear(model[:8*mib])
	if got := readAll(t, v); !bytes.Equal(got, model) {
		t.Fatal("the handle lost its changes with the failed commit")
	}
	e.g.Restart(2)
	e.g.WaitAlive(4)
	// The client's view of which nodes are alive may lag the node's
	// return by a couple of seconds: the retry may fail until it catches
	// up, and must then commit.
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := v.Flush(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if in := v.Info(); in.Base == old.Base || in.Gen != old.Gen+1 || len(in.Overlay) != 0 || in.Stored() != 1 {
		t.Fatalf("retried commit: %+v", in)
	}
	w = open(t, e.manager(t, 0), "f")
	defer w.Close()
	if got := readAll(t, w); !bytes.Equal(got, model) {
		t.Fatal("after the retried flush a new handle reads other bytes")
	}
}
