// Package volume keeps block volumes on the grid (layer 4, beside the file
// tree): a volume is a sized block device whose contents are immutable
// grid objects of ExtentSize bytes each (extents), and whose version is a
// map from extent index to the extent's read capability, kept as one
// record in a Catalog (the gateway's registry, set "volumes"): the
// capability of a base map, an immutable grid object listing the extents,
// and an overlay of at most MaxOverlay extents changed since (basemap.go).
//
// Writes go to a local write-back journal on the host that opened the
// volume (one file per volume under the state directory, bounded to a
// number of extents) and reach the grid as new extent objects when the
// volume is flushed, or when the journal is full; a partially written
// extent is read, patched and stored whole. Flush returns only once every
// extent written before it is stored on the grid with its happiness met
// and the new map is committed to the catalog. A volume opened again
// after its previous handle went away without a flush reads exactly what
// the last flush committed: the journal is a volatile write cache, like a
// disk's, and is discarded on open.
//
// Extents never written read as zeros without touching the grid, and an
// extent trimmed, zeroed, or flushed all zero is dropped from the map.
// Clones and snapshots copy the record only, whatever the volume's size:
// extents and base maps are immutable objects, so they are shared
// copy-on-write; a rollback copies a snapshot's record back, and a resize
// drops or adds extents at the end. An open volume
// keeps a bounded cache of decoded segments of its stored extents, keyed
// by capability, and reads ahead for sequential readers (cache.go). See
// docs/volumes.md.
package volume

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// ExtentSize is the size of an extent, the unit stored on the grid: 4 MiB
// (docs/volumes.md says why).
const ExtentSize = 4 << 20

// Sector is the granularity at which the journal tracks what was written;
// writes not aligned to it read the sectors they partly cover first.
const Sector = 512

// DefaultJournalExtents is how many extents a volume's journal holds
// dirty at most (64 MiB) before it stores them on the grid.
const DefaultJournalExtents = 16

// MaxSize bounds a volume's size (16 TiB).
const MaxSize = 16 << 40

const sectorsPerExtent = ExtentSize / Sector

// Errors of the package.
var (
	ErrNotFound = errors.New("volume: no such volume")
	ErrExists   = errors.New("volume: volume exists")
	ErrReadOnly = errors.New("volume: volume is read-only")
	ErrRange    = errors.New("volume: range outside the volume")
	ErrBadName  = errors.New("volume: invalid volume name")
	ErrBadSize  = errors.New("volume: invalid size")
	ErrClosed   = errors.New("volume: volume is closed")
)

// Catalog keeps the volumes' map records by name. The gateway's registry
// implements it (cmd/quilt); each Put replaces a record atomically.
type Catalog interface {
	// Get returns the record of name, or nil without error if there is
	// none.
	Get(ctx context.Context, name string) ([]byte, error)
	// Put stores the record of name, replacing any.
	Put(ctx context.Context, name string, body []byte) error
	// Delete removes the record of name; no error if there is none.
	Delete(ctx context.Context, name string) error
	// List returns every record by name.
	List(ctx context.Context) (map[string][]byte, error)
}

// Info describes a volume as its catalog record holds it.
type Info struct {
	Name string `json:"-"`
	// Size is the volume's size in bytes, a multiple of Sector.
	Size int64 `json:"size"`
	// Extent is the extent size the volume was made with.
	Extent int64 `json:"extent"`
	// ReadOnly marks a snapshot.
	ReadOnly bool `json:"readonly,omitempty"`
	// Origin is the volume this one was cloned or snapshotted from.
	Origin string `json:"origin,omitempty"`
	// Gen counts the commits of the map.
	Gen uint64 `json:"gen"`
	// Base is the read capability of the base map, a grid object listing
	// the extents stored when it was written (basemap.go); empty: none.
	Base string `json:"base,omitempty"`
	// Overlay maps the index of an extent changed since the base map to
	// its object's read capability, or to "" if it was dropped; at most
	// MaxOverlay entries. An index in neither reads as zeros.
	Overlay map[int64]string `json:"overlay,omitempty"`
	// Count is how many extents the whole map has (Stored says it for
	// both formats).
	Count int `json:"stored,omitempty"`
	// Extents is the whole map of a record of the old format, which had
	// no base map: read as such, replaced by a base map at the next
	// flush; nil in records of the current format.
	Extents map[int64]string `json:"extents,omitempty"`
}

