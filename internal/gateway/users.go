package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Accounts are the people who use the gateway's files: each user has a
// password (Argon2id, password.go), app passwords for clients, an admin
// flag, groups, a quota, and a home drive — a bucket made with the
// account, HomeBucket(NAME), with an S3 access key that owns it, so what
// the user saves through WebDAV or the web app is read through S3 with
// that key and the other way round. Users are records of the registry
// under /users/NAME, groups under /groups/NAME, beside /keys/ID: every
// gateway sharing the registry knows every account, and sees a change
// made through another one within a second (its background sync).

// Errors of accounts.
var (
	ErrNoUser        = errors.New("gateway: no such user")
	ErrUserExists    = errors.New("gateway: user exists")
	ErrBadName       = errors.New("gateway: invalid user or group name")
	ErrNoGroup       = errors.New("gateway: no such group")
	ErrGroupExists   = errors.New("gateway: group exists")
	ErrNoAppPassword = errors.New("gateway: no such app password")
	ErrBadLabel      = errors.New("gateway: invalid app password label")
	ErrHomeExists    = errors.New("gateway: home bucket exists")
)

const (
	maxAppPasswords  = 100 // per user
	maxCachedPerUser = 8   // verified passwords remembered per user
	homePrefix       = "home-"
)

var (
	userNamePattern   = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$`)
	errNoRecord       = errors.New("gateway: no record")
	errTooManyAppPass = fmt.Errorf("gateway: at most %d app passwords per user: revoke one first", maxAppPasswords)
)

// CheckName tells whether name may name a user or a group: 1-32 of a-z,
// 0-9 and -, starting with a letter, not ending with a hyphen, no two
// hyphens side by side; a user's home bucket name must be valid too.
func CheckName(name string) error {
	switch {
	case !userNamePattern.MatchString(name):
		return fmt.Errorf("%w: %q (1-32 of a-z 0-9 -, starting with a letter, not ending with -)", ErrBadName, name)
	case strings.Contains(name, "--"):
		return fmt.Errorf("%w: %q (no two hyphens side by side)", ErrBadName, name)
	}
	if err := CheckBucketName(HomeBucket(name)); err != nil {
		return fmt.Errorf("%w: %q (its home bucket name is not valid: %v)", ErrBadName, name, err)
	}
	return nil
}

// HomeBucket is the name of the home drive made for user name:
// "home-NAME", which is a valid S3 bucket name for every valid user name.
func HomeBucket(name string) string { return homePrefix + name }

// User is an account, as Users and Authenticate return it (without its
// password hashes).
type User struct {
	Name   string   `json:"name"`
	Admin  bool     `json:"admin,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Quota is how many bytes the home bucket may hold; 0: no limit.
	Quota int64 `json:"quota,omitempty"`
	// Home is the user's bucket (their drive).
	Home string `json:"home"`
	// KeyID is the S3 access key with owner permission on Home.
	KeyID        string        `json:"key"`
	Created      time.Time     `json:"created"`
	AppPasswords []AppPassword `json:"apps,omitempty"`
}

// AppPassword is a password for one client (a sync client, a phone),
// which logs in as the user does and is revoked on its own.
type AppPassword struct {
	ID      string    `json:"id"`
	Label   string    `json:"label"`
	Created time.Time `json:"created"`
	Hash    string    `json:"hash,omitempty"` // in the registry only
}

