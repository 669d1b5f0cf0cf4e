package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/object"
)

// Link estimates kept between commands. A quilt put or get measures its
// links to the nodes it talks to (object.Client.Links); a new process
// would start from nothing, placing its first upload by rendezvous
// alone, starting its first read without estimates, and unable to
// choose an upload helper automatically (--helper-auto). So the
// commands that store and read keep the estimates in
// $QUILT_HOME/links.json when they end, and the next command starts from
// them (object.Client.SeedLinks). Estimates of another grid, or older
// than linksMaxAge, are not used.

// linksMaxAge is how old kept estimates may be and still be used.
const linksMaxAge = 30 * 24 * time.Hour

// linksFile is $QUILT_HOME/links.json.
type linksFile struct {
	// Grid tells the grid the estimates are of, without naming its
	// secret: a value derived from it.
	Grid  string                `json:"grid"`
	Saved time.Time             `json:"saved"`
	Nodes map[string]linkRecord `json:"nodes"`
	// Downlink is the client's own downlink estimate
	// (object.Client.Downlink), bytes per second.
	Downlink float64 `json:"downlink_bytes_per_s,omitempty"`
}

// linkRecord is one node's kept estimate.
type linkRecord struct {
	Up    float64 `json:"up_bytes_per_s,omitempty"`
	Down  float64 `json:"down_bytes_per_s,omitempty"`
	RTTms float64 `json:"rtt_ms,omitempty"`
}

func linksPath() string { return filepath.Join(home(), "links.json") }

// gridTag is linksFile.Grid for the session's grid.
func (s *session) gridTag() string {
	h := sha256.Sum256(s.inv.Secret.Derive("quilt client link estimates v1"))
	return hex.EncodeToString(h[:8])
}

// loadLinks seeds the session's object client with the kept estimates,
// if there are any of its grid, recent enough. A missing or damaged
// file is no estimates.
func (s *session) loadLinks() {
	var f linksFile
	if ok, err := atomicfile.ReadJSON(linksPath(), &f); !ok || err != nil {
		return
	}
	if f.Grid != s.gridTag() || time.Since(f.Saved) > linksMaxAge {
		return
	}
	m := make(map[string]object.LinkEstimate, len(f.Nodes))
	for id, r := range f.Nodes {
		m[id] = object.LinkEstimate{Up: r.Up, Down: r.Down, RTT: time.Duration(r.RTTms * float64(time.Millisecond))}
	}
	s.objects.SeedLinks(m)
	s.objects.SeedDownlink(f.Downlink)
}

// saveLinks keeps the session's estimates (those it seeded from and
// those it measured) for the next command. Best effort: a failure to
// write loses only estimates.
func (s *session) saveLinks() {
	f := linksFile{Grid: s.gridTag(), Saved: time.Now().UTC(), Nodes: map[string]linkRecord{}, Downlink: s.objects.Downlink()}
	for id, e := range s.objects.Links() {
		if e.Up > 0 || e.Down > 0 || e.RTT > 0 {
			f.Nodes[id] = linkRecord{Up: e.Up, Down: e.Down, RTTms: float64(e.RTT) / float64(time.Millisecond)}
		}
	}
	if len(f.Nodes) == 0 {
		return
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return
	}
	if err := writeFileAtomic(linksPath(), append(b, '\n'), 0o600); err != nil {
		s.log.Debug("link estimates not kept", "err", err)
	}
}
