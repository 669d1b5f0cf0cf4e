package webapp_test

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/webapp"
)

// gwUsers is webapp.UserAdmin over a real gateway, as cmd/quilt gives it.
type gwUsers struct{ gw *gateway.Gateway }

func refusable(err error) error {
	for _, e := range []error{gateway.ErrBadName, gateway.ErrBadPassword, gateway.ErrUserExists, gateway.ErrNoUser,
		gateway.ErrGroupExists, gateway.ErrNoGroup, gateway.ErrHomeExists} {
		if errors.Is(err, e) {
			return webapp.Refused(err)
		}
	}
	return err
}

func (w gwUsers) Users(ctx context.Context) ([]webapp.UserInfo, error) {
	us, err := w.gw.Users(ctx)
	var out []webapp.UserInfo
	for _, u := range us {
		used, err := w.gw.Usage(ctx, u.Home)
		if err != nil {
			used = -1
		}
		out = append(out, webapp.UserInfo{Name: u.Name, Admin: u.Admin, Groups: u.Groups, Home: u.Home, Used: used, Quota: u.Quota})
	}
	return out, err
}

func (w gwUsers) IsAdmin(ctx context.Context, name string) (bool, error) {
	u, err := w.gw.User(ctx, name)
	if errors.Is(err, gateway.ErrNoUser) {
		return false, nil
	}
	return u.Admin, err
}

func (w gwUsers) Groups(ctx context.Context) ([]webapp.GroupInfo, error) {
	gs, err := w.gw.Groups(ctx)
	var out []webapp.GroupInfo
	for _, g := range gs {
		out = append(out, webapp.GroupInfo{Name: g.Name, Members: g.Members})
	}
	return out, err
}

func (w gwUsers) AddUser(ctx context.Context, nu webapp.NewAccount) (webapp.UserInfo, webapp.S3Key, error) {
	u, key, err := w.gw.CreateUser(ctx, gateway.NewUser{Name: nu.Name, Password: nu.Password, Admin: nu.Admin, Quota: nu.Quota, Groups: nu.Groups})
	if err != nil {
		return webapp.UserInfo{}, webapp.S3Key{}, refusable(err)
	}
	return webapp.UserInfo{Name: u.Name, Home: u.Home, Quota: u.Quota}, webapp.S3Key{ID: key.ID, Secret: key.Secret}, nil
}

func (w gwUsers) SetPassword(ctx context.Context, name, pw string) error {
	return refusable(w.gw.SetPassword(ctx, name, pw))
}

func (w gwUsers) UpdateUser(ctx context.Context, name string, admin bool, quota int64, groups []string) error {
	_, err := w.gw.UpdateUser(ctx, name, gateway.UserChange{Admin: &admin, Quota: &quota, Groups: &groups})
	return refusable(err)
}

func (w gwUsers) DeleteUser(ctx context.Context, name string, purge bool) error {
	return refusable(w.gw.DeleteUser(ctx, name, purge))
}

func (w gwUsers) AddGroup(ctx context.Context, name string) error {
	return refusable(w.gw.CreateGroup(ctx, name))
}

func (w gwUsers) DeleteGroup(ctx context.Context, name string) error {
	return refusable(w.gw.DeleteGroup(ctx, name))
}

// newUsersFixture is the web app with the gateway's accounts: logins are
// gateway.Authenticate, the Users page manages them. root is an admin,
// dave is not.
func newUsersFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, nil)
	ctx := ctxT(t)
	for _, u := range []gateway.NewUser{{Name: "root", Password: "root-password", Admin: true}, {Name: "dave", Password: "dave-password"}} {
		if _, _, err := f.gw.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	f.cfg.Authenticate = func(ctx context.Context, user, pw string) (webapp.Account, error) {
		u, err := f.gw.Authenticate(ctx, user, pw)
		if err != nil {
			return webapp.Account{}, webapp.ErrLogin
		}
		return webapp.Account{Name: u.Name, Bucket: u.Home, Admin: u.Admin, Groups: u.Groups}, nil
	}
	f.cfg.Users = gwUsers{f.gw}
	f.start(t)
	return f
}

// loginAs logs in with a password and keeps the page's CSRF token; it
// returns the login's status.
func (b *browser) loginAs(user, pw string) int {
	b.t.Helper()
	resp, _ := b.do("POST", "/login", url.Values{"user": {user}, "password": {pw}, "next": {"/"}})
	if resp.StatusCode != http.StatusSeeOther {
		return resp.StatusCode
	}
	m := csrfRE.FindStringSubmatch(b.want(200, "GET", "/files/"+user+"/", nil))
	if m == nil {
		b.t.Fatal("no CSRF token in the page")
	}
	b.csrf = m[1]
	return resp.StatusCode
}

