package webapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// UserAdmin is what the admins' Users page manages: the accounts and
// groups (cmd/quilt gives the gateway's). Errors of the admin's input (a
// bad name or password, a user that exists) should be marked with
// Refused: the page shows them as they are, with 400; other errors are
// 500.
type UserAdmin interface {
	// Users lists the accounts, by name.
	Users(ctx context.Context) ([]UserInfo, error)
	// IsAdmin tells whether account name is an admin now (false for no
	// such account).
	IsAdmin(ctx context.Context, name string) (bool, error)
	// Groups lists the groups, by name, with their members.
	Groups(ctx context.Context) ([]GroupInfo, error)
	// AddUser makes an account with its home drive and S3 access key,
	// and returns the key (its secret is shown once).
	AddUser(ctx context.Context, u NewAccount) (UserInfo, S3Key, error)
	// SetPassword replaces a user's password.
	SetPassword(ctx context.Context, name, password string) error
	// UpdateUser changes a user's admin flag, quota and groups.
	UpdateUser(ctx context.Context, name string, admin bool, quota int64, groups []string) error
	// DeleteUser removes an account and its key; purge deletes its home
	// drive and files too.
	DeleteUser(ctx context.Context, name string, purge bool) error
	// AddGroup and DeleteGroup make and remove a group.
	AddGroup(ctx context.Context, name string) error
	DeleteGroup(ctx context.Context, name string) error
}

// UserInfo is an account as the Users page lists it.
type UserInfo struct {
	Name   string
	Admin  bool
	Groups []string
	Home   string // the home bucket
	Used   int64  // bytes in the home; -1: not known
	Quota  int64  // 0: no limit
}

// GroupInfo is a group and its members.
type GroupInfo struct {
	Name    string
	Members []string
}

// NewAccount is what the add-user form gives UserAdmin.AddUser.
type NewAccount struct {
	Name, Password string
	Admin          bool
	Quota          int64 // bytes; 0: no limit
	Groups         []string
}

// S3Key is an access key: its ID and secret.
type S3Key struct{ ID, Secret string }

// ErrRefused is what Refused marks errors with.
var ErrRefused = errors.New("webapp: refused")

type refused struct{ error }

func (r refused) Is(target error) bool { return target == ErrRefused }
func (r refused) Unwrap() error        { return r.error }

// Refused marks err (not nil) as a refusal of the admin's input: the
// Users page shows its message with 400 Bad Request.
func Refused(err error) error { return refused{err} }

// usersData is the Users page's.
type usersData struct {
	Users  []UserInfo
	Groups []GroupInfo
	Err    string
	// Form is the add-user form's values after a refusal (no password).
	Form    NewAccountForm
	GroupIn string // the add-group form's value after a refusal
}

// NewAccountForm is the add-user form's values, shown again after a
// refusal.
type NewAccountForm struct {
	Name, Quota, Groups string
	Admin               bool
}

// userData is the page of one user.
type userData struct {
	User   UserInfo
	Self   bool
	Groups string // the user's groups, as the form spells them
	Quota  string
	Err    string
}

// addedData is the page after a user is added: the key, shown once.
type addedData struct {
	User UserInfo
	Key  S3Key
}

// admin tells whether the session's user may manage accounts: an admin
// at login and still one now (an admin demoted since is refused). It
// answers 403 (404 without Config.Users) if not.
func (q *request) admin() bool {
	if q.h.cfg.Users == nil {
		q.fail(http.StatusNotFound, "Accounts are not managed in this app.")
		return false
	}
	if !q.s.acct.Admin {
		q.h.cfg.Logger.Warn("webapp: the users page without admin", "user", q.s.acct.Name, "path", q.r.URL.Path)
		q.fail(http.StatusForbidden, "The users page is for admins.")
		return false
	}
	ok, err := q.h.cfg.Users.IsAdmin(q.r.Context(), q.s.acct.Name)
	if err != nil {
		q.usersFail(err)
		return false
	}
	if ok {
		return true
	}
	q.fail(http.StatusForbidden, "The users page is for admins, and your account is not one now.")
	return false
}

