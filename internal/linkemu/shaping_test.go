package linkemu

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"sync"
	"testing"
	"time"
)

// These tests measure what a link does and compare it with its setting.
// Tolerances allow for timer lateness on a busy 2-core machine; each test
// still fails if the mechanism it measures is missing or wrong (a uniform
// jitter, uncorrelated loss, an unshared or unenforced bandwidth).

// TestJitterIsNormal checks the delays a link with Delay 60 ms and Jitter
// 12 ms draws for its packets: their mean, standard deviation and shape
// (share within one standard deviation, tails beyond two). It reads the
// draws themselves, not clocks, so a busy machine cannot bend the shape;
// TestJitterReachesPackets checks that packets really take them.
func TestJitterIsNormal(t *testing.T) {
	const (
		count  = 5000
		delay  = 60 * time.Millisecond
		jitter = 12 * time.Millisecond
	)
	n := New(3)
	l := Link{Delay: delay, Jitter: jitter}
	ds := make([]float64, count)
	n.mu.Lock()
	for i := range ds {
		ds[i] = float64(n.delayLocked(l))
	}
	n.mu.Unlock()
	mean, sd := meanSD(ds)
	t.Logf("drawn delays: mean %v sd %v (setting %v ± %v)", time.Duration(mean), time.Duration(sd), delay, jitter)
	if math.Abs(mean-float64(delay)) > float64(time.Millisecond) {
		t.Errorf("mean delay %v, want %v ± 1ms", time.Duration(mean), delay)
	}
	if sd < 0.95*float64(jitter) || sd > 1.05*float64(jitter) {
		t.Errorf("delay standard deviation %v, want %v ± 5%%", time.Duration(sd), jitter)
	}
	// A normal distribution has 68% within one sd of the mean and 4.6%
	// beyond two; a uniform one of the same sd has 58% and none.
	within, beyond2 := 0, 0
	for _, d := range ds {
		switch z := math.Abs(d-float64(delay)) / float64(jitter); {
		case z <= 1:
			within++
		case z > 2:
			beyond2++
		}
	}
	if f := float64(within) / float64(len(ds)); f < 0.65 || f > 0.71 {
		t.Errorf("%.3f of delays within one sd, want about 0.683 (normal)", f)
	}
	if f := float64(beyond2) / float64(len(ds)); f < 0.03 || f > 0.06 {
		t.Errorf("%.3f of delays beyond two sd, want about 0.046 (normal tails)", f)
	}
}

