package object

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// PutSealed stores an object whose segments arrive already sealed (by
// codec.Codec.Seal, in order, each SegmentSize+16 bytes but the last):
// what an upload helper does for a client that keeps the key. It
// erasure-codes, hashes and places the shares as Put does (acknowledged
// at happiness with Options.AckAtHappy, the rest in the background), and
// returns the object's verify capability, whose root the uploader
// compares with the one it computed itself. si is the storage index the
// uploader's key derives, size the plaintext's length (-1: not known).
// The shares carry lease, the uploader's; the shares this client's
// background repair places carry a lease of this client's instead. A
// failed upload leaves its shares to the uploader, which holds the
// secret to delete them, or to their leases' expiry.
func (c *Client) PutSealed(ctx context.Context, r io.Reader, size int64, p codec.Params, si sharefile.SI, happy int, lease sharestore.Lease) (codec.VerifyCap, *PutReport, error) {
	if err := c.needLease(); err != nil {
		return codec.VerifyCap{}, nil, err
	}
	if err := p.Validate(); err != nil {
		return codec.VerifyCap{}, nil, err
	}
	if happy < 1 || happy > p.N {
		return codec.VerifyCap{}, nil, fmt.Errorf("object: happiness %d must be between 1 and n=%d", happy, p.N)
	}
	// No key: the codec only erasure-codes and hashes (EncodeSealed).
	cd, err := codec.New(p, codec.Key{})
	if err != nil {
		return codec.VerifyCap{}, nil, err
	}
	return c.put(ctx, r, size, p, happy, putInput{si: si, cd: cd, sealed: true, lease: lease})
}

// HappyRate estimates the bytes of file a second this client could store
// with happiness happy under p, from its measured links: k times the
// throughput of the happy-th fastest node it has uploaded to. It is 0
// when fewer than happy nodes have been measured. An upload helper
// reports it, so that a client can tell whether the helper places faster
// than its own uplink would.
func (c *Client) HappyRate(p codec.Params, happy int) float64 {
	var ups []float64
	for _, e := range c.Links() {
		if e.Up > 0 {
			ups = append(ups, e.Up)
		}
	}
	if happy < 1 || len(ups) < happy {
		return 0
	}
	// The happy-th largest.
	for i := range happy {
		for j := i + 1; j < len(ups); j++ {
			if ups[j] > ups[i] {
				ups[i], ups[j] = ups[j], ups[i]
			}
		}
	}
	return ups[happy-1] * float64(p.K)
}

// LeaseFor returns the lease this client gives the shares of object si
// (Options.LeaseSecret, Options.LeaseTerm from now): the one an upload
// through a helper asks the helper to put on them, so that this client,
// not the helper, can renew and cancel them.
func (c *Client) LeaseFor(si sharefile.SI) (sharestore.Lease, error) {
	if err := c.needLease(); err != nil {
		return sharestore.Lease{}, err
	}
	return c.leaseFor(si), nil
}

// ConfirmShares asks the nodes of shares (where someone else, an upload
// helper, says it stored them) for the trailers of the shares they hold
// of object si, and returns the share results whose node holds the share
// with exactly the trailer in want (indexed by share number, as
// codec.Tree.Finish returns them). A node checks on arrival that a
// share's block hashes hash to the share root its trailer lists, so a
// confirmed share is framed as this client computed it. A node that does
// not answer, or answers with another trailer, confirms nothing.
func (c *Client) ConfirmShares(ctx context.Context, si sharefile.SI, want [][]byte, shares []ShareResult) []ShareResult {
	tg, _ := c.grid.(TrailerGrid)
	// The grid learns the nodes' addresses from its member list (the
	// uploader may have reached the helper through another client).
	c.grid.Nodes(ctx)
	byNode := map[string][]ShareResult{}
	for _, sr := range shares {
		if sr.Err == nil && sr.Share >= 0 && sr.Share < len(want) {
			byNode[sr.Node] = append(byNode[sr.Node], sr)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []ShareResult
	for nd, srs := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got map[int][]byte
			if tg != nil {
				got, _ = tg.ListTrailers(ctx, nd, si)
			} else {
				// Without trailers in the list: read each from its share.
				got = map[int][]byte{}
				for _, sr := range srs {
					if b, err := c.readTrailer(ctx, nd, si, sr.Share, len(want[sr.Share])); err == nil {
						got[sr.Share] = b
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, sr := range srs {
				if b, ok := got[sr.Share]; ok && bytes.Equal(b, want[sr.Share]) {
					out = append(out, sr)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// readTrailer reads the last n bytes of a share, which are its trailer
// if the share is what the caller expects.
func (c *Client) readTrailer(ctx context.Context, nd string, si sharefile.SI, share, n int) ([]byte, error) {
	rc, err := c.grid.GetShare(ctx, nd, sharestore.Key{SI: si, Share: share}, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil || len(b) < n {
		return nil, fmt.Errorf("object: share %d on %.8s: no trailer", share, nd)
	}
	return b[len(b)-n:], nil
}
