package linkemu

import (
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	// ErrUnreachable is returned when dialling a host that has no transport,
	// whose transport is shut down, or whose StreamCh is full.
	ErrUnreachable = errors.New("linkemu: host unreachable")
	// ErrPartitioned is returned when dialling across a partition, and by
	// Read and Write on a stream that a partition has cut.
	ErrPartitioned = errors.New("linkemu: hosts are partitioned")
	// ErrHostInUse is returned by Network.Transport for a host that already
	// has a live transport.
	ErrHostInUse = errors.New("linkemu: host already has a transport")
)

// Link describes one direction of a link between two hosts. The zero Link is
// a perfect link. The fields follow tc-netem and tc-tbf, which the kernel
// of the lab's machine lacks.
type Link struct {
	// Delay is the one-way latency added to every datagram and to every
	// chunk written on a stream.
	Delay time.Duration
	// Jitter is the standard deviation of a normally distributed variation
	// of Delay, drawn for each datagram and each stream chunk (the total
	// never goes below 0). Streams keep their byte order: a chunk never
	// overtakes the one before it.
	Jitter time.Duration
	// Loss is the probability (0..1) that a datagram is dropped. Streams
	// are never dropped, as with TCP.
	Loss float64
	// LossCorr (0..1) correlates successive loss decisions on this
	// direction, as netem's "loss P% C%": after a loss the next datagram
	// is lost with probability Loss + LossCorr·(1−Loss), after a delivery
	// with Loss·(1−LossCorr). The long-run loss rate stays Loss; losses
	// come in bursts of mean length 1/((1−Loss)(1−LossCorr)).
	LossCorr float64
	// Reorder is the probability (0..1) that a datagram is held back by an
	// extra Delay+Jitter, so that it arrives after later ones. With Delay
	// and Jitter both 0 it has no effect.
	Reorder float64
	// Bandwidth, in bytes per second, limits this direction as a token
	// bucket does (tc-tbf): all streams and datagrams from one host to the
	// other share it, queueing behind each other. 0 is unlimited. A
	// datagram that would wait longer than the queue limit (see
	// QueueLimit) is dropped; a stream writer waits instead, as TCP
	// backs off. See also HostLimit, for a host's total.
	Bandwidth int64
}

// HostLimit limits all the traffic of one host, whatever its peer: the
// capacity of its one radio or cable, as tc on its interface would. It
// applies on top of the links' own Bandwidth: bytes pass the sender's
// uplink, then their link, then the receiver's downlink, queueing at each.
// Streams share a host's uplink as TCP flows share a bottleneck, each
// with a quota of its own bytes in its queue (see Network.queueChunk), so
// a stream that needs less than an equal share gets what it needs; they
// share its downlink first come, first served in the order bytes reach
// it, which is close to but not quite TCP's fairness: a stream from a
// fast peer can take a little of the share of streams from slow ones.
type HostLimit struct {
	Up   int64 // bytes per second the host sends, 0 unlimited
	Down int64 // bytes per second the host receives, 0 unlimited
}

// QueueLimit is the longest a datagram may wait for its turn on a link
// limited by bandwidth before it is dropped, and about how far ahead a
// stream may fill the link's queue: tbf's "latency". A link too slow to
// send a 1500-byte datagram within it allows one such datagram's time.
const QueueLimit = 200 * time.Millisecond

// queueLimit is QueueLimit for a link of rate bytes per second.
func queueLimit(rate int64) time.Duration {
	return max(QueueLimit, txTime(rate, 1500))
}

// txTime is how long a link of rate bytes per second (0 unlimited) takes
// to put k bytes on the wire.
func txTime(rate int64, k int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(float64(k) / float64(rate) * float64(time.Second))
}

// bucket is a token bucket of bandwidth: when it has sent what is queued.
type bucket struct{ free time.Time }

// direction is the state of one direction between two hosts, shared by
// everything sent that way.
type direction struct {
	bucket
	lost bool // whether the last datagram was lost (for LossCorr)
}

// Stats counts what a Network has done since New. Once no datagram is in
// flight, DatagramsSent is the sum of the five Dropped counts and Delivered.
type Stats struct {
	DatagramsSent      int64 // datagrams written by transports
	DroppedLoss        int64 // dropped by Link.Loss
	DroppedPartition   int64 // dropped because sender and receiver were partitioned
	DroppedUnreachable int64 // destination unknown or shut down
	DroppedOverflow    int64 // destination's packet channel full (it reads too slowly)
	DroppedQueue       int64 // waited longer than the link's queue limit (Link.Bandwidth)
	Reordered          int64 // held back by Link.Reorder
	Delivered          int64 // put in the destination's packet channel
	StreamsOpened      int64 // streams set up by transports and Dialer
	StreamsRefused     int64 // dials refused: unknown host or partition
}

