package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Object lock (S3's Object Lock: write once, read many).
//
// A bucket with object lock has a configuration ("objectLock", JSON: a
// LockConfig) and its versioning Enabled for good: it can be neither
// suspended nor the lock turned off. Each version of an object may carry
// a Lock (ObjectInfo.Lock, in the version's record of the bucket's
// namespace, so it is replicated with the version, survives restarts and
// is read by every gateway): a retention (mode and date) and a legal
// hold. A version whose retention is in force, or whose legal hold is
// on, cannot be deleted (ErrLocked); a GOVERNANCE retention can be
// bypassed by a caller the front end allows to, a COMPLIANCE one by no
// one, and it can be neither shortened nor removed until it ends. A
// delete without a version ID only writes a delete marker and is always
// allowed. New versions get the bucket's default retention unless the
// write gives one.

// Retention modes.
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// Lock is the object lock of one version.
type Lock struct {
	// Mode is LockGovernance or LockCompliance ("": no retention).
	Mode string `json:"mode,omitempty"`
	// RetainUntil is when the retention ends.
	RetainUntil time.Time `json:"until,omitzero"`
	// LegalHold, while on, keeps the version whatever its retention.
	LegalHold bool `json:"hold,omitempty"`
}

// Retained reports whether the lock's retention is in force at now.
func (l *Lock) Retained(now time.Time) bool {
	return l != nil && l.Mode != "" && now.Before(l.RetainUntil)
}

// Protects reports whether the lock keeps its version from being deleted
// at now; bypass is a GOVERNANCE bypass the caller may use.
func (l *Lock) Protects(now time.Time, bypass bool) bool {
	if l == nil {
		return false
	}
	if l.LegalHold {
		return true
	}
	return l.Retained(now) && !(l.Mode == LockGovernance && bypass)
}

// LockConfig is a bucket's object lock configuration.
type LockConfig struct {
	// Enabled is always true for a bucket that has one.
	Enabled bool `json:"enabled"`
	// Mode, Days and Years are the default retention of new versions
	// (Mode "": none); one of Days and Years is set.
	Mode  string `json:"mode,omitempty"`
	Days  int    `json:"days,omitempty"`
	Years int    `json:"years,omitempty"`
}

// Until is when a default retention that starts at t ends.
func (c LockConfig) Until(t time.Time) time.Time { return t.AddDate(c.Years, 0, c.Days) }

// Errors of object lock.
var (
	// ErrLocked means a version is kept by its retention or legal hold.
	ErrLocked = errors.New("gateway: the version is locked by its retention or legal hold")
	// ErrNoLockConfig means the bucket has no object lock.
	ErrNoLockConfig = errors.New("gateway: the bucket has no object lock configuration")
	// ErrLockState means a bucket's versioning does not allow the change:
	// object lock needs versioning Enabled, and keeps it so.
	ErrLockState = errors.New("gateway: object lock needs the bucket's versioning Enabled, and keeps it so")
	// ErrBadLock means a retention or configuration that is not valid.
	ErrBadLock = errors.New("gateway: invalid object lock")
	// ErrRetentionPast means a retention date that is not in the future.
	ErrRetentionPast = fmt.Errorf("%w: the retain until date must be in the future", ErrBadLock)
)

// maxRetentionYears bounds a default retention (S3 allows 100 years).
const maxRetentionYears = 100

// CheckLockConfig checks a configuration's values: a mode and exactly
// one positive period, or no default at all.
func CheckLockConfig(c LockConfig) error {
	switch {
	case c.Mode == "" && c.Days == 0 && c.Years == 0:
		return nil
	case c.Mode != LockGovernance && c.Mode != LockCompliance:
		return fmt.Errorf("%w: default retention mode %q (GOVERNANCE or COMPLIANCE)", ErrBadLock, c.Mode)
	case (c.Days > 0) == (c.Years > 0) || c.Days < 0 || c.Years < 0:
		return fmt.Errorf("%w: a default retention has a positive Days or Years, not both", ErrBadLock)
	case c.Years > maxRetentionYears || c.Days > maxRetentionYears*366:
		return fmt.Errorf("%w: a default retention is at most %d years", ErrBadLock, maxRetentionYears)
	}
	return nil
}

// CheckRetentionChange decides whether a version whose lock is cur may
// take the retention (mode, until; mode "" removes it) at now; bypass
// is a GOVERNANCE bypass the caller may use. A retention in force may be
// kept or lengthened (GOVERNANCE may become COMPLIANCE); shortened,
// removed or turned from COMPLIANCE to GOVERNANCE only when it is
// GOVERNANCE and bypassed. A new date must be in the future.
func CheckRetentionChange(cur *Lock, mode string, until time.Time, bypass bool, now time.Time) error {
	if mode != "" {
		if mode != LockGovernance && mode != LockCompliance {
			return fmt.Errorf("%w: retention mode %q (GOVERNANCE or COMPLIANCE)", ErrBadLock, mode)
		}
		if !until.After(now) {
			return ErrRetentionPast
		}
	}
	if !cur.Retained(now) {
		return nil
	}
	weaker := mode == "" || until.Before(cur.RetainUntil) || cur.Mode == LockCompliance && mode != LockCompliance
	switch {
	case !weaker:
		return nil
	case cur.Mode == LockGovernance && bypass:
		return nil
	}
	return fmt.Errorf("%w: its %s retention until %s cannot be shortened or removed", ErrLocked, cur.Mode, cur.RetainUntil.Format(time.RFC3339))
}

// lockOf is b's object lock configuration as this gateway's replica of
// the registry has it (ok false: none).
func (g *Gateway) lockOf(b *bucket) (LockConfig, bool) {
	raw, err := g.readFile(&g.registry, configDir(b)+"/objectLock")
	if err != nil || raw == nil {
		return LockConfig{}, false
	}
	var c LockConfig
	if json.Unmarshal(raw, &c) != nil || !c.Enabled {
		return LockConfig{}, false
	}
	return c, true
}

// ObjectLockConfig returns a bucket's object lock configuration
// (ErrNoLockConfig if it has none).
func (g *Gateway) ObjectLockConfig(ctx context.Context, bucketName string) (LockConfig, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return LockConfig{}, err
	}
	c, ok := g.lockOf(b)
	if !ok {
		return LockConfig{}, ErrNoLockConfig
	}
	return c, nil
}

