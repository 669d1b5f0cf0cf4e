package gateway

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Records are small named documents a front end keeps in the registry
// beside the buckets and access keys: Swift's projects, users, tokens,
// endpoints and container metadata. Each set of records is a directory
// of the registry (/NAME), made on first use; a record is a file in it.
// Every gateway that shares the registry sees the others' records, so a
// front end that keeps its state here holds none between requests.

// ErrBadRecord means a record set or record name is not usable as a
// registry path.
var ErrBadRecord = errors.New("gateway: invalid record name")

var recordSet = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// reservedSets are the registry's own directories.
var reservedSets = map[string]bool{"buckets": true, "keys": true, "uploads": true, "shares": true, "grants": true, "users": true, "groups": true}

func recordPath(set, name string) (string, error) {
	if !recordSet.MatchString(set) || reservedSets[set] {
		return "", fmt.Errorf("%w: set %q", ErrBadRecord, set)
	}
	if name == "" {
		return "/" + set, nil
	}
	if len(name) > 255 || name == "." || name == ".." || dag.CheckKey(name) != nil {
		return "", fmt.Errorf("%w: %q", ErrBadRecord, name)
	}
	for _, c := range name {
		if c == '/' || c < ' ' {
			return "", fmt.Errorf("%w: %q", ErrBadRecord, name)
		}
	}
	return "/" + set + "/" + name, nil
}

// ensureSet makes the registry directory of a record set once.
func (g *Gateway) ensureSet(ctx context.Context, dir string) error {
	if _, err := g.db.Stat(g.registry.ns, dir); err == nil {
		return nil
	}
	return g.write(ctx, &g.registry, dir, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	})
}

// PutRecord stores (or replaces) record name of set in the registry.
func (g *Gateway) PutRecord(ctx context.Context, set, name string, body []byte) error {
	p, err := recordPath(set, name)
	if err != nil {
		return err
	}
	if err := g.ensureSet(ctx, "/"+set); err != nil {
		return err
	}
	return g.write(ctx, &g.registry, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// Record returns record name of set, or nil if there is none. A record
// this gateway has not seen is looked for once more after pulling the
// registry from the grid, so one another gateway wrote is found.
func (g *Gateway) Record(ctx context.Context, set, name string) ([]byte, error) {
	p, err := recordPath(set, name)
	if err != nil {
		return nil, err
	}
	raw, err := g.readFile(&g.registry, p)
	if err == nil && raw == nil {
		g.sync(ctx, &g.registry)
		raw, err = g.readFile(&g.registry, p)
	}
	if errors.Is(err, namespace.ErrNotFound) {
		return nil, nil
	}
	return raw, err
}

// SyncRegistry pulls the registry from the grid, so that the records
// read next include every change another gateway committed before the
// call (Record alone pulls only for a record it does not have).
func (g *Gateway) SyncRegistry(ctx context.Context) error {
	return g.sync(ctx, &g.registry)
}

// Records returns every record of set, by name, after pulling the
// registry from the grid.
func (g *Gateway) Records(ctx context.Context, set string) (map[string][]byte, error) {
	p, err := recordPath(set, "")
	if err != nil {
		return nil, err
	}
	g.sync(ctx, &g.registry)
	out := map[string][]byte{}
	items, err := g.db.List(g.registry.ns, p, "", 0)
	if errors.Is(err, namespace.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if raw, _ := g.readFile(&g.registry, it.Path); raw != nil {
			out[it.Name] = raw
		}
	}
	return out, nil
}

// DeleteRecord removes record name of set (no error if it is not there).
func (g *Gateway) DeleteRecord(ctx context.Context, set, name string) error {
	p, err := recordPath(set, name)
	if err != nil {
		return err
	}
	if _, err := g.db.Stat(g.registry.ns, p); err != nil {
		return nil
	}
	return g.write(ctx, &g.registry, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}
