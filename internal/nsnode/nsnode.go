// Package nsnode starts a storage node that also replicates namespaces
// (layer 4): the node of `quilt node`, of the test grids and of the lab.
// It opens the node's namespace store (DIR/ns.db), makes its replica,
// installs it in the node (gossip and the namespace API), and closes the
// three in the right order, so that assembly is written once.
package nsnode

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
)

// Config configures a node with its replica.
type Config struct {
	// Node is the storage node's configuration. Its Messages and Mount
	// are set to the replica's; its Logger is the replica's too, and
	// NoSync applies to the namespace store as well.
	Node node.Config
	// SyncInterval is how often the replica runs anti-entropy
	// (namespace.ReplicaConfig.SyncInterval; default its default).
	SyncInterval time.Duration
	// NoSyncLog skips fsync of the namespace store even if the node
	// fsyncs its shares (tests).
	NoSyncLog bool
	// Prepare, if set, is called with the open store before the node
	// starts (to open namespaces with their read keys, or set OnAdmit).
	// An error stops the start.
	Prepare func(db *namespace.DB) error
	// Helper, if set, is mounted at /v1/helper (and below) of the
	// node's API once it is up: the upload helper (package uphelper).
	Helper func(n *node.Node) http.Handler
}

// Node is a running storage node with its namespace replica.
type Node struct {
	*node.Node
	Replica *namespace.Replica
	DB      *namespace.DB
}

// Start opens the store, makes the replica and starts the node. On error
// nothing is left open.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	db, err := namespace.OpenDB(filepath.Join(cfg.Node.Dir, "ns.db"), namespace.Options{NoSync: cfg.Node.NoSync || cfg.NoSyncLog})
	if err != nil {
		return nil, err
	}
	if cfg.Prepare != nil {
		if err := cfg.Prepare(db); err != nil {
			db.Close()
			return nil, err
		}
	}
	rep := namespace.NewReplica(namespace.ReplicaConfig{DB: db, SyncInterval: cfg.SyncInterval, Logger: cfg.Node.Logger})
	cfg.Node.Messages, cfg.Node.Mount = rep, rep.Mount
	if cfg.Helper != nil {
		cfg.Node.Helper = true
		cfg.Node.Mount = func(n *node.Node) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/v1/", rep.Mount(n))
			h := cfg.Helper(n)
			mux.Handle("/v1/helper", h)
			mux.Handle("/v1/helper/", h)
			return mux
		}
	}
	n, err := node.Start(ctx, cfg.Node)
	if err != nil {
		rep.Close()
		db.Close()
		return nil, err
	}
	return &Node{Node: n, Replica: rep, DB: db}, nil
}

// Close stops replication, leaves the grid and closes the stores.
func (n *Node) Close() error {
	n.Replica.Close()
	err := n.Node.Close()
	return errors.Join(err, n.DB.Close())
}

// Kill stops the node abruptly, as a crash, then replication, and closes
// the namespace store.
func (n *Node) Kill() {
	n.Node.Kill()
	n.Replica.Close()
	n.DB.Close()
}