// EnableObjectLock turns versioning and object lock on for a new bucket
// (S3's CreateBucket with object lock), with no default retention.
func (g *Gateway) EnableObjectLock(ctx context.Context, bucketName string) error {
	if err := g.SetVersioning(ctx, bucketName, VersioningEnabled); err != nil {
		return err
	}
	return g.SetObjectLockConfig(ctx, bucketName, LockConfig{})
}

// SetObjectLockConfig turns object lock on for a bucket (if it is not
// already) and sets its default retention. The bucket's versioning must
// be Enabled (ErrLockState).
func (g *Gateway) SetObjectLockConfig(ctx context.Context, bucketName string, c LockConfig) error {
	if err := CheckLockConfig(c); err != nil {
		return err
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return err
	}
	if g.versioningOf(b) != VersioningEnabled {
		return ErrLockState
	}
	c.Enabled = true
	doc, _ := json.Marshal(c)
	return g.PutBucketConfig(ctx, bucketName, "objectLock", doc)
}

// checkLock refuses a lock for a bucket without object lock, and a
// retention that is not valid.
func (g *Gateway) checkLock(b *bucket, l *Lock) error {
	if l == nil || *l == (Lock{}) {
		return nil
	}
	if _, ok := g.lockOf(b); !ok {
		return ErrNoLockConfig
	}
	if l.Mode != "" || !l.RetainUntil.IsZero() {
		if l.Mode == "" || l.RetainUntil.IsZero() {
			return fmt.Errorf("%w: a retention has both a mode and a date", ErrBadLock)
		}
		return CheckRetentionChange(nil, l.Mode, l.RetainUntil, false, time.Now())
	}
	return nil
}

