package linkemu

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newTransport(t *testing.T, n *Network, host string) *Transport {
	t.Helper()
	tr, err := n.Transport(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown() })
	return tr
}

// receive waits for one datagram.
func receive(t *testing.T, tr *Transport) *memberlist.Packet {
	t.Helper()
	select {
	case p := <-tr.PacketCh():
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram arrived")
		return nil
	}
}

func TestDatagramLoss(t *testing.T) {
	const total = 5000
	n := New(1)
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")
	n.SetDefault(Link{Loss: 0.2})

	// Send in batches smaller than the packet queue, draining in between,
	// so that only Loss drops datagrams.
	received := int64(0)
	deadline := time.After(10 * time.Second)
	for sent := 0; sent < total; {
		for range 500 {
			a.WriteTo([]byte{byte(sent)}, "127.77.0.2:7946")
			sent++
		}
		for {
			s := n.Stats()
			if s.DroppedLoss+s.DroppedPartition+s.DroppedUnreachable+s.DroppedOverflow+s.Delivered == int64(sent) &&
				received == s.Delivered {
				break
			}
			select {
			case p := <-b.PacketCh():
				if p.From.String() != "127.77.0.1:7946" {
					t.Fatalf("From = %v, want the sender's host", p.From)
				}
				received++
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("datagrams not all accounted for: %+v, received %d", n.Stats(), received)
			}
		}
	}
	s := n.Stats()
	if s.DatagramsSent != total || s.DroppedPartition != 0 || s.DroppedUnreachable != 0 || s.DroppedOverflow != 0 {
		t.Errorf("unexpected drops: %+v", s)
	}
	if frac := float64(received) / total; frac < 0.75 || frac > 0.85 {
		t.Errorf("delivered fraction %.3f, want 0.75..0.85 for Loss 0.2", frac)
	}

	// A shut-down destination drops silently.
	b.Shutdown()
	if _, err := a.WriteTo([]byte("x"), "127.77.0.2:7946"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "drop to a shut-down host", func() bool {
		now := n.Stats()
		return now.DroppedUnreachable+now.DroppedLoss == s.DroppedUnreachable+s.DroppedLoss+1
	})
	if _, err := b.WriteTo([]byte("x"), "127.77.0.1:7946"); err == nil {
		t.Error("WriteTo on a shut-down transport succeeded")
	}
}

func TestDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	const eps = time.Millisecond
	n := New(1)
	n.SetDefault(Link{Delay: delay})
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")

	t.Run("datagram", func(t *testing.T) {
		sent, err := a.WriteTo([]byte("ping"), "127.77.0.2:7946")
		if err != nil {
			t.Fatal(err)
		}
		p := receive(t, b)
		if got := p.Timestamp.Sub(sent); got < delay-eps {
			t.Errorf("datagram arrived after %v, want >= %v", got, delay)
		}
		if string(p.Buf) != "ping" {
			t.Errorf("payload %q", p.Buf)
		}
	})

	t.Run("stream", func(t *testing.T) {
		c, err := a.DialTimeout("127.77.0.2:7946", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var d net.Conn
		select {
		case d = <-b.StreamCh():
		case <-time.After(5 * time.Second):
			t.Fatal("stream not accepted")
		}
		defer d.Close()
		if c.RemoteAddr().String() != "127.77.0.2:7946" || d.RemoteAddr().String() != "127.77.0.1:7946" {
			t.Errorf("RemoteAddr: dialler sees %v, acceptor sees %v", c.RemoteAddr(), d.RemoteAddr())
		}
		start := time.Now()
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(d, buf); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < delay-eps {
			t.Errorf("stream write arrived after %v, want >= %v", got, delay)
		}
	})

	t.Run("bandwidth", func(t *testing.T) {
		n.SetLink("127.77.0.1:7946", "127.77.0.2:7946", Link{Bandwidth: 100_000})
		defer n.SetLink("127.77.0.1:7946", "127.77.0.2:7946", Link{Delay: delay})
		c, err := a.DialTimeout("127.77.0.2:7946", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		d := <-b.StreamCh()
		defer d.Close()
		payload := bytes.Repeat([]byte("q"), 20_000)
		start := time.Now()
		go func() {
			c.Write(payload)
			c.Close()
		}()
		got, err := io.ReadAll(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("received %d bytes, want %d", len(got), len(payload))
		}
		if el := time.Since(start); el < 200*time.Millisecond-eps {
			t.Errorf("20 kB at 100 kB/s took %v, want >= 200ms", el)
		}
	})

	t.Run("dialer", func(t *testing.T) {
		addr := echoServer(t)
		n.Register("127.77.0.2:7946", addr)
		c, err := n.Dialer("127.77.0.1:7946")(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := c.Write([]byte("echo")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "echo" {
			t.Fatalf("echo: %q, %v", buf, err)
		}
		if rtt := time.Since(start); rtt < 2*delay-eps {
			t.Errorf("round trip %v, want >= %v", rtt, 2*delay)
		}
	})
}

// echoServer runs a real TCP echo server on loopback and returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// arrivals sends count numbered datagrams from a to b and returns the numbers
// in the order they arrive.
func arrivals(t *testing.T, a, b *Transport, count int) []uint32 {
	t.Helper()
	for i := range count {
		a.WriteTo(binary.BigEndian.AppendUint32(nil, uint32(i)), b.host)
	}
	var got []uint32
	for range count {
		got = append(got, binary.BigEndian.Uint32(receive(t, b).Buf))
	}
	return got
}

func outOfOrder(seq []uint32) int {
	k := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] < seq[i-1] {
			k++
		}
	}
	return k
}

func TestReorder(t *testing.T) {
	n := New(7)
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")

	n.SetDefault(Link{Delay: 5 * time.Millisecond})
	if k := outOfOrder(arrivals(t, a, b, 200)); k != 0 {
		t.Errorf("without Reorder or Jitter, %d datagrams arrived out of order", k)
	}

	n.SetDefault(Link{Delay: 5 * time.Millisecond, Reorder: 0.5})
	if k := outOfOrder(arrivals(t, a, b, 200)); k == 0 {
		t.Error("with Reorder 0.5, every datagram arrived in order")
	}
	if s := n.Stats(); s.Reordered == 0 {
		t.Errorf("Stats.Reordered = 0: %+v", s)
	}
}

func TestPartition(t *testing.T) {
	const ha, hb = "127.77.0.1:7946", "127.77.0.2:7946"
	n := New(1)
	a := newTransport(t, n, ha)
	b := newTransport(t, n, hb)
	addr := echoServer(t)
	n.Register(hb, addr)
	dial := n.Dialer(ha)

	// A stream opened before the partition is cut by it.
	old, err := a.DialTimeout(hb, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	oldPeer := <-b.StreamCh()
	defer oldPeer.Close()

	n.Partition([]string{ha}, []string{hb})

	if _, err := old.Read(make([]byte, 1)); !errors.Is(err, ErrPartitioned) {
		t.Errorf("Read on a cut stream: %v, want ErrPartitioned", err)
	}
	a.WriteTo([]byte("x"), hb)
	if s := n.Stats(); s.DroppedPartition != 1 {
		t.Errorf("DroppedPartition = %d, want 1", s.DroppedPartition)
	}
	if _, err := a.DialTimeout(hb, 100*time.Millisecond); !errors.Is(err, ErrPartitioned) {
		t.Errorf("DialTimeout across the partition: %v, want ErrPartitioned", err)
	}
	if _, err := dial(context.Background(), "tcp", addr); !errors.Is(err, ErrPartitioned) {
		t.Errorf("Dialer across the partition: %v, want ErrPartitioned", err)
	}
	if _, err := a.DialTimeout("127.77.0.9:7946", 100*time.Millisecond); !errors.Is(err, ErrUnreachable) {
		t.Errorf("DialTimeout to an unknown host: %v, want ErrUnreachable", err)
	}
	select {
	case p := <-b.PacketCh():
		t.Fatalf("datagram %q crossed the partition", p.Buf)
	default:
	}

	n.Heal()

	a.WriteTo([]byte("y"), hb)
	if p := receive(t, b); string(p.Buf) != "y" {
		t.Errorf("after Heal got %q", p.Buf)
	}
	c, err := a.DialTimeout(hb, time.Second)
	if err != nil {
		t.Fatalf("DialTimeout after Heal: %v", err)
	}
	c.Close()
	e, err := dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("Dialer after Heal: %v", err)
	}
	defer e.Close()
	e.Write([]byte("ok"))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(e, buf); err != nil || string(buf) != "ok" {
		t.Errorf("echo after Heal: %q, %v", buf, err)
	}
	if s := n.Stats(); s.StreamsRefused != 3 || s.StreamsOpened != 3 {
		t.Errorf("streams opened %d refused %d, want 3 and 3", s.StreamsOpened, s.StreamsRefused)
	}
}

func TestMemberlist(t *testing.T) {
	const size = 8
	n := New(42)
	n.SetDefault(Link{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.1})

	hosts := make([]string, size)
	lists := make([]*memberlist.Memberlist, size)
	views := make([]*view, size)
	for i := range size {
		ip := fmt.Sprintf("127.77.0.%d", i+1)
		hosts[i] = ip + ":7946"
		tr, err := n.Transport(hosts[i])
		if err != nil {
			t.Fatal(err)
		}
		views[i] = &view{alive: make(map[string]bool)}
		conf := memberlist.DefaultLocalConfig()
		conf.Name = fmt.Sprintf("node%d", i)
		conf.BindAddr, conf.AdvertiseAddr = ip, ip
		conf.BindPort, conf.AdvertisePort = 7946, 7946
		conf.Transport = tr
		conf.Events = views[i]
		conf.ProbeInterval = 100 * time.Millisecond
		conf.ProbeTimeout = 80 * time.Millisecond
		conf.GossipInterval = 20 * time.Millisecond
		conf.PushPullInterval = 500 * time.Millisecond
		conf.LogOutput = io.Discard
		m, err := memberlist.Create(conf)
		if err != nil {
			t.Fatal(err)
		}
		lists[i] = m
		t.Cleanup(func() { m.Shutdown() })
	}

	allSee := func(want int) func() bool {
		return func() bool {
			for _, v := range views {
				if len(v.snapshot()) != want {
					return false
				}
			}
			return true
		}
	}

	for i := 1; i < size; i++ {
		if _, err := lists[i].Join([]string{hosts[0]}); err != nil {
			t.Fatalf("node%d join: %v", i, err)
		}
	}
	waitFor(t, 20*time.Second, "all 8 alive everywhere", allSee(size))

	n.Partition(hosts[:4], hosts[4:])
	waitFor(t, 20*time.Second, "each side to give up on the other", func() bool {
		for i, v := range views {
			seen := v.snapshot()
			for j := range hosts {
				if (i < 4) != (j < 4) && seen[fmt.Sprintf("node%d", j)] {
					return false
				}
			}
		}
		return true
	})

	n.Heal()
	if _, err := lists[0].Join([]string{hosts[4]}); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	waitFor(t, 20*time.Second, "all 8 alive again", allSee(size))
	t.Logf("stats: %+v", n.Stats())
}

// view is a memberlist.EventDelegate that keeps the names of the members a
// node sees alive (joined and not dead or left). Members() would hand out
// nodes that memberlist keeps changing.
type view struct {
	mu    sync.Mutex
	alive map[string]bool
}

func (v *view) NotifyJoin(n *memberlist.Node)   { v.set(n.Name, true) }
func (v *view) NotifyLeave(n *memberlist.Node)  { v.set(n.Name, false) }
func (v *view) NotifyUpdate(n *memberlist.Node) {}

func (v *view) set(name string, alive bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if alive {
		v.alive[name] = true
	} else {
		delete(v.alive, name)
	}
}

func (v *view) snapshot() map[string]bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.alive)
}
