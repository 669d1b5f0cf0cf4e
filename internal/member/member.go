// Package member is Quilt's membership layer: who is in the grid, where
// they are and how full they are, spread by SWIM gossip
// (hashicorp/memberlist, the implementation inside Serf).
//
// Every node gossips a small metadata record (its ID, HTTP address, zone,
// capacity, free bytes, version). Gossip is encrypted and authenticated
// with a key derived from the grid secret, so only holders of the secret
// take part. A List keeps every member it has heard of with its state,
// alive, suspect, dead or left, so operators can see nodes that went away.
//
// Every member also keeps a network coordinate (Vivaldi, hashicorp/serf's
// coordinate package, as Serf and Consul do): each answer to one of
// memberlist's probes carries the prober's target's coordinate, and the
// probe's round trip moves the prober's own. The distance between two
// members' coordinates estimates the round trip between them, also for
// pairs that never exchanged a packet. Members reports them.
package member

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/quilt-grid/quilt/internal/clock"
)

// States of a member, as shown to people.
const (
	Alive   = "alive"
	Suspect = "suspect"
	Dead    = "dead"
	Left    = "left"
)

// Meta is what a node tells the grid about itself. It must encode to at
// most 512 bytes (memberlist's limit).
type Meta struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"` // HTTPS host:port of the node's API
	Zone     string `json:"zone,omitempty"`
	Capacity int64  `json:"cap"`  // 0: no limit but the disk's
	Used     int64  `json:"used"` // bytes of shares stored
	Free     int64  `json:"free"` // bytes that may still be stored
	Version  string `json:"v,omitempty"`
	// Leaving is set by a member about to leave politely, so the others
	// record it as left rather than dead.
	Leaving bool `json:"leaving,omitempty"`
	// Draining is set by a node whose shares are being moved elsewhere
	// (quilt node drain): it takes no new shares.
	Draining bool `json:"draining,omitempty"`
	// Helper is set by a node that runs an upload helper (quilt node
	// --helper), so that clients find it (uphelper.Discover).
	Helper bool `json:"helper,omitempty"`
}

// Member is a node as this member list knows it.
type Member struct {
	Meta
	Gossip string    `json:"gossip"` // host:port of its gossip endpoint
	State  string    `json:"state"`
	Since  time.Time `json:"since"` // when the state last changed
	// Coord is the member's network coordinate as last heard (its own,
	// for the member reporting); nil until one of its probes' answers
	// carried one. Coord.DistanceTo estimates the round trip between two
	// members.
	Coord *coordinate.Coordinate `json:"coord,omitempty"`
}

// Config configures a List.
type Config struct {
	Name      string // unique member name: the node ID
	Bind      string // gossip host:port (UDP and TCP); port 0 picks one
	Advertise string // host:port others should use, if not Bind's
	Key       []byte // 32-byte gossip encryption key
	Meta      func() Meta
	WAN       bool // memberlist's WAN profile, for slow links
	Logger    *slog.Logger
	// SuspectAfter is how long a live member may leave our probes
	// unanswered before we show it as suspect; default 5 probe rounds of
	// the whole grid (memberlist probes members in turn, one per interval).
	SuspectAfter time.Duration
	// Clock times suspicion and the members' Since; default the real
	// clock. memberlist's own timers (probes, its suspicion, gossip) run
	// on real time whatever this is.
	Clock clock.Clock
	// Messages, if set, receives the gossip layer's user messages and
	// supplies the broadcasts to piggyback on gossip (a higher layer's:
	// new namespace entries).
	Messages Messages
	// Tune, if set, adjusts the memberlist configuration last (tests
	// shorten timers; the lab installs an emulated Transport).
	Tune func(*memberlist.Config)
}

// Messages is a higher layer that broadcasts over the gossip layer. Both
// methods are called from memberlist's goroutines and must not block.
type Messages interface {
	// NotifyMsg receives a message another member broadcast. The buffer
	// is the caller's: copy what is kept.
	NotifyMsg(msg []byte)
	// GetBroadcasts returns messages to send, at most limit bytes in all,
	// each costing overhead bytes more.
	GetBroadcasts(overhead, limit int) [][]byte
}