// ParseRecord reads a volume's catalog record, as Manager does; a
// damaged record is an error naming the volume.
func ParseRecord(name string, raw []byte) (Info, error) { return parseInfo(name, raw) }

// Stored returns how many extents the volume has on the grid.
func (i Info) Stored() int {
	if i.Extents != nil {
		return len(i.Extents)
	}
	return i.Count
}

func parseInfo(name string, raw []byte) (Info, error) {
	var in Info
	if err := json.Unmarshal(raw, &in); err != nil {
		return Info{}, fmt.Errorf("volume %s: damaged record: %v", name, err)
	}
	if in.Extent != ExtentSize || in.Size <= 0 || in.Size > MaxSize || in.Size%Sector != 0 {
		return Info{}, fmt.Errorf("volume %s: damaged record: size %d, extent %d", name, in.Size, in.Extent)
	}
	n := extents(in.Size)
	if in.Extents != nil && (in.Base != "" || in.Overlay != nil) {
		return Info{}, fmt.Errorf("volume %s: damaged record: both a whole map and a base map", name)
	}
	if in.Base != "" {
		if _, err := codec.ParseReadCap(in.Base); err != nil {
			return Info{}, fmt.Errorf("volume %s: damaged record: base map: %v", name, err)
		}
	}
	if len(in.Overlay) > MaxOverlay || in.Count < 0 || int64(in.Count) > n {
		return Info{}, fmt.Errorf("volume %s: damaged record: overlay of %d, %d extents stored", name, len(in.Overlay), in.Count)
	}
	for _, em := range []map[int64]string{in.Extents, in.Overlay} {
		for idx, c := range em {
			if idx < 0 || idx >= n {
				return Info{}, fmt.Errorf("volume %s: damaged record: extent %d out of range", name, idx)
			}
			if c == "" && in.Overlay != nil {
				continue // dropped since the base map
			}
			if _, err := codec.ParseReadCap(c); err != nil {
				return Info{}, fmt.Errorf("volume %s: damaged record: extent %d: %v", name, idx, err)
			}
		}
	}
	in.Name = name
	return in, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// CheckName says whether name can name a volume: letters, digits and
// ".-_@", starting with a letter or digit, at most 128 bytes.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q (letters, digits and . _ - @, at most 128)", ErrBadName, name)
	}
	return nil
}

// Config configures a Manager.
type Config struct {
	// Catalog keeps the maps (required).
	Catalog Catalog
	// Objects stores and reads extents (required).
	Objects *object.Client
	// Params encode extents; default codec.DefaultParams().
	Params codec.Params
	// Happy is how many distinct nodes an extent must reach (required).
	Happy int
	// StateDir holds the journals (required).
	StateDir string
	// JournalExtents bounds each journal; default DefaultJournalExtents.
	JournalExtents int
	// ReadCache bounds the decoded extent data each open volume keeps for
	// reads, in bytes; default DefaultReadCache, negative for none.
	ReadCache int64
	// Overlay bounds the entries of a record's overlay before a commit
	// writes a new base map (basemap.go); default and at most
	// MaxOverlay.
	Overlay int
	// Leases keeps the writers' leases, one record per volume open for
	// writing, so that one Manager at a time writes a volume. Optional:
	// without it, Open takes no lease (for readers such as an export).
	Leases Catalog
	// LeaseTTL is how long a lease lasts without renewal; default
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// LeaseOwner, if set, names the writer lastingly (cmd/quilt: the host
	// and the journals' directory, which it locks): a live lease of the
	// same owner is of a Manager that is gone, restarted after a crash,
	// and is taken over at once. The caller guarantees one live Manager
	// per owner.
	LeaseOwner string
}

