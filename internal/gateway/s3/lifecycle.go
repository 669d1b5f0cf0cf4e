package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Lifecycle rules (PutBucketLifecycleConfiguration, ?lifecycle): S3's
// XML, kept as a bucket configuration in the registry, applied by the
// gateway's sweep (RunLifecycle, SweepLifecycle): expiration of current
// objects (after Days, or from a Date) and abort of multipart uploads
// DaysAfterInitiation days old, for the objects a rule's filter (prefix,
// tags, sizes) selects; on versioned buckets, expiration of noncurrent
// versions (NoncurrentDays after they became noncurrent, beyond
// NewerNoncurrentVersions) and of delete markers left with no version
// behind them (ExpiredObjectDeleteMarker). The grid has one storage
// class: transitions are refused, not ignored.

// maxLifecycleRules is S3's limit on the rules of a configuration.
const maxLifecycleRules = 1000

// anyElem is an element the schema does not have.
type anyElem struct{ XMLName xml.Name }

type lcAnd struct {
	Prefix *string   `xml:"Prefix" json:"prefix,omitempty"`
	Tags   []tagXML  `xml:"Tag" json:"tags,omitempty"`
	SizeGT *int64    `xml:"ObjectSizeGreaterThan" json:"gt,omitempty"`
	SizeLT *int64    `xml:"ObjectSizeLessThan" json:"lt,omitempty"`
	Other  []anyElem `xml:",any" json:"-"`
}

type lcFilter struct {
	Prefix *string   `xml:"Prefix" json:"prefix,omitempty"`
	Tag    *tagXML   `xml:"Tag" json:"tag,omitempty"`
	SizeGT *int64    `xml:"ObjectSizeGreaterThan" json:"gt,omitempty"`
	SizeLT *int64    `xml:"ObjectSizeLessThan" json:"lt,omitempty"`
	And    *lcAnd    `xml:"And" json:"and,omitempty"`
	Other  []anyElem `xml:",any" json:"-"`
}

type lcExpiration struct {
	Date                      *string   `xml:"Date" json:"date,omitempty"`
	Days                      *int      `xml:"Days" json:"days,omitempty"`
	ExpiredObjectDeleteMarker *bool     `xml:"ExpiredObjectDeleteMarker" json:"marker,omitempty"`
	Other                     []anyElem `xml:",any" json:"-"`
}

// lcNoncurrent is NoncurrentVersionExpiration.
type lcNoncurrent struct {
	Days  *int      `xml:"NoncurrentDays" json:"days,omitempty"`
	Newer *int      `xml:"NewerNoncurrentVersions" json:"newer,omitempty"`
	Other []anyElem `xml:",any" json:"-"`
}

type lcAbort struct {
	DaysAfterInitiation *int      `xml:"DaysAfterInitiation" json:"days,omitempty"`
	Other               []anyElem `xml:",any" json:"-"`
}

// lcRule is one rule, as S3's XML has it and as it is kept (JSON).
type lcRule struct {
	ID         string        `xml:"ID,omitempty" json:"id,omitempty"`
	Filter     *lcFilter     `xml:"Filter" json:"filter,omitempty"`
	Prefix     *string       `xml:"Prefix" json:"prefix,omitempty"` // the older form, outside Filter
	Status     string        `xml:"Status" json:"status"`
	Expiration *lcExpiration `xml:"Expiration" json:"expiration,omitempty"`
	Abort      *lcAbort      `xml:"AbortIncompleteMultipartUpload" json:"abort,omitempty"`
	Noncurrent *lcNoncurrent `xml:"NoncurrentVersionExpiration" json:"noncurrent,omitempty"`
	Other      []anyElem     `xml:",any" json:"-"`
}

type lifecycleXML struct {
	XMLName xml.Name  `xml:"LifecycleConfiguration"`
	NS      string    `xml:"xmlns,attr,omitempty"`
	Rules   []lcRule  `xml:"Rule"`
	Other   []anyElem `xml:",any"`
}

var (
	errNoLifecycle  = s3err("NoSuchLifecycleConfiguration", 404, "The lifecycle configuration does not exist")
	errLCNoncurrent = notImpl("NoncurrentVersionTransition is refused: the grid has one storage class.")
	errLCTransition = notImpl("Transition is refused: the grid has one storage class, so there is nothing to transition objects to.")
)