// List is a running member of the grid.
type List struct {
	ml      *memberlist.Memberlist
	meta    func() Meta
	log     *slog.Logger
	probe   time.Duration // memberlist's probe interval
	suspect time.Duration // Config.SuspectAfter, 0: from probe
	clock   clock.Clock

	mu      sync.Mutex
	members map[string]*Member
	acked   map[string]time.Time // last answer to one of our probes
	vivaldi *coordinate.Client   // our own coordinate
	coords  map[string]*coordinate.Coordinate
	leaving bool
	msgs    Messages
}

// ErrNoPeers means none of the addresses given to Join answered.
var ErrNoPeers = errors.New("member: could not reach any member to join")

// Start starts gossiping. The List is alone until Join.
func Start(cfg Config) (*List, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(cfg.Key) != 32 {
		return nil, errors.New("member: gossip key must be 32 bytes")
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.WAN {
		mc = memberlist.DefaultWANConfig()
	}
	host, port, err := splitHostPort(cfg.Bind)
	if err != nil {
		return nil, err
	}
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = host, port
	if cfg.Advertise != "" {
		ah, ap, err := splitHostPort(cfg.Advertise)
		if err != nil {
			return nil, err
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	mc.SecretKey = cfg.Key
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.Logger = log.New(logWriter{cfg.Logger}, "", 0)
	viv, err := coordinate.NewClient(coordinate.DefaultConfig())
	if err != nil {
		return nil, fmt.Errorf("member: network coordinates: %w", err)
	}
	l := &List{meta: cfg.Meta, log: cfg.Logger, members: map[string]*Member{}, acked: map[string]time.Time{},
		suspect: cfg.SuspectAfter, clock: clock.Or(cfg.Clock), msgs: cfg.Messages,
		vivaldi: viv, coords: map[string]*coordinate.Coordinate{}}
	mc.Delegate = delegate{l}
	mc.Events = events{l}
	mc.Ping = pings{l}
	if cfg.Tune != nil {
		cfg.Tune(mc)
	}
	l.probe = mc.ProbeInterval
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("member: start gossip on %s: %w", cfg.Bind, err)
	}
	l.ml = ml
	return l, nil
}

func splitHostPort(hp string) (string, int, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("member: bad address %q: %w", hp, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("member: bad port in %q", hp)
	}
	return host, port, nil
}

// logWriter passes memberlist's log lines to slog at debug level.
type logWriter struct{ l *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.l.Debug("memberlist", "msg", string(p))
	return len(p), nil
}

// Addr returns the gossip host:port this member is reachable at.
func (l *List) Addr() string { return l.ml.LocalNode().Address() }

// Join contacts the members at these gossip addresses and returns how many
// answered.
func (l *List) Join(addrs []string) (int, error) {
	n, err := l.ml.Join(addrs)
	if n == 0 {
		return 0, fmt.Errorf("%w (%v): %v", ErrNoPeers, addrs, err)
	}
	return n, nil
}

// Update re-announces this node's metadata (after its free space changed).
func (l *List) Update(timeout time.Duration) error {
	return l.ml.UpdateNode(timeout)
}

// Leave tells the grid this member is leaving, then stops gossiping.
func (l *List) Leave(timeout time.Duration) error {
	l.mu.Lock()
	l.leaving = true
	l.mu.Unlock()
	l.ml.UpdateNode(timeout) // others record "left", not "dead"
	err := l.ml.Leave(timeout)
	if serr := l.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops gossiping without telling anyone, as a crash would.
func (l *List) Shutdown() error { return l.ml.Shutdown() }

// Members returns every member this list has heard of, with its state,
// sorted by zone then ID.
//
// memberlist's public API does not expose its own suspicion, so a member
// it still counts as live shows as suspect here when it has not answered
// one of our probes for SuspectAfter (each member probes one other per
// probe interval, so quiet periods of a few rounds are normal).
func (l *List) Members() []Member {
	live := map[string]bool{}
	for _, n := range l.ml.Members() {
		live[n.Name] = true
	}
	self := l.ml.LocalNode().Name
	l.mu.Lock()
	defer l.mu.Unlock()
	after := l.suspect
	if after == 0 {
		after = 5 * time.Duration(max(len(l.members), 1)) * l.probe
	}
	out := make([]Member, 0, len(l.members))
	for name, m := range l.members {
		c := *m
		if c.State == Alive && live[name] && name != self {
			if last, ok := l.acked[name]; ok && l.clock.Since(last) > after {
				c.State = Suspect
			}
		}
		if name == self {
			c.Coord = l.vivaldi.GetCoordinate()
		} else if co := l.coords[name]; co != nil {
			c.Coord = co.Clone()
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Alive returns the members that are alive or suspect: those worth asking.
func (l *List) Alive() []Member {
	var out []Member
	for _, m := range l.Members() {
		if m.State == Alive || m.State == Suspect {
			out = append(out, m)
		}
	}
	return out
}

// record notes a member's metadata and state. memberlist's Node.State is
// not kept up to date (its own state lives elsewhere), so the state comes
// from the event: gone, or there.
func (l *List) record(n *memberlist.Node, gone bool) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		l.log.Warn("member without metadata", "name", n.Name, "err", err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	state := Alive
	if gone {
		state = Dead
		if meta.Leaving {
			state = Left
		}
	}
	old, ok := l.members[n.Name]
	since := l.clock.Now()
	if ok && old.State == state {
		since = old.Since
	}
	l.members[n.Name] = &Member{Meta: meta, Gossip: n.Address(), State: state, Since: since}
	if state == Alive && (!ok || old.State != Alive) {
		l.acked[n.Name] = since // a fresh start for suspicion
	}
	if !ok || old.State != state {
		l.log.Info("member", "id", meta.ID, "addr", meta.Addr, "zone", meta.Zone, "state", state)
	}
}

type events struct{ l *List }

func (e events) NotifyJoin(n *memberlist.Node) { e.l.record(n, false) }
func (e events) NotifyLeave(n *memberlist.Node) {
	e.l.record(n, true)
	e.l.vivaldi.ForgetNode(n.Name)
}
func (e events) NotifyUpdate(n *memberlist.Node) { e.l.record(n, false) }

// Coordinate returns this member's own network coordinate.
func (l *List) Coordinate() *coordinate.Coordinate { return l.vivaldi.GetCoordinate() }

// pings records answers to our probes, for suspicion, and moves our
// network coordinate by their round trips; the answers carry the
// answering member's coordinate (AckPayload).
type pings struct{ l *List }

// AckPayload is our coordinate, JSON-encoded (about 200 bytes).
func (p pings) AckPayload() []byte {
	b, err := json.Marshal(p.l.vivaldi.GetCoordinate())
	if err != nil {
		return nil
	}
	return b
}

func (p pings) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	p.l.mu.Lock()
	p.l.acked[other.Name] = p.l.clock.Now()
	p.l.mu.Unlock()
	if len(payload) == 0 {
		return // a member without coordinates
	}
	var co coordinate.Coordinate
	if err := json.Unmarshal(payload, &co); err != nil {
		p.l.log.Debug("bad coordinate in probe answer", "from", other.Name, "err", err)
		return
	}
	// Update refuses a coordinate of other dimensions, one not finite,
	// and round trips of 10 s or more.
	if _, err := p.l.vivaldi.Update(other.Name, &co, rtt); err != nil {
		p.l.log.Debug("coordinate not used", "from", other.Name, "rtt", rtt, "err", err)
		return
	}
	p.l.mu.Lock()
	p.l.coords[other.Name] = &co
	p.l.mu.Unlock()
}

type delegate struct{ l *List }

func (d delegate) NodeMeta(limit int) []byte {
	m := d.l.meta()
	d.l.mu.Lock()
	m.Leaving = d.l.leaving
	d.l.mu.Unlock()
	b, err := json.Marshal(m)
	if err != nil || len(b) > limit {
		d.l.log.Error("node metadata too large", "bytes", len(b), "limit", limit)
		return nil
	}
	return b
}
func (d delegate) NotifyMsg(b []byte) {
	if d.l.msgs != nil {
		d.l.msgs.NotifyMsg(b)
	}
}

func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	if d.l.msgs == nil {
		return nil
	}
	return d.l.msgs.GetBroadcasts(overhead, limit)
}

func (d delegate) LocalState(join bool) []byte            { return nil }
func (d delegate) MergeRemoteState(buf []byte, join bool) {}
