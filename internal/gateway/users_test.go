package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/tree"
)

// TestAccounts: a user made with CreateUser has a home bucket and an S3
// key that owns it; their password and app passwords log in, a wrong
// password and an unknown name do not (both ErrDenied); a new password
// ends the old one, cached or not; a revoked app password and a removed
// user log in no more; a second gateway sharing the registry knows the
// accounts; names and passwords are checked.
func TestAccounts(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	dir := t.TempDir()
	gw := openGateway(t, g, dir)

	alice, key, err := gw.CreateUser(ctx, gateway.NewUser{Name: "alice", Password: "correct horse", Groups: []string{"staff", "staff", "admins"}, Quota: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if alice.Home != "home-alice" || alice.KeyID != key.ID || alice.Quota != 1<<20 || strings.Join(alice.Groups, ",") != "admins,staff" || alice.Admin {
		t.Fatalf("user %+v, key %s", alice, key.ID)
	}
	if k, err := gw.Key(ctx, key.ID); err != nil || k.Secret != key.Secret || !k.Allowed("home-alice", gateway.Owner) || k.Allowed("other", gateway.Read) || k.Admin {
		t.Fatalf("the home key: %v %+v", err, k)
	}
	if _, err := gw.Head(ctx, "home-alice", "nothing"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("the home bucket: %v", err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "alice", Password: "another one"}); !errors.Is(err, gateway.ErrUserExists) {
		t.Fatalf("alice twice: %v", err)
	}

	for _, bad := range []string{"", "Alice", "1bob", "bob-", "b--b", "bob_x", "bob.x", strings.Repeat("a", 33), "bob/x", "a\x00", "x-s3alias"} {
		if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: bad, Password: "long enough"}); !errors.Is(err, gateway.ErrBadName) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	for _, good := range []string{"b", "bob-2", strings.Repeat("a", 32)} {
		if err := gateway.CheckName(good); err != nil {
			t.Errorf("name %q: %v", good, err)
		}
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "short"}); !errors.Is(err, gateway.ErrBadPassword) {
		t.Fatalf("short password: %v", err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "long enough", Quota: -1}); err == nil {
		t.Fatal("a negative quota was taken")
	}

	auth := func(name, pw string) error {
		u, err := gw.Authenticate(ctx, name, pw)
		if err == nil && u.Name != name {
			return fmt.Errorf("authenticated as %q", u.Name)
		}
		return err
	}
	if err := auth("alice", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if err := auth("alice", "correct horse"); err != nil { // cached
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"alice", "wrong horse"}, {"alice", ""}, {"nobody", "correct horse"}, {"Alice", "correct horse"}, {"../keys", "x"}, {"alice", strings.Repeat("x", 5000)}} {
		if err := auth(c[0], c[1]); !errors.Is(err, gateway.ErrDenied) {
			t.Errorf("%q/%q: %v, want ErrDenied", c[0], c[1], err)
		}
	}

	// App passwords: each logs in, the password still does, a revoked one
	// does not (even cached), the others stay.
	ap1, s1, err := gw.AddAppPassword(ctx, "alice", "laptop sync")
	if err != nil {
		t.Fatal(err)
	}
	ap2, s2, err := gw.AddAppPassword(ctx, "alice", "phone")
	if err != nil {
		t.Fatal(err)
	}
	if len(s1) != 32 || s1 == s2 || ap1.ID == ap2.ID || ap1.Hash != "" {
		t.Fatalf("app passwords %+v %q, %+v %q", ap1, s1, ap2, s2)
	}
	for _, s := range []string{s1, s2, s1, "correct horse"} {
		if err := auth("alice", s); err != nil {
			t.Fatalf("app password %q: %v", s, err)
		}
	}
	if _, _, err := gw.AddAppPassword(ctx, "alice", ""); !errors.Is(err, gateway.ErrBadLabel) {
		t.Fatalf("empty label: %v", err)
	}
	if _, _, err := gw.AddAppPassword(ctx, "nobody", "x"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("app password of nobody: %v", err)
	}
	u, err := gw.User(ctx, "alice")
	if err != nil || len(u.AppPasswords) != 2 || u.AppPasswords[0].Label != "laptop sync" || u.AppPasswords[0].Hash != "" {
		t.Fatalf("alice's app passwords: %v %+v", err, u.AppPasswords)
	}
	if err := gw.RemoveAppPassword(ctx, "alice", ap1.ID); err != nil {
		t.Fatal(err)
	}
	if err := gw.RemoveAppPassword(ctx, "alice", ap1.ID); !errors.Is(err, gateway.ErrNoAppPassword) {
		t.Fatalf("revoked twice: %v", err)
	}
	if err := auth("alice", s1); !errors.Is(err, gateway.ErrDenied) {
		t.Fatalf("a revoked app password: %v", err)
	}
	if err := auth("alice", s2); err != nil {
		t.Fatalf("the other app password after a revocation: %v", err)
	}

	// A second gateway on the same registry (another process) changes the
	// password: this one refuses the old password, which it had cached,
	// as soon as its replica has the record.
	gw2 := openGateway(t, g, copyRegistry(t, dir))
	if _, err := gw2.User(ctx, "alice"); err != nil {
		t.Fatalf("the second gateway: %v", err)
	}
	if err := gw2.SetPassword(ctx, "alice", "battery staple"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the old password refused", func() bool { return auth("alice", "correct horse") != nil })
	if err := auth("alice", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if err := gw.SetPassword(ctx, "alice", "x"); !errors.Is(err, gateway.ErrBadPassword) {
		t.Fatalf("short new password: %v", err)
	}
	if err := gw.SetPassword(ctx, "nobody", "long enough"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("password of nobody: %v", err)
	}

	// Settings and groups.
	yes, q := true, int64(5000)
	if u, err := gw.UpdateUser(ctx, "alice", gateway.UserChange{Admin: &yes, Quota: &q}); err != nil || !u.Admin || u.Quota != 5000 {
		t.Fatalf("update: %v %+v", err, u)
	}
	if gw.QuotaOf("home-alice") != 5000 {
		t.Fatalf("quota of home-alice: %d", gw.QuotaOf("home-alice"))
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "bob's password", Home: "shared"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.CreateGroup(ctx, "staff"); !errors.Is(err, gateway.ErrGroupExists) {
		t.Fatalf("staff twice: %v", err)
	}
	if err := gw.SetMembership(ctx, "staff", []string{"bob"}, true); err != nil {
		t.Fatal(err)
	}
	if err := gw.SetMembership(ctx, "nogroup", []string{"bob"}, true); !errors.Is(err, gateway.ErrNoGroup) {
		t.Fatalf("membership of a missing group: %v", err)
	}
	members := func() map[string]string {
		gs, err := gw.Groups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, gr := range gs {
			m[gr.Name] = strings.Join(gr.Members, ",")
		}
		return m
	}
	if m := members(); m["staff"] != "alice,bob" || m["admins"] != "alice" {
		t.Fatalf("groups %v", m)
	}
	// Shares given to a group or a user go with them: a group or account
	// made later under the same name does not inherit them.
	grantTo := func(id, with string) {
		t.Helper()
		if err := gw.PutGrant(ctx, gateway.Grant{ID: id, Owner: "alice", Bucket: "home-alice", Path: "docs", With: with, Perm: "read", Created: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	grantGone := func(id string) bool {
		t.Helper()
		_, err := gw.Grant(ctx, id)
		return errors.Is(err, gateway.ErrNoGrant)
	}
	grantTo("toStaff00000000000000000", "group:staff")
	grantTo("toAdmins0000000000000000", "group:admins")
	grantTo("toBob0000000000000000000", "user:bob")
	grantTo("toAlice00000000000000000", "user:alice")
	if err := gw.DeleteGroup(ctx, "staff"); err != nil {
		t.Fatal(err)
	}
	if !grantGone("toStaff00000000000000000") || grantGone("toAdmins0000000000000000") || grantGone("toBob0000000000000000000") {
		t.Fatal("deleting the group staff: its share should go, the others stay")
	}
	if m := members(); len(m) != 1 || m["admins"] != "alice" {
		t.Fatalf("groups after deleting staff: %v", m)
	}
	if u, _ := gw.User(ctx, "bob"); len(u.Groups) != 0 || u.Home != "shared" {
		t.Fatalf("bob after staff went: %+v", u)
	}

	// Removal: the login and the key go; the home stays unless purged.
	if err := auth("bob", "bob's password"); err != nil {
		t.Fatal(err)
	}
	bob, _ := gw.User(ctx, "bob")
	if _, err := gw.Put(ctx, "shared", "kept.txt", strings.NewReader("kept"), 4, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := gw.DeleteUser(ctx, "bob", false); err != nil {
		t.Fatal(err)
	}
	if err := auth("bob", "bob's password"); !errors.Is(err, gateway.ErrDenied) {
		t.Fatalf("a removed user logged in: %v", err)
	}
	if !grantGone("toBob0000000000000000000") || grantGone("toAdmins0000000000000000") || grantGone("toAlice00000000000000000") {
		t.Fatal("removing bob: the share with him should go, the others stay")
	}
	if _, err := gw.Key(ctx, bob.KeyID); !errors.Is(err, gateway.ErrDenied) {
		t.Fatalf("a removed user's key: %v", err)
	}
	if _, err := gw.Head(ctx, "shared", "kept.txt"); err != nil {
		t.Fatalf("the home of a user removed without purge: %v", err)
	}
	if err := gw.DeleteUser(ctx, "bob", false); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("removed twice: %v", err)
	}
	if _, err := gw.Put(ctx, "home-alice", "a.txt", strings.NewReader("alice's"), 7, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := gw.DeleteUser(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Head(ctx, "home-alice", "a.txt"); !errors.Is(err, gateway.ErrNoBucket) {
		t.Fatalf("a purged home: %v", err)
	}
	if err := auth("alice", "battery staple"); !errors.Is(err, gateway.ErrDenied) {
		t.Fatalf("a purged user logged in: %v", err)
	}
	// A home left behind is not handed to a new user of the name unasked.
	if err := gw.CreateBucket(ctx, "home-carol", ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "carol", Password: "carol's password"}); !errors.Is(err, gateway.ErrHomeExists) {
		t.Fatalf("carol over an existing home: %v", err)
	}
	if _, err := gw.User(ctx, "carol"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("carol half made: %v", err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "carol", Password: "carol's password", Home: "home-carol"}); err != nil {
		t.Fatalf("carol given the bucket: %v", err)
	}
}

// TestAuthenticateConcurrent: many logins at once, right and wrong, of
// two users, each get the right answer (run with -race).
func TestAuthenticateConcurrent(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	gw := openGateway(t, g, t.TempDir())
	for _, n := range []string{"ann", "ben"} {
		if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: n, Password: n + "'s password"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				name := []string{"ann", "ben"}[(i+j)%2]
				pw := name + "'s password"
				wrong := (i*4+j)%3 == 0
				if wrong {
					pw = "not " + pw
				}
				u, err := gw.Authenticate(ctx, name, pw)
				switch {
				case wrong && !errors.Is(err, gateway.ErrDenied):
					errs <- fmt.Errorf("%s with a wrong password: %v", name, err)
				case !wrong && (err != nil || u.Name != name):
					errs <- fmt.Errorf("%s: %v %q", name, err, u.Name)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestQuota: writes that would take a home past its quota are refused
// (ErrQuota) however they come — a PUT of known or unknown length, a
// multipart upload, a copy, a tree batch — and nothing is written; an
// overwrite with fewer bytes, a delete and a rename are not; Usage sums
// the objects.
func TestQuota(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	gw := openGateway(t, g, t.TempDir())
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "dora", Password: "dora's password", Quota: 10000}); err != nil {
		t.Fatal(err)
	}
	const b = "home-dora"
	put := func(key string, n int, known bool) error {
		size := int64(n)
		var r io.Reader = bytes.NewReader(randBytes(n))
		if !known {
			size, r = -1, io.MultiReader(r) // hides the length
		}
		_, err := gw.Put(ctx, b, key, r, size, gateway.PutOptions{})
		return err
	}
	usage := func() int64 {
		n, err := gw.Usage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := put("a", 6000, true); err != nil {
		t.Fatal(err)
	}
	err := put("b", 5000, true)
	var errno syscall.Errno
	if !errors.Is(err, gateway.ErrQuota) || !strings.Contains(err.Error(), `"home-dora"`) || !errors.As(err, &errno) || errno != syscall.EDQUOT {
		t.Fatalf("over quota, known length: %v", err)
	}
	if err := put("b", 5000, false); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("over quota, unknown length: %v", err)
	}
	if _, err := gw.Head(ctx, b, "b"); !errors.Is(err, gateway.ErrNoKey) {
		t.Fatalf("a refused write was stored: %v", err)
	}
	if n := usage(); n != 6000 {
		t.Fatalf("usage %d, want 6000", n)
	}
	if err := put("a", 9000, false); err != nil {
		t.Fatalf("an overwrite within the quota: %v", err)
	}
	if err := put("c", 1000, true); err != nil {
		t.Fatal(err)
	}
	if n := usage(); n != 10000 {
		t.Fatalf("usage %d, want 10000", n)
	}
	if err := put("d", 1, true); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("one byte over: %v", err)
	}
	if err := put("d", 0, true); err != nil {
		t.Fatalf("an empty object at the quota: %v", err)
	}
	if _, err := gw.Rewrite(ctx, b, "c", b, "c2", nil); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("copy over quota: %v", err)
	}
	if _, err := gw.Rewrite(ctx, b, "c", b, "c", func(i *gateway.ObjectInfo) { i.ContentType = "text/plain" }); err != nil {
		t.Fatalf("metadata change at the quota: %v", err)
	}
	st := gw.TreeStore(b)
	if err := st.Apply(ctx, []tree.Op{{Key: "c3", From: "c"}}); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("tree copy over quota: %v", err)
	}
	if err := st.Apply(ctx, []tree.Op{{Key: "moved", From: "c"}, {Key: "c", Delete: true}}); err != nil {
		t.Fatalf("a rename at the quota: %v", err)
	}
	up, err := gw.CreateUpload(ctx, b, "multi", gateway.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.PutPart(ctx, b, "multi", up.ID, 1, bytes.NewReader(randBytes(100)), 100, nil, nil); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("a part over quota: %v", err)
	}
	if err := gw.Delete(ctx, b, "a"); err != nil {
		t.Fatal(err)
	}
	if n := usage(); n != 1000 {
		t.Fatalf("usage after a delete %d, want 1000", n)
	}
	p1, err := gw.PutPart(ctx, b, "multi", up.ID, 1, bytes.NewReader(randBytes(5000)), 5000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.PutPart(ctx, b, "multi", up.ID, 2, bytes.NewReader(randBytes(5000)), -1, nil, nil); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("a second part over quota: %v", err)
	}
	p2, err := gw.PutPart(ctx, b, "multi", up.ID, 2, bytes.NewReader(randBytes(4000)), 4000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := put("e", 500, true); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CompleteUpload(ctx, b, "multi", up.ID, []gateway.PartRef{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}, 0, nil); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("completing over quota: %v", err)
	}
	if err := gw.Delete(ctx, b, "e"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CompleteUpload(ctx, b, "multi", up.ID, []gateway.PartRef{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}, 0, nil); err != nil {
		t.Fatalf("completing within the quota: %v", err)
	}
	if n := usage(); n != 10000 {
		t.Fatalf("usage %d, want 10000", n)
	}
	// No quota: no limit; a lowered quota refuses growth, not cleanup.
	var zero int64
	if _, err := gw.UpdateUser(ctx, "dora", gateway.UserChange{Quota: &zero}); err != nil {
		t.Fatal(err)
	}
	if err := put("big", 50000, false); err != nil {
		t.Fatalf("no quota: %v", err)
	}
	low := int64(100)
	if _, err := gw.UpdateUser(ctx, "dora", gateway.UserChange{Quota: &low}); err != nil {
		t.Fatal(err)
	}
	if err := put("f", 10, true); !errors.Is(err, gateway.ErrQuota) {
		t.Fatalf("over a lowered quota: %v", err)
	}
	if err := put("big", 40000, true); err != nil {
		t.Fatalf("shrinking over quota: %v", err)
	}
	if err := gw.Delete(ctx, b, "big"); err != nil {
		t.Fatal(err)
	}
	// Other buckets are not limited.
	if err := gw.CreateBucket(ctx, "free", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Put(ctx, "free", "x", bytes.NewReader(randBytes(20000)), 20000, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFor waits (up to a minute) for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// copyRegistry returns a new gateway directory with dir's registry (a
// second gateway serving the same buckets and accounts).
func copyRegistry(t *testing.T, dir string) string {
	t.Helper()
	reg, err := os.ReadFile(filepath.Join(dir, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir2
}

// BenchmarkAuthenticate: a login that Argon2id verifies (a new
// password each time: nothing cached), one remembered, and a wrong one.
func BenchmarkAuthenticate(b *testing.B) {
	g := testgrid.New(b, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: b.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bench", Password: "bench password"}); err != nil {
		b.Fatal(err)
	}
	b.Run("remembered", func(b *testing.B) {
		for b.Loop() {
			if _, err := gw.Authenticate(ctx, "bench", "bench password"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wrong", func(b *testing.B) {
		for b.Loop() {
			if _, err := gw.Authenticate(ctx, "bench", "wrong password"); err == nil {
				b.Fatal("a wrong password logged in")
			}
		}
	})
	b.Run("unknown", func(b *testing.B) {
		for b.Loop() {
			if _, err := gw.Authenticate(ctx, "nobody", "bench password"); err == nil {
				b.Fatal("an unknown user logged in")
			}
		}
	})
}

// A generated password is 32 lower-case base32 characters: nothing a
// command line takes for an option (a leading "-") or a shell expands.
func TestNewPassword(t *testing.T) {
	re := regexp.MustCompile(`^[a-z2-7]{32}$`)
	seen := map[string]bool{}
	for range 1000 {
		pw := gateway.NewPassword()
		if !re.MatchString(pw) || seen[pw] {
			t.Fatalf("password %q: not 32 of [a-z2-7], or seen before", pw)
		}
		seen[pw] = true
	}
}
