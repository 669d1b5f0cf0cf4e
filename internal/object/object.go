// Package object stores and reads Quilt objects on a grid of untrusted
// storage nodes: immutable, encrypted, erasure-coded, verified block by
// block (layer 3 of docs/design.md).
//
// Put streams the input through the codec to n share uploads in parallel,
// placed by rendezvous hashing, and fails rather than store below the
// happiness threshold; with Options.AckAtHappy it returns at happiness
// and completes the other shares in the background. Get starts on the
// first share lists that answer, checks their trailers against the
// capability, reads the blocks of consecutive segments from every holder
// at once by a running estimate of each one's throughput, hedges late
// blocks, verifies every block and drops a node that is down or lying. Check and Repair
// work from the verify capability alone. Memory is bounded by a few
// segments per share, whatever the object's size.
//
//	c := object.New(grid, object.Options{LeaseSecret: secretFor})
//	rc, rep, err := c.Put(ctx, file, size, codec.DefaultParams(), 7)
//	_, err = c.Get(ctx, rc, os.Stdout, 0, -1)
package object

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/quilt-grid/quilt/internal/clock"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

var (
	// ErrUnhappy means too few shares could be stored on distinct nodes.
	ErrUnhappy = errors.New("object: upload did not reach enough nodes")
	// ErrUnavailable means fewer than k good shares of the object could
	// be found: it cannot be read now.
	ErrUnavailable = errors.New("object: not enough good shares to read")
	// ErrRange means a read starts beyond the end of the object.
	ErrRange = errors.New("object: range starts beyond the end of the object")
	// ErrNoLeaseSecret is returned by the calls that store shares when
	// the client was made without Options.LeaseSecret.
	ErrNoLeaseSecret = errors.New("object: no lease secret (Options.LeaseSecret): shares cannot be stored without a delete secret of this client's")
)

// Node is a storage node as the object layer sees it.
type Node struct {
	ID   string
	Zone string
	Free int64
	Used int64 // bytes stored (0: not known); see placement.PlaceBy
	// Coord is the node's network coordinate as the grid's gossip
	// reports it (nil: not known). A client estimates its round trip to
	// a node it has not measured from it (see Client.Links).
	Coord *coordinate.Coordinate
}

// Grid is what the object layer needs of the storage nodes. Node is the
// node ID. Implementations must be safe for concurrent use.
type Grid interface {
	// Nodes returns the storage nodes that are up.
	Nodes(ctx context.Context) ([]Node, error)
	// PutShare streams a whole share of size bytes (-1: not known) to a
	// node and returns once it is stored durably. An r that fails must
	// make the node store nothing.
	PutShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) error
	// GetShare reads n bytes of a share from off (n < 0: to the end).
	GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error)
	// ListShares returns the share numbers a node holds of an object.
	ListShares(ctx context.Context, node string, si sharefile.SI) ([]int, error)
	// DeleteShare removes a share, with the uploader's delete secret.
	DeleteShare(ctx context.Context, node string, key sharestore.Key, secret []byte) error
}

// TrailerGrid is a Grid that can send, with a node's list of an object's
// shares, their trailers (the hashes a reader checks blocks against), so a
// read needs no second round trip to each holder. NodeGrid is one.
type TrailerGrid interface {
	Grid
	// ListTrailers returns the shares a node holds of an object, each
	// with its trailer (nil where the node could not read it).
	ListTrailers(ctx context.Context, node string, si sharefile.SI) (map[int][]byte, error)
}

