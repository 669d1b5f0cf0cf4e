package main

import (
	"context"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/webapp"
	"golang.org/x/crypto/bcrypt"
)

// webappUsers is the web app's Authenticate over the WebDAV users file
// (bcrypt password lines, as WebDAV checks them). The default user
// ("quilt") is the admin.
func webappUsers(file string) func(ctx context.Context, user, password string) (webapp.Account, error) {
	return func(ctx context.Context, user, password string) (webapp.Account, error) {
		us, err := sftp.LoadUsers(file)
		if err != nil {
			return webapp.Account{}, err
		}
		u := us[user]
		if u == nil {
			// As long as a real check, so that timing does not tell
			// which names exist.
			bcrypt.CompareHashAndPassword(dummyHash(), []byte(password))
			return webapp.Account{}, webapp.ErrLogin
		}
		for _, h := range u.PasswordHashes {
			if bcrypt.CompareHashAndPassword([]byte(h), []byte(password)) == nil {
				return webapp.Account{Name: u.Name, Bucket: u.Bucket, Admin: u.Name == webdavDefault}, nil
			}
		}
		return webapp.Account{}, webapp.ErrLogin
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

// dummyHash is a bcrypt hash of nothing anyone types, for unknown users.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("quilt: no such user"), bcrypt.DefaultCost)
	return h
})
