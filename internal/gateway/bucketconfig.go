package gateway

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Per-bucket configuration (S3's CORS rules, bucket tags, lifecycle rules,
// ACL, policy, Block Public Access, Object Ownership, object lock): one
// document per kind, kept in the registry under /config/BUCKETID/KIND.
// It belongs to the bucket's namespace, not its name: a bucket deleted
// and made again under the same name starts with none.

// ErrNoConfig means a bucket has no configuration of the kind asked.
var ErrNoConfig = errors.New("gateway: no such bucket configuration")

// configKinds are the kinds of configuration a bucket may have.
var configKinds = map[string]bool{"cors": true, "tagging": true, "lifecycle": true, "versioning": true, "acl": true, "policy": true,
	"publicAccessBlock": true, "ownershipControls": true, "objectLock": true}

func configDir(b *bucket) string { return "/config/" + b.ns.String() }

// ensureDir makes directory p of the registry if it is not there.
func (g *Gateway) ensureDir(ctx context.Context, p string) error {
	if _, err := g.db.Stat(g.registry.ns, p); err == nil {
		return nil
	}
	return g.write(ctx, &g.registry, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	})
}

func checkKind(kind string) error {
	if !configKinds[kind] {
		return errors.New("gateway: unknown bucket configuration " + kind)
	}
	return nil
}

// PutBucketConfig stores (or replaces) a bucket's configuration of a
// kind ("cors", "tagging", "lifecycle"): doc is the front end's document, kept as given.
func (g *Gateway) PutBucketConfig(ctx context.Context, bucketName, kind string, doc []byte) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return err
	}
	if err := g.ensureDir(ctx, "/config"); err != nil {
		return err
	}
	if err := g.ensureDir(ctx, configDir(b)); err != nil {
		return err
	}
	return g.write(ctx, &g.registry, configDir(b)+"/"+kind, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, doc)
	})
}

// BucketConfig returns a bucket's configuration of a kind (ErrNoConfig
// if it has none). It reads this gateway's replica of the registry only,
// never the grid, so that requests anyone may send (a CORS preflight)
// cost no more than a local read: a configuration another gateway
// stored is seen here once the registry's next pull brings it.
func (g *Gateway) BucketConfig(ctx context.Context, bucketName, kind string) ([]byte, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	id, err := g.bucketID(bucketName)
	if err != nil {
		return nil, err
	}
	raw, err := g.readFile(&g.registry, "/config/"+id+"/"+kind)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, ErrNoConfig
	}
	return raw, nil
}

// DeleteBucketConfig removes a bucket's configuration of a kind (no
// error if it has none, as S3).
func (g *Gateway) DeleteBucketConfig(ctx context.Context, bucketName, kind string) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return err
	}
	p := configDir(b) + "/" + kind
	if raw, err := g.readFile(&g.registry, p); err != nil || raw == nil {
		return err
	}
	return g.write(ctx, &g.registry, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// bucketID is the namespace ID of a bucket, from this gateway's replica
// of the registry (no pull from the grid).
func (g *Gateway) bucketID(name string) (string, error) {
	if !knownName(name) {
		return "", ErrNoBucket
	}
	raw, err := g.readFile(&g.registry, "/buckets/"+name)
	if err != nil {
		return "", err
	}
	if raw == nil {
		return "", ErrNoBucket
	}
	var rec bucketRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", err
	}
	return rec.ID, nil
}
