package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Share links are records of the registry under /shares/TOKEN, beside
// the access keys under /keys/ID: each gives whoever holds its token
// access to one file or folder of one bucket (internal/sharelink serves
// them). Every gateway that shares the registry serves the same links;
// a link deleted here is gone on the others once their replicas of the
// registry have synced (every Config.SyncEvery, and before a lookup of a
// token they do not hold).

// ErrNoShare means there is no share link of that token.
var ErrNoShare = errors.New("gateway: no such share link")

// ShareLink is a share link's record. The token is a bearer secret: the
// registry is readable only by gateways holding its read key.
type ShareLink struct {
	Token  string `json:"token"`
	Owner  string `json:"owner"`  // the user who made it
	Bucket string `json:"bucket"` // the owner's bucket it reaches into
	// Path is the shared file or folder: a tree path ("a/b", "" for
	// the whole bucket).
	Path string `json:"path"`
	Mode string `json:"mode"` // "read" or "upload"
	// PasswordHash is a slow hash of the link's password (a PHC string
	// such as $argon2id$...), empty for a link without one.
	PasswordHash string `json:"password_hash,omitempty"`
	// Secret keys the cookies that a correct password earns, so every
	// gateway accepts them and deleting the link voids them.
	Secret  []byte    `json:"secret,omitempty"`
	Expires time.Time `json:"expires,omitzero"` // zero: never
	Created time.Time `json:"created"`
}

// shareToken is what a token may look like: URL-safe base64, long
// enough for 128 bits or more.
var shareToken = regexp.MustCompile(`^[A-Za-z0-9_-]{22,64}$`)

// CheckShareToken reports whether s has a share token's form.
func CheckShareToken(s string) error {
	if !shareToken.MatchString(s) {
		return fmt.Errorf("%w: token %q", ErrBadRecord, s)
	}
	return nil
}

const sharesDir = "/shares"

// PutShare stores (or replaces) a share link.
func (g *Gateway) PutShare(ctx context.Context, s ShareLink) error {
	if err := CheckShareToken(s.Token); err != nil {
		return err
	}
	if err := g.ensureSet(ctx, sharesDir); err != nil {
		return err
	}
	body, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return g.write(ctx, &g.registry, sharesDir+"/"+s.Token, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// Share returns the share link of token, or ErrNoShare. A token this
// gateway does not hold is looked for again after pulling the registry,
// so a link made through another gateway is found.
func (g *Gateway) Share(ctx context.Context, token string) (ShareLink, error) {
	var s ShareLink
	if CheckShareToken(token) != nil {
		return s, ErrNoShare
	}
	p := sharesDir + "/" + token
	raw, err := g.readFile(&g.registry, p)
	if err == nil && raw == nil || errors.Is(err, namespace.ErrNotFound) {
		g.sync(ctx, &g.registry)
		raw, err = g.readFile(&g.registry, p)
	}
	if errors.Is(err, namespace.ErrNotFound) || err == nil && raw == nil {
		return s, ErrNoShare
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("gateway: share link record: %w", err)
	}
	return s, nil
}

// Shares returns the share links made by owner ("": everyone's), after
// pulling the registry from the grid.
func (g *Gateway) Shares(ctx context.Context, owner string) ([]ShareLink, error) {
	g.sync(ctx, &g.registry)
	items, err := g.db.List(g.registry.ns, sharesDir, "", 0)
	if errors.Is(err, namespace.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ShareLink
	for _, it := range items {
		raw, _ := g.readFile(&g.registry, it.Path)
		if raw == nil {
			continue
		}
		var s ShareLink
		if json.Unmarshal(raw, &s) == nil && (owner == "" || s.Owner == owner) {
			out = append(out, s)
		}
	}
	return out, nil
}

// DeleteShare removes a share link (ErrNoShare if there is none).
func (g *Gateway) DeleteShare(ctx context.Context, token string) error {
	if _, err := g.Share(ctx, token); err != nil {
		return err
	}
	return g.write(ctx, &g.registry, sharesDir+"/"+token, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// Grants are shares between users: a folder or file of a user's bucket
// given to another user or to a group, to read or to write, under
// /grants/ID of the registry. The front ends that know who is logged in
// (the web app, internal/sharelink's API) check them; a grant gives
// nothing to anyone who is not logged in.

// ErrNoGrant means there is no grant of that ID.
var ErrNoGrant = errors.New("gateway: no such grant")

// Grant is a share of a path of a bucket with a user or a group.
type Grant struct {
	ID     string `json:"id"`     // random, of a share token's form
	Owner  string `json:"owner"`  // the user who made it
	Bucket string `json:"bucket"` // the owner's bucket
	Path   string `json:"path"`   // a tree path; "" is the whole bucket
	// With is who gets it: "user:NAME" or "group:NAME".
	With    string    `json:"with"`
	Perm    string    `json:"perm"` // "read" or "write"
	Created time.Time `json:"created"`
}

const grantsDir = "/grants"

// PutGrant stores (or replaces) a grant.
func (g *Gateway) PutGrant(ctx context.Context, gr Grant) error {
	if err := CheckShareToken(gr.ID); err != nil {
		return err
	}
	if err := g.ensureSet(ctx, grantsDir); err != nil {
		return err
	}
	body, err := json.Marshal(gr)
	if err != nil {
		return err
	}
	return g.write(ctx, &g.registry, grantsDir+"/"+gr.ID, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// Grants returns every grant, after pulling the registry from the grid.
func (g *Gateway) Grants(ctx context.Context) ([]Grant, error) {
	g.sync(ctx, &g.registry)
	items, err := g.db.List(g.registry.ns, grantsDir, "", 0)
	if errors.Is(err, namespace.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Grant
	for _, it := range items {
		if raw, _ := g.readFile(&g.registry, it.Path); raw != nil {
			var gr Grant
			if json.Unmarshal(raw, &gr) == nil {
				out = append(out, gr)
			}
		}
	}
	return out, nil
}

// Grant returns the grant of id, or ErrNoGrant.
func (g *Gateway) Grant(ctx context.Context, id string) (Grant, error) {
	var gr Grant
	if CheckShareToken(id) != nil {
		return gr, ErrNoGrant
	}
	p := grantsDir + "/" + id
	raw, err := g.readFile(&g.registry, p)
	if err == nil && raw == nil || errors.Is(err, namespace.ErrNotFound) {
		g.sync(ctx, &g.registry)
		raw, err = g.readFile(&g.registry, p)
	}
	if errors.Is(err, namespace.ErrNotFound) || err == nil && raw == nil {
		return gr, ErrNoGrant
	}
	if err != nil {
		return gr, err
	}
	if err := json.Unmarshal(raw, &gr); err != nil {
		return gr, fmt.Errorf("gateway: grant record: %w", err)
	}
	return gr, nil
}

// DeleteGrant removes a grant (ErrNoGrant if there is none).
func (g *Gateway) DeleteGrant(ctx context.Context, id string) error {
	if _, err := g.Grant(ctx, id); err != nil {
		return err
	}
	return g.write(ctx, &g.registry, grantsDir+"/"+id, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// deleteGrantsWith removes the grants given to with ("user:NAME" or
// "group:NAME"), so that an account or group made later under the same
// name does not inherit them.
func (g *Gateway) deleteGrantsWith(ctx context.Context, with string) error {
	gs, err := g.Grants(ctx)
	if err != nil {
		return err
	}
	for _, gr := range gs {
		if gr.With != with {
			continue
		}
		if err := g.DeleteGrant(ctx, gr.ID); err != nil && !errors.Is(err, ErrNoGrant) {
			return err
		}
	}
	return nil
}
