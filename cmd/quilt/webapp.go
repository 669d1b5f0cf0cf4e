package main

import (
	"context"
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
