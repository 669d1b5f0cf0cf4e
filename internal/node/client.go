package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// ErrNoGrid means no node of the grid answered.
var ErrNoGrid = errors.New("node: no node of the grid answered")

// Client talks to the nodes of one grid: it learns the members from any
// node it can reach and addresses each node by its ID, so every connection
// is pinned to the node it meant. It is safe for concurrent use.
type Client struct {
	inv  identity.Invite
	id   *identity.Identity
	http *http.Client

	mu      sync.Mutex
	members []member.Member
	addrs   map[identity.NodeID]string
	fetched time.Time
}

// NewClient returns a client of the grid inv names, with identity id.
func NewClient(inv identity.Invite, id *identity.Identity) *Client {
	return NewClientDial(inv, id, nil)
}

// NewClientDial is NewClient whose connections are made by dial (the lab
// puts emulated links there); nil dials directly.
func NewClientDial(inv identity.Invite, id *identity.Identity, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	c := &Client{inv: inv, id: id, addrs: map[identity.NodeID]string{}}
	c.http = &http.Client{Transport: id.NewTransport(c.resolve, dial)}
	return c
}

// HTTP is the client's pinned HTTP client: it reaches the members seen by
// the last Members call as https://<node-id>/... (higher layers' APIs).
func (c *Client) HTTP() *http.Client { return c.http }

func (c *Client) resolve(id identity.NodeID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.addrs[id]
	return a, ok
}

func (c *Client) membersFrom(ctx context.Context, addr string) ([]member.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/v1/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, readError(addr, resp)
	}
	var ms []member.Member
	return ms, json.NewDecoder(resp.Body).Decode(&ms)
}

// Members returns the grid's members as a node sees them, asking again
// when the last answer is older than maxAge.
func (c *Client) Members(ctx context.Context, maxAge time.Duration) ([]member.Member, error) {
	c.mu.Lock()
	if c.members != nil && time.Since(c.fetched) < maxAge {
		ms := c.members
		c.mu.Unlock()
		return ms, nil
	}
	// Ask members we know to be alive first, then the invite's addresses.
	var tries []string
	for _, m := range c.members {
		if m.State == member.Alive {
			tries = append(tries, m.Addr)
		}
	}
	c.mu.Unlock()
	tries = append(tries, c.inv.Addrs...)
	var first error
	for _, a := range tries {
		ms, err := c.membersFrom(ctx, a)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		c.mu.Lock()
		c.members, c.fetched = ms, time.Now()
		for _, m := range ms {
			c.addrs[identity.NodeID(m.ID)] = m.Addr
		}
		c.mu.Unlock()
		return ms, nil
	}
	return nil, fmt.Errorf("%w (tried %d addresses; the first said: %w)", ErrNoGrid, len(tries), first)
}

func (c *Client) do(ctx context.Context, method, node, path string, body io.Reader, hdr map[string]string) (*http.Response, error) {
	return c.doSized(ctx, method, node, path, body, -1, hdr)
}

func (c *Client) doSized(ctx context.Context, method, node, path string, body io.Reader, size int64, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "https://"+node+path, body)
	if err != nil {
		return nil, err
	}
	if size >= 0 {
		req.ContentLength = size
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node %.8s: %w", node, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readError(node, resp)
	}
	return resp, nil
}

func sharePath(key sharestore.Key) string {
	return fmt.Sprintf("/v1/shares/%s/%d", siHex(key.SI), key.Share)
}

// PutShare streams a share of size bytes (-1: not known) to a node. It
// returns when the node has stored it durably, or refused it.
//
// A body that can write itself (io.WriterTo, as the object client's share
// bodies do) is sent chunked, so that the transport hands it the
// connection instead of copying it through a buffer; its size then goes
// in a header of its own.
func (c *Client) PutShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) (ShareInfo, error) {
	return c.putShare(ctx, node, key, r, size, lease, false)
}

// PutOnlyShare is PutShare, but the node refuses the share (an error
// matching sharestore.ErrExists) if it holds, or is receiving, another
// share of the same object: a mover that chose the node because it held
// none of the object's shares does not leave it with two.
func (c *Client) PutOnlyShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease) (ShareInfo, error) {
	return c.putShare(ctx, node, key, r, size, lease, true)
}

func (c *Client) putShare(ctx context.Context, node string, key sharestore.Key, r io.Reader, size int64, lease sharestore.Lease, only bool) (ShareInfo, error) {
	hdr := leaseHeaders(lease, time.Now())
	if only {
		hdr[hdrOnly] = "1"
	}
	if _, ok := r.(io.WriterTo); ok && size >= 0 {
		hdr[hdrSize] = strconv.FormatInt(size, 10)
		size = -1
	}
	resp, err := c.doSized(ctx, "PUT", node, sharePath(key), r, size, hdr)
	if err != nil {
		return ShareInfo{}, err
	}
	defer resp.Body.Close()
	var info ShareInfo
	return info, json.NewDecoder(resp.Body).Decode(&info)
}

// GetShare reads n bytes of a share from offset off; n < 0 reads to the
// end. The caller closes the reader.
func (c *Client) GetShare(ctx context.Context, node string, key sharestore.Key, off, n int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if n >= 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	resp, err := c.do(ctx, "GET", node, sharePath(key), nil, map[string]string{"Range": rng})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusPartialContent && !(off == 0 && resp.StatusCode == 200) {
		resp.Body.Close()
		return nil, fmt.Errorf("node %.8s: range %s answered with HTTP %d", node, rng, resp.StatusCode)
	}
	return resp.Body, nil
}

// ListShares returns the shares a node holds of one object; with
// trailers, each with its trailer where the node could read it.
func (c *Client) ListShares(ctx context.Context, node string, si [16]byte, trailers bool) ([]ShareInfo, error) {
	path := "/v1/shares/" + siHex(si)
	if trailers {
		path += "?trailers=1"
	}
	resp, err := c.do(ctx, "GET", node, path, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []ShareInfo
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// DeleteShare removes a share, proving the right with the delete secret.
func (c *Client) DeleteShare(ctx context.Context, node string, key sharestore.Key, secret []byte) error {
	resp, err := c.do(ctx, "DELETE", node, sharePath(key), nil, map[string]string{hdrSecret: hex.EncodeToString(secret)})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
