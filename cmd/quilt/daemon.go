package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
)

// daemon is a running node with its namespace replica.
type daemon struct {
	*node.Node
	rep *namespace.Replica
	db  *namespace.DB
}

// startDaemon starts a node that also replicates namespaces, keeping them
// in DIR/ns.db.
func startDaemon(ctx context.Context, cfg node.Config, syncEvery time.Duration) (*daemon, error) {
	db, err := namespace.OpenDB(filepath.Join(cfg.Dir, "ns.db"), namespace.Options{NoSync: cfg.NoSync})
	if err != nil {
		return nil, err
	}
	rep := namespace.NewReplica(namespace.ReplicaConfig{DB: db, SyncInterval: syncEvery, Logger: cfg.Logger})
	cfg.Messages, cfg.Mount = rep, rep.Mount
	n, err := node.Start(ctx, cfg)
	if err != nil {
		rep.Close()
		db.Close()
		return nil, err
	}
	return &daemon{Node: n, rep: rep, db: db}, nil
}

// Close leaves the grid and closes the stores.
func (d *daemon) Close() error {
	d.rep.Close()
	err := d.Node.Close()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	return err
}
