package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
)

// On a versioned bucket the grid objects of noncurrent versions (kept by
// an overwrite or behind a delete marker) are renewed by the walk and
// survive the retirer; a version deleted for good is released and its
// shares go; a null version replaced on a suspended bucket goes too.
func TestVersionLeases(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(),
		Objects: g.Objects(object.Options{LeaseTerm: time.Hour}), NoSync: true, SyncEvery: 200 * time.Millisecond,
		LeaseRenew: -1, CancelDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if err := gw.CreateBucket(ctx, "vgc", ""); err != nil {
		t.Fatal(err)
	}
	if err := gw.SetVersioning(ctx, "vgc", "On"); !errors.Is(err, gateway.ErrBadVersioning) {
		t.Fatalf("versioning On: %v", err)
	}
	if err := gw.SetVersioning(ctx, "vgc", gateway.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	si := func(info gateway.ObjectInfo) sharefile.SI {
		t.Helper()
		rc, err := codec.ParseReadCap(info.Cap)
		if err != nil {
			t.Fatal(err)
		}
		return rc.Key.StorageIndex()
	}
	shares := func(s sharefile.SI) int {
		n := 0
		for _, nd := range g.Nodes {
			infos, _ := nd.Store().List(ctx, s)
			n += len(infos)
		}
		return n
	}
	waitGone := func(what string, s sharefile.SI) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for shares(s) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d shares still there", what, shares(s))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	put := func(key string, body []byte) gateway.ObjectInfo {
		t.Helper()
		info, err := gw.Put(ctx, "vgc", key, bytes.NewReader(body), int64(len(body)), gateway.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	body1 := randBytes(40_000)
	a1, a2 := put("a", body1), put("a", randBytes(30_000))
	if a1.VersionID == "" || a2.VersionID == "" || a1.VersionID == a2.VersionID {
		t.Fatalf("version IDs %q, %q", a1.VersionID, a2.VersionID)
	}
	n1 := shares(si(a1))
	if n1 == 0 || shares(si(a2)) == 0 {
		t.Fatal("no shares stored")
	}
	// A delete writes a marker: both versions stay.
	if res, err := gw.DeleteObject(ctx, "vgc", "a"); err != nil || !res.DeleteMarker || res.VersionID == "" {
		t.Fatalf("delete: %+v %v", res, err)
	}
	// The file tree, like ListObjects, shows no versions and no marker.
	if l, err := gw.TreeStore("vgc").List(ctx, "", "", "", 100); err != nil || len(l.Objects) != 0 {
		t.Fatalf("tree listing of a bucket with only old versions: %+v %v", l, err)
	}
	rep, err := gw.RenewLeases(ctx)
	if err != nil || rep.Objects != 2 || rep.Renewed != 2 {
		t.Fatalf("renewal walk: %+v, %v; want both versions renewed", rep, err)
	}
	// Deleting the newer version for good releases it, not the older.
	if _, err := gw.DeleteObjectVersion(ctx, "vgc", "a", a2.VersionID); err != nil {
		t.Fatal(err)
	}
	waitGone("version deleted for good", si(a2))
	if n := shares(si(a1)); n != n1 {
		t.Fatalf("noncurrent version: %d shares, want %d", n, n1)
	}
	info, inline, err := gw.LookupVersion(ctx, "vgc", "a", a1.VersionID)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := gw.ReadVersion(ctx, info, inline, &out, 0, info.Size); err != nil || !bytes.Equal(out.Bytes(), body1) {
		t.Fatalf("old version read: %v", err)
	}
	// A delete through the file tree writes a marker too: the version
	// stays.
	b1 := put("b", randBytes(20_000))
	if err := gw.TreeStore("vgc").Apply(ctx, []tree.Op{{Key: "b", Delete: true}}); err != nil {
		t.Fatal(err)
	}
	// Suspended: a null version replaced by another goes.
	if err := gw.SetVersioning(ctx, "vgc", gateway.VersioningSuspended); err != nil {
		t.Fatal(err)
	}
	x1 := put("x", randBytes(20_000))
	if x1.VersionID != "" {
		t.Fatalf("suspended bucket: version %q, want null", x1.VersionID)
	}
	put("x", randBytes(20_000))
	waitGone("null version replaced", si(x1))
	if _, err := gw.DeleteObjectVersion(ctx, "vgc", "a", a1.VersionID); err != nil {
		t.Fatal(err)
	}
	waitGone("last version deleted for good", si(a1))
	if n := shares(si(b1)); n == 0 {
		t.Fatal("version behind the file tree's delete marker lost its shares")
	}
	if rep, err := gw.RenewLeases(ctx); err != nil || rep.Objects != 2 {
		t.Fatalf("renewal walk at the end: %+v, %v; want 2 (b's version, x)", rep, err)
	}
	if _, err := gw.DeleteObjectVersion(ctx, "vgc", "a", a1.VersionID); !errors.Is(err, gateway.ErrNoVersion) {
		t.Fatalf("deleted version deleted again: %v", err)
	}
}

// TestVersionsAtAnotherGateway: a second gateway sharing the registry
// reads versions the first wrote by their IDs (pulling the bucket on a
// miss), lists them, and once its registry has the bucket's versioning
// its own writes keep versions too.
func TestVersionsAtAnotherGateway(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	open := func(dir string) *gateway.Gateway {
		gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
			NoSync: true, SyncEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gw.Close() })
		return gw
	}
	dir1, dir2 := t.TempDir(), t.TempDir()
	gw1 := open(dir1)
	if err := gw1.CreateBucket(ctx, "vshared", ""); err != nil {
		t.Fatal(err)
	}
	if err := gw1.SetVersioning(ctx, "vshared", gateway.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	reg, err := os.ReadFile(filepath.Join(dir1, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	gw2 := open(dir2)
	if err := gw2.SyncRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	put := func(gw *gateway.Gateway, body string) gateway.ObjectInfo {
		t.Helper()
		info, err := gw.Put(ctx, "vshared", "k", bytes.NewReader([]byte(body)), int64(len(body)), gateway.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	v1 := put(gw1, "one")
	v2 := put(gw1, "two")
	// The other gateway writes the key once it has seen both versions:
	// two gateways writing one versioned key at the same moment can lose
	// a version (docs/s3.md, "Not yet").
	for deadline := time.Now().Add(30 * time.Second); ; {
		l, err := gw2.ListVersions(ctx, "vshared", "", "", "", "", 10)
		if err == nil && len(l.Versions) == 2 && l.Versions[0].VersionID == v2.VersionID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versions at the second gateway: %+v %v", l, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	info, inline, err := gw2.LookupVersion(ctx, "vshared", "k", v1.VersionID)
	if err != nil || string(inline) != "one" || info.VersionID != v1.VersionID {
		t.Fatalf("other gateway, old version: %q %+v %v", inline, info, err)
	}
	v3 := put(gw2, "three")
	if v3.VersionID == "" {
		t.Fatal("other gateway's write to a versioned bucket is the null version")
	}
	// The first gateway sees the other's write once it has pulled the
	// bucket (its periodic sync, about a second).
	for deadline := time.Now().Add(30 * time.Second); ; {
		l, err := gw1.ListVersions(ctx, "vshared", "", "", "", "", 10)
		if err == nil && len(l.Versions) == 3 && l.Versions[0].VersionID == v3.VersionID && l.Versions[0].IsLatest && l.Versions[2].VersionID == v1.VersionID {
			break
		}
		if err != nil || len(l.Versions) > 3 || time.Now().After(deadline) {
			t.Fatalf("versions at the first gateway: %+v %v", l, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
