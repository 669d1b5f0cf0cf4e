package gateway

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Versions of objects (S3's bucket versioning).
//
// A bucket's versioning state is a bucket configuration ("versioning":
// Enabled or Suspended; none: never enabled). In the bucket's namespace
// the latest version of a key, when it is an object, stays where an
// unversioned bucket keeps it, at the key: listings, the file tree and
// reads of the current object are those of an unversioned bucket. Every
// other version (noncurrent objects, and every delete marker) is a record
// under a hidden name
//
//	versionSpace + esc(key) + "\x01\x01" + sortID
//
// where versionSpace is U+10FFFF (a code point no key may start with, and
// which sorts after every other key), esc doubles every \x01 of the key
// into \x01\x02 (so the separator sorts before anything a longer key can
// continue with, and a key's versions sort by key), and sortID is the
// version ID (16 hex digits of the inverted nanosecond time of the write,
// then 8 random hex digits: newest first) or, for the null version, the
// inverted time of its write and "null". So the versions of a key are one
// range of the namespace, newest first, and all versions of all keys sort
// by key as ListObjectVersions lists them.
//
// Invariant: if a key's latest version is an object, it is at the key and
// nowhere else; otherwise the key is absent and its latest version is the
// newest hidden record (a delete marker). Each change of versions is one
// commit of the namespace log (the new record and the moved one together),
// under the key's lock. The lease walk reads every record of the bucket,
// hidden ones included, so every version's grid objects stay alive until
// that version is deleted.

// Versioning states of a bucket ("" is never enabled).
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// NullVersion is the version ID of versions written while versioning was
// never enabled or suspended.
const NullVersion = "null"

// ErrNoVersion means the version asked for does not exist.
var ErrNoVersion = errors.New("gateway: no such version")

// ErrBadVersion means a version ID is not one the gateway makes.
var ErrBadVersion = errors.New("gateway: invalid version ID")

// ErrBadVersioning means a versioning state other than Enabled or
// Suspended.
var ErrBadVersioning = errors.New("gateway: versioning status must be Enabled or Suspended")

// DeleteMarkerError is the answer to a read of a delete marker: of the
// current version of a key whose latest version is one (Current; it is
// also ErrNoKey), or of a marker asked for by its version ID.
type DeleteMarkerError struct {
	VersionID string
	Modified  time.Time
	Current   bool
}

func (e *DeleteMarkerError) Error() string {
	if e.Current {
		return "gateway: the key's latest version is a delete marker"
	}
	return "gateway: the version is a delete marker"
}

// Is makes a current delete marker an ErrNoKey.
func (e *DeleteMarkerError) Is(target error) bool { return e.Current && target == ErrNoKey }

// versionSpace starts the hidden names of versions (U+10FFFF).
const versionSpace = "\U0010FFFF"

const versionSep = "\x01\x01"

func escKey(key string) string { return strings.ReplaceAll(key, "\x01", "\x01\x02") }

func unescKey(s string) string { return strings.ReplaceAll(s, "\x01\x02", "\x01") }

// versionStart is the start of the hidden names of key's versions.
func versionStart(key string) string { return versionSpace + escKey(key) + versionSep }

// versionName is the hidden name of a version of key.
func versionName(key string, info ObjectInfo) string { return versionStart(key) + sortID(info) }

func sortID(info ObjectInfo) string {
	if info.VersionID != "" {
		return info.VersionID
	}
	return invTime(info.Modified) + NullVersion
}

func invTime(t time.Time) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ^uint64(t.UnixNano()))
	return hex.EncodeToString(b[:])
}

// parseVersionName splits a hidden name into key and sort ID.
func parseVersionName(name string) (key, sid string, ok bool) {
	rest, ok := strings.CutPrefix(name, versionSpace)
	if !ok {
		return "", "", false
	}
	i := strings.Index(rest, versionSep)
	if i < 0 {
		return "", "", false
	}
	return unescKey(rest[:i]), rest[i+len(versionSep):], true
}

