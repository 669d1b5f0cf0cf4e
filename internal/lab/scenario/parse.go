package scenario

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// ParseError is what is wrong with a scenario file, and where. It matches
// ErrInvalid.
type ParseError struct {
	File string // the file's path if known (Load), else ""
	Line int    // 1-based; 0 when the problem is the file as a whole
	Err  error
}

// Error returns "scenario: FILE:LINE: what", leaving out what is unknown.
func (e *ParseError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("scenario: %s:%d: %v", e.File, e.Line, e.Err)
	case e.File != "":
		return fmt.Sprintf("scenario: %s: %v", e.File, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("scenario: line %d: %v", e.Line, e.Err)
	}
	return "scenario: " + e.Err.Error()
}

// Unwrap returns ErrInvalid and the underlying error.
func (e *ParseError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// Parse reads a scenario in the text form described in the package
// documentation. Every error is a *ParseError.
func Parse(r io.Reader) (*Scenario, error) {
	p := &parser{s: new(Scenario), nodeLine: make(map[string]int)}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, &ParseError{Line: p.line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Line: p.line + 1, Err: err}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.s, nil
}

// Load returns the built-in scenario of that name (see Names), else the
// scenario in the file at that path.
func Load(nameOrPath string) (*Scenario, error) {
	if s, err := Builtin(nameOrPath); err == nil {
		return s, nil
	}
	f, err := os.Open(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is not one (%s) and not a file: %w",
			ErrNotFound, nameOrPath, strings.Join(Names(), ", "), err)
	}
	defer f.Close()
	s, err := Parse(f)
	if pe, ok := errors.AsType[*ParseError](err); ok {
		pe.File = nameOrPath
	}
	return s, err
}

// A link key's bit in spec.set.
const (
	keyDelay = 1 << iota
	keyJitter
	keyLoss
	keyCorr
	keyReorder
	keyBandwidth
)

// spec is a link line's keys: the values of those given.
type spec struct {
	l   linkemu.Link
	set int // key bits
}

// over returns base with the keys of sp.
func (sp spec) over(base linkemu.Link) linkemu.Link {
	l := base
	if sp.set&keyDelay != 0 {
		l.Delay = sp.l.Delay
	}
	if sp.set&keyJitter != 0 {
		l.Jitter = sp.l.Jitter
	}
	if sp.set&keyLoss != 0 {
		l.Loss = sp.l.Loss
	}
	if sp.set&keyCorr != 0 {
		l.LossCorr = sp.l.LossCorr
	}
	if sp.set&keyReorder != 0 {
		l.Reorder = sp.l.Reorder
	}
	if sp.set&keyBandwidth != 0 {
		l.Bandwidth = sp.l.Bandwidth
	}
	return l
}

// pending is a rule waiting for the end of the file, which may still
// define its nodes and the default link.
type pending struct {
	from, to string
	spec     spec
	line     int
}

type parser struct {
	s        *Scenario
	line     int
	named    bool // "scenario" seen
	descLine int
	defLine  int
	nodeLine map[string]int
	rules    []pending
}

func (p *parser) parseLine(text string) error {
	if i := strings.IndexByte(text, '#'); i >= 0 {
		text = text[:i]
	}
	f := strings.Fields(text)
	if len(f) == 0 {
		return nil
	}
	if !p.named && f[0] != "scenario" {
		return fmt.Errorf("the first directive must be \"scenario NAME\", not %q", f[0])
	}
	switch f[0] {
	case "scenario":
		if p.named {
			return errors.New("a second scenario directive")
		}
		if len(f) != 2 {
			return errors.New("want \"scenario NAME\"")
		}
		if err := checkName(f[1]); err != nil {
			return fmt.Errorf("scenario name: %w", err)
		}
		p.s.Name, p.named = f[1], true
	case "description":
		if p.descLine != 0 {
			return fmt.Errorf("a second description (the first is on line %d)", p.descLine)
		}
		_, d, _ := strings.Cut(strings.TrimSpace(text), "description")
		p.s.Description, p.descLine = strings.TrimSpace(d), p.line
	case "node":
		return p.parseNode(f[1:])
	case "default":
		if p.defLine != 0 {
			return fmt.Errorf("a second default (the first is on line %d)", p.defLine)
		}
		sp, err := parseSpec(f[1:])
		if err != nil {
			return err
		}
		p.s.Default, p.defLine = sp.over(linkemu.Link{}), p.line
	case "link":
		return p.parseLink(f[1:])
	default:
		return fmt.Errorf("unknown directive %q (want scenario, description, node, default or link)", f[0])
	}
	return nil
}