func invalidArg(msg string) *Error { return s3err("InvalidArgument", 400, msg) }

// unknownElem answers an element a rule (or a part of it) does not take.
func unknownElem(other []anyElem) error {
	for _, o := range other {
		switch o.XMLName.Local {
		case "NoncurrentVersionTransition":
			return errLCNoncurrent
		case "Transition":
			return errLCTransition
		}
		return s3err("MalformedXML", 400, "The XML you provided was not well-formed or did not validate against our published schema: unknown element "+o.XMLName.Local+".")
	}
	return nil
}

// checkLifecycle applies S3's rules to a configuration.
func checkLifecycle(c lifecycleXML) error {
	if err := unknownElem(c.Other); err != nil {
		return err
	}
	if len(c.Rules) == 0 {
		return errMalformedXML
	}
	if len(c.Rules) > maxLifecycleRules {
		return invalidArg(fmt.Sprintf("A lifecycle configuration has at most %d rules.", maxLifecycleRules))
	}
	ids := map[string]bool{}
	for _, r := range c.Rules {
		if err := checkRule(r); err != nil {
			return err
		}
		if r.ID != "" {
			if ids[r.ID] {
				return invalidArg("Rule ID must be unique. Found same ID for more than one rule")
			}
			ids[r.ID] = true
		}
	}
	return nil
}

func checkRule(r lcRule) error {
	if err := unknownElem(r.Other); err != nil {
		return err
	}
	if len(r.ID) > 255 {
		return invalidArg("ID length should not exceed allowed limit of 255")
	}
	if r.Status != "Enabled" && r.Status != "Disabled" {
		return errMalformedXML
	}
	if (r.Filter == nil) == (r.Prefix == nil) {
		return errMalformedXML // one of Filter and the older Prefix
	}
	tagged, sized := false, false
	if f := r.Filter; f != nil {
		if err := unknownElem(f.Other); err != nil {
			return err
		}
		n := 0
		for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.SizeGT != nil, f.SizeLT != nil, f.And != nil} {
			if set {
				n++
			}
		}
		if n > 1 {
			return errMalformedXML // more than one condition: they go in And
		}
		var tags []tagXML
		gt, lt := f.SizeGT, f.SizeLT
		if f.Tag != nil {
			tags = []tagXML{*f.Tag}
		}
		if a := f.And; a != nil {
			if err := unknownElem(a.Other); err != nil {
				return err
			}
			tags, gt, lt = a.Tags, a.SizeGT, a.SizeLT
		}
		if len(tags) > 0 {
			if _, err := checkTags(tags, maxBucketTags, "Filter"); err != nil {
				return err
			}
			tagged = true
		}
		if gt != nil && *gt < 0 || lt != nil && *lt <= 0 {
			return invalidArg("ObjectSizeGreaterThan must be at least 0, ObjectSizeLessThan more than 0.")
		}
		if gt != nil && lt != nil && *gt >= *lt {
			return invalidArg("ObjectSizeGreaterThan must be less than ObjectSizeLessThan.")
		}
		sized = gt != nil || lt != nil
	}
	if r.Expiration == nil && r.Abort == nil && r.Noncurrent == nil {
		return s3err("InvalidRequest", 400, "At least one action needs to be specified in a rule")
	}
	if e := r.Expiration; e != nil {
		if err := unknownElem(e.Other); err != nil {
			return err
		}
		n := 0
		for _, set := range []bool{e.Days != nil, e.Date != nil, e.ExpiredObjectDeleteMarker != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return errMalformedXML
		}
		if e.Days != nil && *e.Days <= 0 {
			return invalidArg("'Days' for Expiration action must be a positive integer")
		}
		if e.Date != nil {
			if _, err := lcDate(*e.Date); err != nil {
				return err
			}
		}
		if e.ExpiredObjectDeleteMarker != nil && tagged {
			return s3err("InvalidRequest", 400, "ExpiredObjectDeleteMarker cannot be specified with tags.")
		}
	}
	if nc := r.Noncurrent; nc != nil {
		if err := unknownElem(nc.Other); err != nil {
			return err
		}
		if nc.Days == nil {
			return errMalformedXML
		}
		if *nc.Days <= 0 {
			return invalidArg("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
		}
		if nc.Newer != nil && (*nc.Newer <= 0 || *nc.Newer > 100) {
			return invalidArg("'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be a positive integer up to 100")
		}
	}
	if a := r.Abort; a != nil {
		if err := unknownElem(a.Other); err != nil {
			return err
		}
		if a.DaysAfterInitiation == nil {
			return errMalformedXML
		}
		if *a.DaysAfterInitiation <= 0 {
			return invalidArg("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
		}
		if tagged {
			return s3err("InvalidRequest", 400, "AbortIncompleteMultipartUpload cannot be specified with Tags.")
		}
		if sized {
			return s3err("InvalidRequest", 400, "AbortIncompleteMultipartUpload cannot be specified with object size filters: an upload has no size yet.")
		}
	}
	return nil
}

// lcDate reads an Expiration Date: ISO 8601, at midnight UTC.
func lcDate(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, invalidArg("Invalid date specified for Expiration action: " + s)
	}
	if t = t.UTC(); !t.Truncate(24 * time.Hour).Equal(t) {
		return t, invalidArg("'Date' must be at midnight GMT")
	}
	return t, nil
}