// Manager creates, lists, clones and opens volumes.
type Manager struct {
	cfg        Config
	holder, id string // in leases
	mu         sync.Mutex
	open       map[string]*Volume
	basesMu    sync.Mutex           // guards bases (not mu: Open holds mu while it reads one)
	bases      map[string]baseEntry // decoded base maps by capability
}

// New makes a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Catalog == nil || cfg.Objects == nil || cfg.StateDir == "" || cfg.Happy < 1 {
		return nil, errors.New("volume: Config needs Catalog, Objects, StateDir and Happy")
	}
	if cfg.Params.N == 0 {
		cfg.Params = codec.DefaultParams()
	}
	if cfg.JournalExtents <= 0 {
		cfg.JournalExtents = DefaultJournalExtents
	}
	if cfg.Overlay <= 0 || cfg.Overlay > MaxOverlay {
		cfg.Overlay = MaxOverlay
	}
	if cfg.ReadCache == 0 {
		cfg.ReadCache = DefaultReadCache
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("volume: state directory: %w", err)
	}
	holder, id := newLeaseID()
	return &Manager{cfg: cfg, holder: holder, id: id, open: map[string]*Volume{}, bases: map[string]baseEntry{}}, nil
}

// Create makes an empty volume of size bytes (a positive multiple of
// Sector). It stores nothing on the grid.
func (m *Manager) Create(ctx context.Context, name string, size int64) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if size <= 0 || size > MaxSize || size%Sector != 0 {
		return fmt.Errorf("%w: %d (a positive multiple of %d, at most %d)", ErrBadSize, size, Sector, int64(MaxSize))
	}
	return m.put(ctx, Info{Name: name, Size: size, Extent: ExtentSize}, true)
}

