package main

import (
	"context"
	"net/http"
	"time"

	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsnode"
)

// daemon is a running node with its namespace replica (DIR/ns.db).
type daemon = nsnode.Node

// startDaemon starts a node that also replicates namespaces, keeping them
// in DIR/ns.db, and serves an upload helper when helper is set.
func startDaemon(ctx context.Context, cfg node.Config, syncEvery time.Duration, helper func(*node.Node) http.Handler) (*daemon, error) {
	return nsnode.Start(ctx, nsnode.Config{Node: cfg, SyncInterval: syncEvery, Helper: helper})
}