// TestJitterReachesPackets sends datagrams over a link with Delay 60 ms
// and Jitter 12 ms and measures their one-way delays: on average the
// delay, and spread by at least most of the jitter.
// (Timers that fire late on a busy machine only add to the delays and
// their spread, so the bounds above are loose.)
func TestJitterReachesPackets(t *testing.T) {
	const (
		count  = 600
		delay  = 60 * time.Millisecond
		jitter = 12 * time.Millisecond
	)
	n := New(3)
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")
	n.SetDefault(Link{Delay: delay, Jitter: jitter})
	var ds []float64
	sent := make([]time.Time, count)
	for i := range count {
		s, _ := a.WriteTo([]byte{byte(i), byte(i >> 8)}, b.host)
		sent[i] = s
		if i%50 == 49 { // drain so the packet channel never overflows
			for range 50 {
				p := receive(t, b)
				ds = append(ds, float64(p.Timestamp.Sub(sent[int(p.Buf[0])|int(p.Buf[1])<<8])))
			}
		}
	}
	mean, sd := meanSD(ds)
	t.Logf("one-way delay: mean %v sd %v (setting %v ± %v)", time.Duration(mean), time.Duration(sd), delay, jitter)
	if mean < float64(delay-2*time.Millisecond) || mean > float64(delay+20*time.Millisecond) {
		t.Errorf("mean delay %v, want %v (up to 20ms more on a busy machine)", time.Duration(mean), delay)
	}
	if sd < 0.8*float64(jitter) {
		t.Errorf("delay standard deviation %v, want at least 80%% of %v", time.Duration(sd), jitter)
	}
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// TestCorrelatedLoss checks the loss rate and the burstiness of loss with
// and without LossCorr, on the decisions the network takes for datagrams.
func TestCorrelatedLoss(t *testing.T) {
	for _, tc := range []struct {
		loss, corr float64
	}{{0.3, 0}, {0.3, 0.5}, {0.05, 0.25}, {0.8, 0.25}} {
		n := New(11)
		dir := new(direction)
		l := Link{Loss: tc.loss, LossCorr: tc.corr}
		const count = 100_000
		lost, lostAfterLost, afterLost := 0, 0, 0
		prev := false
		for range count {
			n.mu.Lock()
			x := n.lostLocked(l, dir)
			n.mu.Unlock()
			if x {
				lost++
			}
			if prev {
				afterLost++
				if x {
					lostAfterLost++
				}
			}
			prev = x
		}
		rate := float64(lost) / count
		cond := float64(lostAfterLost) / float64(afterLost)
		wantCond := tc.loss + tc.corr*(1-tc.loss)
		t.Logf("loss %.2f corr %.2f: rate %.4f, P(loss|loss) %.4f (want %.4f)", tc.loss, tc.corr, rate, cond, wantCond)
		if math.Abs(rate-tc.loss) > 0.01 {
			t.Errorf("loss %v corr %v: measured rate %.4f", tc.loss, tc.corr, rate)
		}
		if math.Abs(cond-wantCond) > 0.015 {
			t.Errorf("loss %v corr %v: P(loss after loss) %.4f, want %.4f", tc.loss, tc.corr, cond, wantCond)
		}
	}
}

// TestCorrelatedLossEndToEnd sends datagrams through transports over a
// lossy, correlated link and checks the delivered share and that losses
// come in runs longer than independent loss would give.
func TestCorrelatedLossEndToEnd(t *testing.T) {
	const count = 4000
	n := New(5)
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")
	n.SetDefault(Link{Loss: 0.25, LossCorr: 0.6})
	got := make([]bool, count)
	for i := 0; i < count; i += 400 {
		for j := i; j < i+400; j++ {
			a.WriteTo([]byte{byte(j), byte(j >> 8)}, b.host)
		}
		waitFor(t, 5*time.Second, "datagrams accounted for", func() bool {
			s := n.Stats()
			return s.DroppedLoss+s.Delivered == int64(i+400)
		})
		for len(b.PacketCh()) > 0 {
			p := <-b.PacketCh()
			got[int(p.Buf[0])|int(p.Buf[1])<<8] = true
		}
	}
	lost, runs := 0, 0
	for i, ok := range got {
		if !ok {
			lost++
			if i == 0 || got[i-1] {
				runs++
			}
		}
	}
	rate, meanRun := float64(lost)/count, float64(lost)/float64(runs)
	// Independent loss at 25% gives runs of mean 1/(1-0.25) = 1.33; with
	// correlation 0.6, 1/((1-0.25)(1-0.6)) = 3.33.
	t.Logf("rate %.3f, mean loss run %.2f", rate, meanRun)
	if math.Abs(rate-0.25) > 0.04 {
		t.Errorf("loss rate %.3f, want 0.25 ± 0.04", rate)
	}
	if meanRun < 2.6 || meanRun > 4.2 {
		t.Errorf("mean run of losses %.2f, want about 3.3", meanRun)
	}
}

// sink is a real TCP server that reads everything and reports, per
// connection, how many bytes arrived and when the last one did.
func sink(t *testing.T) (addr string, done <-chan time.Time) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan time.Time, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
				ch <- time.Now()
			}()
		}
	}()
	return ln.Addr().String(), ch
}

