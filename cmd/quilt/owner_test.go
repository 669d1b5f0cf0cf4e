package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Only the owner deletes (issue 22): on a grid of real processes, an
// object stored by `quilt put` keeps every share when a node (with its
// own identity and its repairer's lease key), a gateway that is not its
// owner (a real `quilt gateway` of another $QUILT_HOME, with objects of
// its own) and a stranger with the invite (a fresh $QUILT_HOME) try to
// delete it; then the owner's `quilt rm` deletes every share.
func TestOnlyOwnerDeletesProcesses(t *testing.T) {
	g := startTestGrid(t, 3)
	rc, vc := putForRepair(t, g, 100<<10, 2, 3)
	files := func() []string {
		var all []string
		for i := range 3 {
			all = append(all, shareFiles(t, g, i, vc)...)
		}
		slices.Sort(all)
		return all
	}
	before := files()
	if len(before) != 3 {
		t.Fatalf("the object has %d share files, want 3", len(before))
	}
	// other returns the grid with a $QUILT_HOME of its own.
	other := func(name string) *testGrid {
		o := *g
		o.env = append(slices.Clone(g.env), "QUILT_HOME="+filepath.Join(g.base, name))
		return &o
	}

	// A stranger with the invite.
	stranger := other("stranger")
	if out, _, err := stranger.quilt(nil, "rm", rc); err == nil {
		t.Fatalf("a stranger's quilt rm succeeded:\n%s", out)
	}

	// A gateway that is not the owner: its lease key is the one of its
	// own objects.
	gwGrid := other("gateway-home")
	gw := &chaosGateway{g: gwGrid, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0"}
	t.Cleanup(gw.kill)
	gw.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := gw.client()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("own")}); err != nil {
		t.Fatal(err)
	}
	mine := make([]byte, 50<<10)
	rand.Read(mine)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("own"), Key: aws.String("k"), Body: bytes.NewReader(mine)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(g.base, "gateway-home", "client", "lease.key")); err != nil {
		t.Fatalf("the gateway has no lease key of its own: %v", err)
	}
	if out, _, err := gwGrid.quilt(nil, "rm", rc); err == nil {
		t.Fatalf("quilt rm with the gateway's lease key succeeded:\n%s", out)
	}

	// A node, with its own identity, cancelling and deleting with its
	// repairer's lease key, on every node.
	inv, err := identity.ParseInvite(g.invite)
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.LoadOrCreateKey(g.nodeDir(0))
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.New(key, inv.Secret)
	if err != nil {
		t.Fatal(err)
	}
	self := identity.IDFromPublicKey(key.Public().(ed25519.PublicKey)).String()
	nc := node.NewClient(inv, id)
	ms, err := nc.Members(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := os.ReadFile(filepath.Join(g.nodeDir(0), "repair.key"))
	if err != nil {
		t.Fatal(err)
	}
	repairKey, err := hex.DecodeString(strings.TrimSpace(string(rk)))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, repairKey)
	m.Write(vc.SI[:])
	secret := m.Sum(nil)
	forbidden := 0
	for _, mb := range ms {
		_, err := nc.CancelLeases(ctx, mb.ID, vc.SI, secret)
		if errors.Is(err, sharestore.ErrForbidden) {
			forbidden++
		} else if !errors.Is(err, sharestore.ErrNotFound) {
			t.Fatalf("node %.8s's cancel on %.8s: %v, want forbidden", self, mb.ID, err)
		}
		for sh := range vc.N {
			err := nc.DeleteShare(ctx, mb.ID, sharestore.Key{SI: vc.SI, Share: sh}, secret)
			if !errors.Is(err, sharestore.ErrForbidden) && !errors.Is(err, sharestore.ErrNotFound) {
				t.Fatalf("node %.8s's delete of share %d on %.8s: %v, want forbidden", self, sh, mb.ID, err)
			}
		}
	}

	if forbidden != 3 {
		t.Fatalf("%d nodes refused the node's cancel, want the 3 that hold a share", forbidden)
	}
	if after := files(); !slices.Equal(after, before) {
		t.Fatalf("share files %v after the attempts, want %v", after, before)
	}
	if _, _, err := g.quilt(nil, "get", rc); err != nil {
		t.Fatalf("the object does not read after the attempts: %v", err)
	}
	// The owner can.
	if out, _, err := g.quilt(nil, "rm", rc); err != nil || !strings.Contains(out, "shares deleted") {
		t.Fatalf("the owner's quilt rm: %v\n%s", err, out)
	}
	if left := files(); len(left) != 0 {
		t.Fatalf("the owner's quilt rm left %v", left)
	}
}
