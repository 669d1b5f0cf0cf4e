package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/quilt-grid/quilt/internal/sharestore"
)

// maxLeaseTerm bounds the term a node gives a lease: ten years.
const maxLeaseTerm = 10 * 365 * 24 * time.Hour

// now is the node's clock for leases.
func (n *Node) now() time.Time {
	if n.cfg.Now != nil {
		return n.cfg.Now()
	}
	return time.Now()
}

// leaseTerm parses the lease term header; ok is false when it is absent.
func leaseTerm(r *http.Request) (d time.Duration, ok bool, err error) {
	v := r.Header.Get(hdrTerm)
	if v == "" {
		return 0, false, nil
	}
	s, err := strconv.ParseInt(v, 10, 64)
	if err != nil || s <= 0 || s > int64(maxLeaseTerm/time.Second) {
		return 0, false, fmt.Errorf("%w: bad %s header %q (seconds, at most %d)", ErrBadRequest, hdrTerm, v, int64(maxLeaseTerm/time.Second))
	}
	return time.Duration(s) * time.Second, true, nil
}

func hash32(v, name string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%w: missing or bad %s header", ErrBadRequest, name)
	}
	copy(h[:], b)
	return h, nil
}

// leaseOf reads the lease a share PUT asks for: its ID, its cancel hash
// (the ID if absent, as from a client that sends one secret), and its
// term from now by the node's clock (for ever if absent).
func (n *Node) leaseOf(r *http.Request) (sharestore.Lease, error) {
	var l sharestore.Lease
	var err error
	if l.ID, err = hash32(r.Header.Get(hdrLease), hdrLease); err != nil {
		return l, err
	}
	l.Cancel = l.ID
	if v := r.Header.Get(hdrCancel); v != "" {
		if l.Cancel, err = hash32(v, hdrCancel); err != nil {
			return l, err
		}
	}
	term, ok, err := leaseTerm(r)
	if err != nil {
		return l, err
	}
	if ok {
		l.Expires = n.now().Add(term)
	}
	return l, nil
}

// LeaseResult is a node's answer to a renewal or cancellation of an
// object's leases: how many of its shares there the secret opened a
// lease of, and how many of those it deleted (their last lease
// cancelled).
type LeaseResult struct {
	Shares  int `json:"shares"`
	Removed int `json:"removed"`
}

