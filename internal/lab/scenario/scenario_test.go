package scenario

import (
	"bytes"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

func mustParse(t *testing.T, text string) *Scenario {
	t.Helper()
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func mustBuiltin(t *testing.T, name string) *Scenario {
	t.Helper()
	s, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// roundTrip formats s, parses the text and checks that it gets s back and
// that formatting again gives the same text.
func roundTrip(t *testing.T, s *Scenario) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.Format(&b); err != nil {
		t.Fatalf("Format: %v", err)
	}
	text := b.String()
	got, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("Parse of Format's output: %v\n%s", err, text)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("Parse(Format(s)) differs from s\nformatted:\n%s\ns:   %+v\ngot: %+v", text, s, got)
	}
	var again bytes.Buffer
	if err := got.Format(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != text {
		t.Errorf("formatting twice differs:\n%s\n---\n%s", text, again.String())
	}
	return text
}

func TestBuiltinRoundTrip(t *testing.T) {
	if got, want := Names(), []string{"azure", "kreonet", "lan", "qmpsu"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := mustBuiltin(t, name)
			if s.Name != name {
				t.Errorf("Name = %q", s.Name)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			roundTrip(t, s)
		})
	}
	if _, err := Builtin("nowhere"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Builtin(nowhere): %v, want ErrNotFound", err)
	}
}

const handWritten = `# a hand-written scenario
scenario qmpsu-small
description three buildings of a wireless mesh   # and a comment
node s01 role=storage zone=z1 capacity=50GiB
node s02 zone=z2          # storage by default
	node s03   zone=z3 capacity=1.5TB
node gw role=gateway capacity=4096
node best role=client

default delay=2.3ms jitter=0.5ms bw=17.4Mbit loss=0.1% corr=25% reorder=0%
link s01 -> s02 delay=3ms bw=10Mbit        # one direction
link best <-> * delay=1ms bw=40Mbit         # both
link s03 -> * bw=2.5MB/s loss=0
link * -> s03 bw=0 reorder=12.5%
link gw -> s01
link * <-> * delay=250us
`

func TestParseHandWritten(t *testing.T) {
	s := mustParse(t, handWritten)
	def := linkemu.Link{Delay: 2300 * time.Microsecond, Jitter: 500 * time.Microsecond, Bandwidth: 2_175_000, Loss: 0.001, LossCorr: 0.25}
	with := func(f func(*linkemu.Link)) linkemu.Link {
		l := def
		f(&l)
		return l
	}
	best := with(func(l *linkemu.Link) { l.Delay, l.Bandwidth = time.Millisecond, 5_000_000 })
	all := with(func(l *linkemu.Link) { l.Delay = 250 * time.Microsecond })
	want := &Scenario{
		Name:        "qmpsu-small",
		Description: "three buildings of a wireless mesh",
		Nodes: []Node{
			{Name: "s01", Zone: "z1", Role: RoleStorage, Capacity: 50 << 30},
			{Name: "s02", Zone: "z2", Role: RoleStorage},
			{Name: "s03", Zone: "z3", Role: RoleStorage, Capacity: 1_500_000_000_000},
			{Name: "gw", Role: RoleGateway, Capacity: 4096},
			{Name: "best", Role: RoleClient},
		},
		Default: def,
		Rules: []Rule{
			{"s01", "s02", with(func(l *linkemu.Link) { l.Delay, l.Bandwidth = 3*time.Millisecond, 1_250_000 })},
			{"best", "*", best},
			{"*", "best", best},
			{"s03", "*", with(func(l *linkemu.Link) { l.Bandwidth, l.Loss = 2_500_000, 0 })},
			{"*", "s03", with(func(l *linkemu.Link) { l.Bandwidth, l.Reorder = 0, 0.125 })},
			{"gw", "s01", def},
			{"*", "*", all},
			{"*", "*", all},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", s, want)
	}
	text := roundTrip(t, s)
	for _, line := range []string{
		"node s01 role=storage zone=z1 capacity=50GiB\n",
		"node s03 role=storage zone=z3 capacity=1.5TB\n",
		"default delay=2.3ms jitter=500us bw=17.4Mbit loss=0.1% corr=25%\n",
		"link best <-> * delay=1ms bw=40Mbit\n",
		"link gw -> s01\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("Format's output lacks %q:\n%s", line, text)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const head = "scenario x\nnode a\nnode b\n" // lines 1-3
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"empty", "# nothing\n\n", 0, "no \"scenario NAME\""},
		{"not first", "node a\nscenario x\n", 1, "first directive"},
		{"second scenario", head + "scenario y\n", 4, "second scenario"},
		{"scenario without name", "scenario\n", 1, "scenario NAME"},
		{"scenario with two names", "scenario a b\n", 1, "scenario NAME"},
		{"bad scenario name", "scenario a/b\n", 1, "only letters"},
		{"no nodes", "scenario x\ndefault delay=1ms\n", 0, "no nodes"},
		{"unknown directive", head + "host c\n", 4, "unknown directive \"host\""},
		{"second description", "scenario x\ndescription one\ndescription two\n", 3, "first is on line 2"},
		{"second default", head + "default\ndefault delay=1ms\n", 5, "first is on line 4"},
		{"duplicate node", head + "node a role=client\n", 4, "already defined on line 2"},
		{"node named star", head + "node *\n", 4, "\"*\""},
		{"bad node name", head + "node c:1\n", 4, "only letters"},
		{"node without name", head + "node\n", 4, "node NAME"},
		{"unknown node key", head + "node c colour=red\n", 4, "unknown node key \"colour\""},
		{"unknown role", head + "node c role=admin\n", 4, "unknown role \"admin\""},
		{"bad zone", head + "node c zone=a,b\n", 4, "zone"},
		{"bad capacity unit", head + "node c capacity=12XB\n", 4, "unknown unit \"XB\""},
		{"bad capacity number", head + "node c capacity=lots\n", 4, "does not start with a number"},
		{"negative capacity", head + "node c capacity=-1GiB\n", 4, "does not start with a number"},
		{"huge capacity", head + "node c capacity=9000000PiB\n", 4, "too large"},
		{"repeated key", head + "node c zone=x zone=y\n", 4, "\"zone\" given twice"},
		{"not key=value", head + "node c role\n", 4, "not key=value"},
		{"empty value", head + "link a -> b delay=\n", 4, "not key=value"},
		{"unknown link key", head + "link a -> b speed=1Mbit\n", 4, "unknown link key \"speed\""},
		{"no arrow", head + "link a b delay=1ms\n", 4, "FROM -> TO"},
		{"arrow without spaces", head + "link a->b\n", 4, "FROM -> TO"},
		{"unknown node in rule", head + "link a -> c delay=1ms\nnode d\n", 4, "\"c\", which is not a node"},
		{"unknown node in rule before", "scenario x\nlink q <-> * delay=1ms\nnode a\n", 2, "\"q\", which is not a node"},
		{"self link", head + "link a <-> a\n", 4, "to itself"},
		{"bad delay", head + "link a -> b delay=3\n", 4, "delay: \"3\" is not a duration"},
		{"negative delay", head + "default delay=-1ms\n", 4, "negative"},
		{"bad jitter", head + "link a -> b jitter=fast\n", 4, "jitter"},
		{"loss without percent", head + "link a -> b loss=5\n", 4, "needs a % sign"},
		{"loss over 100", head + "link a -> b loss=101%\n", 4, "more than 100%"},
		{"bad corr", head + "link a -> b corr=x%\n", 4, "corr"},
		{"bad reorder", head + "link a -> b reorder=1%%\n", 4, "not a percentage"},
		{"Mbps", head + "link a -> b bw=10Mbps\n", 4, "unknown unit \"Mbps\""},
		{"bw without unit", head + "link a -> b bw=10\n", 4, "has no unit"},
		{"bw below a byte", head + "link a -> b bw=1bit\n", 4, "less than 1 byte/s"},
		{"bw exponent", head + "link a -> b bw=1e9Gbit\n", 4, "unknown unit"},
		{"bw huge", head + "link a -> b bw=99999999999999999999Gbit\n", 4, "too large"},
		{"bw kilo bytes in binary", head + "link a -> b bw=1KiB\n", 4, "unknown unit \"KiB\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", s)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			pe, ok := errors.AsType[*ParseError](err)
			if !ok {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if pe.Line != tc.line {
				t.Errorf("error %q: line %d, want %d", err, pe.Line, tc.line)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), "scenario: line ") {
				t.Errorf("error %q does not start with the line", err)
			}
		})
	}
}