// parseKeys splits key=value words, refusing repeated keys.
func parseKeys(words []string, each func(key, value string) error) error {
	seen := make(map[string]bool)
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("%q is not key=value", w)
		}
		if seen[k] {
			return fmt.Errorf("key %q given twice", k)
		}
		seen[k] = true
		if err := each(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) parseNode(f []string) error {
	if len(f) == 0 {
		return errors.New("want \"node NAME [role=ROLE] [zone=ZONE] [capacity=SIZE] [up=RATE] [down=RATE]\"")
	}
	n := Node{Name: f[0], Role: RoleStorage}
	if n.Name == Any {
		return errors.New("a node may not be named \"*\"")
	}
	if err := checkName(n.Name); err != nil {
		return fmt.Errorf("node name: %w", err)
	}
	if l, ok := p.nodeLine[n.Name]; ok {
		return fmt.Errorf("node %q is already defined on line %d", n.Name, l)
	}
	err := parseKeys(f[1:], func(k, v string) error {
		switch k {
		case "role":
			if err := checkRole(v); err != nil {
				return err
			}
			n.Role = v
		case "zone":
			if err := checkName(v); err != nil {
				return fmt.Errorf("zone: %w", err)
			}
			n.Zone = v
		case "capacity":
			c, err := parseSize(v)
			if err != nil {
				return fmt.Errorf("capacity: %w", err)
			}
			n.Capacity = c
		case "up", "down":
			r, err := parseRate(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if k == "up" {
				n.Up = r
			} else {
				n.Down = r
			}
		default:
			return fmt.Errorf("unknown node key %q (want role, zone, capacity, up or down)", k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	p.nodeLine[n.Name] = p.line
	p.s.Nodes = append(p.s.Nodes, n)
	return nil
}

func (p *parser) parseLink(f []string) error {
	if len(f) < 3 || f[1] != "->" && f[1] != "<->" {
		return errors.New("want \"link FROM -> TO [KEY=VALUE ...]\" or \"link FROM <-> TO ...\", with spaces around the arrow")
	}
	from, arrow, to := f[0], f[1], f[2]
	for _, end := range []string{from, to} {
		if end == Any {
			continue
		}
		if err := checkName(end); err != nil {
			return fmt.Errorf("link end: %w", err)
		}
	}
	if from == to && from != Any {
		return fmt.Errorf("link %s %s %s: a node has no link to itself", from, arrow, to)
	}
	sp, err := parseSpec(f[3:])
	if err != nil {
		return fmt.Errorf("link %s %s %s: %w", from, arrow, to, err)
	}
	p.rules = append(p.rules, pending{from, to, sp, p.line})
	if arrow == "<->" {
		p.rules = append(p.rules, pending{to, from, sp, p.line})
	}
	return nil
}

// parseSpec parses link keys.
func parseSpec(words []string) (spec, error) {
	var sp spec
	err := parseKeys(words, func(k, v string) error {
		var err error
		switch k {
		case "delay":
			sp.l.Delay, err = parseDuration(v)
			sp.set |= keyDelay
		case "jitter":
			sp.l.Jitter, err = parseDuration(v)
			sp.set |= keyJitter
		case "loss":
			sp.l.Loss, err = parsePercent(v)
			sp.set |= keyLoss
		case "corr":
			sp.l.LossCorr, err = parsePercent(v)
			sp.set |= keyCorr
		case "reorder":
			sp.l.Reorder, err = parsePercent(v)
			sp.set |= keyReorder
		case "bw":
			sp.l.Bandwidth, err = parseRate(v)
			sp.set |= keyBandwidth
		default:
			return fmt.Errorf("unknown link key %q (want delay, jitter, loss, corr, reorder or bw)", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		return nil
	})
	return sp, err
}

// finish checks what needs the whole file and resolves the rules.
func (p *parser) finish() error {
	if !p.named {
		return &ParseError{Err: errors.New("empty: no \"scenario NAME\" line")}
	}
	if len(p.s.Nodes) == 0 {
		return &ParseError{Err: errors.New("no nodes")}
	}
	for _, r := range p.rules {
		for _, end := range []string{r.from, r.to} {
			if _, ok := p.nodeLine[end]; !ok && end != Any {
				return &ParseError{Line: r.line, Err: fmt.Errorf("link names %q, which is not a node", end)}
			}
		}
		p.s.Rules = append(p.s.Rules, Rule{From: r.from, To: r.to, Link: r.spec.over(p.s.Default)})
	}
	return nil
}
