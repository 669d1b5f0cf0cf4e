package linkemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A stream is one emulated connection between two hosts. Its users hold
// the outer ends of two in-memory pipes; two pumps carry bytes between the
// inner ends, one per direction, each holding chunks back by its link's
// delay and pacing them by its bandwidth. For Dialer the accepting side's
// inner end is the real TCP connection to the registered listener.
type stream struct {
	from, to string      // dialling host, accepting host
	inner    [2]net.Conn // the from side's inner end, the to side's
	broken   atomic.Bool
}

// cut breaks the stream for a partition.
func (s *stream) cut() {
	s.broken.Store(true)
	s.inner[0].Close()
	s.inner[1].Close()
}

// streamConn is a user's end of a stream.
type streamConn struct {
	net.Conn
	local, remote net.Addr
	s             *stream
}

func (c *streamConn) LocalAddr() net.Addr  { return c.local }
func (c *streamConn) RemoteAddr() net.Addr { return c.remote }

func (c *streamConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	return k, c.err(err)
}

func (c *streamConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	return k, c.err(err)
}

func (c *streamConn) err(err error) error {
	if c.s.broken.Load() && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)) {
		return fmt.Errorf("linkemu: stream %s -> %s: %w", c.s.from, c.s.to, ErrPartitioned)
	}
	return err
}

// open registers s unless its hosts are partitioned.
func (n *Network) open(s *stream) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.partitionedLocked(s.from, s.to) {
		n.stats.StreamsRefused++
		return fmt.Errorf("linkemu: dial %s from %s: %w", s.to, s.from, ErrPartitioned)
	}
	n.streams[s] = struct{}{}
	n.stats.StreamsOpened++
	return nil
}

// dialHost opens a stream from host from to the transport of host to.
func (n *Network) dialHost(from, to string) (net.Conn, error) {
	n.mu.Lock()
	dst := n.hosts[to]
	if dst == nil {
		n.stats.StreamsRefused++
	}
	n.mu.Unlock()
	if dst == nil {
		return nil, fmt.Errorf("linkemu: dial %s from %s: %w", to, from, ErrUnreachable)
	}
	a, b := net.Pipe()
	c, d := net.Pipe()
	s := &stream{from: from, to: to, inner: [2]net.Conn{b, c}}
	if err := n.open(s); err != nil {
		return nil, err
	}
	n.start(s)
	if !dst.accept(&streamConn{d, hostAddr(to), hostAddr(from), s}) {
		a.Close()
		d.Close()
		return nil, fmt.Errorf("linkemu: dial %s from %s: %w", to, from, ErrUnreachable)
	}
	return &streamConn{a, hostAddr(from), hostAddr(to), s}, nil
}

// Register says that the real TCP listener at tcpAddr (such as a node's
// loopback HTTPS server) belongs to host, so that connections made to it by
// Dialer go through the links from and to host. tcpAddr must be spelled as
// dialers will spell it, e.g. "127.0.0.1:43121".
func (n *Network) Register(host, tcpAddr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owners[tcpAddr] = host
}

// Dialer returns a dial function for host from, for http.Transport's
// DialContext and the like. A connection to an address given to Register is
// refused with ErrPartitioned when from is partitioned from its owner;
// otherwise the bytes pass through the links between from and the owner,
// both ways, and the connection is cut by a later partition (see
// Partition). Other addresses are dialled directly, without emulation.
func (n *Network) Dialer(from string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		owner, ok := n.owners[addr]
		refuse := ok && n.partitionedLocked(from, owner)
		if refuse {
			n.stats.StreamsRefused++
		}
		n.mu.Unlock()
		var d net.Dialer
		if !ok {
			return d.DialContext(ctx, network, addr)
		}
		if refuse {
			return nil, fmt.Errorf("linkemu: dial %s (%s) from %s: %w", addr, owner, from, ErrPartitioned)
		}
		r, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		a, b := net.Pipe()
		s := &stream{from: from, to: owner, inner: [2]net.Conn{b, r}}
		if err := n.open(s); err != nil {
			r.Close()
			return nil, err
		}
		n.start(s)
		return &streamConn{a, r.LocalAddr(), r.RemoteAddr(), s}, nil
	}
}