func (s *Server) putLifecycle(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 1<<20+1))
	if err != nil {
		q.fail(err)
		return
	}
	var c lifecycleXML
	if len(body) > 1<<20 || xml.Unmarshal(body, &c) != nil {
		q.fail(errMalformedXML)
		return
	}
	if err := checkLifecycle(c); err != nil {
		q.fail(err)
		return
	}
	doc, _ := json.Marshal(c.Rules)
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "lifecycle", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) getLifecycle(q *request) {
	rules, err := s.lifecycleRules(q.r.Context(), q.bucket)
	if err == nil && rules == nil {
		err = errNoLifecycle
	}
	if err != nil {
		q.fail(err)
		return
	}
	q.xml(200, lifecycleXML{NS: s3ns, Rules: rules})
}

func (s *Server) deleteLifecycle(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "lifecycle"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

// lifecycleRules reads a bucket's rules (nil if it has none).
func (s *Server) lifecycleRules(ctx context.Context, bucket string) ([]lcRule, error) {
	doc, err := s.gw.BucketConfig(ctx, bucket, "lifecycle")
	if errors.Is(err, gateway.ErrNoConfig) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rules []lcRule
	if err := json.Unmarshal(doc, &rules); err != nil {
		return nil, fmt.Errorf("s3: lifecycle of %s: %w", bucket, err)
	}
	return rules, nil
}

// prefix is the key prefix a rule selects.
func (r lcRule) prefix() string {
	switch {
	case r.Prefix != nil:
		return *r.Prefix
	case r.Filter == nil:
	case r.Filter.Prefix != nil:
		return *r.Filter.Prefix
	case r.Filter.And != nil && r.Filter.And.Prefix != nil:
		return *r.Filter.And.Prefix
	}
	return ""
}

// selects reports whether a rule's filter selects an object.
func (r lcRule) selects(o gateway.ObjectInfo) bool {
	if !strings.HasPrefix(o.Key, r.prefix()) {
		return false
	}
	f := r.Filter
	if f == nil {
		return true
	}
	tags, gt, lt := []tagXML(nil), f.SizeGT, f.SizeLT
	if f.Tag != nil {
		tags = []tagXML{*f.Tag}
	}
	if f.And != nil {
		tags, gt, lt = f.And.Tags, f.And.SizeGT, f.And.SizeLT
	}
	for _, t := range tags {
		if v, ok := o.Tags[t.Key]; !ok || v != t.Value {
			return false
		}
	}
	return (gt == nil || o.Size > *gt) && (lt == nil || o.Size < *lt)
}

// afterDays is when something made at t is days old by S3's count: t
// plus the days, rounded up to the next midnight UTC.
func afterDays(t time.Time, days int) time.Time {
	d := t.UTC().Add(time.Duration(days) * 24 * time.Hour)
	if m := d.Truncate(24 * time.Hour); m.Before(d) {
		return m.Add(24 * time.Hour)
	}
	return d
}

// expires reports whether an enabled rule expires an object at now.
func (r lcRule) expires(o gateway.ObjectInfo, now time.Time) bool {
	e := r.Expiration
	if r.Status != "Enabled" || e == nil || !r.selects(o) {
		return false
	}
	switch {
	case e.Days != nil:
		return !now.Before(afterDays(o.Modified, *e.Days))
	case e.Date != nil:
		d, err := lcDate(*e.Date)
		return err == nil && !now.Before(d)
	}
	return false // ExpiredObjectDeleteMarker: expiresMarker
}

// expiresNoncurrent reports whether an enabled rule expires a noncurrent
// version at now: o became noncurrent at since, and newer noncurrent
// versions of its key are newer of them.
func (r lcRule) expiresNoncurrent(o gateway.ObjectInfo, since time.Time, newer int, now time.Time) bool {
	nc := r.Noncurrent
	if r.Status != "Enabled" || nc == nil || nc.Days == nil || !r.selects(o) {
		return false
	}
	if nc.Newer != nil && newer < *nc.Newer {
		return false
	}
	return !now.Before(afterDays(since, *nc.Days))
}

// expiresMarker reports whether an enabled rule removes a delete marker
// that is its key's only version.
func (r lcRule) expiresMarker(key string) bool {
	e := r.Expiration
	return r.Status == "Enabled" && e != nil && e.ExpiredObjectDeleteMarker != nil && *e.ExpiredObjectDeleteMarker &&
		strings.HasPrefix(key, r.prefix())
}

// aborts reports whether an enabled rule aborts an upload at now.
func (r lcRule) aborts(u gateway.Upload, now time.Time) bool {
	a := r.Abort
	return r.Status == "Enabled" && a != nil && a.DaysAfterInitiation != nil &&
		strings.HasPrefix(u.Key, r.prefix()) && !now.Before(afterDays(u.Initiated, *a.DaysAfterInitiation))
}

// sweepVersions removes the noncurrent versions and the lone delete
// markers of a versioned bucket that rules expire at now. Each key's
// versions are taken whole, newest first: a version became noncurrent
// when the next newer one was written.
func (s *Server) sweepVersions(ctx context.Context, bucket string, rules []lcRule, now time.Time) error {
	if mode, err := s.gw.Versioning(ctx, bucket); err != nil || mode == "" {
		return err
	}
	type doomed struct{ key, vid, why string }
	var gone []doomed
	var group []gateway.VersionEntry
	decide := func() {
		if len(group) == 0 {
			return
		}
		if len(group) == 1 && group[0].DeleteMarker && group[0].IsLatest {
			for _, r := range rules {
				if r.expiresMarker(group[0].Key) {
					gone = append(gone, doomed{group[0].Key, group[0].VersionID, r.ID})
					break
				}
			}
		}
		newer := 0 // noncurrent versions newer than this one
		for i := 1; i < len(group); i++ {
			v := group[i]
			if v.DeleteMarker {
				continue
			}
			for _, r := range rules {
				if r.expiresNoncurrent(v.ObjectInfo, group[i-1].Modified, newer, now) {
					gone = append(gone, doomed{v.Key, v.VersionID, r.ID})
					break
				}
			}
			newer++
		}
		group = group[:0]
	}
	keyMarker, vidMarker := "", ""
	for {
		l, err := s.gw.ListVersions(ctx, bucket, "", "", keyMarker, vidMarker, 1000)
		if err != nil {
			return err
		}
		for _, v := range l.Versions {
			if len(group) > 0 && group[0].Key != v.Key {
				decide()
			}
			group = append(group, v)
		}
		if !l.Truncated {
			break
		}
		keyMarker, vidMarker = l.NextKey, l.NextVersion
	}
	decide()
	var errs []error
	for _, d := range gone {
		if _, err := s.gw.DeleteObjectVersion(ctx, bucket, d.key, d.vid); errors.Is(err, gateway.ErrLocked) {
			// Kept by its object lock: expired once the lock ends.
			s.log.Info("s3: lifecycle keeps a locked version", "bucket", bucket, "key", d.key, "version", d.vid, "rule", d.why)
			continue
		} else if err != nil && !errors.Is(err, gateway.ErrNoVersion) {
			errs = append(errs, err)
			continue
		}
		s.log.Info("s3: lifecycle expired a version", "bucket", bucket, "key", d.key, "version", d.vid, "rule", d.why)
	}
	return errors.Join(errs...)
}

// SweepLifecycle applies every bucket's lifecycle rules once, as of
// Options.Clock's now: it removes the objects an enabled rule expires
// (only the version it listed: one written since stays) and aborts the
// uploads one says are old enough. It goes on past a failure and
// returns them all. Gateways that share a registry may each sweep: what
// one removed, the other finds gone.
func (s *Server) SweepLifecycle(ctx context.Context) error {
	bs, err := s.gw.Buckets(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range bs {
		rules, err := s.lifecycleRules(ctx, b.Name)
		if err == nil && rules != nil {
			err = s.sweepBucket(ctx, b.Name, rules, s.clock.Now())
		}
		if err != nil && !errors.Is(err, gateway.ErrNoBucket) {
			errs = append(errs, fmt.Errorf("lifecycle of %s: %w", b.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Server) sweepBucket(ctx context.Context, bucket string, rules []lcRule, now time.Time) error {
	var expiring, aborting, versions bool
	for _, r := range rules {
		expiring = expiring || r.Status == "Enabled" && r.Expiration != nil
		aborting = aborting || r.Status == "Enabled" && r.Abort != nil
		versions = versions || r.Status == "Enabled" && (r.Noncurrent != nil || r.Expiration != nil && r.Expiration.ExpiredObjectDeleteMarker != nil)
	}
	var errs []error
	if versions {
		if err := s.sweepVersions(ctx, bucket, rules, now); err != nil {
			errs = append(errs, err)
		}
	}
	for after := ""; expiring; {
		l, err := s.gw.List(ctx, bucket, "", "", after, 1000)
		if err != nil {
			return err
		}
		for _, o := range l.Objects {
			for _, r := range rules {
				if !r.expires(o, now) {
					continue
				}
				err := s.gw.DeleteVersion(ctx, bucket, o.Key, o.Version)
				switch {
				case err == nil:
					s.log.Info("s3: lifecycle expired an object", "bucket", bucket, "key", o.Key, "rule", r.ID)
				case !errors.Is(err, gateway.ErrPrecondition): // written since: not this version's turn
					errs = append(errs, err)
				}
				break
			}
		}
		if !l.Truncated {
			break
		}
		after = l.Next
	}
	if aborting {
		us, err := s.gw.Uploads(ctx, bucket)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, u := range us {
			for _, r := range rules {
				if !r.aborts(u, now) {
					continue
				}
				err := s.gw.AbortUpload(ctx, bucket, u.Key, u.ID)
				switch {
				case err == nil:
					s.log.Info("s3: lifecycle aborted an upload", "bucket", bucket, "key", u.Key, "upload", u.ID, "rule", r.ID)
				case !errors.Is(err, gateway.ErrNoUpload):
					errs = append(errs, err)
				}
				break
			}
		}
	}
	return errors.Join(errs...)
}

// RunLifecycle sweeps (SweepLifecycle) at once and then every
// Options.LifecycleEvery of Options.Clock, until ctx is done; with a
// negative LifecycleEvery it returns at once. A sweep's failures are
// logged, and the next sweep tries again.
func (s *Server) RunLifecycle(ctx context.Context) {
	if s.opt.LifecycleEvery < 0 {
		return
	}
	t := s.clock.NewTicker(s.opt.LifecycleEvery)
	defer t.Stop()
	for {
		if err := s.SweepLifecycle(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("s3: lifecycle sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// setExpiration sets an answer's x-amz-expiration for an object an
// enabled rule of its bucket will expire: the earliest such day and the
// rule's ID, as S3 sends it on PUT, copy, completion, GET and HEAD.
func (s *Server) setExpiration(q *request, o gateway.ObjectInfo) {
	rules, err := s.lifecycleRules(q.r.Context(), q.bucket)
	if err != nil || rules == nil {
		return
	}
	var when time.Time
	var id string
	for _, r := range rules {
		e := r.Expiration
		if r.Status != "Enabled" || e == nil || !r.selects(o) {
			continue
		}
		var t time.Time
		switch {
		case e.Days != nil:
			t = afterDays(o.Modified, *e.Days)
		case e.Date != nil:
			t, _ = lcDate(*e.Date)
		}
		if !t.IsZero() && (when.IsZero() || t.Before(when)) {
			when, id = t, r.ID
		}
	}
	if !when.IsZero() {
		q.w.Header()["x-amz-expiration"] = []string{fmt.Sprintf(`expiry-date="%s", rule-id="%s"`, when.Format(http.TimeFormat), id)}
	}
}