func TestFormatInvalid(t *testing.T) {
	valid := func() *Scenario { return mustParse(t, "scenario x\nnode a\nnode b\nlink a -> b delay=1ms\n") }
	for _, tc := range []struct {
		name  string
		spoil func(s *Scenario)
	}{
		{"no name", func(s *Scenario) { s.Name = "" }},
		{"description with #", func(s *Scenario) { s.Description = "issue #3" }},
		{"description with newline", func(s *Scenario) { s.Description = "a\nnode z" }},
		{"description with spaces", func(s *Scenario) { s.Description = " a" }},
		{"no nodes", func(s *Scenario) { s.Nodes, s.Rules = nil, nil }},
		{"no role", func(s *Scenario) { s.Nodes[0].Role = "" }},
		{"bad zone", func(s *Scenario) { s.Nodes[0].Zone = "a b" }},
		{"negative capacity", func(s *Scenario) { s.Nodes[0].Capacity = -1 }},
		{"duplicate node", func(s *Scenario) { s.Nodes[1].Name = "a" }},
		{"unknown node", func(s *Scenario) { s.Rules[0].To = "c" }},
		{"self link", func(s *Scenario) { s.Rules[0].To = "a" }},
		{"loss", func(s *Scenario) { s.Rules[0].Link.Loss = 1.5 }},
		{"NaN", func(s *Scenario) { s.Default.Reorder = math.NaN() }},
		{"negative jitter", func(s *Scenario) { s.Default.Jitter = -1 }},
		{"negative bandwidth", func(s *Scenario) { s.Rules[0].Link.Bandwidth = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.spoil(s)
			var b bytes.Buffer
			err := s.Format(&b)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Format: %v, want ErrInvalid", err)
			}
			if b.Len() != 0 {
				t.Errorf("Format wrote %q", b.String())
			}
		})
	}
}