// Network is an emulated network of hosts. Create it with New.
type Network struct {
	mu      sync.Mutex
	rng     *rand.Rand
	def     Link
	links   map[[2]string]Link
	dirs    map[[2]string]*direction
	limits  map[string]HostLimit
	up      map[string]*bucket
	down    map[string]*bucket
	group   map[string]int // nil: no partition
	hosts   map[string]*Transport
	owners  map[string]string // real TCP address -> host
	streams map[*stream]struct{}
	stats   Stats

	// scheduler of datagram deliveries
	queue   []delivery // by due time
	running bool
	wake    chan struct{}
}

// New returns an empty network with perfect links. Loss, jitter and
// reordering draw from a random source seeded with seed, so a run is
// repeatable as far as goroutine scheduling allows.
func New(seed int64) *Network {
	return &Network{
		rng:     rand.New(rand.NewPCG(uint64(seed), 0)),
		links:   make(map[[2]string]Link),
		dirs:    make(map[[2]string]*direction),
		limits:  make(map[string]HostLimit),
		up:      make(map[string]*bucket),
		down:    make(map[string]*bucket),
		hosts:   make(map[string]*Transport),
		owners:  make(map[string]string),
		streams: make(map[*stream]struct{}),
		wake:    make(chan struct{}, 1),
	}
}

// SetDefault sets the link used between two hosts that have no link of
// their own (see SetLink). It applies to datagrams sent and stream chunks
// written from now on.
func (n *Network) SetDefault(l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.def = l
}

// SetHost limits everything host sends and receives (see HostLimit).
func (n *Network) SetHost(host string, h HostLimit) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.limits[host] = h
}

// SetLink sets the link from one host to another, in that direction only.
func (n *Network) SetLink(from, to string, l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[[2]string{from, to}] = l
}

func (n *Network) linkLocked(from, to string) Link {
	if l, ok := n.links[[2]string{from, to}]; ok {
		return l
	}
	return n.def
}

func (n *Network) link(from, to string) Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.linkLocked(from, to)
}

// Partition splits the network: hosts in different groups cannot reach each
// other. Hosts named in no group together form one more group. Datagrams
// sent across the partition are dropped (those already in flight still
// arrive), dials are refused with ErrPartitioned, and established streams
// across it are cut: Read and Write on them return ErrPartitioned. A new
// Partition replaces the previous one.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = make(map[string]int)
	for i, g := range groups {
		for _, h := range g {
			n.group[h] = i + 1
		}
	}
	for s := range n.streams {
		if n.partitionedLocked(s.from, s.to) {
			s.cut()
		}
	}
}

// Heal removes the partition. Streams cut by it stay cut.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.group = nil
}

func (n *Network) partitionedLocked(a, b string) bool {
	return n.group != nil && n.group[a] != n.group[b]
}

// Stats returns the counters so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// send emulates one datagram from host from to host to. It keeps a copy of b.
func (n *Network) send(from, to string, b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.DatagramsSent++
	if n.partitionedLocked(from, to) {
		n.stats.DroppedPartition++
		return
	}
	l := n.linkLocked(from, to)
	dir := n.dirLocked(from, to)
	if n.lostLocked(l, dir) {
		n.stats.DroppedLoss++
		return
	}
	now := time.Now()
	sent, ok := n.transmitLocked(from, to, l, dir, now, len(b), false)
	if !ok {
		n.stats.DroppedQueue++
		return
	}
	d := sent.Sub(now) + n.delayLocked(l)
	if l.Reorder > 0 && n.rng.Float64() < l.Reorder {
		d += l.Delay + l.Jitter
		n.stats.Reordered++
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: hostAddr(from)}
	n.scheduleLocked(now.Add(d), func() { n.deliver(to, p) })
}

func (n *Network) dirLocked(from, to string) *direction {
	k := [2]string{from, to}
	d := n.dirs[k]
	if d == nil {
		d = new(direction)
		n.dirs[k] = d
	}
	return d
}

// lostLocked decides whether the next datagram on dir is lost.
func (n *Network) lostLocked(l Link, dir *direction) bool {
	p := l.Loss
	if p <= 0 {
		dir.lost = false
		return false
	}
	if l.LossCorr > 0 {
		if dir.lost {
			p += l.LossCorr * (1 - p)
		} else {
			p *= 1 - l.LossCorr
		}
	}
	dir.lost = n.rng.Float64() < p
	return dir.lost
}