// newVersionID makes a version ID: the inverted time (newest sorts first)
// and 32 random bits.
func newVersionID(t time.Time) string {
	var r [4]byte
	rand.Read(r[:])
	return invTime(t) + hex.EncodeToString(r[:])
}

// CheckVersionID reports whether id is a version ID the gateway could
// have made ("null" or 24 lower-case hex digits), or a UUID (MinIO's
// form: tools written for MinIO send one and expect "no such version"):
// ErrBadVersion if not.
func CheckVersionID(id string) error {
	if id == NullVersion || uuidForm.MatchString(id) {
		return nil
	}
	if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: %q", ErrBadVersion, id)
	}
	return nil
}

var uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// VersionOf is the version ID of a record ("null" for none).
func VersionOf(info ObjectInfo) string {
	if info.VersionID == "" {
		return NullVersion
	}
	return info.VersionID
}

// Versioning returns a bucket's versioning state: "" (never enabled),
// VersioningEnabled or VersioningSuspended.
func (g *Gateway) Versioning(ctx context.Context, bucketName string) (string, error) {
	raw, err := g.BucketConfig(ctx, bucketName, "versioning")
	if errors.Is(err, ErrNoConfig) {
		return "", nil
	}
	return string(raw), err
}

// SetVersioning sets a bucket's versioning state (VersioningEnabled or
// VersioningSuspended; a bucket never goes back to unversioned).
func (g *Gateway) SetVersioning(ctx context.Context, bucketName, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return ErrBadVersioning
	}
	if status == VersioningSuspended {
		b, err := g.bucket(ctx, bucketName)
		if err != nil {
			return err
		}
		if _, ok := g.lockOf(b); ok {
			return ErrLockState // objectlock.go
		}
	}
	return g.PutBucketConfig(ctx, bucketName, "versioning", []byte(status))
}

// maxVersionedKey is the longest key of a versioned bucket: its versions'
// hidden names must be keys too.
const maxVersionedKey = dag.MaxKey - len(versionSpace) - len(versionSep) - 24

// ErrVersionedKeyTooLong is an ErrKeyTooLong: a key too long for its
// versions to be kept.
var ErrVersionedKeyTooLong = fmt.Errorf("%w: a versioned bucket's keys are at most %d bytes", ErrKeyTooLong, maxVersionedKey)

// checkVersionedKey refuses a key whose versions' hidden names would
// be too long.
func checkVersionedKey(key string) error {
	if len(escKey(key)) > maxVersionedKey {
		return ErrVersionedKeyTooLong
	}
	return nil
}

// versioningOf is b's versioning state as this gateway's replica of the
// registry has it.
func (g *Gateway) versioningOf(b *bucket) string {
	raw, err := g.readFile(&g.registry, configDir(b)+"/versioning")
	if err != nil {
		return ""
	}
	return string(raw)
}

// hidden is one hidden version record of a key.
type hidden struct {
	name   string
	info   ObjectInfo
	inline []byte
}

