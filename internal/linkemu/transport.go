package linkemu

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// queueLen is how many datagrams, and how many accepted streams, a
// transport holds for its reader; beyond that datagrams are dropped (like a
// full UDP receive buffer) and dials refused with ErrUnreachable.
const queueLen = 1024

// Transport is the memberlist transport of one host of a Network. Create it
// with Network.Transport and give it to memberlist as Config.Transport.
type Transport struct {
	net  *Network
	host string
	ip   net.IP
	port int

	mu       sync.Mutex
	closed   bool
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Transport returns a new transport for host, an "ip:port" string with a
// literal IP. Nothing is bound on the real network. A host can have one live
// transport at a time; once it is shut down the host may get a new one (a
// restarted node).
func (n *Network) Transport(host string) (*Transport, error) {
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		return nil, fmt.Errorf("linkemu: host %q: %w", host, err)
	}
	ip := net.ParseIP(h)
	port, err := strconv.Atoi(p)
	if ip == nil || err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("linkemu: host %q is not a literal ip:port", host)
	}
	t := &Transport{
		net:      n,
		host:     host,
		ip:       ip,
		port:     port,
		packetCh: make(chan *memberlist.Packet, queueLen),
		streamCh: make(chan net.Conn, queueLen),
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hosts[host] != nil {
		return nil, fmt.Errorf("%w: %s", ErrHostInUse, host)
	}
	n.hosts[host] = t
	return t, nil
}

// FinalAdvertiseAddr returns the transport's host IP and port, whatever is
// asked for: the host is the address.
func (t *Transport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, t.port, nil
}

// WriteTo sends a datagram to the host addr. Like UDP it succeeds whether or
// not the datagram will arrive; it fails only once the transport is shut
// down. The caller keeps b.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.isClosed() {
		return time.Time{}, fmt.Errorf("linkemu: %s: %w", t.host, net.ErrClosed)
	}
	now := time.Now()
	t.net.send(t.host, addr, b)
	return now, nil
}

// WriteToAddress is WriteTo(b, addr.Addr).
func (t *Transport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, addr.Addr)
}

// PacketCh returns the channel of datagrams that arrive for this host. It is
// never closed (memberlist reads it until its own shutdown, which comes after
// the transport's, and would take a nil packet from a closed channel).
func (t *Transport) PacketCh() <-chan *memberlist.Packet {
	return t.packetCh
}

// DialTimeout opens a stream to the host addr. It fails at once, with
// ErrUnreachable or ErrPartitioned, so never later than timeout.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.isClosed() {
		return nil, fmt.Errorf("linkemu: %s: %w", t.host, net.ErrClosed)
	}
	return t.net.dialHost(t.host, addr)
}

// DialAddressTimeout is DialTimeout(addr.Addr, timeout).
func (t *Transport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(addr.Addr, timeout)
}

// StreamCh returns the channel of streams other hosts open to this one. Like
// PacketCh it is never closed.
func (t *Transport) StreamCh() <-chan net.Conn {
	return t.streamCh
}

// Shutdown detaches the transport from the network: datagrams to the host
// are dropped, dials to it refused, and accepted streams not yet taken from
// StreamCh closed. Streams already taken stay up. It is idempotent.
func (t *Transport) Shutdown() error {
	t.mu.Lock()
	t.closed = true
	for drained := false; !drained; {
		select {
		case c := <-t.streamCh:
			c.Close()
		default:
			drained = true
		}
	}
	t.mu.Unlock()

	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.net.hosts[t.host] == t {
		delete(t.net.hosts, t.host)
	}
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// deliver puts a datagram in the packet channel without blocking and
// reports whether it did, and if not whether t is shut down.
func (t *Transport) deliver(p *memberlist.Packet) (ok, closed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false, true
	}
	p.Timestamp = time.Now()
	select {
	case t.packetCh <- p:
		return true, false
	default:
		return false, false
	}
}

// accept puts a stream in the stream channel without blocking and reports
// whether it did.
func (t *Transport) accept(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	select {
	case t.streamCh <- c:
		return true
	default:
		return false
	}
}