// forShares runs fn on every share of the request's storage index held
// here. It answers ErrNotFound if there is none, and ErrForbidden if fn
// said so for every one.
func (n *Node) forShares(w http.ResponseWriter, r *http.Request, fn func(sharestore.Key, []byte) (removed bool, err error)) {
	si, err := sharestore.ParseSI(r.PathValue("si"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	secret, err := hex.DecodeString(r.Header.Get(hdrSecret))
	if err != nil || len(secret) == 0 {
		writeError(w, fmt.Errorf("%w: missing or bad %s header", ErrBadRequest, hdrSecret))
		return
	}
	infos, err := n.store.List(r.Context(), si)
	if err != nil {
		writeError(w, err)
		return
	}
	var res LeaseResult
	forbidden := 0
	for _, i := range infos {
		removed, err := fn(i.Key, secret)
		switch {
		case errors.Is(err, sharestore.ErrForbidden):
			forbidden++
		case errors.Is(err, sharestore.ErrNotFound):
		case errors.Is(err, sharestore.ErrCorrupt):
			// A share whose record or lease file is damaged keeps its
			// leases as they were; the others are still served.
			n.log.Warn("lease change on a damaged share", "share", i.Key.String(), "err", err)
		case err != nil:
			writeError(w, err)
			return
		default:
			res.Shares++
			if removed {
				res.Removed++
			}
		}
	}
	if res.Removed > 0 {
		n.usageChanged()
	}
	switch {
	case res.Shares == 0 && forbidden > 0:
		writeError(w, fmt.Errorf("%w: on %d shares of %x", sharestore.ErrForbidden, forbidden, si[:]))
	case res.Shares == 0:
		writeError(w, fmt.Errorf("%w: no share of %x here", sharestore.ErrNotFound, si[:]))
	default:
		writeJSON(w, 200, res)
	}
}

// renewShares renews, on every share of an object held here, the lease
// the renew secret opens, to the term asked from now. With a cancel hash
// (X-Quilt-Cancel) it adds the lease where there is none of the renew
// secret's (Tahoe-LAFS's add-lease).
func (n *Node) renewShares(w http.ResponseWriter, r *http.Request) {
	term, ok, err := leaseTerm(r)
	if err == nil && !ok {
		err = fmt.Errorf("%w: a renewal needs %s", ErrBadRequest, hdrTerm)
	}
	var cancel [32]byte
	add := r.Header.Get(hdrCancel) != ""
	if err == nil && add {
		cancel, err = hash32(r.Header.Get(hdrCancel), hdrCancel)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	expires := n.now().Add(term)
	n.forShares(w, r, func(k sharestore.Key, secret []byte) (bool, error) {
		if add {
			return false, n.store.AddLease(r.Context(), k, sharestore.Lease{ID: sharestore.SecretHash(secret), Cancel: cancel, Expires: expires})
		}
		return false, n.store.Renew(r.Context(), k, secret, expires)
	})
}

// cancelShares cancels, on every share of an object held here, the lease
// the cancel secret opens; a share left with no lease is deleted.
func (n *Node) cancelShares(w http.ResponseWriter, r *http.Request) {
	n.forShares(w, r, func(k sharestore.Key, secret []byte) (bool, error) {
		return n.store.Delete(r.Context(), k, secret)
	})
}

// sweepLeases deletes, every LeaseSweep, the shares whose leases have all
// expired (more than LeaseGrace ago).
func (n *Node) sweepLeases() {
	defer n.wg.Done()
	every := orDefault(n.cfg.LeaseSweep, time.Hour)
	if n.cfg.LeaseSweep < 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			n.SweepLeases(context.Background())
		}
	}
}

// SweepLeases removes the leases that expired more than LeaseGrace ago
// and deletes the shares left with none, as the node does every
// LeaseSweep.
func (n *Node) SweepLeases(ctx context.Context) (sharestore.Swept, error) {
	grace := n.cfg.LeaseGrace
	if grace == 0 {
		grace = 24 * time.Hour
	}
	grace = max(grace, 0)
	sw, err := n.store.Expire(ctx, n.now().Add(-grace))
	if err != nil {
		n.log.Warn("lease sweep", "err", err)
	}
	if sw.Leases > 0 {
		n.log.Info("expired leases swept", "leases", sw.Leases, "shares", sw.Shares, "bytes", sw.Bytes)
	}
	if sw.Shares > 0 {
		n.usageChanged()
	}
	return sw, err
}

// leaseHeaders are the headers that give a share PUT its lease: the
// expiry travels as a term from now, so the clocks of client and node
// need not agree.
func leaseHeaders(lease sharestore.Lease, now time.Time) map[string]string {
	hdr := map[string]string{hdrLease: hex.EncodeToString(lease.ID[:])}
	if lease.Cancel != lease.ID {
		hdr[hdrCancel] = hex.EncodeToString(lease.Cancel[:])
	}
	if !lease.Expires.IsZero() {
		hdr[hdrTerm] = termSeconds(lease.Expires.Sub(now))
	}
	return hdr
}

// termSeconds writes a lease term in whole seconds, rounded up, at least
// one and at most maxLeaseTerm.
func termSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(min(max(s, 1), int64(maxLeaseTerm/time.Second)), 10)
}

// RenewLeases renews, on every share of the object si that node holds,
// the lease that the renew secret opens, to term from now. With cancel
// (the hash of a cancel secret, non-nil) a share with no lease of the
// renew secret's is given one, cancelled by that secret.
func (c *Client) RenewLeases(ctx context.Context, node string, si [16]byte, secret []byte, cancel *[32]byte, term time.Duration) (LeaseResult, error) {
	hdr := map[string]string{hdrSecret: hex.EncodeToString(secret), hdrTerm: termSeconds(term)}
	if cancel != nil {
		hdr[hdrCancel] = hex.EncodeToString(cancel[:])
	}
	return c.leaseCall(ctx, node, si, "renew", hdr)
}

// CancelLeases cancels, on every share of the object si that node holds,
// the lease that the cancel secret opens; the node deletes a share left
// with no lease.
func (c *Client) CancelLeases(ctx context.Context, node string, si [16]byte, secret []byte) (LeaseResult, error) {
	return c.leaseCall(ctx, node, si, "cancel", map[string]string{hdrSecret: hex.EncodeToString(secret)})
}

func (c *Client) leaseCall(ctx context.Context, node string, si [16]byte, verb string, hdr map[string]string) (LeaseResult, error) {
	resp, err := c.do(ctx, "POST", node, "/v1/shares/"+siHex(si)+"/"+verb, nil, hdr)
	if err != nil {
		return LeaseResult{}, err
	}
	defer resp.Body.Close()
	var res LeaseResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return LeaseResult{}, fmt.Errorf("node %.8s: %s answer: %w", node, verb, err)
	}
	return res, nil
}