func (m *Manager) put(ctx context.Context, in Info, create bool) error {
	if create {
		raw, err := m.cfg.Catalog.Get(ctx, in.Name)
		if err != nil {
			return err
		}
		if raw != nil {
			return fmt.Errorf("%w: %s", ErrExists, in.Name)
		}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return m.cfg.Catalog.Put(ctx, in.Name, body)
}

// Stat returns the committed record of a volume.
func (m *Manager) Stat(ctx context.Context, name string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	raw, err := m.cfg.Catalog.Get(ctx, name)
	if err != nil {
		return Info{}, err
	}
	if raw == nil {
		return Info{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return parseInfo(name, raw)
}

// List returns every volume, by name. A damaged record is an error.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	recs, err := m.cfg.Catalog.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(recs))
	for name, raw := range recs {
		in, err := parseInfo(name, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Clone makes dst a copy of src's committed map (read-only if snapshot):
// no extent is copied, both share them, and the copy is of the record
// alone (the base map's capability and the overlay), so its cost does
// not depend on the volume's size. A volume of this Manager that is
// open is flushed first, so the copy holds what was written to it.
func (m *Manager) Clone(ctx context.Context, src, dst string, snapshot bool) error {
	if err := CheckName(dst); err != nil {
		return err
	}
	m.mu.Lock()
	v := m.open[src]
	m.mu.Unlock()
	if v != nil {
		if err := v.Flush(ctx); err != nil && !errors.Is(err, ErrClosed) {
			return err
		}
	}
	in, err := m.Stat(ctx, src)
	if err != nil {
		return err
	}
	in.Name, in.Origin, in.ReadOnly, in.Gen = dst, src, snapshot, 0
	return m.put(ctx, in, true)
}

// Rollback makes volume name read as its snapshot snap (a read-only
// volume whose origin is name) does: name's map becomes a copy of the
// snapshot's, size included, in one commit; no extent is copied. Writes
// not flushed are dropped. With Config.Leases it takes name's writer's
// lease for the time (ErrLeased if another Manager holds it); a volume
// this Manager has open is refused.
func (m *Manager) Rollback(ctx context.Context, name, snap string) error {
	s, err := m.Stat(ctx, snap)
	if err != nil {
		return err
	}
	if !s.ReadOnly || s.Origin != name {
		return fmt.Errorf("volume: %s is not a snapshot of %s", snap, name)
	}
	return m.replaceMap(ctx, name, func(v *Volume) (Info, error) {
		// The snapshot's record as it is: its base map is shared.
		in := v.info
		in.Size, in.Base, in.Overlay, in.Count, in.Extents = s.Size, s.Base, maps.Clone(s.Overlay), s.Count, maps.Clone(s.Extents)
		return in, nil
	})
}

// Resize changes volume name's size (a positive multiple of Sector). A
// volume made smaller loses its extents past the end, and the bytes of its
// new last extent past the end are zeroed, so that growing it again reads
// zeros there; one made larger reads zeros in what it gained. Leases and
// open volumes as for Rollback.
func (m *Manager) Resize(ctx context.Context, name string, size int64) error {
	if size <= 0 || size > MaxSize || size%Sector != 0 {
		return fmt.Errorf("%w: %d (a positive multiple of %d, at most %d)", ErrBadSize, size, Sector, int64(MaxSize))
	}
	return m.replaceMap(ctx, name, func(v *Volume) (Info, error) {
		if size < v.info.Size && size%ExtentSize != 0 {
			// Zero the tail of the new last extent (it may be
			// shared: zeroing stores it anew) and store it.
			end := min(v.info.Size, (size/ExtentSize+1)*ExtentSize)
			if err := v.zero(ctx, size, end-size); err != nil {
				return Info{}, err
			}
			if err := v.store(ctx); err != nil {
				return Info{}, err
			}
		}
		in := v.info
		in.Size = size
		cur := map[int64]string{}
		last := extents(size)
		for k, c := range v.cur {
			if k < last {
				cur[k] = c
			}
		}
		in, _, err := m.record(ctx, in, v.base, nil, cur)
		return in, err
	})
}

// replaceMap opens volume name alone (its lease taken, refused if this
// Manager has it open), drops its unflushed writes, and commits the map
// that change returns.
func (m *Manager) replaceMap(ctx context.Context, name string, change func(*Volume) (Info, error)) error {
	v, err := m.Open(ctx, name)
	if err != nil {
		return err
	}
	defer v.Close()
	m.mu.Lock()
	shared := v.refs > 1
	m.mu.Unlock()
	if shared {
		return fmt.Errorf("volume: %s is open", name)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.info.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, name)
	}
	in, err := change(v)
	if err != nil {
		return err
	}
	if v.lease != nil && !v.lease.valid() {
		return fmt.Errorf("%w: %s: the map is not committed", ErrLeaseLost, name)
	}
	in.Gen = v.info.Gen + 1
	base, cur, err := m.loadMap(ctx, in)
	if err != nil {
		return err
	}
	if err := m.put(ctx, in, false); err != nil {
		return fmt.Errorf("volume %s: commit: %w", name, err)
	}
	v.info, v.base, v.cur, v.over, v.chg = in, base, cur, maps.Clone(in.Overlay), in.Extents != nil
	for idx, s := range v.dirty {
		delete(v.dirty, idx)
		v.free = append(v.free, s.n)
	}
	return nil
}

// Remove deletes a volume's record. Its extents are not cancelled (clones
// may share them): their leases run out (docs/volumes.md).
func (m *Manager) Remove(ctx context.Context, name string) error {
	if _, err := m.Stat(ctx, name); err != nil {
		return err
	}
	m.mu.Lock()
	open := m.open[name] != nil
	m.mu.Unlock()
	if open {
		return fmt.Errorf("volume: %s is open", name)
	}
	return m.cfg.Catalog.Delete(ctx, name)
}

// Open opens a volume for reading and writing. Handles of one Manager to
// the same volume are one: each Open needs its Close. With Config.Leases,
// a writable volume's first Open takes its writer's lease (ErrLeased if
// another Manager holds it), renewed until the last Close.
func (m *Manager) Open(ctx context.Context, name string) (*Volume, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := m.open[name]; v != nil {
		v.refs++
		return v, nil
	}
	in, err := m.Stat(ctx, name)
	if err != nil {
		return nil, err
	}
	base, cur, err := m.loadMap(ctx, in)
	if err != nil {
		return nil, err
	}
	// A record of the old format is migrated at the first flush.
	v := &Volume{m: m, info: in, base: base, cur: cur, over: maps.Clone(in.Overlay), dirty: map[int64]*slot{}, refs: 1, chg: in.Extents != nil}
	if m.cfg.ReadCache > 0 {
		v.cache = newSegCache(m.cfg.ReadCache)
	}
	if !in.ReadOnly && m.cfg.Leases != nil {
		if v.lease, err = m.acquireLease(ctx, name); err != nil {
			return nil, err
		}
	}
	if !in.ReadOnly {
		// The journal of a previous handle holds writes never flushed:
		// they are discarded, as a crashed disk's cache.
		f, err := os.OpenFile(filepath.Join(m.cfg.StateDir, name+".journal"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			if v.lease != nil {
				v.lease.release()
			}
			return nil, fmt.Errorf("volume %s: journal: %w", name, err)
		}
		v.j = f
		for i := m.cfg.JournalExtents - 1; i >= 0; i-- {
			v.free = append(v.free, i)
		}
	}
	m.open[name] = v
	return v, nil
}

// Volume is an open volume. It is safe for concurrent use: reads run side
// by side, and each write, zeroing or flush runs alone.
type Volume struct {
	m     *Manager
	mu    sync.RWMutex // reads share it; writes, flushes and Close hold it alone
	refs  int
	info  Info             // as last committed
	base  map[int64]string // info's base map, decoded (shared: read only)
	cur   map[int64]string // the map as written (extents stored, not yet committed)
	over  map[int64]string // cur's differences from base, as Info.Overlay; nil in the old format
	dirty map[int64]*slot  // extents with writes in the journal
	free  []int            // free journal slots
	j     *os.File         // nil: read-only
	chg   bool             // cur differs from info.Extents
	err   error            // set when closed
	lease *lease           // the writer's lease, if the Manager keeps leases
	cache *segCache        // decoded segments of stored extents; nil: none
}

// slot is a dirty extent's place in the journal and which sectors of it
// were written.
type slot struct {
	n     int
	valid [sectorsPerExtent / 64]uint64
}

func (s *slot) has(i int64) bool { return s.valid[i/64]&(1<<(uint(i)%64)) != 0 }
func (s *slot) set(i int64)      { s.valid[i/64] |= 1 << (uint(i) % 64) }

// Name returns the volume's name.
func (v *Volume) Name() string { return v.info.Name }

// Size returns the volume's size in bytes.
func (v *Volume) Size() int64 { return v.info.Size }

// ReadOnly says whether the volume is a snapshot.
func (v *Volume) ReadOnly() bool { return v.info.ReadOnly }

// Info returns the volume's last committed record.
func (v *Volume) Info() Info {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.info
}

func (v *Volume) extLen(idx int64) int64 { return min(ExtentSize, v.info.Size-idx*ExtentSize) }

func (v *Volume) check(off, n int64) error {
	if v.err != nil {
		return v.err
	}
	if off < 0 || n < 0 || off > v.info.Size || n > v.info.Size-off {
		return fmt.Errorf("%w: %d+%d of %d", ErrRange, off, n, v.info.Size)
	}
	return nil
}

// Extents calls fn for consecutive runs covering [off, off+n), in order,
// each with its length and whether it is stored: an extent on the grid or
// with writes in the journal. The others (never written, or trimmed or
// zeroed whole) are holes and read as zeros without the grid. A run is at
// most an extent long; it is what NBD block status reports.
func (v *Volume) Extents(off, n int64, fn func(length int64, stored bool)) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if err := v.check(off, n); err != nil {
		return err
	}
	for end := off + n; off < end; {
		idx := off / ExtentSize
		k := min(end, (idx+1)*ExtentSize) - off
		_, stored := v.cur[idx]
		fn(k, stored || v.dirty[idx] != nil)
		off += k
	}
	return nil
}

// ReadAt fills p from offset off.
func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if err := v.check(off, int64(len(p))); err != nil {
		return err
	}
	ahead := v.cache != nil && v.cache.sequential(off, off+int64(len(p)))
	return v.read(ctx, p, off, ahead)
}

// read fills p from offset off; with ahead (a sequential reader), the
// extents it reads from the grid are fetched to their end into the read
// cache.
func (v *Volume) read(ctx context.Context, p []byte, off int64, ahead bool) error {
	for len(p) > 0 {
		idx, eoff := off/ExtentSize, off%ExtentSize
		n := min(int64(len(p)), ExtentSize-eoff)
		if err := v.readExtent(ctx, idx, eoff, p[:n], ahead); err != nil {
			return err
		}
		p, off = p[n:], off+n
	}
	return nil
}

// readExtent reads p from offset eoff of extent idx: written sectors from
// the journal, the others from the extent as stored (or zeros).
func (v *Volume) readExtent(ctx context.Context, idx, eoff int64, p []byte, ahead bool) error {
	s := v.dirty[idx]
	if s == nil {
		return v.readBase(ctx, idx, eoff, p, ahead)
	}
	end := eoff + int64(len(p))
	for pos := eoff; pos < end; {
		sec := pos / Sector
		inJ := s.has(sec)
		run := (sec + 1) * Sector
		for run < end && s.has(run/Sector) == inJ {
			run += Sector
		}
		run = min(run, end)
		q := p[pos-eoff : run-eoff]
		if inJ {
			if _, err := v.j.ReadAt(q, int64(s.n)*ExtentSize+pos); err != nil {
				return fmt.Errorf("volume %s: journal: %w", v.info.Name, err)
			}
		} else if err := v.readBase(ctx, idx, pos, q, ahead); err != nil {
			return err
		}
		pos = run
	}
	return nil
}

// readBase reads p from offset eoff of extent idx as stored on the grid:
// zeros, without a request, for an extent not stored. Through the read
// cache, whole segments are fetched (the codec decodes no less), and with
// ahead the rest of the extent too.
func (v *Volume) readBase(ctx context.Context, idx, eoff int64, p []byte, ahead bool) error {
	c, ok := v.cur[idx]
	if !ok {
		clear(p)
		return nil
	}
	rc, err := codec.ParseReadCap(c)
	if err != nil {
		return err
	}
	// The last extent of a volume since made larger is shorter than an
	// extent: past its object's end it reads zeros.
	if eoff >= rc.Size {
		clear(p)
		return nil
	}
	if eoff+int64(len(p)) > rc.Size {
		clear(p[rc.Size-eoff:])
		p = p[:rc.Size-eoff]
	}
	if v.cache != nil {
		ss := int64(rc.SegmentSize)
		err := v.cache.read(ctx, c, rc, eoff, p, ahead, func(ctx context.Context, from, to int64, w io.Writer) error {
			_, err := v.m.cfg.Objects.Get(ctx, rc, w, from*ss, min((to+1)*ss, rc.Size)-from*ss)
			return err
		})
		if err != nil {
			return fmt.Errorf("volume %s: extent %d: %w", v.info.Name, idx, err)
		}
		return nil
	}
	w := &fixedWriter{p: p}
	if _, err := v.m.cfg.Objects.Get(ctx, rc, w, eoff, int64(len(p))); err != nil {
		return fmt.Errorf("volume %s: extent %d: %w", v.info.Name, idx, err)
	}
	if w.n != len(p) {
		return fmt.Errorf("volume %s: extent %d: short read (%d of %d bytes)", v.info.Name, idx, w.n, len(p))
	}
	return nil
}

// fixedWriter writes into a slice and refuses more than it holds.
type fixedWriter struct {
	p []byte
	n int
}

func (w *fixedWriter) Write(b []byte) (int, error) {
	if len(b) > len(w.p)-w.n {
		return 0, io.ErrShortWrite
	}
	w.n += copy(w.p[w.n:], b)
	return len(b), nil
}

// WriteAt writes p at offset off into the journal; with fua it returns
// once the volume is flushed.
func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64, fua bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.check(off, int64(len(p))); err != nil {
		return err
	}
	if v.j == nil {
		return ErrReadOnly
	}
	if err := v.write(ctx, p, off); err != nil {
		return err
	}
	if fua {
		return v.flush(ctx)
	}
	return nil
}

func (v *Volume) write(ctx context.Context, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	end := off + int64(len(p))
	if off%Sector != 0 || end%Sector != 0 {
		// Widen to whole sectors, with what the edges hold now.
		start, aend := off/Sector*Sector, (end+Sector-1)/Sector*Sector
		buf := make([]byte, aend-start)
		if err := v.read(ctx, buf[:Sector], start, false); err != nil {
			return err
		}
		if err := v.read(ctx, buf[len(buf)-Sector:], aend-Sector, false); err != nil {
			return err
		}
		copy(buf[off-start:], p)
		p, off = buf, start
	}
	for len(p) > 0 {
		idx, eoff := off/ExtentSize, off%ExtentSize
		n := min(int64(len(p)), ExtentSize-eoff)
		s, err := v.slotFor(ctx, idx)
		if err != nil {
			return err
		}
		if _, err := v.j.WriteAt(p[:n], int64(s.n)*ExtentSize+eoff); err != nil {
			return fmt.Errorf("volume %s: journal: %w", v.info.Name, err)
		}
		for sec := eoff / Sector; sec < (eoff+n)/Sector; sec++ {
			s.set(sec)
		}
		p, off = p[n:], off+n
	}
	return nil
}

// slotFor returns extent idx's journal slot, storing the dirty extents on
// the grid first if the journal is full (they are committed at the next
// flush).
func (v *Volume) slotFor(ctx context.Context, idx int64) (*slot, error) {
	if s := v.dirty[idx]; s != nil {
		return s, nil
	}
	if len(v.free) == 0 {
		if err := v.store(ctx); err != nil {
			return nil, err
		}
	}
	s := &slot{n: v.free[len(v.free)-1]}
	v.free = v.free[:len(v.free)-1]
	v.dirty[idx] = s
	return s, nil
}

// storeWorkers is how many dirty extents store reads, encodes and uploads
// at once: an extent's store waits on the grid's nodes more than on the
// CPU, so several in flight keep both busy.
const storeWorkers = 4

// store puts every dirty extent on the grid as a new object (or drops it
// from the map if it is all zeros) and frees its slot, storeWorkers
// extents at once. Extents that fail to store stay dirty; the first
// error is returned.
func (v *Volume) store(ctx context.Context) error {
	idxs := make([]int64, 0, len(v.dirty))
	for idx := range v.dirty {
		idxs = append(idxs, idx)
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	type stored struct {
		rc   codec.ReadCap
		full []byte // nil: all zeros
		err  error
	}
	res := make([]stored, len(idxs))
	sem := make(chan struct{}, storeWorkers)
	var wg sync.WaitGroup
	// The workers only read the volume's maps and journal: v.mu is held
	// for writing by the caller, so nothing changes them meanwhile.
	for i, idx := range idxs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			full := make([]byte, v.extLen(idx))
			if err := v.readExtent(ctx, idx, 0, full, false); err != nil {
				res[i].err = err
				return
			}
			if allZero(full) {
				return
			}
			rc, _, err := v.m.cfg.Objects.Put(ctx, bytes.NewReader(full), int64(len(full)), v.m.cfg.Params, v.m.cfg.Happy)
			if err != nil {
				res[i].err = fmt.Errorf("volume %s: store extent %d: %w", v.info.Name, idx, err)
				return
			}
			res[i].rc, res[i].full = rc, full
		}()
	}
	wg.Wait()
	var first error
	for i, idx := range idxs {
		r := res[i]
		if r.err != nil {
			if first == nil {
				first = r.err
			}
			continue
		}
		if r.full == nil {
			v.setExtent(idx, "")
		} else {
			v.setExtent(idx, r.rc.String())
			if v.cache != nil {
				v.cache.put(v.cur[idx], r.rc, r.full)
			}
		}
		v.chg = true
		s := v.dirty[idx]
		delete(v.dirty, idx)
		v.free = append(v.free, s.n)
	}
	return first
}

// setExtent sets extent idx of the map as written to capability c, or
// drops it if c is "", and keeps the overlay in step.
func (v *Volume) setExtent(idx int64, c string) {
	if c == "" {
		delete(v.cur, idx)
	} else {
		v.cur[idx] = c
	}
	if v.info.Extents != nil {
		return // the old format: a base map is written at the next commit
	}
	if v.over == nil {
		v.over = map[int64]string{}
	}
	if b, ok := v.base[idx]; b == c || (!ok && c == "") {
		delete(v.over, idx)
	} else {
		v.over[idx] = c
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Flush stores every dirty extent on the grid and commits the map: when it
// returns nil, everything written before is durable.
func (v *Volume) Flush(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return v.err
	}
	if v.j == nil {
		return nil
	}
	return v.flush(ctx)
}

func (v *Volume) flush(ctx context.Context) error {
	if err := v.store(ctx); err != nil {
		return err
	}
	if !v.chg {
		return nil
	}
	if v.lease != nil && !v.lease.valid() {
		return fmt.Errorf("%w: %s: the map is not committed", ErrLeaseLost, v.info.Name)
	}
	in := v.info
	in.Gen++
	// The base map, if a new one is needed, is stored before the
	// record that names it is put.
	in, base, err := v.m.record(ctx, in, v.base, v.over, v.cur)
	if err != nil {
		return err
	}
	if err := v.m.put(ctx, in, false); err != nil {
		return fmt.Errorf("volume %s: commit: %w", v.info.Name, err)
	}
	v.info, v.base, v.over, v.chg = in, base, maps.Clone(in.Overlay), false
	return nil
}

// Zero makes [off, off+n) read as zeros (write-zeroes and trim): extents it
// covers whole are dropped from the map, the edges written with zeros.
func (v *Volume) Zero(ctx context.Context, off, n int64, fua bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.check(off, n); err != nil {
		return err
	}
	if v.j == nil {
		return ErrReadOnly
	}
	if err := v.zero(ctx, off, n); err != nil {
		return err
	}
	if fua {
		return v.flush(ctx)
	}
	return nil
}

func (v *Volume) zero(ctx context.Context, off, n int64) error {
	for end := off + n; off < end; {
		idx, eoff := off/ExtentSize, off%ExtentSize
		k := min(end-off, v.extLen(idx)-eoff)
		if eoff == 0 && k == v.extLen(idx) {
			if s := v.dirty[idx]; s != nil {
				delete(v.dirty, idx)
				v.free = append(v.free, s.n)
			}
			if _, ok := v.cur[idx]; ok {
				v.setExtent(idx, "")
				v.chg = true
			}
		} else if err := v.write(ctx, make([]byte, k), off); err != nil {
			return err
		}
		off += k
	}
	return nil
}

// Close releases the handle. The last Close of a Manager's handles drops
// what was written since the last Flush, as a crash would.
func (v *Volume) Close() error {
	m := v.m
	m.mu.Lock()
	defer m.mu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return nil
	}
	if v.refs--; v.refs > 0 {
		return nil
	}
	v.err = ErrClosed
	delete(m.open, v.info.Name)
	if v.j != nil {
		name := v.j.Name()
		v.j.Close()
		os.Remove(name)
	}
	if v.lease != nil {
		v.lease.release()
	}
	return nil
}