// hiddenVersions returns the hidden versions of key in b, newest first.
func (g *Gateway) hiddenVersions(b *bucket, key string) ([]hidden, error) {
	start := versionStart(key)
	type found struct {
		name string
		data dag.Hash
	}
	var fs []found
	err := g.db.Scan(b.ns, "/", start, func(it namespace.Info) bool {
		if !strings.HasPrefix(it.Name, start) {
			return false
		}
		if k, _, ok := parseVersionName(it.Name); ok && k == key && it.Type == dag.File {
			fs = append(fs, found{it.Name, it.Data})
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	var out []hidden
	for _, f := range fs {
		raw, _, err := g.db.Content(b.ns, f.data)
		if err != nil {
			return nil, err
		}
		info, inline, err := decodeRecord(raw)
		if err != nil {
			continue
		}
		info.Key = key
		out = append(out, hidden{f.name, info, inline})
	}
	return out, nil
}

// change is one path's change in a commit of versions.
type change struct {
	p   string
	rec []byte // nil: delete
}

// applyChanges commits changes to b in one commit; it returns the entry
// of each change.
func (g *Gateway) applyChanges(ctx context.Context, b *bucket, cs []change) ([]dag.Hash, error) {
	root, err := g.db.Stat(b.ns, "/")
	if err != nil {
		return nil, fmt.Errorf("gateway: root of %q: %w", b.name, err)
	}
	var recs [][]byte
	hashes := make([]dag.Hash, len(cs))
	for i, c := range cs {
		heads, err := g.db.Heads(b.ns, c.p)
		if err != nil && !errors.Is(err, namespace.ErrNotFound) {
			return nil, err
		}
		for _, h := range heads {
			if v, err := g.db.Version(b.ns, h); err == nil {
				g.db.Clock().Observe(v.Entry.Time)
			}
		}
		var e *dag.Entry
		var blocks []*dag.Block
		if c.rec == nil {
			e = b.w.Entry(dag.Delete, root.Data, heads, c.p[1:], nil)
		} else {
			e, blocks = b.w.FileInline(root.Data, heads, c.p[1:], c.rec, dag.MaxSealed)
		}
		hashes[i] = e.Hash()
		recs = append(recs, e.Encode())
		for _, bl := range blocks {
			recs = append(recs, bl.Encode())
		}
	}
	if err := g.commit(ctx, b, recs); err != nil {
		return nil, fmt.Errorf("gateway: bucket %q: %w", b.name, err)
	}
	return hashes, nil
}

// writeVersioned commits a new latest version (an object, or a delete
// marker with marker set) of key at path p of a bucket whose versioning
// is mode (Enabled or Suspended), keeping the version it supersedes
// (but a null one, when the new one is null). The caller holds the key's
// lock. It returns the entry of the new record and the grid objects of
// the versions it replaced.
func (g *Gateway) writeVersioned(ctx context.Context, b *bucket, p, mode string, info *ObjectInfo, inline []byte) (dag.Hash, []string, error) {
	key := p[1:]
	if err := checkVersionedKey(key); err != nil {
		return dag.Hash{}, nil, err
	}
	if mode == VersioningEnabled {
		info.VersionID = newVersionID(time.Now())
	} else {
		info.VersionID = ""
	}
	var cs []change
	var old []string
	cur, curInline, found, err := g.current(b, p)
	if err != nil {
		return dag.Hash{}, nil, err
	}
	if found {
		if cur.VersionID == "" && info.VersionID == "" {
			old = append(old, recordCaps(cur)...) // the null version is replaced
		} else {
			cs = append(cs, change{"/" + versionName(key, cur), encodeRecord(cur, curInline)})
		}
	}
	if info.VersionID == "" {
		hs, err := g.hiddenVersions(b, key)
		if err != nil {
			return dag.Hash{}, nil, err
		}
		for _, h := range hs {
			if h.info.VersionID == "" {
				cs = append(cs, change{"/" + h.name, nil})
				old = append(old, recordCaps(h.info)...)
			}
		}
	}
	mine := len(cs)
	if info.DeleteMarker {
		if found {
			cs = append(cs, change{p, nil})
		}
		cs = append(cs, change{"/" + versionName(key, *info), encodeRecord(*info, nil)})
		mine = len(cs) - 1
	} else {
		cs = append(cs, change{p, encodeRecord(*info, inline)})
	}
	hashes, err := g.applyChanges(ctx, b, cs)
	if err != nil {
		return dag.Hash{}, nil, err
	}
	return hashes[mine], old, nil
}

// DeleteResult is what a delete did on a versioned bucket.
type DeleteResult struct {
	// VersionID is the version deleted, or the delete marker made ("" on
	// an unversioned bucket).
	VersionID string
	// DeleteMarker: a marker was made, or the version deleted was one.
	DeleteMarker bool
}

// DeleteObject deletes key: on an unversioned bucket it removes the
// object (as Delete); on a versioned one it writes a delete marker, the
// current version kept as noncurrent (Enabled) or replaced if null
// (Suspended).
func (g *Gateway) DeleteObject(ctx context.Context, bucketName, key string) (DeleteResult, error) {
	return g.deleteObjectIf(ctx, bucketName, key, nil)
}

// deleteObjectIf is DeleteObject, only while the key's current version
// is entry version if that is set (DeleteVersion).
func (g *Gateway) deleteObjectIf(ctx context.Context, bucketName, key string, version *dag.Hash) (DeleteResult, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return DeleteResult{}, err
	}
	p, err := keyPath(key)
	if err != nil {
		return DeleteResult{}, nil
	}
	unlock := g.keys.lock(b.ns, p)
	defer unlock()
	st, serr := g.stat(ctx, b, p) // pulls the bucket if the key is not here
	if version != nil {
		switch {
		case errors.Is(serr, namespace.ErrNotFound):
			return DeleteResult{}, nil // gone already
		case serr != nil:
			return DeleteResult{}, serr
		case st.Data != *version:
			return DeleteResult{}, ErrPrecondition
		}
	}
	mode := g.versioningOf(b)
	if mode == "" {
		if errors.Is(serr, namespace.ErrNotFound) {
			return DeleteResult{}, nil
		}
		old := g.capsAt(b, p) // the deleted version's grid objects (leases.go)
		err = g.write(ctx, b, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.Entry(dag.Delete, a, h, n, nil), nil
		})
		if err == nil {
			g.retire(b, old)
		}
		return DeleteResult{}, err
	}
	if err := checkVersionedKey(key); err != nil {
		return DeleteResult{}, err
	}
	marker := ObjectInfo{DeleteMarker: true, Modified: time.Now().UTC()}
	_, old, err := g.writeVersioned(ctx, b, p, mode, &marker, nil)
	if err != nil {
		return DeleteResult{}, err
	}
	g.retire(b, old)
	return DeleteResult{VersionID: VersionOf(marker), DeleteMarker: true}, nil
}

// DeleteObjectVersion removes one version of key for good (a delete marker
// too); its grid objects are released (leases.go). If it was the latest,
// the next newest becomes the current object (unless it is a delete
// marker). A version that does not exist is ErrNoVersion; one kept by
// its object lock (objectlock.go) ErrLocked.
func (g *Gateway) DeleteObjectVersion(ctx context.Context, bucketName, key, vid string) (DeleteResult, error) {
	return g.DeleteObjectVersionWith(ctx, bucketName, key, vid, DeleteOptions{})
}

// DeleteOptions qualify the delete of a version.
type DeleteOptions struct {
	// BypassGovernance deletes a version whose retention is GOVERNANCE
	// (S3's x-amz-bypass-governance-retention, for a caller allowed to).
	BypassGovernance bool
}

// DeleteObjectVersionWith is DeleteObjectVersion with options.
func (g *Gateway) DeleteObjectVersionWith(ctx context.Context, bucketName, key, vid string, opt DeleteOptions) (DeleteResult, error) {
	if err := CheckVersionID(vid); err != nil {
		return DeleteResult{}, err
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return DeleteResult{}, err
	}
	p, err := keyPath(key)
	if err != nil {
		return DeleteResult{}, ErrNoVersion
	}
	unlock := g.keys.lock(b.ns, p)
	defer unlock()
	g.stat(ctx, b, p)
	cur, _, found, err := g.current(b, p)
	if err != nil {
		return DeleteResult{}, err
	}
	hs, err := g.hiddenVersions(b, key)
	if err != nil {
		return DeleteResult{}, err
	}
	if !(found && VersionOf(cur) == vid) && !hasVersion(hs, vid) && g.sync(ctx, b) == nil {
		// A version another gateway wrote may not be here yet.
		if cur, _, found, err = g.current(b, p); err != nil {
			return DeleteResult{}, err
		}
		if hs, err = g.hiddenVersions(b, key); err != nil {
			return DeleteResult{}, err
		}
	}
	var cs []change
	var gone ObjectInfo
	latest := false
	switch {
	case found && VersionOf(cur) == vid:
		gone, latest = cur, true
		cs = append(cs, change{p, nil})
	default:
		i := -1
		for j, h := range hs {
			if VersionOf(h.info) == vid {
				i = j
				break
			}
		}
		if i < 0 && vid == NullVersion {
			return DeleteResult{VersionID: vid}, nil // no null version: as deleted
		}
		if i < 0 {
			return DeleteResult{}, fmt.Errorf("%w: %s of %q", ErrNoVersion, vid, key)
		}
		gone, latest = hs[i].info, !found && i == 0
		cs = append(cs, change{"/" + hs[i].name, nil})
		hs = append(hs[:i:i], hs[i+1:]...)
	}
	if gone.Lock.Protects(time.Now(), opt.BypassGovernance) {
		return DeleteResult{}, fmt.Errorf("%w: version %s of %q", ErrLocked, vid, key)
	}
	// The latest deleted: the next newest version, if an object, becomes
	// the current one (a delete marker stays where it is).
	if latest && len(hs) > 0 && !hs[0].info.DeleteMarker {
		next := hs[0]
		if cs[0].p == p {
			cs = cs[:0] // the write of p replaces it
		}
		cs = append(cs, change{"/" + next.name, nil}, change{p, encodeRecord(next.info, next.inline)})
	}
	if _, err := g.applyChanges(ctx, b, cs); err != nil {
		return DeleteResult{}, err
	}
	g.retire(b, recordCaps(gone))
	return DeleteResult{VersionID: vid, DeleteMarker: gone.DeleteMarker}, nil
}

func hasVersion(hs []hidden, vid string) bool {
	for _, h := range hs {
		if VersionOf(h.info) == vid {
			return true
		}
	}
	return false
}

// LookupVersion returns version vid of key ("" or the current version's
// ID: the current object, as Lookup) and its inline bytes. A delete
// marker is a *DeleteMarkerError; a version that does not exist
// ErrNoVersion (or ErrNoKey, for the current one).
func (g *Gateway) LookupVersion(ctx context.Context, bucketName, key, vid string) (ObjectInfo, []byte, error) {
	if vid != "" {
		if err := CheckVersionID(vid); err != nil {
			return ObjectInfo{}, nil, err
		}
	}
	info, inline, err := g.lookup(ctx, bucketName, key)
	if err == nil && (vid == "" || VersionOf(info) == vid) {
		return info, inline, nil
	}
	if err != nil && !errors.Is(err, ErrNoKey) {
		return info, inline, err
	}
	b, berr := g.bucket(ctx, bucketName)
	if berr != nil {
		return ObjectInfo{}, nil, berr
	}
	if _, perr := keyPath(key); perr != nil {
		return ObjectInfo{}, nil, err
	}
	if vid == "" && g.versioningOf(b) == "" {
		return ObjectInfo{}, nil, err // unversioned: nothing hidden
	}
	hs, herr := g.hiddenVersions(b, key)
	if herr != nil {
		return ObjectInfo{}, nil, herr
	}
	if vid == "" {
		// No current object: the latest version may be a delete marker.
		if len(hs) > 0 && hs[0].info.DeleteMarker {
			return ObjectInfo{}, nil, &DeleteMarkerError{VersionID: VersionOf(hs[0].info), Modified: hs[0].info.Modified, Current: true}
		}
		return ObjectInfo{}, nil, err
	}
	for attempt := 0; ; attempt++ {
		for _, h := range hs {
			if VersionOf(h.info) == vid {
				if h.info.DeleteMarker {
					return ObjectInfo{}, nil, &DeleteMarkerError{VersionID: vid, Modified: h.info.Modified}
				}
				return h.info, h.inline, nil
			}
		}
		if attempt > 0 || g.sync(ctx, b) != nil {
			return ObjectInfo{}, nil, fmt.Errorf("%w: %s of %q", ErrNoVersion, vid, key)
		}
		// A version another gateway wrote may not be here yet: pull the
		// bucket and look once more.
		if hs, herr = g.hiddenVersions(b, key); herr != nil {
			return ObjectInfo{}, nil, herr
		}
	}
}

// SetVersionTags is SetTags of one version of key ("": the current one).
func (g *Gateway) SetVersionTags(ctx context.Context, bucketName, key, vid string, tags map[string]string) (ObjectInfo, error) {
	if vid == "" {
		return g.SetTags(ctx, bucketName, key, tags)
	}
	if err := CheckVersionID(vid); err != nil {
		return ObjectInfo{}, err
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return ObjectInfo{}, err
	}
	p, err := keyPath(key)
	if err != nil {
		return ObjectInfo{}, ErrNoVersion
	}
	unlock := g.keys.lock(b.ns, p)
	info, inline, found, err := g.current(b, p)
	if err == nil && found && VersionOf(info) == vid {
		unlock()
		return g.SetTags(ctx, bucketName, key, tags)
	}
	defer unlock()
	hs, err := g.hiddenVersions(b, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	for _, h := range hs {
		if VersionOf(h.info) != vid {
			continue
		}
		if h.info.DeleteMarker {
			return ObjectInfo{}, &DeleteMarkerError{VersionID: vid, Modified: h.info.Modified}
		}
		info, inline = h.info, h.inline
		info.Tags = tags
		hashes, err := g.applyChanges(ctx, b, []change{{"/" + h.name, encodeRecord(info, inline)}})
		if err != nil {
			return ObjectInfo{}, err
		}
		info.Key, info.Version = key, hashes[0]
		return info, nil
	}
	return ObjectInfo{}, fmt.Errorf("%w: %s of %q", ErrNoVersion, vid, key)
}

// VersionEntry is one version in a listing of versions: an object or a
// delete marker.
type VersionEntry struct {
	ObjectInfo
	VersionID string // "null" for the null version
	IsLatest  bool
}

// VersionListing is one page of a bucket's versions.
type VersionListing struct {
	Versions  []VersionEntry
	Prefixes  []string
	Truncated bool
	// NextKey and NextVersion resume the listing (NextVersion is empty
	// when the page ended on a common prefix).
	NextKey, NextVersion string
}

// ListVersions lists up to maxKeys versions and common prefixes of a
// bucket, by key in byte order, each key's versions newest first (S3's
// ListObjectVersions): after keyMarker's versions, or after version
// vidMarker of keyMarker when given.
func (g *Gateway) ListVersions(ctx context.Context, bucketName, prefix, delimiter, keyMarker, vidMarker string, maxKeys int) (VersionListing, error) {
	var out VersionListing
	if vidMarker != "" {
		if err := CheckVersionID(vidMarker); err != nil {
			return out, err
		}
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return out, err
	}
	g.sync(ctx, b)
	if maxKeys <= 0 {
		return out, nil
	}
	// item is one entry of the merged order: a version or a prefix.
	type item struct {
		key    string // the key, or the common prefix
		prefix bool
		rank   int    // 0: current (or prefix), 1: hidden
		sid    string // hidden: the sort ID
		data   dag.Hash
	}
	less := func(a, b item) bool {
		if a.key != b.key {
			return a.key < b.key
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return a.sid < b.sid
	}
	rollup := func(k string) (string, bool) {
		if delimiter == "" {
			return "", false
		}
		if i := strings.Index(k[len(prefix):], delimiter); i >= 0 {
			return k[:len(prefix)+i+len(delimiter)], true
		}
		return "", false
	}
	// A marker that is a common prefix resumes past every key under it.
	skipUnder := ""
	if delimiter != "" && vidMarker == "" && strings.HasPrefix(keyMarker, prefix) && strings.HasSuffix(keyMarker, delimiter) &&
		strings.Contains(keyMarker[len(prefix):], delimiter) {
		skipUnder = keyMarker
	}
	// markerSID: the hidden versions of keyMarker at or before it in the
	// order are listed already.
	markerSID := ""
	if vidMarker == NullVersion {
		hs, err := g.hiddenVersions(b, keyMarker)
		if err != nil {
			return out, err
		}
		for _, h := range hs {
			if h.info.VersionID == "" {
				markerSID = sortID(h.info)
			}
		}
	} else if vidMarker != "" {
		markerSID = vidMarker
	}
	limit := maxKeys + 1
	collect := func(from string, hiddenStream bool) ([]item, error) {
		var items []item
		lastPrefix := ""
		err := g.db.Scan(b.ns, "/", from, func(it namespace.Info) bool {
			key, sid := it.Name, ""
			if hiddenStream {
				k, s, ok := parseVersionName(it.Name)
				if !ok {
					return true
				}
				key, sid = k, s
			} else if strings.HasPrefix(key, versionSpace) {
				return false // the versions' names: no more keys
			}
			if !strings.HasPrefix(key, prefix) {
				return key < prefix // before the prefix: go on; past it: stop
			}
			if skipUnder != "" && strings.HasPrefix(key, skipUnder) {
				return true
			}
			// What the markers say is listed already.
			if key < keyMarker {
				return true
			}
			if key == keyMarker && (vidMarker == "" || !hiddenStream || sid <= markerSID) {
				return true
			}
			if it.Type != dag.File {
				return true
			}
			if cp, ok := rollup(key); ok {
				if cp == lastPrefix {
					return true
				}
				lastPrefix = cp
				items = append(items, item{key: cp, prefix: true})
			} else {
				rank := 0
				if hiddenStream {
					rank = 1
				}
				items = append(items, item{key: key, rank: rank, sid: sid, data: it.Data})
			}
			return len(items) < limit
		})
		return items, err
	}
	curFrom := max(prefix, keyMarker)
	hidFrom := versionSpace + escKey(max(prefix, keyMarker))
	if skipUnder != "" {
		curFrom = skipUnder + "\xff"
		hidFrom = versionSpace + escKey(skipUnder) + "\xff"
	}
	cur, err := collect(curFrom, false)
	if err != nil {
		return out, err
	}
	hid, err := collect(hidFrom, true)
	if err != nil {
		return out, err
	}
	all := append(cur, hid...)
	sort.SliceStable(all, func(i, j int) bool { return less(all[i], all[j]) })
	// Drop a prefix both streams gave.
	merged := all[:0]
	for i, it := range all {
		if it.prefix && i > 0 && all[i-1].prefix && all[i-1].key == it.key {
			continue
		}
		merged = append(merged, it)
	}
	if len(merged) > maxKeys {
		merged, out.Truncated = merged[:maxKeys], true
	}
	seen := map[string]bool{}
	if vidMarker != "" {
		seen[keyMarker] = true // its latest was on an earlier page
	}
	for _, it := range merged {
		if it.prefix {
			out.Prefixes = append(out.Prefixes, it.key)
			out.NextKey, out.NextVersion = it.key, ""
			continue
		}
		raw, _, err := g.db.Content(b.ns, it.data)
		if err != nil {
			return out, err
		}
		info, _, err := decodeRecord(raw)
		if err != nil {
			continue
		}
		info.Key, info.Version = it.key, it.data
		e := VersionEntry{ObjectInfo: info, VersionID: VersionOf(info), IsLatest: !seen[it.key]}
		seen[it.key] = true
		out.Versions = append(out.Versions, e)
		out.NextKey, out.NextVersion = it.key, e.VersionID
	}
	if !out.Truncated {
		out.NextKey, out.NextVersion = "", ""
	}
	return out, nil
}
