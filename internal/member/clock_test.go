package member

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/clock"
)

// A live member shows as suspect once it has left our probes unanswered
// for longer than SuspectAfter on the list's clock, and as alive again
// from its next answer. memberlist probes no one during the test (its
// probe interval is an hour), so only the fake clock moves suspicion.
func TestSuspicionFollowsTheClock(t *testing.T) {
	key := make([]byte, 32)
	var free atomic.Int64
	free.Store(1)
	clk := clock.NewFake()
	noProbes := func(c *memberlist.Config) { fast(c); c.ProbeInterval = time.Hour }
	const after = 10 * time.Second
	lists := map[string]*List{}
	for _, name := range []string{"a", "b"} {
		l, err := Start(Config{
			Name: name, Bind: "127.0.0.1:0", Key: key, Tune: noProbes, SuspectAfter: after, Clock: clk,
			Meta: func() Meta { return Meta{ID: name, Addr: "addr-" + name, Free: free.Load()} },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Shutdown() })
		lists[name] = l
	}
	a := lists["a"]
	if _, err := lists["b"].Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b alive at a", func() bool { m, _ := state(a, "b"); return m.State == Alive })
	joined := clk.Now()
	if m, _ := state(a, "b"); !m.Since.Equal(joined) {
		t.Fatalf("b alive since %v, want the clock's %v", m.Since, joined)
	}
	clk.Advance(after)
	if m, _ := state(a, "b"); m.State != Alive {
		t.Fatalf("b is %s after exactly SuspectAfter without an answer", m.State)
	}
	clk.Advance(time.Millisecond)
	if m, _ := state(a, "b"); m.State != Suspect {
		t.Fatalf("b is %s after more than SuspectAfter without an answer", m.State)
	}
	if len(a.Alive()) != 2 {
		t.Fatalf("a suspect member is not among the %d live", len(a.Alive()))
	}
	// An answer to a probe: alive again, for another SuspectAfter.
	pings{a}.NotifyPingComplete(&memberlist.Node{Name: "b"}, time.Millisecond, nil)
	if m, _ := state(a, "b"); m.State != Alive {
		t.Fatalf("b is %s right after answering", m.State)
	}
	clk.Advance(after + time.Millisecond)
	if m, _ := state(a, "b"); m.State != Suspect {
		t.Fatalf("b is %s SuspectAfter after its last answer", m.State)
	}
}