func TestLinkPrecedence(t *testing.T) {
	s := mustParse(t, `scenario p
node a
node b
node c
node d
default delay=1ms
link a -> c delay=5ms
link * -> c delay=3ms
link a -> * delay=4ms
link * -> * delay=2ms
link a -> c delay=6ms   # later, same specificity: wins
link * -> * delay=7ms   # wins over the other * -> *
link d -> * delay=8ms
link * -> b delay=9ms
`)
	for _, tc := range []struct {
		from, to string
		want     time.Duration
	}{
		{"a", "c", 6}, // exact pair
		{"a", "b", 4}, // (from, *) beats (*, to)
		{"a", "d", 4},
		{"b", "c", 3}, // (*, to) beats (*, *)
		{"d", "c", 8}, // (from, *) beats (*, to) even when earlier
		{"d", "b", 8},
		{"c", "b", 9},
		{"b", "a", 7}, // the last (*, *)
		{"c", "d", 7},
		{"x", "y", 7}, // not nodes: (*, *)
	} {
		if got := s.Link(tc.from, tc.to).Delay; got != tc.want*time.Millisecond {
			t.Errorf("Link(%s, %s).Delay = %v, want %vms", tc.from, tc.to, got, int(tc.want))
		}
	}
	s = mustParse(t, "scenario p\nnode a\nnode b\ndefault delay=1ms loss=1%\nlink b -> a delay=2ms\n")
	if got, want := s.Link("a", "b"), (linkemu.Link{Delay: time.Millisecond, Loss: 0.01}); got != want {
		t.Errorf("Link(a, b) = %+v, want the default %+v", got, want)
	}
	if got, want := s.Link("b", "a"), (linkemu.Link{Delay: 2 * time.Millisecond, Loss: 0.01}); got != want {
		t.Errorf("Link(b, a) = %+v, want %+v", got, want)
	}
}