// transmitLocked sends k bytes from host from to host to through the
// rate-limited stages on the way, in order (the sender's uplink, their
// link dir of Link l, the receiver's downlink), each queueing the bytes
// behind what it already has, at time now; it returns when the last stage
// has sent them. A datagram (wait false) that would queue at any stage
// longer than the slowest stage's limit (see QueueLimit) is refused.
func (n *Network) transmitLocked(from, to string, l Link, dir *direction, now time.Time, k int, wait bool) (time.Time, bool) {
	stages := n.stagesLocked(from, to, l, dir)
	if len(stages) == 0 {
		return now, true
	}
	end, queued, slowest := pass(stages, now, k, false)
	if !wait && queued > queueLimit(slowest) {
		return time.Time{}, false
	}
	end, _, _ = pass(stages, now, k, true)
	return end, true
}

// pass works out how k bytes handed over at time now go through stages:
// when the last one has sent them, the longest they queue at one stage,
// and the slowest rate on the way. With commit it also books the stages.
func pass(stages []stage, now time.Time, k int, commit bool) (end time.Time, queued time.Duration, slowest int64) {
	t := now
	for _, st := range stages {
		start := later(t, st.b.free)
		queued = max(queued, start.Sub(t))
		t = start.Add(txTime(st.rate, k))
		if commit {
			st.b.free = t
		}
		if slowest == 0 || st.rate < slowest {
			slowest = st.rate
		}
	}
	return t, queued, slowest
}

// stage is one rate-limited hop: a bucket and its rate.
type stage struct {
	b    *bucket
	rate int64
}

// stagesLocked returns the rate-limited stages from host from to host to,
// in the order bytes pass them.
func (n *Network) stagesLocked(from, to string, l Link, dir *direction) []stage {
	stages := n.sendStagesLocked(from, to, l, dir)
	if r := n.limits[to].Down; r > 0 {
		stages = append(stages, stage{hostBucket(n.down, to), r})
	}
	return stages
}

// sendStagesLocked is stagesLocked without the receiver's downlink: the
// stages a stream books when it sends (see Network.pump).
func (n *Network) sendStagesLocked(from, to string, l Link, dir *direction) []stage {
	var stages []stage
	if r := n.limits[from].Up; r > 0 {
		stages = append(stages, stage{hostBucket(n.up, from), r})
	}
	if l.Bandwidth > 0 {
		stages = append(stages, stage{&dir.bucket, l.Bandwidth})
	}
	return stages
}

func hostBucket(m map[string]*bucket, host string) *bucket {
	b := m[host]
	if b == nil {
		b = new(bucket)
		m[host] = b
	}
	return b
}

// delayLocked draws one delay of l: Delay plus normal jitter, never < 0.
func (n *Network) delayLocked(l Link) time.Duration {
	d := l.Delay
	if l.Jitter > 0 {
		d += time.Duration(n.rng.NormFloat64() * float64(l.Jitter))
	}
	return max(d, 0)
}

func (n *Network) deliver(to string, p *memberlist.Packet) {
	n.mu.Lock()
	t := n.hosts[to]
	n.mu.Unlock()
	ok, closed := false, true
	if t != nil {
		ok, closed = t.deliver(p)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case ok:
		n.stats.Delivered++
	case closed:
		n.stats.DroppedUnreachable++
	default:
		n.stats.DroppedOverflow++
	}
}

// hostAddr is the net.Addr of a host: its "ip:port" string.
type hostAddr string

func (a hostAddr) Network() string { return "linkemu" }
func (a hostAddr) String() string  { return string(a) }

var _ net.Addr = hostAddr("")

// The scheduler: one goroutine per network, running only while deliveries
// are pending, calls each function at its due time, in order of due time and
// then of scheduling.

type delivery struct {
	due time.Time
	fn  func()
}

func (n *Network) scheduleLocked(due time.Time, fn func()) {
	i := sort.Search(len(n.queue), func(i int) bool { return n.queue[i].due.After(due) })
	n.queue = slices.Insert(n.queue, i, delivery{due, fn})
	if !n.running {
		n.running = true
		go n.run()
		return
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *Network) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.mu.Lock()
		if len(n.queue) == 0 {
			n.running = false
			n.mu.Unlock()
			return
		}
		wait := time.Until(n.queue[0].due)
		if wait <= 0 {
			d := n.queue[0]
			n.queue[0] = delivery{}
			n.queue = n.queue[1:]
			n.mu.Unlock()
			d.fn()
			continue
		}
		n.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-n.wake:
		}
	}
}
