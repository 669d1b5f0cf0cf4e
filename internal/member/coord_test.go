package member

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/quilt-grid/quilt/internal/linkemu"
)

// Three members on emulated links, a and b 2 ms apart, c 60 ms from
// both: the coordinates they gossip on their probes' answers put c far
// from a and b close, so a can estimate its round trip to c, and b's to
// c, from the coordinates alone.
func TestCoordinatesEstimateRoundTrips(t *testing.T) {
	ln := linkemu.New(7)
	hosts := map[string]string{"a": "127.77.0.1:7946", "b": "127.77.0.2:7946", "c": "127.77.0.3:7946"}
	ln.SetDefault(linkemu.Link{Delay: time.Millisecond})
	for _, x := range []string{"a", "b"} {
		ln.SetLink(hosts[x], hosts["c"], linkemu.Link{Delay: 30 * time.Millisecond})
		ln.SetLink(hosts["c"], hosts[x], linkemu.Link{Delay: 30 * time.Millisecond})
	}
	ls := map[string]*List{}
	for _, name := range []string{"a", "b", "c"} {
		tr, err := ln.Transport(hosts[name])
		if err != nil {
			t.Fatal(err)
		}
		l, err := Start(Config{
			Name: name, Bind: hosts[name], Key: make([]byte, 32),
			Meta: func() Meta { return Meta{ID: name, Addr: "addr-" + name} },
			Tune: func(c *memberlist.Config) {
				c.Transport = tr
				c.ProbeInterval = 100 * time.Millisecond
				c.ProbeTimeout = 400 * time.Millisecond
				c.GossipInterval = 20 * time.Millisecond
				c.TCPTimeout = 2 * time.Second
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Shutdown() })
		ls[name] = l
	}
	for _, name := range []string{"b", "c"} {
		if _, err := ls[name].Join([]string{hosts["a"]}); err != nil {
			t.Fatal(err)
		}
	}
	coords := func(l *List) map[string]*coordinate.Coordinate {
		out := map[string]*coordinate.Coordinate{}
		for _, m := range l.Members() {
			if m.Coord != nil {
				out[m.ID] = m.Coord
			}
		}
		return out
	}
	var ab, ac, bc time.Duration
	deadline := time.Now().Add(60 * time.Second)
	for {
		cs := coords(ls["a"])
		if len(cs) == 3 {
			ab, ac = cs["a"].DistanceTo(cs["b"]), cs["a"].DistanceTo(cs["c"])
			bc = cs["b"].DistanceTo(cs["c"]) // a pair a did not measure
			if ac > 4*ab && ac > 30*time.Millisecond && ac < 240*time.Millisecond &&
				bc > 30*time.Millisecond && bc < 240*time.Millisecond {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinates at a (%d of 3 known) estimate a-b %v, a-c %v, b-c %v; want a-c and b-c near 60 ms, a-b far less",
				len(cs), ab, ac, bc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("estimated round trips: a-b %v, a-c %v, b-c %v", ab, ac, bc)
}

// A probe's answer without a coordinate (an older member), with one that
// does not parse, or with one of other dimensions leaves the member's
// coordinate unknown and ours unmoved.
func TestCoordinatesRefuseBadAnswers(t *testing.T) {
	l, err := Start(Config{Name: "x", Bind: "127.0.0.1:0", Key: make([]byte, 32),
		Meta: func() Meta { return Meta{ID: "x"} }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown()
	before := l.Coordinate()
	other := coordinate.NewCoordinate(coordinate.DefaultConfig())
	other.Vec = other.Vec[:3]
	short, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	for i, payload := range [][]byte{nil, []byte("{not json"), short} {
		name := fmt.Sprintf("peer%d", i)
		pings{l}.NotifyPingComplete(&memberlist.Node{Name: name}, 20*time.Millisecond, payload)
		l.mu.Lock()
		co := l.coords[name]
		l.mu.Unlock()
		if co != nil {
			t.Errorf("answer %q: coordinate %v recorded", payload, co)
		}
	}
	if after := l.Coordinate(); !reflect.DeepEqual(before, after) {
		t.Errorf("bad answers moved our coordinate from %+v to %+v", before, after)
	}
	// A good one is recorded.
	good, _ := json.Marshal(coordinate.NewCoordinate(coordinate.DefaultConfig()))
	pings{l}.NotifyPingComplete(&memberlist.Node{Name: "peer"}, 20*time.Millisecond, good)
	l.mu.Lock()
	co := l.coords["peer"]
	l.mu.Unlock()
	if co == nil {
		t.Error("a good coordinate was not recorded")
	}
}