// pairs calls f for every ordered pair of distinct nodes.
func pairs(s *Scenario, f func(a, b Node)) {
	for _, a := range s.Nodes {
		for _, b := range s.Nodes {
			if a.Name != b.Name {
				f(a, b)
			}
		}
	}
}

func TestAddDelay(t *testing.T) {
	for _, tc := range []struct {
		scenario, from, to string
		d                  time.Duration
		changed            int // ordered pairs
	}{
		{"kreonet", RoleGateway, RoleStorage, 10 * time.Millisecond, 20},
		{"kreonet", RoleStorage, RoleGateway, 50 * time.Millisecond, 20},
		{"kreonet", RoleStorage, RoleStorage, time.Millisecond, 90},
		{"qmpsu", RoleClient, RoleStorage, 5 * time.Millisecond, 40},
		{"qmpsu", RoleClient, RoleStorage, -time.Hour, 40},
		{"qmpsu", RoleClient, RoleClient, time.Millisecond, 2},
		{"lan", RoleGateway, RoleStorage, time.Millisecond, 0},
	} {
		t.Run(tc.scenario+"/"+tc.from+"-"+tc.to+"/"+tc.d.String(), func(t *testing.T) {
			s := mustBuiltin(t, tc.scenario)
			before := s.Clone()
			c := s.AddDelay(tc.from, tc.to, tc.d)
			if !reflect.DeepEqual(s, before) {
				t.Fatal("AddDelay modified its receiver")
			}
			changed := 0
			pairs(s, func(a, b Node) {
				old, got := s.Link(a.Name, b.Name), c.Link(a.Name, b.Name)
				want := old
				if a.Role == tc.from && b.Role == tc.to || a.Role == tc.to && b.Role == tc.from {
					want.Delay = max(0, old.Delay+tc.d)
					changed++
				}
				if got != want {
					t.Errorf("%s -> %s: %+v, want %+v", a.Name, b.Name, got, want)
				}
			})
			if changed != tc.changed {
				t.Errorf("%d pairs between the roles, want %d", changed, tc.changed)
			}
			if tc.scenario == "qmpsu" && len(c.Rules) != len(s.Rules) {
				t.Errorf("%d rules, want the %d exact rules updated in place", len(c.Rules), len(s.Rules))
			}
			roundTrip(t, c)
		})
	}
	k := mustBuiltin(t, "kreonet")
	if c := k.AddDelay(RoleGateway, RoleStorage, 0); !reflect.DeepEqual(c, k) {
		t.Errorf("AddDelay(0) changed the scenario: %+v", c)
	}
	// 20 ms added: the proxy's RTT to a storage node is 2·(0.25+20) ms.
	c := k.AddDelay(RoleGateway, RoleStorage, 20*time.Millisecond)
	if rtt := c.Link("proxy", "s03").Delay + c.Link("s03", "proxy").Delay; rtt != 40500*time.Microsecond {
		t.Errorf("proxy-s03 RTT %v, want 40.5ms", rtt)
	}
}