// wantPost posts a form with the CSRF token and checks the status and
// that the page says each of says.
func (b *browser) wantPost(code int, path string, v url.Values, says ...string) string {
	b.t.Helper()
	resp, out := b.post(path, v)
	if resp.StatusCode != code {
		b.t.Fatalf("POST %s %v: %d, want %d: %.600s", path, v, resp.StatusCode, code, out)
	}
	for _, s := range says {
		if !strings.Contains(out, s) {
			b.t.Fatalf("POST %s: the page does not say %q: %.1500s", path, s, out)
		}
	}
	return out
}

// TestWebappUsersAccess: the Users page is for admins only (403 for
// others, no nav link), not there without Config.Users, needs the CSRF
// token on every form, and refuses an admin demoted since login.
func TestWebappUsersAccess(t *testing.T) {
	plain := newFixture(t, nil)
	a := plain.browser(t)
	a.login("alice")
	if out := a.want(200, "GET", "/storage", nil); strings.Contains(out, `href="/users"`) {
		t.Fatal("a Users link without Config.Users")
	}
	a.want(404, "GET", "/users", nil)

	f := newUsersFixture(t)
	d := f.browser(t)
	if d.loginAs("dave", "dave-password") != http.StatusSeeOther {
		t.Fatal("dave cannot log in")
	}
	if out := d.want(200, "GET", "/storage", nil); strings.Contains(out, `href="/users"`) {
		t.Fatal("a Users link for a user who is not an admin")
	}
	d.want(403, "GET", "/users", nil)
	d.want(403, "GET", "/users/edit?name=root", nil)
	d.wantPost(403, "/users/add", url.Values{"name": {"eve"}, "password": {"eve-password"}, "password2": {"eve-password"}}, "for admins")
	d.wantPost(403, "/users/rm", url.Values{"name": {"root"}, "confirm": {"1"}})
	d.wantPost(403, "/users/group-add", url.Values{"group": {"x"}})
	if _, err := f.gw.User(ctxT(t), "eve"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("dave made eve: %v", err)
	}

	r := f.browser(t)
	if r.loginAs("root", "root-password") != http.StatusSeeOther {
		t.Fatal("root cannot log in")
	}
	if out := r.want(200, "GET", "/storage", nil); !strings.Contains(out, `href="/users"`) {
		t.Fatal("no Users link for an admin")
	}
	out := r.want(200, "GET", "/users", nil)
	for _, s := range []string{"root", "dave", "home-dave", `action="/users/add"`, `name="csrf" value="` + r.csrf + `"`} {
		if !strings.Contains(out, s) {
			t.Fatalf("the users page lacks %q: %.2000s", s, out)
		}
	}
	// Without the token (or with another session's): 403, nothing made.
	for _, tok := range []string{"", d.csrf} {
		for _, p := range []string{"/users/add", "/users/passwd", "/users/set", "/users/rm", "/users/group-add", "/users/group-rm"} {
			r.want(403, "POST", p, url.Values{"csrf": {tok}, "name": {"eve"}, "password": {"eve-password"}, "password2": {"eve-password"}, "group": {"g"}, "confirm": {"1"}})
		}
	}
	if us, _ := f.gw.Users(ctxT(t)); len(us) != 2 {
		t.Fatalf("users after refused posts: %+v", us)
	}
	r.want(405, "GET", "/users/add", nil)

	// Demoted by another admin since login: refused at once.
	if _, _, err := f.gw.CreateUser(ctxT(t), gateway.NewUser{Name: "ann", Password: "ann-password", Admin: true}); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := f.gw.UpdateUser(ctxT(t), "root", gateway.UserChange{Admin: &no}); err != nil {
		t.Fatal(err)
	}
	r.want(403, "GET", "/users", nil)
}

var keyRE = regexp.MustCompile(`id="key-id">([^<]+)</code>.*\n.*id="key-secret">([^<]+)</code>`)