// applyDefaultLock gives a new version of a bucket with object lock the
// bucket's default retention, unless the write gave one.
func (g *Gateway) applyDefaultLock(b *bucket, info *ObjectInfo) {
	c, ok := g.lockOf(b)
	if !ok || c.Mode == "" || info.DeleteMarker || info.Lock != nil && info.Lock.Mode != "" {
		return
	}
	l := Lock{Mode: c.Mode, RetainUntil: c.Until(info.Modified).UTC()}
	if info.Lock != nil {
		l.LegalHold = info.Lock.LegalHold
	}
	info.Lock = &l
}

// ObjectLockWanted reports whether a write to a bucket would lock the
// new version: the bucket has object lock and a default retention, or
// l asks for a lock. (S3 wants such writes to carry a checksum.)
func (g *Gateway) ObjectLockWanted(ctx context.Context, bucketName string, l *Lock) bool {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return false
	}
	c, ok := g.lockOf(b)
	return ok && (c.Mode != "" || l != nil && *l != (Lock{}))
}

// UpdateLock changes the lock of version vid of key ("": the current
// version) under the key's lock: update gets the version's lock (nil if
// it never had one) and returns the new one, or an error that is
// returned as it is. A bucket without object lock is ErrNoLockConfig.
func (g *Gateway) UpdateLock(ctx context.Context, bucketName, key, vid string, update func(cur *Lock) (*Lock, error)) (ObjectInfo, error) {
	if vid != "" {
		if err := CheckVersionID(vid); err != nil {
			return ObjectInfo{}, err
		}
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return ObjectInfo{}, err
	}
	if _, ok := g.lockOf(b); !ok {
		return ObjectInfo{}, ErrNoLockConfig
	}
	p, err := keyPath(key)
	if err != nil {
		return ObjectInfo{}, ErrNoKey
	}
	// A version another gateway wrote may not be here yet.
	if _, _, err := g.LookupVersion(ctx, bucketName, key, vid); err != nil {
		return ObjectInfo{}, err
	}
	unlock := g.keys.lock(b.ns, p)
	defer unlock()
	set := func(info ObjectInfo, inline []byte, path string) (ObjectInfo, error) {
		l, err := update(info.Lock)
		if err != nil {
			return ObjectInfo{}, err
		}
		info.Lock = l // an empty one: a legal hold set OFF
		rec := encodeRecord(info, inline)
		var entry dag.Hash
		err = g.write(ctx, b, path, func(w *dag.Writer, a dag.Hash, heads []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			e, blocks := w.FileInline(a, heads, n, rec, dag.MaxSealed)
			entry = e.Hash()
			return e, blocks
		})
		info.Key, info.Version = key, entry
		return info, err
	}
	cur, inline, found, err := g.current(b, p)
	if err != nil {
		return ObjectInfo{}, err
	}
	if found && (vid == "" || VersionOf(cur) == vid) {
		return set(cur, inline, p)
	}
	hs, err := g.hiddenVersions(b, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	for _, h := range hs {
		if vid == "" && h.info.DeleteMarker {
			return ObjectInfo{}, &DeleteMarkerError{VersionID: VersionOf(h.info), Modified: h.info.Modified, Current: true}
		}
		if vid != "" && VersionOf(h.info) != vid {
			continue
		}
		if h.info.DeleteMarker {
			return ObjectInfo{}, &DeleteMarkerError{VersionID: vid, Modified: h.info.Modified}
		}
		return set(h.info, h.inline, "/"+h.name)
	}
	if vid == "" {
		return ObjectInfo{}, ErrNoKey
	}
	return ObjectInfo{}, fmt.Errorf("%w: %s of %q", ErrNoVersion, vid, key)
}
