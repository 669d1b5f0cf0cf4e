package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// The roles a node may have.
const (
	RoleStorage = "storage" // holds shares
	RoleClient  = "client"  // reads and writes, holds nothing
	RoleGateway = "gateway" // a front end (S3, Swift, ...) where the workload runs
)

// Any, as the From or To of a [Rule], stands for every node.
const Any = "*"

// ErrInvalid is matched (with errors.Is) by every error of [Parse],
// [Load] for a file that does not parse, and [Scenario.Validate].
var ErrInvalid = errors.New("scenario: invalid scenario")

// Node is one host of a scenario.
type Node struct {
	Name     string // unique within the scenario
	Zone     string // failure domain (a building, a rack); "" is none
	Role     string // RoleStorage, RoleClient or RoleGateway
	Capacity int64  // bytes the node offers for storage; 0 is unknown
	// Up and Down limit everything the node sends and receives, in bytes
	// per second, whatever the peer (its radio's or cable's capacity; see
	// linkemu.HostLimit); 0 is unlimited.
	Up, Down int64
}

// Rule sets the link in one direction between the nodes it covers.
type Rule struct {
	From, To string // a node's name or Any
	Link     linkemu.Link
}

// Scenario describes an emulated network: its nodes and the links between
// them. See the package documentation for its text form.
type Scenario struct {
	Name        string
	Description string       // one line, no '#'
	Nodes       []Node       // in file order
	Default     linkemu.Link // the link of pairs no rule covers
	Rules       []Rule       // in file order; see Link for precedence
}

// Link returns the link from node from to node to: that of the most
// specific rule that covers the pair (from -> to, then from -> *, then
// * -> to, then * -> *), the last one of equal specificity, else Default.
// Names need not be nodes of s.
func (s *Scenario) Link(from, to string) linkemu.Link {
	l, rank := s.Default, 0
	for _, r := range s.Rules {
		k := 0
		switch {
		case r.From == from && r.To == to:
			k = 4
		case r.From == from && r.To == Any:
			k = 3
		case r.From == Any && r.To == to:
			k = 2
		case r.From == Any && r.To == Any:
			k = 1
		}
		if k > 0 && k >= rank {
			l, rank = r.Link, k
		}
	}
	return l
}

