package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// An object put through the gateway is in every live node's repair
// registry (its verify capability, never its read capability); a renewal
// walk registers again what the registries lost; and once a node holding
// its shares is gone for good, the nodes' repairers bring it back to n
// good shares with nothing but the registry.
func TestGatewayRegistersForRepair(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 6})
	g.WaitAlive(6)
	dir := t.TempDir()
	open := func() *gateway.Gateway {
		gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
			NoSync: true, LeaseRenew: -1, CancelDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		return gw
	}
	gw := open()
	if err := gw.CreateBucket(ctx, "rpb", ""); err != nil {
		t.Fatal(err)
	}
	body := randBytes(50_000)
	info, err := gw.Put(ctx, "rpb", "k", bytes.NewReader(body), int64(len(body)), gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := codec.ParseReadCap(info.Cap)
	if err != nil {
		t.Fatal(err)
	}
	vc := rc.Verify()
	registered := func() int {
		n := 0
		for _, nd := range g.Nodes {
			if nd == nil {
				continue
			}
			reg, err := nd.Registered()
			if err != nil {
				t.Fatal(err)
			}
			switch e, ok := reg[vc.SI]; {
			case !ok:
			case e != vc.String():
				t.Fatalf("registry entry %q, want the verify capability %q", e, vc.String())
			default:
				n++
			}
		}
		return n
	}
	// The put registers in the background, soon after it returns.
	for deadline := time.Now().Add(10 * time.Second); registered() != 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the put, %d of 6 nodes have the object in their repair registry", registered())
		}
	}

	// The registries lose the entry; a gateway started afresh registers
	// it again on its renewal walk.
	gw.Close()
	for _, nd := range g.Nodes {
		if err := nd.Unregister(vc.SI); err != nil {
			t.Fatal(err)
		}
	}
	if n := registered(); n != 0 {
		t.Fatalf("%d registries still have the entry", n)
	}
	gw = open()
	t.Cleanup(func() { gw.Close() })
	if _, err := gw.RenewLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if n := registered(); n != 6 {
		t.Fatalf("after the renewal walk, %d of 6 nodes have the object in their repair registry", n)
	}

	// A node holding shares goes for good; the others' repairers rebuild.
	victim := -1
	for i, nd := range g.Nodes {
		if infos, _ := nd.Store().List(ctx, vc.SI); len(infos) > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("no node holds a share")
	}
	g.Kill(victim)
	g.WaitAlive(5)
	for i, nd := range g.Nodes {
		if nd == nil || i == victim {
			continue
		}
		r, err := repairer.New(repairer.Config{Node: nd, Every: 100 * time.Millisecond, Budget: 64 << 20, Stall: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
	}
	check := g.Objects(object.Options{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep, err := check.Check(ctx, vc, true)
		if err == nil && rep.Clean() && rep.Good == rep.Total {
			break
		}
		if time.Now().After(deadline) {
			if err == nil {
				t.Fatalf("object not repaired: %d of %d shares good", rep.Good, rep.Total)
			}
			t.Fatalf("object not repaired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got bytes.Buffer
	if _, err := gw.Get(ctx, "rpb", "k", &got, 0, -1); err != nil || !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("read after repair: %v (%d bytes)", err, got.Len())
	}
}

// The objects a gateway writes just before it stops, still waiting for
// their batch, are in every node's repair registry once Close returns.
func TestGatewayRegistersQueuedAtClose(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 4})
	g.WaitAlive(4)
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, LeaseRenew: -1, CancelDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.CreateBucket(ctx, "rqc", ""); err != nil {
		t.Fatal(err)
	}
	var sis []sharefile.SI
	for i := range 5 {
		body := randBytes(20_000)
		info, err := gw.Put(ctx, "rqc", fmt.Sprint("k", i), bytes.NewReader(body), int64(len(body)), gateway.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := codec.ParseReadCap(info.Cap)
		if err != nil {
			t.Fatal(err)
		}
		sis = append(sis, rc.Key.StorageIndex())
	}
	gw.Close()
	for i, nd := range g.Nodes {
		reg, err := nd.Registered()
		if err != nil {
			t.Fatal(err)
		}
		for _, si := range sis {
			if reg[si] == "" {
				t.Fatalf("node %d: an object written before Close is not in its repair registry", i)
			}
		}
	}
}
