package object

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// DefaultLeaseTerm is how long the lease of a share stored runs unless
// Options.LeaseTerm says otherwise: 90 days. A share whose leases all
// expire is deleted by its node, so whoever keeps an object renews it
// (Client.Renew) well within the term.
const DefaultLeaseTerm = 90 * 24 * time.Hour

// ErrNoLease means no node holding shares of the object had a lease that
// the client's secret opens (or none holds any share of it).
var ErrNoLease = errors.New("object: no share of the object has a lease of this client's")

// LeaseGrid is a Grid whose nodes renew and cancel leases, an object at a
// time. NodeGrid is one.
type LeaseGrid interface {
	Grid
	// RenewLeases renews, on every share of si a node holds, the lease
	// that the renew secret opens, to term from now; a share without one
	// is given one, cancelled by the secret whose hash is cancel.
	RenewLeases(ctx context.Context, node string, si sharefile.SI, secret []byte, cancel [32]byte, term time.Duration) (node.LeaseResult, error)
	// CancelLeases cancels, on every share of si a node holds, the lease
	// that the cancel secret opens; the node deletes a share left with
	// none.
	CancelLeases(ctx context.Context, node string, si sharefile.SI, secret []byte) (node.LeaseResult, error)
}

// RenewSecret is the renew secret that goes with a cancel secret (what
// Options.LeaseSecret returns): a one-way function of it, so the holder
// of the cancel secret can renew too, and a party given only the renew
// secret cannot cancel.
func RenewSecret(cancel []byte) []byte {
	h := sha256.New()
	h.Write([]byte("quilt lease renew secret\x00"))
	h.Write(cancel)
	return h.Sum(nil)
}

// LeaseTerm is the term of the leases this client gives shares
// (Options.LeaseTerm, or the default).
func (c *Client) LeaseTerm() time.Duration { return c.leaseTerm() }

func (c *Client) leaseTerm() time.Duration {
	if c.opt.LeaseTerm > 0 {
		return c.opt.LeaseTerm
	}
	return DefaultLeaseTerm
}

// leaseFor returns the lease this client gives the shares of si: its ID
// and cancel hash from the secrets derived for si, expiring a term from
// now.
func (c *Client) leaseFor(si sharefile.SI) sharestore.Lease {
	cancel := c.opt.LeaseSecret(si)
	return sharestore.Lease{
		ID:      sharestore.SecretHash(RenewSecret(cancel)),
		Cancel:  sharestore.SecretHash(cancel),
		Expires: time.Now().Add(c.leaseTerm()),
	}
}

// LeaseReport says what a renewal or cancellation of an object's leases
// did.
type LeaseReport struct {
	Shares  int       // shares whose lease of this client's was renewed or cancelled
	Removed int       // shares deleted, their last lease cancelled
	Nodes   int       // nodes that held such a share
	Refused int       // nodes that hold shares of the object but none with a lease of this client's
	Failed  []Problem // nodes that could not be asked (their shares keep their leases as they were)
}

// Renew renews this client's lease on every share of the object si held
// by the live nodes, to the client's lease term from now; a share that
// has no lease of this client's (another client uploaded it) is given
// one. It fails with ErrNoLease if no live node holds a share of it.
func (c *Client) Renew(ctx context.Context, si sharefile.SI) (LeaseReport, error) {
	if err := c.needLease(); err != nil {
		return LeaseReport{}, err
	}
	cancel := c.opt.LeaseSecret(si)
	secret, term := RenewSecret(cancel), c.leaseTerm()
	return c.eachNode(ctx, si, func(g LeaseGrid, n string) (node.LeaseResult, error) {
		return g.RenewLeases(ctx, n, si, secret, sharestore.SecretHash(cancel), term)
	})
}

// Cancel cancels this client's lease on every share of the object si held
// by the live nodes; a node deletes a share left with no lease. Shares on
// nodes that are down keep the lease until it expires. It fails with
// ErrNoLease if no lease was cancelled.
func (c *Client) Cancel(ctx context.Context, si sharefile.SI) (LeaseReport, error) {
	if err := c.needLease(); err != nil {
		return LeaseReport{}, err
	}
	secret := c.opt.LeaseSecret(si)
	return c.eachNode(ctx, si, func(g LeaseGrid, n string) (node.LeaseResult, error) {
		return g.CancelLeases(ctx, n, si, secret)
	})
}

// eachNode runs fn on every live node at once, at most 16 at a time, and
// adds up the answers.
func (c *Client) eachNode(ctx context.Context, si sharefile.SI, fn func(LeaseGrid, string) (node.LeaseResult, error)) (LeaseReport, error) {
	g, ok := c.grid.(LeaseGrid)
	if !ok {
		return LeaseReport{}, errors.New("object: this grid does not renew or cancel leases")
	}
	nodes, err := c.grid.Nodes(ctx)
	if err != nil {
		return LeaseReport{}, err
	}
	var (
		mu  sync.Mutex
		rep LeaseReport
		wg  sync.WaitGroup
	)
	sem := make(chan struct{}, 16)
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := fn(g, n.ID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, sharestore.ErrNotFound):
			case errors.Is(err, sharestore.ErrForbidden):
				rep.Refused++
			case err != nil:
				rep.Failed = append(rep.Failed, Problem{Share: -1, Node: n.ID, Err: err})
			default:
				rep.Shares += res.Shares
				rep.Removed += res.Removed
				rep.Nodes++
			}
		}()
	}
	wg.Wait()
	if rep.Shares == 0 {
		if len(rep.Failed) > 0 {
			return rep, fmt.Errorf("%w (%d nodes could not be asked; the first: %v)", ErrNoLease, len(rep.Failed), rep.Failed[0].Err)
		}
		return rep, ErrNoLease
	}
	return rep, nil
}

// RenewLeases implements LeaseGrid.
func (g NodeGrid) RenewLeases(ctx context.Context, n string, si sharefile.SI, secret []byte, cancel [32]byte, term time.Duration) (node.LeaseResult, error) {
	return g.Client.RenewLeases(ctx, n, si, secret, &cancel, term)
}

// CancelLeases implements LeaseGrid.
func (g NodeGrid) CancelLeases(ctx context.Context, n string, si sharefile.SI, secret []byte) (node.LeaseResult, error) {
	return g.Client.CancelLeases(ctx, n, si, secret)
}

var _ LeaseGrid = NodeGrid{}
