package uphelper

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"
	"net/http"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

// NodeConfig configures the helper a storage node runs.
type NodeConfig struct {
	// Uploads bounds the uploads at once (Config.Uploads).
	Uploads int
	// Stall is object.Options.Stall of the helper's placing; default
	// the object layer's.
	Stall time.Duration
	// BodyStall is Config.BodyStall.
	BodyStall time.Duration
	Logger    *slog.Logger
}

// LagBytes is object.Options.LagBytes of a node's helper: the share
// bytes one upload may hold for shares behind the happy-th fastest node
// (a quarter of a direct upload's default), so that Uploads at once hold
// at most Uploads × 16 MiB of them.
const LagBytes = 16 << 20

// Mount returns what nsnode.Config.Helper wants: once the node is up, a
// helper that places shares through the node's own client of the grid
// (its identity, its dialer), acknowledging at happiness and completing
// the other shares in the background. The shares its background repair
// places carry a lease of a key this process draws (the uploader's own
// renewals give them the uploader's lease too).
func Mount(cfg NodeConfig) func(n *node.Node) http.Handler {
	return func(n *node.Node) http.Handler {
		key := make([]byte, 32)
		rand.Read(key)
		log := cfg.Logger
		if log != nil {
			log = log.With("helper", n.ID().Short())
		}
		obj := object.New(object.NodeGrid{Client: n.LocalClient(), MaxAge: time.Second}, object.Options{
			LeaseSecret: func(si sharefile.SI) []byte {
				m := hmac.New(sha256.New, key)
				m.Write(si[:])
				return m.Sum(nil)
			},
			AckAtHappy: true,
			LagBytes:   LagBytes,
			Stall:      cfg.Stall,
			Logger:     log,
		})
		nc := n.LocalClient()
		register := func(ctx context.Context, vc codec.VerifyCap) (int, error) { return repairer.Register(ctx, nc, vc) }
		return NewServer(Config{Objects: obj, Uploads: cfg.Uploads, BodyStall: cfg.BodyStall, Register: register, Logger: log, Metrics: n.Registry()})
	}
}
