package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/webapp"
)

// webappAccounts is the web app's Authenticate: the gateway's accounts
// (their home bucket, admin flag and groups), or a user of an older
// gateway's users file, as auth (WebDAV's check) lets them in.
func webappAccounts(gw *gateway.Gateway, auth func(ctx context.Context, user, password string) (string, error)) func(ctx context.Context, user, password string) (webapp.Account, error) {
	return func(ctx context.Context, user, password string) (webapp.Account, error) {
		bucket, err := auth(ctx, user, password)
		if err != nil {
			return webapp.Account{}, webapp.ErrLogin
		}
		a := webapp.Account{Name: user, Bucket: bucket}
		if u, err := gw.User(ctx, user); err == nil && u.Home == bucket {
			a.Admin, a.Groups = u.Admin, u.Groups
		}
		return a, nil
	}
}

// webappUsage is the web app's storage page: the bytes an account's home
// bucket holds and its quota.
func webappUsage(gw *gateway.Gateway) func(ctx context.Context, a webapp.Account) (int64, int64, error) {
	return func(ctx context.Context, a webapp.Account) (int64, int64, error) {
		used, err := gw.Usage(ctx, a.Bucket)
		return used, gw.QuotaOf(a.Bucket), err
	}
}

// sharedTrees keeps one tree per bucket, so the web app's requests share
// its events and caches.
func sharedTrees(open func(ctx context.Context, bucket string) (*tree.Tree, error)) func(ctx context.Context, bucket string) (*tree.Tree, error) {
	var mu sync.Mutex
	trees := map[string]*tree.Tree{}
	return func(ctx context.Context, bucket string) (*tree.Tree, error) {
		mu.Lock()
		defer mu.Unlock()
		if t := trees[bucket]; t != nil {
			return t, nil
		}
		t, err := open(ctx, bucket)
		if err != nil {
			return nil, err
		}
		trees[bucket] = t
		return t, nil
	}
}

// webappGrid is the web app's grid page: the members as a node sees them,
// judged as quilt status judges them. Nil without a node client.
func webappGrid(nodes *node.Client) func(ctx context.Context) (webapp.GridStatus, error) {
	if nodes == nil {
		return nil
	}
	return func(ctx context.Context) (webapp.GridStatus, error) {
		ms, err := nodes.Members(ctx, 5*time.Second)
		if err != nil {
			return webapp.GridStatus{}, err
		}
		st := summarize(ms)
		gs := webapp.GridStatus{Verdict: st.Verdict, Reason: st.Reason, Used: st.Used, Free: st.Free, Capacity: st.Capacity,
			Missing: "objects at risk (it needs a census of every node's shares) and the housekeeping's repair and scrub state (not reported by the nodes yet)."}
		for _, m := range ms {
			gs.Nodes = append(gs.Nodes, gridNode(m))
		}
		return gs, nil
	}
}

func gridNode(m member.Member) webapp.GridNode {
	return webapp.GridNode{ID: m.ID, Addr: m.Addr, Zone: m.Zone, State: m.State, Used: m.Used, Free: m.Free, Capacity: m.Capacity, Since: m.Since}
}

// webappUsers is the web app's Users page over the gateway's accounts.
type webappUsers struct{ gw *gateway.Gateway }

// refusable marks the gateway's errors of an admin's input as such for
// the web app, without the "gateway: " prefix.
func refusable(err error) error {
	if err == nil {
		return nil
	}
	for _, e := range []error{gateway.ErrBadName, gateway.ErrBadPassword, gateway.ErrUserExists, gateway.ErrNoUser,
		gateway.ErrGroupExists, gateway.ErrNoGroup, gateway.ErrHomeExists, gateway.ErrBadBucket} {
		if errors.Is(err, e) {
			return webapp.Refused(cleanErr{err})
		}
	}
	return err
}

// cleanErr is an error shown to people: without its "gateway: " prefix.
type cleanErr struct{ error }

func (e cleanErr) Error() string { return strings.TrimPrefix(e.error.Error(), "gateway: ") }
func (e cleanErr) Unwrap() error { return e.error }

// Users lists the accounts with their home's usage (-1: not known).
func (w webappUsers) Users(ctx context.Context) ([]webapp.UserInfo, error) {
	us, err := w.gw.Users(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]webapp.UserInfo, 0, len(us))
	for _, u := range us {
		used, err := w.gw.Usage(ctx, u.Home)
		if err != nil {
			used = -1
		}
		out = append(out, webapp.UserInfo{Name: u.Name, Admin: u.Admin, Groups: u.Groups, Home: u.Home, Used: used, Quota: u.Quota})
	}
	return out, nil
}

// IsAdmin tells whether account name is an admin now.
func (w webappUsers) IsAdmin(ctx context.Context, name string) (bool, error) {
	u, err := w.gw.User(ctx, name)
	if errors.Is(err, gateway.ErrNoUser) {
		return false, nil
	}
	return u.Admin, err
}

// Groups lists the groups and their members.
func (w webappUsers) Groups(ctx context.Context) ([]webapp.GroupInfo, error) {
	gs, err := w.gw.Groups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]webapp.GroupInfo, 0, len(gs))
	for _, g := range gs {
		out = append(out, webapp.GroupInfo{Name: g.Name, Members: g.Members})
	}
	return out, nil
}

// AddUser makes an account (gateway.CreateUser) and returns its S3 key.
func (w webappUsers) AddUser(ctx context.Context, nu webapp.NewAccount) (webapp.UserInfo, webapp.S3Key, error) {
	u, key, err := w.gw.CreateUser(ctx, gateway.NewUser{Name: nu.Name, Password: nu.Password, Admin: nu.Admin, Quota: nu.Quota, Groups: nu.Groups})
	if err != nil {
		return webapp.UserInfo{}, webapp.S3Key{}, refusable(err)
	}
	return webapp.UserInfo{Name: u.Name, Admin: u.Admin, Groups: u.Groups, Home: u.Home, Quota: u.Quota},
		webapp.S3Key{ID: key.ID, Secret: key.Secret}, nil
}

// SetPassword replaces a password.
func (w webappUsers) SetPassword(ctx context.Context, name, password string) error {
	return refusable(w.gw.SetPassword(ctx, name, password))
}

// UpdateUser sets the admin flag, quota and groups.
func (w webappUsers) UpdateUser(ctx context.Context, name string, admin bool, quota int64, groups []string) error {
	_, err := w.gw.UpdateUser(ctx, name, gateway.UserChange{Admin: &admin, Quota: &quota, Groups: &groups})
	return refusable(err)
}

// DeleteUser removes an account, and with purge its home bucket.
func (w webappUsers) DeleteUser(ctx context.Context, name string, purge bool) error {
	return refusable(w.gw.DeleteUser(ctx, name, purge))
}

// AddGroup makes a group.
func (w webappUsers) AddGroup(ctx context.Context, name string) error {
	return refusable(w.gw.CreateGroup(ctx, name))
}

// DeleteGroup removes a group.
func (w webappUsers) DeleteGroup(ctx context.Context, name string) error {
	return refusable(w.gw.DeleteGroup(ctx, name))
}