// TestWebappUsersManage: an admin adds a user (the S3 key shown once),
// who logs in; changes their password (the old one and their sessions
// stop), quota, admin flag and groups; adds and removes groups; removes
// the user with their files. Bad input and self-removal or self-demotion
// get clear errors and change nothing.
func TestWebappUsersManage(t *testing.T) {
	f := newUsersFixture(t)
	ctx := ctxT(t)
	r := f.browser(t)
	if r.loginAs("root", "root-password") != http.StatusSeeOther {
		t.Fatal("root cannot log in")
	}
	add := func(name, pw, pw2, quota, groups string) url.Values {
		return url.Values{"name": {name}, "password": {pw}, "password2": {pw2}, "quota": {quota}, "groups": {groups}}
	}
	// Bad input: the form comes back with the error and the values.
	r.wantPost(400, "/users/add", add("carol", "carol-password", "carol-passw0rd", "", ""), "The two passwords differ.", `value="carol"`)
	r.wantPost(400, "/users/add", add("Carol!", "carol-password", "carol-password", "", ""), "invalid user or group name", "1-32 of a-z 0-9 -")
	r.wantPost(400, "/users/add", add("carol", "short", "short", "", ""), "unusable password: at least 8 characters")
	r.wantPost(400, "/users/add", add("carol", "carol-password", "carol-password", "lots", ""), "is not a size")
	r.wantPost(400, "/users/add", add("carol", "carol-password", "carol-password", "-5MB", ""), "is not a size")
	r.wantPost(400, "/users/add", add("carol", "carol-password", "carol-password", "", "ok, Bad_Group"), "invalid user or group name")
	r.wantPost(400, "/users/add", add("dave", "dave-password2", "dave-password2", "", ""), "user exists")
	if _, err := f.gw.User(ctx, "carol"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("carol made by a refused form: %v", err)
	}

	v := add("carol", "carol-password", "carol-password", "5MiB", "staff, lab")
	v.Set("admin", "1")
	out := r.wantPost(200, "/users/add", v, "User carol added", "home-carol", "shown only here, once")
	m := keyRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no key on the page: %.2000s", out)
	}
	u, err := f.gw.User(ctx, "carol")
	if err != nil || u.KeyID != m[1] || !u.Admin || u.Quota != 5<<20 || !slices.Equal(u.Groups, []string{"lab", "staff"}) {
		t.Fatalf("carol: %+v %v (key on the page %s)", u, err, m[1])
	}
	if k, err := f.gw.Key(ctx, m[1]); err != nil || k.Secret != html.UnescapeString(m[2]) {
		t.Fatalf("the secret shown is not the key's: %v", err)
	}
	list := r.want(200, "GET", "/users", nil)
	if strings.Contains(list, m[2]) {
		t.Fatal("the secret is shown again on the users page")
	}
	for _, s := range []string{"carol", "home-carol", "lab, staff", "5.2 MB", "staff"} {
		if !strings.Contains(list, s) {
			t.Fatalf("the users page lacks %q: %.3000s", s, list)
		}
	}
	if !regexp.MustCompile(`(?s)<td class="name">lab</td><td>carol</td>`).MatchString(list) {
		t.Fatalf("group lab's members: %.3000s", list)
	}

	c := f.browser(t)
	if c.loginAs("carol", "carol-password") != http.StatusSeeOther {
		t.Fatal("carol cannot log in")
	}
	if out := c.want(200, "GET", "/files/carol/", nil); !strings.Contains(out, "carol") {
		t.Fatal("carol's drive")
	}

	// Password: a mismatch or a short one is refused; then the old one
	// no longer logs in, and carol's session is over.
	r.wantPost(400, "/users/passwd", url.Values{"name": {"carol"}, "password": {"carol-new-pw"}, "password2": {"carol-new-px"}}, "The two passwords differ.")
	r.wantPost(400, "/users/passwd", url.Values{"name": {"carol"}, "password": {"x"}, "password2": {"x"}}, "at least 8 characters")
	r.want(404, "GET", "/users/edit?name=nobody", nil)
	r.wantPost(404, "/users/passwd", url.Values{"name": {"nobody"}, "password": {"nobody-password"}, "password2": {"nobody-password"}}, "There is no user")
	resp, _ := r.post("/users/passwd", url.Values{"name": {"carol"}, "password": {"carol-new-pw"}, "password2": {"carol-new-pw"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("passwd: %d", resp.StatusCode)
	}
	if out := r.want(200, "GET", "/users/edit?name=carol", nil); !strings.Contains(out, "the old one no longer logs in") {
		t.Fatalf("after passwd: %.1500s", out)
	}
	c.want(http.StatusSeeOther, "GET", "/files/carol/", nil)
	if c.loginAs("carol", "carol-password") != http.StatusUnauthorized {
		t.Fatal("carol's old password still logs in")
	}
	if c.loginAs("carol", "carol-new-pw") != http.StatusSeeOther {
		t.Fatal("carol's new password does not log in")
	}

	// Settings: quota, groups, admin off.
	r.wantPost(400, "/users/set", url.Values{"name": {"carol"}, "quota": {"5 parsecs"}}, "is not a size")
	r.wantPost(400, "/users/set", url.Values{"name": {"carol"}, "groups": {"a--b"}}, "no two hyphens")
	resp, _ = r.post("/users/set", url.Values{"name": {"carol"}, "quota": {"2GB"}, "groups": {"ops,staff"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("set: %d", resp.StatusCode)
	}
	if u, err := f.gw.User(ctx, "carol"); err != nil || u.Admin || u.Quota != 2e9 || !slices.Equal(u.Groups, []string{"ops", "staff"}) {
		t.Fatalf("carol after set: %+v %v", u, err)
	}
	if out := r.want(200, "GET", "/users/edit?name=carol", nil); !strings.Contains(out, `value="ops, staff"`) || !strings.Contains(out, `value="2000000000"`) {
		t.Fatalf("carol's page: %.2000s", out)
	}

	// Groups.
	resp, _ = r.post("/users/group-add", url.Values{"group": {"empty"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("group-add: %d", resp.StatusCode)
	}
	r.wantPost(400, "/users/group-add", url.Values{"group": {"empty"}}, "group exists")
	r.wantPost(400, "/users/group-add", url.Values{"group": {"No Way"}}, "invalid user or group name", `value="No Way"`)
	r.wantPost(400, "/users/group-rm", url.Values{"group": {"nope"}}, "no such group")
	resp, _ = r.post("/users/group-rm", url.Values{"group": {"staff"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("group-rm: %d", resp.StatusCode)
	}
	gs, err := f.gw.Groups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range gs {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"empty", "lab", "ops"}) {
		t.Fatalf("groups: %v", names)
	}
	if u, _ := f.gw.User(ctx, "carol"); !slices.Equal(u.Groups, []string{"ops"}) {
		t.Fatalf("carol's groups after staff went: %v", u.Groups)
	}

	// Self: no removal, no demotion; the page says so.
	r.wantPost(400, "/users/rm", url.Values{"name": {"root"}, "confirm": {"1"}}, "You cannot remove your own account")
	r.wantPost(400, "/users/set", url.Values{"name": {"root"}, "quota": {""}}, "You cannot take away your own admin rights")
	if u, err := f.gw.User(ctx, "root"); err != nil || !u.Admin {
		t.Fatalf("root: %+v %v", u, err)
	}
	if out := r.want(200, "GET", "/users/edit?name=root", nil); strings.Contains(out, `action="/users/rm"`) {
		t.Fatal("a remove form on the admin's own page")
	}

	// Removal: confirmed, with the files.
	if _, err := f.gw.Put(ctx, "home-carol", "note.txt", strings.NewReader("hello"), 5, gateway.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r.wantPost(400, "/users/rm", url.Values{"name": {"carol"}}, "Tick the box")
	r.wantPost(404, "/users/rm", url.Values{"name": {"nobody"}, "confirm": {"1"}}, "There is no user")
	resp, _ = r.post("/users/rm", url.Values{"name": {"carol"}, "confirm": {"1"}, "purge": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("rm: %d", resp.StatusCode)
	}
	if out := r.want(200, "GET", "/users", nil); !strings.Contains(out, "home drive and its files.") || strings.Contains(out, "home-carol") {
		t.Fatalf("after rm: %.2000s", out)
	}
	if _, err := f.gw.User(ctx, "carol"); !errors.Is(err, gateway.ErrNoUser) {
		t.Fatalf("carol after rm: %v", err)
	}
	bs, _ := f.gw.Buckets(ctx)
	for _, b := range bs {
		if b.Name == "home-carol" {
			t.Fatal("home-carol kept after a purge")
		}
	}
	c.want(http.StatusSeeOther, "GET", "/files/carol/", nil)
	if c.loginAs("carol", "carol-new-pw") != http.StatusUnauthorized {
		t.Fatal("a removed user logs in")
	}

	// Without purge the home stays.
	resp, _ = r.post("/users/rm", url.Values{"name": {"dave"}, "confirm": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("rm dave: %d", resp.StatusCode)
	}
	bs, _ = f.gw.Buckets(ctx)
	if !slices.ContainsFunc(bs, func(b gateway.BucketInfo) bool { return b.Name == "home-dave" }) {
		t.Fatal("home-dave deleted without purge")
	}
}