// Options tune a Client. Zero values are the defaults.
type Options struct {
	// LeaseSecret returns the cancel secret of the lease this client
	// gives an object's shares, a secret of this client's (an HMAC of si
	// under a key it keeps); the lease's renew secret is derived from it
	// (RenewSecret). Nodes see only hashes of the two. There is no
	// default: without it Put, Repair, Renew and Cancel return
	// ErrNoLeaseSecret, since a secret everyone shares would let anyone
	// delete the shares.
	LeaseSecret func(si sharefile.SI) []byte
	// LeaseTerm is how long the lease of each share stored (by Put and
	// Repair) and renewed (by Renew) runs from then; default
	// DefaultLeaseTerm, 90 days.
	LeaseTerm time.Duration
	// Workers encode segments in parallel; default GOMAXPROCS.
	Workers int
	// Stall is how long a node may make no progress before its share is
	// given up on (upload) or read from elsewhere (download). Default 20s.
	Stall time.Duration
	// Clock times Stall for a share's stream (its upload, or its blocks
	// during a read); default the real clock. (The deadlines of single
	// requests, such as finding shares, are contexts on real time.)
	Clock clock.Clock
	// Logger receives what the client notices about nodes.
	Logger *slog.Logger
	// AckAtHappy makes Put return as soon as the object's shares are
	// stored durably on happy distinct nodes, spread over as many zones
	// as the placement plan's first happy nodes use (up to happy),
	// rather than on every node of the plan. The shares still on their
	// way are completed afterwards in the background by this client
	// (see Background), or, if it goes away first, by the grid's
	// repairers from the verify capability. Off (the zero value), Put
	// waits for every share, as it always did: a caller that needs full
	// redundancy at once keeps that.
	AckAtHappy bool
	// Background bounds how long the shares left after an early
	// acknowledgement (AckAtHappy) may take to complete, uploads and the
	// repair that places the ones that failed; default 30 minutes.
	Background time.Duration
	// LagBytes bounds the share bytes an upload with AckAtHappy holds in
	// memory for shares that fall behind the fastest happy nodes: a
	// share further behind is cut off and placed in the background by
	// repair. Default 64 MiB.
	LagBytes int64
}

// Client stores and reads objects on a grid. It is safe for concurrent use.
type Client struct {
	grid Grid
	opt  Options
	log  *slog.Logger
	// bg is the context of background completions: cancelled by Close.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	bgMu     sync.Mutex // orders bgWG.Add after Close's cancel
	stats    *bgStats
	links    links // running estimates of the links to nodes
}

// New returns a client of grid.
func New(grid Grid, opt Options) *Client {
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.Stall <= 0 {
		opt.Stall = 20 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opt.Background <= 0 {
		opt.Background = 30 * time.Minute
	}
	if opt.LagBytes <= 0 {
		opt.LagBytes = 64 << 20
	}
	opt.Clock = clock.Or(opt.Clock)
	bg, cancel := context.WithCancel(context.Background())
	return &Client{grid: grid, opt: opt, log: opt.Logger, bg: bg, bgCancel: cancel, stats: newBGStats()}
}

// Wait waits until every background completion of this client's uploads
// (AckAtHappy) has ended, or ctx ends.
func (c *Client) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { c.bgWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close cancels the background completions of this client's uploads and
// waits for them to stop: shares still on their way are cut off (their
// nodes store nothing), and the grid's repairers place them later. The
// client may still be used: later uploads wait for every share.
func (c *Client) Close() {
	c.bgMu.Lock()
	c.bgCancel()
	c.bgMu.Unlock()
	c.bgWG.Wait()
}

// goBackground runs fn as a background completion unless the client is
// closed, and reports whether it did.
func (c *Client) goBackground(fn func()) bool {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bg.Err() != nil {
		return false
	}
	c.bgWG.Add(1)
	go fn()
	return true
}

// needLease says whether the client may store shares.
func (c *Client) needLease() error {
	if c.opt.LeaseSecret == nil {
		return ErrNoLeaseSecret
	}
	return nil
}

// Problem is something wrong that a transfer noticed and worked around.
type Problem struct {
	Share int
	Node  string
	Err   error
}

// guarded runs fn, turning a panic in it into an error. Goroutines that
// check what a node sent run their checks through it: the checks are meant
// never to panic on any bytes, and this keeps a mistake there from taking
// down the reading process (a gateway, a whole `quilt up`) for one lying
// node.
func guarded(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: checking what a node sent failed: %v", sharefile.ErrCorrupt, r)
		}
	}()
	return fn()
}