// dial connects from host from to a registered address through n; the
// connection is closed when the test ends.
func dial(t *testing.T, n *Network, from, addr string) net.Conn {
	t.Helper()
	c, err := n.Dialer(from)(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flood writes on c until it is closed.
func flood(c net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// send writes size bytes on c and closes it (an emulated stream's pipe
// has handed every byte on once Write returns).
func send(t *testing.T, c net.Conn, size int) {
	buf := make([]byte, 64<<10)
	for left := size; left > 0; {
		k, err := c.Write(buf[:min(left, len(buf))])
		if err != nil {
			t.Error(err)
			return
		}
		left -= k
	}
	c.Close()
}

// TestBandwidth measures stream throughput through Dialer: one stream gets
// the link's bandwidth; two streams in the same direction share it; a
// stream the other way has its own.
func TestBandwidth(t *testing.T) {
	const (
		bw   = 2_000_000 // bytes/s
		size = 1_000_000
	)
	n := New(1)
	addrB, doneB := sink(t)
	addrA, doneA := sink(t)
	n.Register("b", addrB)
	n.Register("a", addrA)
	n.SetLink("a", "b", Link{Bandwidth: bw, Delay: 5 * time.Millisecond})
	n.SetLink("b", "a", Link{Bandwidth: bw, Delay: 5 * time.Millisecond})
	rate := func(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() }

	start := time.Now()
	send(t, dial(t, n, "a", addrB), size)
	one := rate(size, (<-doneB).Sub(start))

	start = time.Now()
	c1, c2 := dial(t, n, "a", addrB), dial(t, n, "a", addrB)
	go send(t, c1, size)
	go send(t, c2, size)
	last := later(<-doneB, <-doneB)
	shared := rate(2*size, last.Sub(start))

	start = time.Now()
	ab, ba := dial(t, n, "a", addrB), dial(t, n, "b", addrA)
	go send(t, ab, size)
	go send(t, ba, size)
	tAB, tBA := (<-doneB).Sub(start), (<-doneA).Sub(start)
	both := rate(size, max(tAB, tBA))

	t.Logf("one stream %.0f B/s; two streams together %.0f B/s; each way at once %.0f B/s (setting %d)", one, shared, both, bw)
	for _, c := range []struct {
		what string
		got  float64
	}{{"one stream", one}, {"two streams sharing", shared}, {"each direction", both}} {
		if c.got < 0.85*bw || c.got > 1.1*bw {
			t.Errorf("%s: %.0f B/s, want %d ± 10%%", c.what, c.got, bw)
		}
	}
}

// TestHostLimit: a host's uplink is shared by its streams to different
// peers, whose links are unlimited; another host is not held back by it.
func TestHostLimit(t *testing.T) {
	const (
		up   = 2_000_000
		size = 1_000_000
	)
	n := New(1)
	addrB, doneB := sink(t)
	addrC, doneC := sink(t)
	n.Register("b", addrB)
	n.Register("c", addrC)
	n.SetHost("a", HostLimit{Up: up})
	start := time.Now()
	for _, addr := range []string{addrB, addrC} {
		c, err := n.Dialer("a")(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go send(t, c, size)
	}
	agg := float64(2*size) / later(<-doneB, <-doneC).Sub(start).Seconds()
	start = time.Now()
	c, err := n.Dialer("x")(context.Background(), "tcp", addrB)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send(t, c, 4*size)
	free := float64(4*size) / (<-doneB).Sub(start).Seconds()
	t.Logf("host a's uplink, two peers: %.0f B/s (limit %d); unlimited host: %.0f B/s", agg, up, free)
	if agg < 0.85*up || agg > 1.1*up {
		t.Errorf("two streams from a to different peers: %.0f B/s, want %d ± 10%%", agg, up)
	}
	if free < 2*up {
		t.Errorf("a host without a limit sent at only %.0f B/s", free)
	}
}

// TestSlowPeerDoesNotHoldUplink: a host streams to five slow peers (200
// kB/s links) and to a fast one at once; the slow streams queue at their
// own links, not in the host's shared uplink, so the fast one gets the
// rest of it.
func TestSlowPeerDoesNotHoldUplink(t *testing.T) {
	const up = 4_000_000
	n := New(1)
	n.SetHost("a", HostLimit{Up: up})
	addrC, doneC := sink(t)
	n.Register("c", addrC)
	for i := range 5 {
		addr, _ := sink(t)
		peer := fmt.Sprint("slow", i)
		n.Register(peer, addr)
		n.SetLink("a", peer, Link{Bandwidth: 200_000})
		c := dial(t, n, "a", addr)
		go flood(c)
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	send(t, dial(t, n, "a", addrC), 4_000_000)
	fast := 4_000_000 / (<-doneC).Sub(start).Seconds()
	// The slow streams take 5 × 200 kB/s of the uplink.
	want := 0.85 * (up - 5*200_000)
	t.Logf("fast peer got %.0f B/s of a %d B/s uplink beside five 200 kB/s streams", fast, up)
	// Booking is first come, first served, not TCP's fairness: the fast
	// stream may take some of the slow ones' share, not the reverse.
	if fast < want || fast > 1.25*(up-5*200_000) {
		t.Errorf("a stream to a fast peer got %.0f B/s beside slow ones, want %.0f (its share) -15%% +25%%", fast, up-5*200_000.0)
	}
}

// TestSlowPeerGetsItsRate: as a client writing shares to a mesh: one
// host streams at once to a peer behind a slow link and slow downlink
// (both 150 kB/s) and to fast peers; the slow stream still gets its
// 150 kB/s, the rate of the slowest stage on its way.
func TestSlowPeerGetsItsRate(t *testing.T) {
	const slowRate = 150_000
	n := New(1)
	n.SetHost("a", HostLimit{Up: 8_000_000})
	addrS, doneS := sink(t)
	n.Register("s", addrS)
	n.SetHost("s", HostLimit{Up: slowRate, Down: slowRate})
	n.SetLink("a", "s", Link{Bandwidth: slowRate, Delay: 6 * time.Millisecond})
	for i := range 4 {
		addr, _ := sink(t)
		peer := fmt.Sprint("fast", i)
		n.Register(peer, addr)
		n.SetLink("a", peer, Link{Bandwidth: 1_000_000, Delay: time.Millisecond})
		c := dial(t, n, "a", addr)
		go flood(c)
	}
	start := time.Now()
	send(t, dial(t, n, "a", addrS), 300_000)
	got := 300_000 / (<-doneS).Sub(start).Seconds()
	t.Logf("slow peer's stream: %.0f B/s (its stages allow %d)", got, slowRate)
	if got < 0.85*slowRate || got > 1.1*slowRate {
		t.Errorf("stream to a 150 kB/s peer beside fast ones: %.0f B/s, want %d ± 10%%", got, slowRate)
	}
}

// TestDatagramQueue sends a burst of datagrams into a slow link: they
// leave one per transmission time, and those that would wait past the
// queue limit are dropped.
func TestDatagramQueue(t *testing.T) {
	const (
		bw   = 20_000 // bytes/s: a 1000-byte datagram takes 50 ms
		size = 1000
	)
	n := New(1)
	a := newTransport(t, n, "127.77.0.1:7946")
	b := newTransport(t, n, "127.77.0.2:7946")
	n.SetDefault(Link{Bandwidth: bw})
	sent := time.Now()
	for range 40 {
		a.WriteTo(make([]byte, size), b.host)
	}
	waitFor(t, 5*time.Second, "burst accounted for", func() bool {
		s := n.Stats()
		return s.DroppedQueue+s.Delivered == 40
	})
	s := n.Stats()
	// QueueLimit 200 ms holds 4 datagrams waiting behind the one sent.
	if s.Delivered < 4 || s.Delivered > 6 || s.DroppedQueue != 40-s.Delivered {
		t.Errorf("burst of 40 into a 200 ms queue at 50 ms each: %+v", s)
	}
	var at []time.Time
	for range s.Delivered {
		at = append(at, receive(t, b).Timestamp)
	}
	// A busy machine may deliver a datagram late, and the next one on
	// time right behind it, so gaps between arrivals prove nothing; what
	// pacing guarantees is that the i-th datagram cannot arrive before
	// i+1 transmission times have passed since the burst was sent.
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i, a := range at {
		if want, got := time.Duration(i+1)*50*time.Millisecond-5*time.Millisecond, a.Sub(sent); got < want {
			t.Errorf("datagram %d arrived %v after the burst, want >= %v (1000 B at 20 kB/s)", i, got, want)
		}
	}
}

// TestProxy puts a real echo server behind a proxy with a delayed, slow
// link: a round trip takes both delays and bulk data is paced.
func TestProxy(t *testing.T) {
	const delay = 20 * time.Millisecond
	n := New(1)
	n.SetLink("client", "server", Link{Delay: delay, Bandwidth: 500_000})
	n.SetLink("server", "client", Link{Delay: delay})
	p, err := n.Proxy("127.0.0.1:0", echoServer(t), "client", "server")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo through proxy: %q %v", buf, err)
	}
	if rtt := time.Since(start); rtt < 2*delay-time.Millisecond {
		t.Errorf("round trip %v through the proxy, want >= %v", rtt, 2*delay)
	}
	const size = 500_000 // one second at 500 kB/s
	start = time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.CopyN(io.Discard, c, size)
	}()
	c.Write(make([]byte, size))
	wg.Wait()
	if el := time.Since(start); el < 900*time.Millisecond || el > 1500*time.Millisecond {
		t.Errorf("500 kB echoed through a 500 kB/s proxy link in %v, want about 1 s", el)
	}
	if s := n.Stats(); s.StreamsOpened != 1 {
		t.Errorf("StreamsOpened = %d, want 1", s.StreamsOpened)
	}
}

// TestDownlinkServesInArrivalOrder: a receiver's downlink is a queue
// served in the order bytes reach it. A slow sender whose uplink queue
// holds a burst, and a fast one starting beside it, share a 2 MB/s
// downlink: the fast stream gets what the slow one leaves, because the
// slow stream's later chunks, which reach the downlink later, do not take
// its time before the fast stream's earlier ones (booked when sent, they
// did, and the downlink stood idle in between: the fast stream got about
// 0.5 MB/s).
func TestDownlinkServesInArrivalOrder(t *testing.T) {
	const (
		down = 2_000_000
		slow = 100_000
		size = 1_000_000
	)
	n := New(1)
	n.SetHost("c", HostLimit{Down: down})
	n.SetHost("s", HostLimit{Up: slow})
	addr, done := sink(t)
	n.Register("c", addr)
	go flood(dial(t, n, "s", addr))
	time.Sleep(50 * time.Millisecond) // the slow stream has its queue
	start := time.Now()
	send(t, dial(t, n, "f", addr), size)
	fast := size / (<-done).Sub(start).Seconds()
	t.Logf("fast stream beside a %d B/s one into a %d B/s downlink: %.0f B/s", slow, down, fast)
	if want := 0.85 * (down - slow); fast < want {
		t.Errorf("fast stream got %.0f B/s of the downlink, want at least %.0f (what the slow stream leaves, -15%%)", fast, want)
	}
}

// TestSlowDownlinkQueueIsBounded: a bulk stream into a 20 kB/s downlink
// from an unlimited sender keeps no more than about the queue limit on
// the way, so a short message sent beside it is through within a few
// hundred milliseconds. Counting only the bytes that reached the
// downlink, the stream had its whole window ahead (64 chunks of 1500
// bytes, 4.8 s), and every request to the slow host waited that long.
func TestSlowDownlinkQueueIsBounded(t *testing.T) {
	const down = 20_000
	n := New(1)
	n.SetHost("c", HostLimit{Down: down})
	addr, done := sink(t)
	n.Register("c", addr)
	go flood(dial(t, n, "s", addr))
	time.Sleep(time.Second) // the bulk stream's queue is full
	start := time.Now()
	send(t, dial(t, n, "f", addr), 100)
	wait := (<-done).Sub(start)
	t.Logf("100 bytes beside a bulk stream into a %d B/s downlink: through after %v", down, wait)
	if limit := 4 * QueueLimit; wait > limit {
		t.Errorf("100 bytes took %v behind the bulk stream, want at most %v (the queue limit and a few chunks)", wait, limit)
	}
}

// TestSlowPeerGetsItsRateFromBusyUplink: as the lab's best client writing
// a file's shares: its uplink (8.7 MB/s) is the bottleneck of six
// streams to fast peers (4 MB/s links), and a seventh goes to a peer
// whose link and downlink carry 750 kB/s (6 Mbit/s). As TCP flows
// through a bottleneck share it, the slow stream still gets its 750 kB/s:
// the fast ones take the rest of the uplink, not part of its share. With
// the uplink's queue first come, first served, the fast streams kept it
// full and the slow one got about 300 kB/s.
func TestSlowPeerGetsItsRateFromBusyUplink(t *testing.T) {
	const (
		up       = 8_700_000
		slowRate = 750_000
	)
	n := New(1)
	n.SetHost("a", HostLimit{Up: up})
	addrS, doneS := sink(t)
	n.Register("s", addrS)
	n.SetHost("s", HostLimit{Up: slowRate, Down: slowRate})
	n.SetLink("a", "s", Link{Bandwidth: slowRate, Delay: 2350 * time.Microsecond})
	for i := range 6 {
		addr, _ := sink(t)
		peer := fmt.Sprint("fast", i)
		n.Register(peer, addr)
		n.SetLink("a", peer, Link{Bandwidth: 4_000_000, Delay: time.Millisecond})
		go flood(dial(t, n, "a", addr))
	}
	time.Sleep(300 * time.Millisecond) // the fast streams fill the uplink
	start := time.Now()
	send(t, dial(t, n, "a", addrS), 1_500_000)
	got := 1_500_000 / (<-doneS).Sub(start).Seconds()
	t.Logf("slow peer's stream beside six fast ones on a busy %d B/s uplink: %.0f B/s (its stages allow %d)", up, got, slowRate)
	if got < 0.9*slowRate || got > 1.1*slowRate {
		t.Errorf("stream to a %d B/s peer beside fast ones on a busy uplink: %.0f B/s, want %d ± 10%%", slowRate, got, slowRate)
	}
}
