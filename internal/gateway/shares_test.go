package gateway_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestShareRecords: share links stored by one gateway are found by a
// second sharing its registry, listed by owner, and gone from both once
// deleted through either; malformed tokens are refused, and the record
// set cannot be written as generic records. Grants go the same way.
func TestShareRecords(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	dir1, dir2 := t.TempDir(), t.TempDir()
	gw1 := openGateway(t, g, dir1)
	reg, err := os.ReadFile(filepath.Join(dir1, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	gw2 := openGateway(t, g, dir2)

	if _, err := gw1.Share(ctx, "AAAAAAAAAAAAAAAAAAAAAAAA"); !errors.Is(err, gateway.ErrNoShare) {
		t.Fatalf("before any link: %v", err)
	}
	a := gateway.ShareLink{Token: "tokA_tokA-tokA_tokA-tokA", Owner: "alice", Bucket: "alice-files", Path: "docs", Mode: "read",
		Created: time.Now().UTC().Truncate(time.Second), Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
	b := gateway.ShareLink{Token: "tokB_tokB-tokB_tokB-tokB", Owner: "bob", Bucket: "bob-files", Path: "", Mode: "upload",
		PasswordHash: "$argon2id$x", Secret: []byte{1, 2, 3}, Created: a.Created}
	for _, s := range []gateway.ShareLink{a, b} {
		if err := gw1.PutShare(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := gw2.Share(ctx, b.Token)
	if err != nil || got.Owner != "bob" || got.Mode != "upload" || string(got.Secret) != "\x01\x02\x03" || got.PasswordHash != b.PasswordHash {
		t.Fatalf("second gateway: %+v %v", got, err)
	}
	got, err = gw2.Share(ctx, a.Token)
	if err != nil || !got.Expires.Equal(a.Expires) || got.Path != "docs" {
		t.Fatalf("second gateway: %+v %v", got, err)
	}
	ls, err := gw2.Shares(ctx, "alice")
	if err != nil || len(ls) != 1 || ls[0].Token != a.Token {
		t.Fatalf("alice's links: %+v %v", ls, err)
	}
	if all, _ := gw2.Shares(ctx, ""); len(all) != 2 {
		t.Fatalf("every link: %+v", all)
	}
	if err := gw1.DeleteShare(ctx, a.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := gw1.Share(ctx, a.Token); !errors.Is(err, gateway.ErrNoShare) {
		t.Fatalf("deleted, on its gateway: %v", err)
	}
	// The other gateway holds the record until its replica syncs.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := gw2.Share(ctx, a.Token)
		if errors.Is(err, gateway.ErrNoShare) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted through the first gateway, the second still finds it: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := gw2.DeleteShare(ctx, a.Token); !errors.Is(err, gateway.ErrNoShare) {
		t.Fatalf("delete again: %v", err)
	}
	for _, tok := range []string{"", "short", "../../keys/x/aaaaaaaaaaaaaaaa", "AAAAAAAAAAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAAAAAAAAA/"} {
		if err := gw1.PutShare(ctx, gateway.ShareLink{Token: tok}); !errors.Is(err, gateway.ErrBadRecord) {
			t.Errorf("token %q: %v", tok, err)
		}
		if _, err := gw1.Share(ctx, tok); !errors.Is(err, gateway.ErrNoShare) {
			t.Errorf("lookup %q: %v", tok, err)
		}
	}
	if err := gw1.PutRecord(ctx, "shares", b.Token, []byte("{}")); !errors.Is(err, gateway.ErrBadRecord) {
		t.Fatalf("generic record in the shares set: %v", err)
	}

	// Grants, the same way.
	gr := gateway.Grant{ID: "grnt_grnt-grnt_grnt-grnt", Owner: "alice", Bucket: "alice-files", Path: "docs", With: "group:staff", Perm: "write", Created: a.Created}
	if err := gw1.PutGrant(ctx, gr); err != nil {
		t.Fatal(err)
	}
	if got, err := gw2.Grant(ctx, gr.ID); err != nil || got != gr {
		t.Fatalf("grant on the second gateway: %+v %v", got, err)
	}
	if gs, err := gw2.Grants(ctx); err != nil || len(gs) != 1 || gs[0] != gr {
		t.Fatalf("grants: %+v %v", gs, err)
	}
	if err := gw2.DeleteGrant(ctx, gr.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := gw2.Grant(ctx, gr.ID); !errors.Is(err, gateway.ErrNoGrant) {
		t.Fatalf("deleted grant: %v", err)
	}
	if err := gw1.PutGrant(ctx, gateway.Grant{ID: "../x"}); !errors.Is(err, gateway.ErrBadRecord) {
		t.Fatalf("bad grant ID: %v", err)
	}
}
