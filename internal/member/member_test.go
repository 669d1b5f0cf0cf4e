package member

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func fast(c *memberlist.Config) {
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 20 * time.Millisecond
	c.SuspicionMult = 2
	c.TCPTimeout = 500 * time.Millisecond
}

func start(t *testing.T, name string, key []byte, free *atomic.Int64) *List {
	return startTuned(t, name, key, free, fast)
}

func startTuned(t *testing.T, name string, key []byte, free *atomic.Int64, tune func(*memberlist.Config)) *List {
	t.Helper()
	l, err := Start(Config{
		Name: name, Bind: "127.0.0.1:0", Key: key, Tune: tune, SuspectAfter: 400 * time.Millisecond,
		Meta: func() Meta { return Meta{ID: name, Addr: "addr-" + name, Zone: "z", Free: free.Load()} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Shutdown() })
	return l
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func state(l *List, id string) (Member, bool) {
	for _, m := range l.Members() {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Members see each other with metadata; a crashed member turns dead, a
// member that leaves turns left, and metadata updates spread.
func TestStatesAndMetadata(t *testing.T) {
	key := make([]byte, 32)
	var free [3]atomic.Int64
	var ls [3]*List
	// Slow to declare death (suspicion lasts seconds), so the test sees
	// a crashed member suspect first.
	slowDeath := func(c *memberlist.Config) { fast(c); c.SuspicionMult = 20 }
	for i := range ls {
		free[i].Store(int64(100 * (i + 1)))
		ls[i] = startTuned(t, fmt.Sprintf("n%d", i), key, &free[i], slowDeath)
	}
	for i := 1; i < 3; i++ {
		if _, err := ls[i].Join([]string{ls[0].Addr()}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "3 alive members everywhere", func() bool {
		for _, l := range ls {
			if len(l.Alive()) != 3 {
				return false
			}
		}
		return true
	})
	if m, _ := state(ls[0], "n2"); m.Addr != "addr-n2" || m.Free != 300 || m.Zone != "z" || m.State != Alive {
		t.Fatalf("n0 sees n2 as %+v", m)
	}

	free[1].Store(7)
	if err := ls[1].Update(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1's new free space at n0", func() bool { m, _ := state(ls[0], "n1"); return m.Free == 7 })

	ls[2].Shutdown() // a crash: nobody is told
	waitFor(t, "n2 suspect at n0", func() bool { m, _ := state(ls[0], "n2"); return m.State == Suspect })
	waitFor(t, "n2 dead at n0", func() bool { m, _ := state(ls[0], "n2"); return m.State == Dead })
	if len(ls[0].Alive()) != 2 || len(ls[0].Members()) != 3 {
		t.Fatalf("after the crash n0 sees %d alive of %d", len(ls[0].Alive()), len(ls[0].Members()))
	}

	if err := ls[1].Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1 left at n0", func() bool { m, _ := state(ls[0], "n1"); return m.State == Left })
}

// Gossip is encrypted with the grid's key: a member with another key
// cannot join.
func TestWrongKeyCannotJoin(t *testing.T) {
	var free atomic.Int64
	a := start(t, "a", make([]byte, 32), &free)
	other := make([]byte, 32)
	other[0] = 1
	b := start(t, "b", other, &free)
	if _, err := b.Join([]string{a.Addr()}); err == nil {
		time.Sleep(300 * time.Millisecond)
		if len(a.Alive()) != 1 {
			t.Fatalf("a member with another gossip key joined: a sees %d", len(a.Alive()))
		}
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := Start(Config{Name: "x", Bind: "127.0.0.1:0", Key: []byte("short")}); err == nil {
		t.Fatal("a short key was accepted")
	}
	if _, err := Start(Config{Name: "x", Bind: "no-port", Key: make([]byte, 32)}); err == nil {
		t.Fatal("an address without a port was accepted")
	}
}
