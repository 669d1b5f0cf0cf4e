package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Draining a node: POST /v1/drain marks it draining (kept in
// DIR/draining, so a restart keeps it), which it tells the grid in its
// gossip metadata (member.Meta.Draining, with no free space, so that
// placement gives it no new shares), and it refuses new shares as if
// full. Moving the shares it holds is the work of a higher layer (the
// repairer), which waits on DrainRequests and reports with
// SetDrainStatus; GET /v1/drain returns that report and how many shares
// the node still holds.

// DrainStatus is what a node says of its drain.
type DrainStatus struct {
	Draining bool `json:"draining"`
	Running  bool `json:"running"` // a pass is moving shares now
	Passes   int  `json:"passes"`  // passes finished
	Shares   int  `json:"shares"`  // shares the node still holds
	Moved    int  `json:"moved"`   // shares moved to other nodes so far
	// Failed counts the shares the last pass could not move (none:
	// no other node had room, the copy failed, or the share is damaged).
	Failed int `json:"failed"`
	// Doubled counts the shares moved onto a node that already held a
	// share of the same object: that object is on one node fewer.
	Doubled int    `json:"doubled"`
	Err     string `json:"err,omitempty"` // why the last pass stopped, if it did
}

// drainState is a node's drain.
type drainState struct {
	mu     sync.Mutex
	on     bool
	status DrainStatus
	kick   chan struct{}
}

func (n *Node) drainFile() string { return filepath.Join(n.cfg.Dir, "draining") }

// initDrain reads whether the node was being drained when it stopped.
func (n *Node) initDrain() {
	n.drain.kick = make(chan struct{}, 1)
	if _, err := os.Stat(n.drainFile()); err == nil {
		n.drain.on = true
		n.drain.kick <- struct{}{}
	}
}

// Draining reports whether the node is being drained.
func (n *Node) Draining() bool {
	n.drain.mu.Lock()
	defer n.drain.mu.Unlock()
	return n.drain.on
}

// Drain marks the node draining (as POST /v1/drain does): it takes no new
// shares, tells the grid, and asks whatever waits on DrainRequests to
// move its shares elsewhere. Draining a node already draining asks for
// another pass.
func (n *Node) Drain() error {
	n.drain.mu.Lock()
	was := n.drain.on
	if !was {
		if err := writeFileAtomic(n.drainFile(), []byte("draining\n")); err != nil {
			n.drain.mu.Unlock()
			return fmt.Errorf("node: %w", err)
		}
		n.drain.on = true
		n.drain.status.Draining = true
	}
	n.drain.mu.Unlock()
	if !was {
		n.log.Info("draining: no new shares, moving the ones held")
		n.usageChanged() // the gossip metadata says so
	}
	select {
	case n.drain.kick <- struct{}{}:
	default:
	}
	return nil
}

// DrainRequests is signalled when the node is drained (and at start, if
// it was being drained): the drain's mover waits on it.
func (n *Node) DrainRequests() <-chan struct{} { return n.drain.kick }

// SetDrainStatus records what the drain's mover did, for GET /v1/drain.
func (n *Node) SetDrainStatus(s DrainStatus) {
	n.drain.mu.Lock()
	defer n.drain.mu.Unlock()
	s.Draining = n.drain.on
	n.drain.status = s
}

// DrainStatus returns the drain's status and how many shares the node
// holds.
func (n *Node) DrainStatus(ctx context.Context) (DrainStatus, error) {
	n.drain.mu.Lock()
	s := n.drain.status
	s.Draining = n.drain.on
	n.drain.mu.Unlock()
	s.Shares = 0
	err := n.store.Walk(ctx, func(_ sharestore.Info) error {
		s.Shares++
		return nil
	})
	return s, err
}

func (n *Node) postDrain(w http.ResponseWriter, r *http.Request) {
	if err := n.Drain(); err != nil {
		writeError(w, err)
		return
	}
	n.getDrain(w, r)
}

func (n *Node) getDrain(w http.ResponseWriter, r *http.Request) {
	s, err := n.DrainStatus(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, s)
}

// Drain asks a node to drain (POST /v1/drain) and returns its status.
func (c *Client) Drain(ctx context.Context, node string) (DrainStatus, error) {
	return c.drainCall(ctx, "POST", node)
}

// DrainStatus returns a node's drain status (GET /v1/drain).
func (c *Client) DrainStatus(ctx context.Context, node string) (DrainStatus, error) {
	return c.drainCall(ctx, "GET", node)
}

func (c *Client) drainCall(ctx context.Context, method, node string) (DrainStatus, error) {
	var s DrainStatus
	resp, err := c.do(ctx, method, node, "/v1/drain", nil, nil)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&s); err != nil {
		return s, fmt.Errorf("node %.8s: drain status: %w", node, err)
	}
	return s, nil
}

// errDraining refuses a new share on a node being drained.
var errDraining = errors.New("the node is being drained")