// start runs the two pumps of s and, when both are done, forgets s.
func (n *Network) start(s *stream) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.pump(s.inner[1], s.inner[0], s.from, s.to)
	}()
	go func() {
		defer wg.Done()
		n.pump(s.inner[0], s.inner[1], s.to, s.from)
	}()
	go func() {
		wg.Wait()
		s.inner[0].Close()
		s.inner[1].Close()
		n.mu.Lock()
		delete(n.streams, s)
		n.mu.Unlock()
	}()
}

type chunk struct {
	b   []byte
	due time.Time
}

// pumpDepth is how many chunks a pump holds in flight (the emulated window).
const pumpDepth = 64

// chunkSize is how many bytes a pump moves at once from host from to
// host to: up to 32 KiB, but no more than about 5 ms of the slowest rate
// on the way (at least 1500 bytes), so a slow link delivers a steady
// trickle rather than rare large bursts.
func (n *Network) chunkSize(from, to string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	size := 32 << 10
	_, _, slowest := pass(n.stagesLocked(from, to, n.linkLocked(from, to), n.dirLocked(from, to)), time.Time{}, 0, false)
	if slowest > 0 {
		size = min(size, max(1500, int(slowest/200)))
	}
	return size
}

// pump copies src to dst through the link from host from to host to.
// Each chunk queues for the sender's uplink (shared with everything from
// sends) and the link's bandwidth (shared with everything sent from from
// to to), is held back by the link's delay and jitter, and then queues
// for the receiver's downlink (shared with everything to receives) in
// the order bytes reach it, never overtaking the chunk before it. When
// src ends it passes the end on to dst (closing it, or only its write
// side for TCP); when dst fails it closes both.
//
// The receiver's downlink is booked when a chunk reaches it, not when it
// is sent: booked at sending, a chunk from a slow sender would take a
// slot of the downlink as far ahead as its own queue reaches, and bytes
// from faster senders that reach the downlink before it would queue
// behind it while the downlink stands idle in between.
func (n *Network) pump(dst, src net.Conn, from, to string) {
	window := make(chan struct{}, pumpDepth) // chunks in flight
	sent := make(chan chunk, pumpDepth)      // due: when the chunk reaches to's downlink
	var pending int64                        // bytes sent, not yet on to's downlink; under n.mu
	var own upQueue                          // bytes sent, still in from's uplink; the sending goroutine's alone
	go func() {
		defer close(sent)
		buf := make([]byte, 32<<10)
		var prev time.Time // when the previous chunk arrives
		for {
			k, err := src.Read(buf[:n.chunkSize(from, to)])
			if k > 0 {
				window <- struct{}{}
				due := n.queueChunk(from, to, k, &pending, &own)
				prev = later(due, prev)
				sent <- chunk{append([]byte(nil), buf[:k]...), prev}
			}
			if err != nil {
				return
			}
		}
	}()
	received := make(chan chunk, pumpDepth) // due: when the chunk is through to's downlink
	go func() {
		defer close(received)
		var prev time.Time
		for c := range sent {
			time.Sleep(time.Until(c.due))
			prev = later(n.receiveChunk(to, len(c.b), &pending), later(c.due, prev))
			received <- chunk{c.b, prev}
		}
	}()
	for c := range received {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			dst.Close()
			<-window
			for range received {
				<-window
			}
			return
		}
		<-window
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// queueChunk puts k bytes of a stream on the sender's uplink and the link
// from -> to and returns when they reach the receiver's downlink (see
// receiveChunk). While the queue at the link, or at the receiver's
// downlink, is longer than its limit it waits first, as a TCP sender held
// back by its window would. pending is the stream's bytes sent but not
// yet on the downlink: those past the sender's uplink count as queued
// there, so a stream into a slow downlink has no more than the limit's
// worth on the way (without them it would have its whole window, seconds
// of a slow downlink, ahead of every other stream's bytes).
//
// The sender's uplink is shared as TCP flows share a bottleneck: each
// stream may have up to upQuota of its own bytes queued there (own),
// whatever the others have, and waits for its own to leave beyond that.
// So a stream that needs less than an equal share of the uplink (one to
// a slow peer) gets what it needs, and the fast ones share the rest.
// Held back by the uplink's whole queue instead, as the link's, a slow
// stream waited behind the fast ones' bytes each time it backed off and
// got a fraction of its rate (TestSlowPeerGetsItsRateFromBusyUplink).
func (n *Network) queueChunk(from, to string, k int, pending *int64, own *upQueue) time.Time {
	for {
		n.mu.Lock()
		l := n.linkLocked(from, to)
		dir := n.dirLocked(from, to)
		now := time.Now()
		stages := n.sendStagesLocked(from, to, l, dir)
		rest, leave := stages, now // the stages after the uplink; when the bytes leave it
		if r := n.limits[from].Up; r > 0 {
			own.drain(now)
			if own.bytes > 0 && own.bytes+int64(k) > upQuota(r, k) {
				wait := own.q[0].leaves.Sub(now)
				n.mu.Unlock()
				time.Sleep(wait)
				continue
			}
			leave = later(now, stages[0].b.free).Add(txTime(r, k))
			rest = stages[1:]
		}
		// A stream does not queue more than the limit at its link or the
		// receiver's downlink: it waits first, as TCP backs off, and
		// leaves the downlink it shares to the others meanwhile.
		_, queued, slowest := pass(rest, leave, k, false)
		if r := n.limits[to].Down; r > 0 {
			ahead := max(hostBucket(n.down, to).free.Sub(now), 0) + txTime(r, int(*pending-own.bytes))
			queued = max(queued, ahead)
			if slowest == 0 || r < slowest {
				slowest = r
			}
		}
		if limit := queueLimit(slowest); slowest > 0 && queued > limit {
			n.mu.Unlock()
			time.Sleep(queued - limit/2)
			continue
		}
		sent, _, _ := pass(stages, now, k, true)
		if len(rest) < len(stages) {
			own.add(stages[0].b.free, k)
		}
		due := sent.Add(n.delayLocked(l))
		*pending += int64(k)
		n.mu.Unlock()
		return due
	}
}

// upQuota is how many of its own bytes a stream of chunks of k bytes may
// have queued at its sender's uplink of rate bytes per second: 20 ms of
// the uplink (a tenth of QueueLimit), at least two chunks, so that the
// next is queued before the last leaves.
func upQuota(rate int64, k int) int64 {
	return max(2*int64(k), rate*int64(QueueLimit/10)/int64(time.Second))
}

// upQueue is a stream's bytes on its sender's uplink that have not left
// it yet, oldest first.
type upQueue struct {
	q     []upChunk
	bytes int64
}

type upChunk struct {
	leaves time.Time
	k      int64
}

// add counts k bytes that leave the uplink at leaves.
func (u *upQueue) add(leaves time.Time, k int) {
	u.q = append(u.q, upChunk{leaves, int64(k)})
	u.bytes += int64(k)
}

// drain forgets the bytes that have left the uplink by now.
func (u *upQueue) drain(now time.Time) {
	for len(u.q) > 0 && !u.q[0].leaves.After(now) {
		u.bytes -= u.q[0].k
		u.q = u.q[1:]
	}
}

// receiveChunk puts k bytes of a stream that reach host to now on its
// downlink, behind the bytes that reached it before, and returns when
// they are through; they leave the stream's pending (see queueChunk).
func (n *Network) receiveChunk(to string, k int, pending *int64) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	*pending -= int64(k)
	now := time.Now()
	r := n.limits[to].Down
	if r <= 0 {
		return now
	}
	b := hostBucket(n.down, to)
	b.free = later(now, b.free).Add(txTime(r, k))
	return b.free
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Proxy is a real TCP listener whose connections pass through an emulated
// link to a real TCP server. It puts programs the lab does not link (a
// Tahoe-LAFS storage node, say) behind the same links as its own nodes.
type Proxy struct {
	n        *Network
	ln       net.Listener
	target   string
	from, to string
	wg       sync.WaitGroup
}

// Proxy listens on the loopback address listen ("127.0.0.1:0" picks a
// port) and forwards each connection to target, as if it were made from
// host from to host to: bytes towards target take the link from -> to,
// replies the link to -> from. Partitions between from and to refuse new
// connections and cut open ones.
func (n *Network) Proxy(listen, target, from, to string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{n: n, ln: ln, target: target, from: from, to: to}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting connections; those open stay open until either
// end closes them.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	s := &stream{from: p.from, to: p.to, inner: [2]net.Conn{c, r}}
	if err := p.n.open(s); err != nil {
		c.Close()
		r.Close()
		return
	}
	p.n.start(s)
}