// usersFail answers an error of Config.Users.
func (q *request) usersFail(err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, ErrRefused) {
		code = http.StatusBadRequest
	} else {
		q.h.cfg.Logger.Error("webapp: users", "user", q.s.acct.Name, "err", err)
	}
	q.fail(code, err.Error())
}

// usersRoute serves /users and /users/VERB.
func (q *request) usersRoute(verb string) {
	if !q.admin() {
		return
	}
	if verb == "" {
		q.usersPage(http.StatusOK, usersData{})
		return
	}
	if verb == "edit" {
		q.userPage(http.StatusOK, q.r.URL.Query().Get("name"), "")
		return
	}
	if q.r.Method != http.MethodPost {
		q.fail(http.StatusMethodNotAllowed, "Use the page's forms.")
		return
	}
	if err := q.r.ParseForm(); err != nil {
		q.fail(http.StatusBadRequest, "The form could not be read: "+err.Error())
		return
	}
	switch verb {
	case "add":
		q.addUser()
	case "passwd":
		q.setPassword()
	case "set":
		q.setUser()
	case "rm":
		q.removeUser()
	case "group-add":
		q.addGroup()
	case "group-rm":
		q.removeGroup()
	default:
		q.fail(http.StatusNotFound, "There is no such page.")
	}
}

// usersPage lists the users and groups with d's error and form values.
func (q *request) usersPage(code int, d usersData) {
	ctx := q.r.Context()
	var err error
	if d.Users, err = q.h.cfg.Users.Users(ctx); err == nil {
		d.Groups, err = q.h.cfg.Users.Groups(ctx)
	}
	if err != nil {
		q.usersFail(err)
		return
	}
	q.h.render(q.w, q.r, q.s, code, "users", "Users", d)
}

// userPage shows one user's forms.
func (q *request) userPage(code int, name, msg string) {
	us, err := q.h.cfg.Users.Users(q.r.Context())
	if err != nil {
		q.usersFail(err)
		return
	}
	i := slices.IndexFunc(us, func(u UserInfo) bool { return u.Name == name })
	if i < 0 {
		q.fail(http.StatusNotFound, fmt.Sprintf("There is no user %q.", name))
		return
	}
	u := us[i]
	d := userData{User: u, Self: u.Name == q.s.acct.Name, Groups: strings.Join(u.Groups, ", "), Err: msg}
	if u.Quota > 0 {
		d.Quota = strconv.FormatInt(u.Quota, 10)
	}
	q.h.render(q.w, q.r, q.s, code, "user", "User "+u.Name, d)
}

// userURL is the page of user name.
func userURL(name string) string { return "/users/edit?name=" + url.QueryEscape(name) }

// splitGroups reads a list of groups separated by commas or spaces.
func splitGroups(s string) []string {
	gs := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
	slices.Sort(gs)
	return slices.Compact(gs)
}

// parseQuota reads a quota: bytes, or a number with a unit (kB, MB, GB,
// TB or KiB, MiB, GiB, TiB); "" and 0 are no limit.
func parseQuota(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, nil
	}
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("the quota %q is not a size: give bytes or a number with kB, MB, GB, TB, KiB, MiB, GiB or TiB (0 or nothing: no limit)", s)
	}
	return int64(f * mult), nil
}

// addUser makes an account and shows its S3 key once.
func (q *request) addUser() {
	f := q.r.PostForm
	form := NewAccountForm{Name: strings.TrimSpace(f.Get("name")), Quota: f.Get("quota"), Groups: f.Get("groups"), Admin: f.Get("admin") != ""}
	refuse := func(msg string) { q.usersPage(http.StatusBadRequest, usersData{Err: msg, Form: form}) }
	if f.Get("password") != f.Get("password2") {
		refuse("The two passwords differ.")
		return
	}
	quota, err := parseQuota(form.Quota)
	if err != nil {
		refuse(err.Error())
		return
	}
	u, key, err := q.h.cfg.Users.AddUser(q.r.Context(), NewAccount{Name: form.Name, Password: f.Get("password"), Admin: form.Admin, Quota: quota, Groups: splitGroups(form.Groups)})
	if errors.Is(err, ErrRefused) {
		refuse(err.Error())
		return
	}
	if err != nil {
		q.usersFail(err)
		return
	}
	q.h.cfg.Logger.Info("webapp: user added", "admin", q.s.acct.Name, "user", u.Name)
	q.h.render(q.w, q.r, q.s, http.StatusOK, "user-added", "User "+u.Name+" added", addedData{User: u, Key: key})
}

