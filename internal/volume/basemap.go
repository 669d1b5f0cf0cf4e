package volume

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// A volume's map is kept in two parts, so that a clone or a snapshot,
// which copies the catalog record, costs the same for any size: the base
// map, an immutable grid object (encrypted and erasure-coded as extents
// are) listing every extent stored when it was written, and the overlay,
// in the record, of the extents changed since (a capability, or "" for an
// extent dropped). A commit whose overlay would pass MaxOverlay entries
// writes a new base map first and commits an empty overlay; the record
// is put only once the base map is stored with its happiness met, so no
// record names a base map that is not there. Base maps are never
// changed: clones and snapshots share them as they share extents.

// MaxOverlay bounds the entries of a record's overlay: a commit that
// would pass it writes a new base map instead (a 10 GiB volume's full map
// is 2,560 entries, about 250 KiB).
const MaxOverlay = 256

// baseMagic starts a base map object.
const baseMagic = "quilt volume map 1\n"

// maxBaseMap bounds a base map object's size: MaxSize's extents with
// capabilities of up to 1 KiB.
const maxBaseMap = MaxSize / ExtentSize * 1040

// encodeBase encodes map m: the magic, the count, then per extent by
// increasing index the index's delta and the capability, length-prefixed.
func encodeBase(m map[int64]string) []byte {
	idxs := slices.Sorted(maps.Keys(m))
	b := append([]byte(baseMagic), binary.AppendUvarint(nil, uint64(len(idxs)))...)
	prev := int64(-1)
	for _, idx := range idxs {
		b = binary.AppendUvarint(b, uint64(idx-prev))
		b = binary.AppendUvarint(b, uint64(len(m[idx])))
		b = append(b, m[idx]...)
		prev = idx
	}
	return b
}

// errBadBase is a base map object that does not decode.
var errBadBase = errors.New("damaged base map")

// decodeBase decodes a base map object of a volume of n extents.
func decodeBase(b []byte, n int64) (map[int64]string, error) {
	if !bytes.HasPrefix(b, []byte(baseMagic)) {
		return nil, fmt.Errorf("%w: no header", errBadBase)
	}
	b = b[len(baseMagic):]
	uv := func() (uint64, error) {
		x, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, fmt.Errorf("%w: truncated", errBadBase)
		}
		b = b[k:]
		return x, nil
	}
	count, err := uv()
	if err != nil {
		return nil, err
	}
	if count > uint64(n) {
		return nil, fmt.Errorf("%w: %d extents of %d", errBadBase, count, n)
	}
	m := make(map[int64]string, count)
	prev := int64(-1)
	for range count {
		d, err := uv()
		if err != nil {
			return nil, err
		}
		l, err := uv()
		if err != nil {
			return nil, err
		}
		if d == 0 || d > uint64(n) || uint64(prev)+d >= uint64(n) || l > uint64(len(b)) {
			return nil, fmt.Errorf("%w: bad entry after extent %d", errBadBase, prev)
		}
		prev += int64(d)
		c := string(b[:l])
		b = b[l:]
		if _, err := codec.ParseReadCap(c); err != nil {
			return nil, fmt.Errorf("%w: extent %d: %v", errBadBase, prev, err)
		}
		m[prev] = c
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes past the end", errBadBase, len(b))
	}
	return m, nil
}

// readBase reads and decodes the base map c of a volume of n extents.
func readBase(ctx context.Context, objects *object.Client, c string, n int64) (map[int64]string, error) {
	rc, err := codec.ParseReadCap(c)
	if err != nil {
		return nil, err
	}
	if rc.Size > maxBaseMap {
		return nil, fmt.Errorf("%w: %d bytes", errBadBase, rc.Size)
	}
	var buf bytes.Buffer
	if _, err := objects.Get(ctx, rc, &buf, 0, -1); err != nil {
		return nil, err
	}
	return decodeBase(buf.Bytes(), n)
}

// extents returns how many extents a volume of size bytes has.
func extents(size int64) int64 { return (size + ExtentSize - 1) / ExtentSize }

// compose returns the whole map of record in over its decoded base map.
func compose(in Info, base map[int64]string) map[int64]string {
	if in.Extents != nil { // a record of the old format holds it all
		return maps.Clone(in.Extents)
	}
	cur := maps.Clone(base)
	if cur == nil {
		cur = map[int64]string{}
	}
	for idx, c := range in.Overlay {
		if c == "" {
			delete(cur, idx)
		} else {
			cur[idx] = c
		}
	}
	return cur
}