// Node returns the node of that name.
func (s *Scenario) Node(name string) (Node, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Role returns the nodes of a role, in file order.
func (s *Scenario) Role(role string) []Node {
	var nodes []Node
	for _, n := range s.Nodes {
		if n.Role == role {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// Clone returns a deep copy of s.
func (s *Scenario) Clone() *Scenario {
	c := *s
	c.Nodes = slices.Clone(s.Nodes)
	c.Rules = slices.Clone(s.Rules)
	return &c
}

// AddDelay returns a copy of s in which d is added to the delay of every
// link between a node of role fromRole and a node of role toRole, in both
// directions, as KREONET's experiment adds latency between the proxy
// (gateway) and the storage nodes. Other links, the jitter and the rest of
// each link are unchanged. A negative d takes delay away, down to 0. The
// copy has exact-pair rules for the links it changed: it updates the rule
// that gave such a link, or appends one. s itself is not modified.
func (s *Scenario) AddDelay(fromRole, toRole string, d time.Duration) *Scenario {
	c := s.Clone()
	if d == 0 {
		return c
	}
	exact := make(map[[2]string]int) // pair -> index of its last exact rule
	for i, r := range c.Rules {
		exact[[2]string{r.From, r.To}] = i
	}
	set := func(a, b Node) {
		l := s.Link(a.Name, b.Name)
		l.Delay = max(l.Delay+d, 0)
		if i, ok := exact[[2]string{a.Name, b.Name}]; ok {
			c.Rules[i].Link = l
			return
		}
		c.Rules = append(c.Rules, Rule{From: a.Name, To: b.Name, Link: l})
	}
	for i, a := range s.Nodes {
		for _, b := range s.Nodes[i+1:] {
			if a.Role == fromRole && b.Role == toRole || a.Role == toRole && b.Role == fromRole {
				set(a, b)
				set(b, a)
			}
		}
	}
	return c
}

// Apply sets the link of every ordered pair of distinct nodes of s on net,
// with net.SetLink(host(a), host(b), s.Link(a, b)). host maps a node's name
// to its emulated host address (an "ip:port" for linkemu); nil uses the
// name itself. Apply leaves net's default link alone.
func (s *Scenario) Apply(net *linkemu.Network, host func(name string) string) {
	if host == nil {
		host = func(name string) string { return name }
	}
	for _, a := range s.Nodes {
		net.SetHost(host(a.Name), linkemu.HostLimit{Up: a.Up, Down: a.Down})
		for _, b := range s.Nodes {
			if a.Name != b.Name {
				net.SetLink(host(a.Name), host(b.Name), s.Link(a.Name, b.Name))
			}
		}
	}
}

// HostLimit is the limit on all traffic of the node called name, and
// whether it has one.
func (s *Scenario) HostLimit(name string) (linkemu.HostLimit, bool) {
	n, ok := s.Node(name)
	if !ok || (n.Up == 0 && n.Down == 0) {
		return linkemu.HostLimit{}, false
	}
	return linkemu.HostLimit{Up: n.Up, Down: n.Down}, true
}

// Validate reports the first thing in s that its text form could not say
// or that Parse would refuse: a bad or duplicate name, an unknown role, a
// negative capacity, a link value out of range, a rule naming no node. The
// error matches ErrInvalid.
func (s *Scenario) Validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	if err := checkName(s.Name); err != nil {
		return invalid("scenario name: %v", err)
	}
	if err := checkDescription(s.Description); err != nil {
		return invalid("description: %v", err)
	}
	if len(s.Nodes) == 0 {
		return invalid("no nodes")
	}
	seen := make(map[string]bool)
	for _, n := range s.Nodes {
		if err := checkNode(n); err != nil {
			return invalid("node %q: %v", n.Name, err)
		}
		if seen[n.Name] {
			return invalid("node %q: defined twice", n.Name)
		}
		seen[n.Name] = true
	}
	if err := checkLink(s.Default); err != nil {
		return invalid("default: %v", err)
	}
	for _, r := range s.Rules {
		for _, end := range []string{r.From, r.To} {
			if end != Any && !seen[end] {
				return invalid("link %s -> %s: %q is not a node", r.From, r.To, end)
			}
		}
		if r.From == r.To && r.From != Any {
			return invalid("link %s -> %s: a node has no link to itself", r.From, r.To)
		}
		if err := checkLink(r.Link); err != nil {
			return invalid("link %s -> %s: %v", r.From, r.To, err)
		}
	}
	return nil
}

// checkName checks a scenario, node or zone name.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q: a name has only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

func checkDescription(d string) error {
	if strings.ContainsAny(d, "#\n\r") {
		return errors.New("has '#' or a line break")
	}
	if strings.TrimSpace(d) != d {
		return errors.New("starts or ends with white space")
	}
	return nil
}

func checkRole(role string) error {
	switch role {
	case RoleStorage, RoleClient, RoleGateway:
		return nil
	}
	return fmt.Errorf("unknown role %q (want %s, %s or %s)", role, RoleStorage, RoleClient, RoleGateway)
}

func checkNode(n Node) error {
	if err := checkName(n.Name); err != nil {
		return err
	}
	if err := checkRole(n.Role); err != nil {
		return err
	}
	if n.Zone != "" {
		if err := checkName(n.Zone); err != nil {
			return fmt.Errorf("zone %v", err)
		}
	}
	if n.Up < 0 || n.Down < 0 {
		return fmt.Errorf("negative up or down rate")
	}
	if n.Capacity < 0 {
		return fmt.Errorf("negative capacity %d", n.Capacity)
	}
	return nil
}

func checkLink(l linkemu.Link) error {
	switch {
	case l.Delay < 0:
		return fmt.Errorf("negative delay %v", l.Delay)
	case l.Jitter < 0:
		return fmt.Errorf("negative jitter %v", l.Jitter)
	case l.Bandwidth < 0:
		return fmt.Errorf("negative bandwidth %d", l.Bandwidth)
	}
	for _, p := range []struct {
		key string
		v   float64
	}{{"loss", l.Loss}, {"corr", l.LossCorr}, {"reorder", l.Reorder}} {
		if !(0 <= p.v && p.v <= 1) { // also refuses NaN
			return fmt.Errorf("%s %v is not within 0..1", p.key, p.v)
		}
	}
	return nil
}