// quantile is numpy's default (linear) quantile.
func quantile(xs []float64, p float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	pos := float64(len(xs)-1) * p
	i := int(pos)
	if i+1 >= len(xs) {
		return xs[len(xs)-1]
	}
	return xs[i] + (xs[i+1]-xs[i])*(pos-float64(i))
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func near(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if math.Abs(got-want) > tolerance*want {
		t.Errorf("%s = %.3f, want %.3f within %.0f%%", what, got, want, tolerance*100)
	}
}

// rtt is the round-trip time between two nodes.
func rtt(s *Scenario, a, b string) time.Duration {
	return s.Link(a, b).Delay + s.Link(b, a).Delay
}

func toMbit(b int64) float64 { return float64(b) * 8 / 1e6 }

func TestQMPSU(t *testing.T) {
	s := mustBuiltin(t, "qmpsu")
	storage := s.Role(RoleStorage)
	if len(storage) != 10 {
		t.Fatalf("%d storage nodes, want 10", len(storage))
	}
	zones := make(map[string]bool)
	for _, n := range storage {
		if n.Zone == "" || zones[n.Zone] {
			t.Errorf("node %s: zone %q empty or shared", n.Name, n.Zone)
		}
		zones[n.Zone] = true
	}
	var clients []string
	for _, n := range s.Role(RoleClient) {
		clients = append(clients, n.Name)
	}
	if !slices.Equal(clients, []string{"best", "worst"}) {
		t.Fatalf("clients %v, want [best worst]", clients)
	}

	// Each node's own figures, recovered from the links: its throughput is
	// its best link's, and with pair RTTs the mean of the two nodes' RTTs,
	// a node's RTT is RTT(i,best) + RTT(i,worst) - RTT(best,worst).
	var mbits, rtts []float64
	for _, i := range storage {
		var bw int64
		for _, j := range s.Nodes {
			if j.Name != i.Name {
				bw = max(bw, s.Link(i.Name, j.Name).Bandwidth)
			}
		}
		r := rtt(s, i.Name, "best") + rtt(s, i.Name, "worst") - rtt(s, "best", "worst")
		mbits = append(mbits, toMbit(bw))
		rtts = append(rtts, float64(r)/1e6)
	}
	t.Logf("throughput %v Mbit/s, RTT %v ms", mbits, rtts)
	near(t, "mean throughput", mean(mbits), 17.4, 0.02)
	near(t, "throughput lower quartile", quantile(mbits, 0.25), 4.7, 0.02)
	near(t, "mean RTT", mean(rtts), 9.2, 0.02)
	near(t, "RTT upper quartile", quantile(rtts, 0.75), 14.3, 0.02)

	pairs(s, func(a, b Node) {
		l := s.Link(a.Name, b.Name)
		if l != s.Link(b.Name, a.Name) {
			t.Errorf("%s -> %s differs from the way back", a.Name, b.Name)
		}
		if l.Jitter != l.Delay/10 || l.Loss != 0 || l.Bandwidth == 0 || l.Delay == 0 {
			t.Errorf("%s -> %s: %+v, want delay, bandwidth, 10%% jitter, no loss", a.Name, b.Name, l)
		}
	})
	// best's link to any storage node is at least as good as any other
	// node's link to it, worst's at most as good.
	for _, j := range storage {
		lb, lw := s.Link("best", j.Name), s.Link("worst", j.Name)
		for _, i := range storage {
			if i.Name == j.Name {
				continue
			}
			li := s.Link(i.Name, j.Name)
			if lb.Bandwidth < li.Bandwidth || lb.Delay > li.Delay {
				t.Errorf("best -> %s (%v, %v) worse than %s -> %s (%v, %v)", j.Name, lb.Bandwidth, lb.Delay, i.Name, j.Name, li.Bandwidth, li.Delay)
			}
			if lw.Bandwidth > li.Bandwidth || lw.Delay < li.Delay {
				t.Errorf("worst -> %s (%v, %v) better than %s -> %s (%v, %v)", j.Name, lw.Bandwidth, lw.Delay, i.Name, j.Name, li.Bandwidth, li.Delay)
			}
		}
	}
}

func TestAzure(t *testing.T) {
	s := mustBuiltin(t, "azure")
	if n := len(s.Role(RoleStorage)); n != 20 {
		t.Fatalf("%d storage nodes, want 20", n)
	}
	for _, name := range []string{"local", "remote"} {
		if n, ok := s.Node(name); !ok || n.Role != RoleClient {
			t.Errorf("node %s: %+v, want a client", name, n)
		}
	}
	bws, rtts := make(map[int64]bool), make(map[time.Duration]bool)
	pairs(s, func(a, b Node) {
		l := s.Link(a.Name, b.Name)
		r := rtt(s, a.Name, b.Name)
		if l.Jitter != l.Delay/10 || l.Loss != 0 {
			t.Errorf("%s -> %s: %+v, want 10%% jitter, no loss", a.Name, b.Name, l)
		}
		if a.Name == "remote" || b.Name == "remote" {
			if l.Bandwidth < mbit(7) || l.Bandwidth > mbit(8) {
				t.Errorf("%s -> %s: %.2f Mbit/s, want 7-8", a.Name, b.Name, toMbit(l.Bandwidth))
			}
			if r < ms(56.3) || r > ms(60) {
				t.Errorf("%s -> %s: RTT %v, want 56.3-60ms", a.Name, b.Name, r)
			}
			return
		}
		if l.Bandwidth < mbit(220) || l.Bandwidth > mbit(230) {
			t.Errorf("%s -> %s: %.2f Mbit/s, want 220-230", a.Name, b.Name, toMbit(l.Bandwidth))
		}
		if r < time.Millisecond || r > 2*time.Millisecond {
			t.Errorf("%s -> %s: RTT %v, want 1-2ms", a.Name, b.Name, r)
		}
		bws[l.Bandwidth], rtts[r] = true, true
	})
	if len(bws) < 10 || len(rtts) < 10 {
		t.Errorf("only %d throughputs and %d RTTs between VMs: not spread over the ranges", len(bws), len(rtts))
	}
}

func TestKreonetAndLAN(t *testing.T) {
	k := mustBuiltin(t, "kreonet")
	if g := k.Role(RoleGateway); len(g) != 1 || g[0].Name != "proxy" {
		t.Errorf("gateways %+v, want proxy", g)
	}
	if n := len(k.Role(RoleStorage)); n != 10 {
		t.Errorf("%d storage nodes, want 10", n)
	}
	pairs(k, func(a, b Node) {
		if l := k.Link(a.Name, b.Name); l != (linkemu.Link{Delay: 250 * time.Microsecond, Bandwidth: 125_000_000}) {
			t.Errorf("kreonet %s -> %s: %+v", a.Name, b.Name, l)
		}
	})
	l := mustBuiltin(t, "lan")
	if len(l.Role(RoleStorage)) != 10 || len(l.Role(RoleClient)) != 1 {
		t.Errorf("lan nodes %+v", l.Nodes)
	}
	pairs(l, func(a, b Node) {
		if got := l.Link(a.Name, b.Name); got != (linkemu.Link{}) {
			t.Errorf("lan %s -> %s: %+v, want perfect", a.Name, b.Name, got)
		}
	})
}

func TestRoleNodeClone(t *testing.T) {
	s := mustBuiltin(t, "qmpsu")
	var names []string
	for _, n := range s.Role(RoleStorage) {
		names = append(names, n.Name)
	}
	if want := []string{"s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10"}; !slices.Equal(names, want) {
		t.Errorf("Role(storage) = %v, want %v", names, want)
	}
	if g := s.Role(RoleGateway); g != nil {
		t.Errorf("Role(gateway) = %v", g)
	}
	if _, ok := s.Node("nobody"); ok {
		t.Error("Node(nobody) found")
	}

	c := s.Clone()
	c.Nodes[0].Name = "changed"
	c.Rules[0].Link.Delay = time.Hour
	c.Rules = append(c.Rules[:1], Rule{From: "*", To: "*"})
	if !reflect.DeepEqual(s, mustBuiltin(t, "qmpsu")) {
		t.Error("changing a clone changed the original")
	}
	// Builtin returns a new copy each time.
	s.Nodes[0].Zone = "elsewhere"
	if mustBuiltin(t, "qmpsu").Nodes[0].Zone == "elsewhere" {
		t.Error("Builtin shares its scenario between calls")
	}
}

func TestApply(t *testing.T) {
	s := mustParse(t, `scenario apply
node a
node b
node c role=client
default bw=1Mbit
link a -> b loss=100%
link b -> a delay=150ms
`)
	addr := map[string]string{"a": "127.78.0.1:7946", "b": "127.78.0.2:7946", "c": "127.78.0.3:7946"}
	asked := make(map[string]int)
	net := linkemu.New(1)
	s.Apply(net, func(name string) string {
		asked[name]++
		return addr[name]
	})
	// Each node: its host limit, and the two ends of its four links.
	if want := map[string]int{"a": 5, "b": 5, "c": 5}; !reflect.DeepEqual(asked, want) {
		t.Errorf("host asked for %v, want %v", asked, want)
	}
	tr := make(map[string]*linkemu.Transport)
	for name, host := range addr {
		x, err := net.Transport(host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { x.Shutdown() })
		tr[name] = x
	}

	// a -> b loses everything.
	if _, err := tr["a"].WriteTo([]byte("lost"), addr["b"]); err != nil {
		t.Fatal(err)
	}
	if st := net.Stats(); st.DatagramsSent != 1 || st.DroppedLoss != 1 {
		t.Errorf("after a -> b: %+v, want the datagram lost", st)
	}
	// b -> a takes 150ms.
	sent := time.Now()
	if _, err := tr["b"].WriteTo([]byte("slow"), addr["a"]); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-tr["a"].PacketCh():
		if got := p.Timestamp.Sub(sent); got < 149*time.Millisecond || string(p.Buf) != "slow" {
			t.Errorf("b -> a: %q after %v, want \"slow\" after 150ms", p.Buf, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b -> a: nothing arrived")
	}
	// a -> c has the scenario's default link.
	if _, err := tr["a"].WriteTo([]byte("ok"), addr["c"]); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-tr["c"].PacketCh():
		if string(p.Buf) != "ok" {
			t.Errorf("a -> c: %q", p.Buf)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a -> c: nothing arrived")
	}

	// Every built-in applies, with names as hosts.
	for _, name := range Names() {
		mustBuiltin(t, name).Apply(linkemu.New(1), nil)
	}
}

func TestLoad(t *testing.T) {
	s, err := Load("azure")
	if err != nil || s.Name != "azure" {
		t.Fatalf("Load(azure): %v, %v", s, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "small.scn")
	if err := os.WriteFile(path, []byte(handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, mustParse(t, handWritten)) {
		t.Error("Load(path) differs from Parse of the file")
	}

	bad := filepath.Join(dir, "bad.scn")
	if err := os.WriteFile(bad, []byte("scenario x\nnode a\nnode a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if pe, ok := errors.AsType[*ParseError](err); !ok || pe.File != bad || pe.Line != 3 ||
		!strings.HasPrefix(err.Error(), "scenario: "+bad+":3: ") {
		t.Errorf("Load(bad): %v, want a ParseError at %s line 3", err, bad)
	}

	_, err = Load(filepath.Join(dir, "qmpsu2"))
	if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing): %v, want ErrNotFound and fs.ErrNotExist", err)
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		out  string
	}{
		{"17.4Mbit", 2_175_000, "17.4Mbit"},
		{"4.7mbit", 587_500, "4.7Mbit"},
		{"10Mbit/s", 1_250_000, "10Mbit"},
		{"1Gbit", 125_000_000, "1Gbit"},
		{"1.25GBIT", 156_250_000, "1.25Gbit"},
		{"1kbit", 125, "1kbit"},
		{"12bit", 2, "16bit"}, // 1.5 bytes/s rounds up
		{"8bit", 1, "8bit"},
		{"2.5MB", 2_500_000, "20Mbit"},
		{"100B/s", 100, "800bit"},
		{"3kB", 3000, "24kbit"},
		{"0", 0, "0"},
		{"0Mbit", 0, "0"},
	} {
		got, err := parseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseRate(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
		if s := formatRate(tc.want); s != tc.out {
			t.Errorf("formatRate(%d) = %q, want %q", tc.want, s, tc.out)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
		out  string
	}{
		{"50GiB", 50 << 30, "50GiB"},
		{"1.5TB", 1_500_000_000_000, "1.5TB"},
		{"12TB", 12e12, "12TB"},
		{"1.5KiB", 1536, "1536B"},
		{"4096", 4096, "4KiB"},
		{"4096B", 4096, "4KiB"},
		{"0", 0, "0B"},
		{"2PiB", 2 << 50, "2PiB"},
	} {
		got, err := parseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
		if s := formatSize(tc.want); s != tc.out {
			t.Errorf("formatSize(%d) = %q, want %q", tc.want, s, tc.out)
		}
	}
	for _, tc := range []struct {
		in   string
		want float64
		out  string
	}{
		{"0.5%", 0.005, "0.5%"},
		{"25%", 0.25, "25%"},
		{"100%", 1, "100%"},
		{"0.1%", 0.001, "0.1%"},
		{"33.3%", 0.333, "33.3%"},
		{"0", 0, "0%"},
		{"0%", 0, "0%"},
	} {
		got, err := parsePercent(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parsePercent(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
		if s := formatPercent(tc.want); s != tc.out {
			t.Errorf("formatPercent(%v) = %q, want %q", tc.want, s, tc.out)
		}
	}

	// Any value formats to text that parses back to it.
	rng := rand.New(rand.NewPCG(1, 2))
	percents := []float64{1e-300, math.SmallestNonzeroFloat64, math.Nextafter(0.1, 1), math.Nextafter(1, 0)}
	for range 2000 {
		percents = append(percents, rng.Float64(), math.Ldexp(rng.Float64(), -rng.IntN(60)))
	}
	for _, f := range percents {
		if g, err := parsePercent(formatPercent(f)); err != nil || g != f {
			t.Errorf("percent %v: formatted %q, parsed %v, %v", f, formatPercent(f), g, err)
		}
	}
	for range 2000 {
		b := rng.Int64N(1 << uint(rng.IntN(62)+1))
		if g, err := parseRate(formatRate(b)); err != nil || g != b {
			t.Errorf("rate %d: formatted %q, parsed %d, %v", b, formatRate(b), g, err)
		}
		if g, err := parseSize(formatSize(b)); err != nil || g != b {
			t.Errorf("size %d: formatted %q, parsed %d, %v", b, formatSize(b), g, err)
		}
	}
	for _, b := range []int64{math.MaxInt64, math.MaxInt64 / 8, math.MaxInt64/8 + 1} {
		if g, err := parseRate(formatRate(b)); err != nil || g != b {
			t.Errorf("rate %d: formatted %q, parsed %d, %v", b, formatRate(b), g, err)
		}
	}
}

// TestHostLimits: up= and down= on a node parse, format back, and come out
// of HostLimit; qmpsu's nodes are limited by their own throughput.
func TestHostLimits(t *testing.T) {
	s, err := Parse(strings.NewReader("scenario h\nnode a up=1Mbit down=2MB\nnode b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := s.HostLimit("a"); !ok || l.Up != 125_000 || l.Down != 2_000_000 {
		t.Errorf("HostLimit(a) = %+v, %v", l, ok)
	}
	if _, ok := s.HostLimit("b"); ok {
		t.Error("b has no limit, HostLimit says it has")
	}
	var b strings.Builder
	if err := s.Format(&b); err != nil {
		t.Fatal(err)
	}
	again, err := Parse(strings.NewReader(b.String()))
	if err != nil || !reflect.DeepEqual(again, s) {
		t.Errorf("round trip of host limits:\n%s\n%+v", b.String(), again)
	}
	if _, err := Parse(strings.NewReader("scenario h\nnode a up=fast\n")); err == nil {
		t.Error("up=fast parsed")
	}
	q, _ := Builtin("qmpsu")
	worst, _ := q.HostLimit("worst")
	best, _ := q.HostLimit("best")
	if worst.Up <= 0 || best.Up <= 20*worst.Up {
		t.Errorf("qmpsu host limits: best %+v, worst %+v", best, worst)
	}
}