// loadMap returns the decoded base map of in (nil if it has none) and its
// whole map. Only the base map is read from the grid.
func (m *Manager) loadMap(ctx context.Context, in Info) (base, cur map[int64]string, err error) {
	if in.Base != "" {
		if base, err = m.baseMap(ctx, in.Base, extents(in.Size)); err != nil {
			return nil, nil, fmt.Errorf("volume %s: base map: %w", in.Name, err)
		}
	}
	return base, compose(in, base), nil
}

// baseMap returns base map c, decoded, through the Manager's cache of the
// last few (clones of one image share one).
func (m *Manager) baseMap(ctx context.Context, c string, n int64) (map[int64]string, error) {
	m.basesMu.Lock()
	e, ok := m.bases[c]
	m.basesMu.Unlock()
	if ok && e.n == n {
		return e.m, nil
	}
	bm, err := readBase(ctx, m.cfg.Objects, c, n)
	if err != nil {
		return nil, err
	}
	m.cacheBase(c, baseEntry{m: bm, n: n})
	return bm, nil
}

// cacheBase keeps decoded base map c, dropping another if the cache is
// full.
func (m *Manager) cacheBase(c string, e baseEntry) {
	m.basesMu.Lock()
	defer m.basesMu.Unlock()
	if _, ok := m.bases[c]; !ok && len(m.bases) >= baseCache {
		for k := range m.bases { // any one: the cache is small
			delete(m.bases, k)
			break
		}
	}
	m.bases[c] = e
}

// baseCache bounds the decoded base maps a Manager keeps (each is
// shared, read-only, by the open volumes built on it).
const baseCache = 8

// baseEntry is a decoded base map, for volumes of n extents.
type baseEntry struct {
	m map[int64]string
	n int64
}

// record makes the record that commits map cur with the fields of in
// (size, name, ...) over base, the decoded base map of in.Base: cur's
// differences from base as the overlay, or, if they would be more than
// Config.Overlay, if in is of the old format, or if base has extents past
// the end, a new base map stored on the grid first. It returns the record
// and its base map. over, if not nil, is cur's differences from base, kept
// as cur changed (a flush: its cost is then that of the changes, not of
// the map); nil, they are computed (a resize).
func (m *Manager) record(ctx context.Context, in Info, base, over, cur map[int64]string) (Info, map[int64]string, error) {
	n := extents(in.Size)
	compact := in.Extents != nil
	if over == nil && !compact {
		over = map[int64]string{}
		for idx, c := range cur {
			if base[idx] != c {
				over[idx] = c
			}
		}
		for idx := range base {
			if idx >= n {
				compact = true
			} else if _, ok := cur[idx]; !ok {
				over[idx] = ""
			}
		}
	}
	in.Extents, in.Count = nil, len(cur)
	if !compact && len(over) <= m.cfg.Overlay {
		in.Overlay = maps.Clone(over)
		return in, base, nil
	}
	in.Overlay = nil
	if len(cur) == 0 {
		in.Base = ""
		return in, nil, nil
	}
	body := encodeBase(cur)
	rc, _, err := m.cfg.Objects.Put(ctx, bytes.NewReader(body), int64(len(body)), m.cfg.Params, m.cfg.Happy)
	if err != nil {
		return Info{}, nil, fmt.Errorf("volume %s: store base map: %w", in.Name, err)
	}
	in.Base = rc.String()
	base = maps.Clone(cur)
	m.cacheBase(in.Base, baseEntry{m: base, n: n})
	return in, base, nil
}

// References returns the read capabilities of every grid object that the
// volume records recs (by name, as Catalog.List returns them) refer to:
// each base map, the extents it lists and the extents of the overlays (of
// a record of the old format, its extents), each once, sorted. A base map
// shared by several records is read once. The gateway's lease renewal
// walk renews them (cmd/quilt). A record or base map that cannot be read
// is an error, returned with the references of all the others; a base map
// not read is still named.
func References(ctx context.Context, objects *object.Client, recs map[string][]byte) ([]string, error) {
	set := map[string]bool{}
	bases := map[string]int64{} // base map → the most extents of a volume on it
	var first error
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		in, err := parseInfo(name, recs[name])
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		for _, c := range in.Extents {
			set[c] = true
		}
		for _, c := range in.Overlay {
			if c != "" {
				set[c] = true
			}
		}
		if in.Base != "" {
			set[in.Base] = true
			bases[in.Base] = max(bases[in.Base], extents(in.Size))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(bases)) {
		bm, err := readBase(ctx, objects, c, bases[c])
		if err != nil {
			first = cmp.Or(first, fmt.Errorf("volume: base map %.40s...: %w", c, err))
			continue
		}
		for _, e := range bm {
			set[e] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), first
}