// setPassword replaces a user's password.
func (q *request) setPassword() {
	name := q.r.PostForm.Get("name")
	if q.r.PostForm.Get("password") != q.r.PostForm.Get("password2") {
		q.userPage(http.StatusBadRequest, name, "The two passwords differ.")
		return
	}
	if err := q.h.cfg.Users.SetPassword(q.r.Context(), name, q.r.PostForm.Get("password")); err != nil {
		q.userError(name, err)
		return
	}
	if name != q.s.acct.Name {
		q.h.sessions.dropUser(name)
	}
	q.done(userURL(name), "The password of "+name+" is changed; the old one no longer logs in.")
}

// userError shows a refusal on the user's page, or fails.
func (q *request) userError(name string, err error) {
	if errors.Is(err, ErrRefused) {
		q.userPage(http.StatusBadRequest, name, err.Error())
		return
	}
	q.usersFail(err)
}

// setUser changes a user's admin flag, quota and groups.
func (q *request) setUser() {
	f := q.r.PostForm
	name := f.Get("name")
	admin := f.Get("admin") != ""
	if name == q.s.acct.Name && !admin {
		q.userPage(http.StatusBadRequest, name, "You cannot take away your own admin rights: another admin can.")
		return
	}
	quota, err := parseQuota(f.Get("quota"))
	if err != nil {
		q.userPage(http.StatusBadRequest, name, err.Error())
		return
	}
	if err := q.h.cfg.Users.UpdateUser(q.r.Context(), name, admin, quota, splitGroups(f.Get("groups"))); err != nil {
		q.userError(name, err)
		return
	}
	q.done(userURL(name), "The settings of "+name+" are saved.")
}

// removeUser removes an account, and with purge its files.
func (q *request) removeUser() {
	f := q.r.PostForm
	name := f.Get("name")
	if name == q.s.acct.Name {
		q.userPage(http.StatusBadRequest, name, "You cannot remove your own account: another admin can.")
		return
	}
	if f.Get("confirm") == "" {
		q.userPage(http.StatusBadRequest, name, "Tick the box that confirms the removal of "+name+".")
		return
	}
	purge := f.Get("purge") != ""
	if err := q.h.cfg.Users.DeleteUser(q.r.Context(), name, purge); err != nil {
		q.userError(name, err)
		return
	}
	q.h.sessions.dropUser(name)
	q.h.cfg.Logger.Info("webapp: user removed", "admin", q.s.acct.Name, "user", name, "purge", purge)
	msg := "User " + name + " is removed, with their S3 key; their home drive and its files are kept (an admin key reaches them)."
	if purge {
		msg = "User " + name + " is removed, with their S3 key, their home drive and its files."
	}
	q.done("/users", msg)
}

// addGroup makes a group.
func (q *request) addGroup() {
	name := strings.TrimSpace(q.r.PostForm.Get("group"))
	if err := q.h.cfg.Users.AddGroup(q.r.Context(), name); err != nil {
		if errors.Is(err, ErrRefused) {
			q.usersPage(http.StatusBadRequest, usersData{Err: err.Error(), GroupIn: name})
			return
		}
		q.usersFail(err)
		return
	}
	q.done("/users#groups", "Group "+name+" is made.")
}

// removeGroup removes a group (its members leave it).
func (q *request) removeGroup() {
	name := q.r.PostForm.Get("group")
	if err := q.h.cfg.Users.DeleteGroup(q.r.Context(), name); err != nil {
		if errors.Is(err, ErrRefused) {
			q.usersPage(http.StatusBadRequest, usersData{Err: err.Error()})
			return
		}
		q.usersFail(err)
		return
	}
	q.done("/users#groups", "Group "+name+" is removed; its members left it.")
}
