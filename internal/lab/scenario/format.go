package scenario

import (
	"io"
	"strings"

	"github.com/quilt-grid/quilt/internal/linkemu"
)

// Format writes s in the text form that Parse reads; Parse of the output
// gives a Scenario equal to s. It returns the error of Validate if s is not
// valid, else the first write error.
func (s *Scenario) Format(w io.Writer) error {
	if err := s.Validate(); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("scenario " + s.Name + "\n")
	if s.Description != "" {
		b.WriteString("description " + s.Description + "\n")
	}
	b.WriteString("\n")
	for _, n := range s.Nodes {
		b.WriteString("node " + n.Name + " role=" + n.Role)
		if n.Zone != "" {
			b.WriteString(" zone=" + n.Zone)
		}
		if n.Capacity != 0 {
			b.WriteString(" capacity=" + formatSize(n.Capacity))
		}
		if n.Up != 0 {
			b.WriteString(" up=" + formatRate(n.Up))
		}
		if n.Down != 0 {
			b.WriteString(" down=" + formatRate(n.Down))
		}
		b.WriteString("\n")
	}
	if s.Default != (linkemu.Link{}) {
		b.WriteString("\ndefault" + linkKeys(s.Default, linkemu.Link{}) + "\n")
	}
	if len(s.Rules) > 0 {
		b.WriteString("\n")
	}
	for i := 0; i < len(s.Rules); i++ {
		r := s.Rules[i]
		arrow := "->"
		if i+1 < len(s.Rules) && r.From != r.To && s.Rules[i+1] == (Rule{From: r.To, To: r.From, Link: r.Link}) {
			arrow = "<->"
			i++
		}
		b.WriteString("link " + r.From + " " + arrow + " " + r.To + linkKeys(r.Link, s.Default) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// linkKeys writes the keys in which l differs from base, each with a
// leading space.
func linkKeys(l, base linkemu.Link) string {
	var b strings.Builder
	if l.Delay != base.Delay {
		b.WriteString(" delay=" + formatDuration(l.Delay))
	}
	if l.Jitter != base.Jitter {
		b.WriteString(" jitter=" + formatDuration(l.Jitter))
	}
	if l.Bandwidth != base.Bandwidth {
		b.WriteString(" bw=" + formatRate(l.Bandwidth))
	}
	if l.Loss != base.Loss {
		b.WriteString(" loss=" + formatPercent(l.Loss))
	}
	if l.LossCorr != base.LossCorr {
		b.WriteString(" corr=" + formatPercent(l.LossCorr))
	}
	if l.Reorder != base.Reorder {
		b.WriteString(" reorder=" + formatPercent(l.Reorder))
	}
	return b.String()
}