// InGroup reports whether u is a member of group.
func (u User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// userRecord is a user as the registry keeps it.
type userRecord struct {
	User
	Hash string `json:"hash"` // Argon2id, PHC form
}

// public is the user without hashes.
func (r userRecord) public() User {
	u := r.User
	u.Groups = slices.Clone(u.Groups)
	u.AppPasswords = slices.Clone(u.AppPasswords)
	for i := range u.AppPasswords {
		u.AppPasswords[i].Hash = ""
	}
	return u
}

// accounts is the gateway's state of accounts: a lock for its
// read-modify-write changes, and the logins verified recently.
type accounts struct {
	mu sync.Mutex // one change of a user or group at a time here

	authMu sync.Mutex
	authed map[string][]authEntry // by user name

	recMu   sync.Mutex
	recRoot namespace.Digest      // the registry's root when recs were read
	recs    map[string]userRecord // records read at recRoot, by name
}

// authEntry is a password that matched a hash: it is trusted again
// without Argon2id while the user's record still holds that hash.
type authEntry struct {
	sum  [32]byte // SHA-256 of the password
	hash string   // the hash it matched
}

// NewUser is what CreateUser needs.
type NewUser struct {
	Name     string
	Password string
	Admin    bool
	Groups   []string // made if missing
	Quota    int64    // bytes; 0: no limit
	// Home, if set, is an existing bucket to give the user (made if
	// missing) instead of a new HomeBucket(Name).
	Home string
}

// userPath and groupPath are the records' registry paths.
func userPath(name string) string  { return "/users/" + name }
func groupPath(name string) string { return "/groups/" + name }

// readUser returns the record of user name as this gateway's replica has
// it, or errNoRecord. Records read are kept while the registry's root
// stays the same (a login reads one at every request).
func (g *Gateway) readUser(name string) (userRecord, error) {
	var rec userRecord
	if CheckName(name) != nil {
		return rec, errNoRecord
	}
	root := g.db.Root(g.registry.ns)
	a := &g.acct
	a.recMu.Lock()
	r, ok := a.recs[name]
	ok = ok && a.recRoot == root
	a.recMu.Unlock()
	if ok {
		return r.clone(), nil
	}
	raw, err := g.readFile(&g.registry, userPath(name))
	if err != nil || raw == nil {
		return rec, errNoRecord
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("gateway: user %q record: %w", name, err)
	}
	a.recMu.Lock()
	if a.recs == nil || a.recRoot != root {
		a.recs, a.recRoot = map[string]userRecord{}, root
	}
	a.recs[name] = rec.clone()
	a.recMu.Unlock()
	return rec, nil
}

// clone is a copy of r that shares no slice with it.
func (r userRecord) clone() userRecord {
	r.Groups = slices.Clone(r.Groups)
	r.AppPasswords = slices.Clone(r.AppPasswords)
	return r
}

// putUser writes a user's record.
func (g *Gateway) putUser(ctx context.Context, rec userRecord) error {
	if err := g.ensureSet(ctx, "/users"); err != nil {
		return err
	}
	body, _ := json.Marshal(rec)
	return g.write(ctx, &g.registry, userPath(rec.Name), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// User returns an account, after pulling the registry if this gateway
// does not know it.
func (g *Gateway) User(ctx context.Context, name string) (User, error) {
	if err := CheckName(name); err != nil {
		return User{}, err
	}
	rec, err := g.readUser(name)
	if errors.Is(err, errNoRecord) {
		g.sync(ctx, &g.registry)
		rec, err = g.readUser(name)
	}
	if errors.Is(err, errNoRecord) {
		return User{}, fmt.Errorf("%w: %q", ErrNoUser, name)
	}
	if err != nil {
		return User{}, err
	}
	return rec.public(), nil
}

// KnowsUser reports whether this gateway's replica of the registry holds
// an account of the name (no pull from the grid: it costs no round trip).
func (g *Gateway) KnowsUser(name string) bool {
	_, err := g.readUser(name)
	return err == nil
}

// Users lists the accounts, by name, after pulling the registry.
func (g *Gateway) Users(ctx context.Context) ([]User, error) {
	g.sync(ctx, &g.registry)
	recs, err := g.userRecords()
	if err != nil {
		return nil, err
	}
	out := make([]User, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.public())
	}
	return out, nil
}

// userRecords reads every user record of the replica, by name.
func (g *Gateway) userRecords() ([]userRecord, error) {
	items, err := g.db.List(g.registry.ns, "/users", "", 0)
	if err != nil {
		return nil, nil // no /users yet: no users
	}
	var out []userRecord
	for _, it := range items {
		raw, _ := g.readFile(&g.registry, it.Path)
		var r userRecord
		if raw != nil && json.Unmarshal(raw, &r) == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// CreateUser makes an account: its home bucket (HomeBucket(Name), which
// must not exist, unless nu.Home names a bucket to give it), an S3 access
// key with owner permission on it, the groups named if missing, and the
// user's record. It returns the user and the key (whose secret is shown
// to nobody else: print it once). A failure part way undoes what was
// made.
func (g *Gateway) CreateUser(ctx context.Context, nu NewUser) (User, AccessKey, error) {
	if err := CheckName(nu.Name); err != nil {
		return User{}, AccessKey{}, err
	}
	if err := CheckPassword(nu.Password); err != nil {
		return User{}, AccessKey{}, err
	}
	if nu.Quota < 0 {
		return User{}, AccessKey{}, fmt.Errorf("gateway: quota %d: want 0 (no limit) or more bytes", nu.Quota)
	}
	for _, gr := range nu.Groups {
		if err := CheckName(gr); err != nil {
			return User{}, AccessKey{}, err
		}
	}
	g.acct.mu.Lock()
	defer g.acct.mu.Unlock()
	g.sync(ctx, &g.registry)
	if _, err := g.readUser(nu.Name); err == nil {
		return User{}, AccessKey{}, fmt.Errorf("%w: %q", ErrUserExists, nu.Name)
	}
	home := nu.Home
	makeHome := false
	if home == "" {
		home = HomeBucket(nu.Name)
		if _, err := g.bucket(ctx, home); err == nil {
			return User{}, AccessKey{}, fmt.Errorf("%w: %q (left by a removed user?): give it to the user explicitly, or delete it first", ErrHomeExists, home)
		}
		makeHome = true
	} else if _, err := g.bucket(ctx, home); errors.Is(err, ErrNoBucket) {
		if err := CheckBucketName(home); err != nil {
			return User{}, AccessKey{}, err
		}
		makeHome = true
	} else if err != nil {
		return User{}, AccessKey{}, err
	}
	hash := hashPassword(nu.Password)
	key, err := g.CreateKey(ctx, false, map[string]Perm{home: Owner})
	if err != nil {
		return User{}, AccessKey{}, err
	}
	undo := func() { g.DeleteKey(context.WithoutCancel(ctx), key.ID) }
	if makeHome {
		if err := g.CreateBucket(ctx, home, key.ID); err != nil {
			undo()
			return User{}, AccessKey{}, fmt.Errorf("gateway: home bucket of %q: %w", nu.Name, err)
		}
		undoKey := undo
		undo = func() { undoKey(); g.DeleteBucket(context.WithoutCancel(ctx), home) }
	}
	// Now the key is the account's: it makes no more buckets.
	key.User = nu.Name
	if err := g.PutKey(ctx, key); err != nil {
		undo()
		return User{}, AccessKey{}, err
	}
	groups := slices.Clone(nu.Groups)
	slices.Sort(groups)
	groups = slices.Compact(groups)
	for _, gr := range groups {
		if err := g.ensureGroup(ctx, gr); err != nil {
			undo()
			return User{}, AccessKey{}, err
		}
	}
	rec := userRecord{User: User{Name: nu.Name, Admin: nu.Admin, Groups: groups, Quota: nu.Quota, Home: home,
		KeyID: key.ID, Created: time.Now().UTC()}, Hash: hash}
	if err := g.putUser(ctx, rec); err != nil {
		undo()
		return User{}, AccessKey{}, err
	}
	return rec.public(), key, nil
}

// changeUser applies change to user name's record and writes it.
func (g *Gateway) changeUser(ctx context.Context, name string, change func(*userRecord) error) (User, error) {
	if err := CheckName(name); err != nil {
		return User{}, err
	}
	g.acct.mu.Lock()
	defer g.acct.mu.Unlock()
	g.sync(ctx, &g.registry)
	rec, err := g.readUser(name)
	if errors.Is(err, errNoRecord) {
		return User{}, fmt.Errorf("%w: %q", ErrNoUser, name)
	}
	if err != nil {
		return User{}, err
	}
	if err := change(&rec); err != nil {
		return User{}, err
	}
	if err := g.putUser(ctx, rec); err != nil {
		return User{}, err
	}
	return rec.public(), nil
}

// SetPassword replaces a user's password. Logins with the old one fail
// from then on, here at once and on other gateways as soon as they have
// the record (a second); app passwords stay.
func (g *Gateway) SetPassword(ctx context.Context, name, password string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash := hashPassword(password)
	_, err := g.changeUser(ctx, name, func(r *userRecord) error { r.Hash = hash; return nil })
	g.forget(name)
	return err
}

// UserChange is a change of an account's settings; nil fields stay.
type UserChange struct {
	Admin  *bool
	Quota  *int64
	Groups *[]string // the whole new list; groups named are made if missing
}

// UpdateUser changes an account's admin flag, quota or groups.
func (g *Gateway) UpdateUser(ctx context.Context, name string, c UserChange) (User, error) {
	if c.Quota != nil && *c.Quota < 0 {
		return User{}, fmt.Errorf("gateway: quota %d: want 0 (no limit) or more bytes", *c.Quota)
	}
	var groups []string
	if c.Groups != nil {
		groups = slices.Clone(*c.Groups)
		slices.Sort(groups)
		groups = slices.Compact(groups)
		for _, gr := range groups {
			if err := CheckName(gr); err != nil {
				return User{}, err
			}
		}
	}
	return g.changeUser(ctx, name, func(r *userRecord) error {
		if c.Admin != nil {
			r.Admin = *c.Admin
		}
		if c.Quota != nil {
			r.Quota = *c.Quota
		}
		if c.Groups != nil {
			for _, gr := range groups {
				if err := g.ensureGroup(ctx, gr); err != nil {
					return err
				}
			}
			r.Groups = groups
		}
		return nil
	})
}

// DeleteUser removes an account and its S3 access key: its logins fail
// from then on. The shares given to the account (gateway.Grant) go too;
// the shares it made stay but are not served while no account of the
// name exists. The home bucket and its files are kept (an admin key
// still reaches them) unless purge is set: then every object and
// multipart upload in it is deleted, and the bucket too.
func (g *Gateway) DeleteUser(ctx context.Context, name string, purge bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	g.acct.mu.Lock()
	g.sync(ctx, &g.registry)
	rec, err := g.readUser(name)
	if err != nil {
		g.acct.mu.Unlock()
		if errors.Is(err, errNoRecord) {
			return fmt.Errorf("%w: %q", ErrNoUser, name)
		}
		return err
	}
	err = g.write(ctx, &g.registry, userPath(name), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
	g.acct.mu.Unlock()
	g.forget(name)
	if err != nil {
		return err
	}
	if err := g.deleteGrantsWith(ctx, "user:"+name); err != nil {
		return fmt.Errorf("gateway: user %q removed, but not the shares with them: %w", name, err)
	}
	if rec.KeyID != "" {
		if err := g.DeleteKey(ctx, rec.KeyID); err != nil && !errors.Is(err, ErrDenied) {
			return fmt.Errorf("gateway: user %q removed, but not their access key %s: %w", name, rec.KeyID, err)
		}
	}
	if purge {
		if err := g.PurgeBucket(ctx, rec.Home); err != nil && !errors.Is(err, ErrNoBucket) {
			return fmt.Errorf("gateway: user %q removed, but not their bucket %q: %w", name, rec.Home, err)
		}
	}
	return nil
}

// PurgeBucket deletes every object and multipart upload of a bucket,
// then the bucket.
func (g *Gateway) PurgeBucket(ctx context.Context, name string) error {
	us, err := g.Uploads(ctx, name)
	if err != nil {
		return err
	}
	for _, u := range us {
		if err := g.AbortUpload(ctx, name, u.Key, u.ID); err != nil && !errors.Is(err, ErrNoUpload) {
			return err
		}
	}
	for {
		l, err := g.List(ctx, name, "", "", "", 1000)
		if err != nil {
			return err
		}
		if len(l.Objects) == 0 {
			break
		}
		for _, o := range l.Objects {
			if err := g.Delete(ctx, name, o.Key); err != nil {
				return err
			}
		}
	}
	return g.DeleteBucket(ctx, name)
}

// checkLabel tells whether an app password's label is usable: 1-100
// printable characters.
func checkLabel(label string) error {
	if label == "" || len(label) > 100 || strings.IndexFunc(label, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("%w: %q (1-100 printable characters)", ErrBadLabel, label)
	}
	return nil
}

// AddAppPassword makes a new app password for user name, labelled (say,
// "laptop sync"), and returns it with its secret, which is kept only as
// a hash: show it once.
func (g *Gateway) AddAppPassword(ctx context.Context, name, label string) (AppPassword, string, error) {
	if err := checkLabel(label); err != nil {
		return AppPassword{}, "", err
	}
	secret := newAppSecret()
	id := make([]byte, 5)
	rand.Read(id)
	ap := AppPassword{ID: hex.EncodeToString(id), Label: label, Created: time.Now().UTC(), Hash: hashAppPassword(secret)}
	_, err := g.changeUser(ctx, name, func(r *userRecord) error {
		if len(r.AppPasswords) >= maxAppPasswords {
			return errTooManyAppPass
		}
		r.AppPasswords = append(r.AppPasswords, ap)
		return nil
	})
	ap.Hash = ""
	return ap, secret, err
}

// RemoveAppPassword revokes one of a user's app passwords, by ID: logins
// with it fail from then on.
func (g *Gateway) RemoveAppPassword(ctx context.Context, name, id string) error {
	_, err := g.changeUser(ctx, name, func(r *userRecord) error {
		i := slices.IndexFunc(r.AppPasswords, func(a AppPassword) bool { return a.ID == id })
		if i < 0 {
			return fmt.Errorf("%w: %q of %q", ErrNoAppPassword, id, name)
		}
		r.AppPasswords = slices.Delete(r.AppPasswords, i, i+1)
		return nil
	})
	g.forget(name)
	return err
}
