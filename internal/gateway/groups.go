package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Groups are sets of accounts, records of the registry under
// /groups/NAME; membership is kept with each user (User.Groups).

// Group is a set of users.
type Group struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	// Members are the users in the group (computed by Groups, not
	// stored: membership is kept with each user).
	Members []string `json:"-"`
}

// ensureGroup makes a group if there is none of the name.
func (g *Gateway) ensureGroup(ctx context.Context, name string) error {
	if raw, _ := g.readFile(&g.registry, groupPath(name)); raw != nil {
		return nil
	}
	return g.putGroup(ctx, Group{Name: name, Created: time.Now().UTC()})
}

func (g *Gateway) putGroup(ctx context.Context, gr Group) error {
	if err := g.ensureSet(ctx, "/groups"); err != nil {
		return err
	}
	body, _ := json.Marshal(gr)
	return g.write(ctx, &g.registry, groupPath(gr.Name), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// CreateGroup makes a group.
func (g *Gateway) CreateGroup(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	g.acct.mu.Lock()
	defer g.acct.mu.Unlock()
	g.sync(ctx, &g.registry)
	if raw, _ := g.readFile(&g.registry, groupPath(name)); raw != nil {
		return fmt.Errorf("%w: %q", ErrGroupExists, name)
	}
	return g.putGroup(ctx, Group{Name: name, Created: time.Now().UTC()})
}

// Groups lists the groups, by name, with their members, after pulling
// the registry.
func (g *Gateway) Groups(ctx context.Context) ([]Group, error) {
	g.sync(ctx, &g.registry)
	items, err := g.db.List(g.registry.ns, "/groups", "", 0)
	if err != nil {
		return nil, nil // no /groups yet
	}
	users, err := g.userRecords()
	if err != nil {
		return nil, err
	}
	var out []Group
	for _, it := range items {
		raw, _ := g.readFile(&g.registry, it.Path)
		var gr Group
		if raw == nil || json.Unmarshal(raw, &gr) != nil {
			continue
		}
		for _, u := range users {
			if u.InGroup(gr.Name) {
				gr.Members = append(gr.Members, u.Name)
			}
		}
		out = append(out, gr)
	}
	return out, nil
}

// DeleteGroup removes a group, takes its members out of it and removes
// the shares given to it (gateway.Grant).
func (g *Gateway) DeleteGroup(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	g.acct.mu.Lock()
	defer g.acct.mu.Unlock()
	g.sync(ctx, &g.registry)
	if raw, _ := g.readFile(&g.registry, groupPath(name)); raw == nil {
		return fmt.Errorf("%w: %q", ErrNoGroup, name)
	}
	users, err := g.userRecords()
	if err != nil {
		return err
	}
	for _, u := range users {
		if i := slices.Index(u.Groups, name); i >= 0 {
			u.Groups = slices.Delete(u.Groups, i, i+1)
			if err := g.putUser(ctx, u); err != nil {
				return err
			}
		}
	}
	if err := g.write(ctx, &g.registry, groupPath(name), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	}); err != nil {
		return err
	}
	if err := g.deleteGrantsWith(ctx, "group:"+name); err != nil {
		return fmt.Errorf("gateway: group %q removed, but not the shares with it: %w", name, err)
	}
	return nil
}

// SetMembership adds users to a group (add) or takes them out of it; the
// group must exist.
func (g *Gateway) SetMembership(ctx context.Context, group string, users []string, add bool) error {
	if err := CheckName(group); err != nil {
		return err
	}
	g.sync(ctx, &g.registry)
	if raw, _ := g.readFile(&g.registry, groupPath(group)); raw == nil {
		return fmt.Errorf("%w: %q", ErrNoGroup, group)
	}
	for _, name := range users {
		if _, err := g.changeUser(ctx, name, func(r *userRecord) error {
			i := slices.Index(r.Groups, group)
			switch {
			case add && i < 0:
				r.Groups = append(r.Groups, group)
				slices.Sort(r.Groups)
			case !add && i >= 0:
				r.Groups = slices.Delete(r.Groups, i, i+1)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
