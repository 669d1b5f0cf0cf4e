package s3

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// S3 Object Lock (the gateway's objectlock.go keeps the locks):
// CreateBucket with x-amz-bucket-object-lock-enabled, Get and Put
// ObjectLockConfiguration (?object-lock), Get and Put ObjectRetention
// (?retention) and ObjectLegalHold (?legal-hold), the
// x-amz-object-lock-* headers of writes and reads, and
// x-amz-bypass-governance-retention on deletes and retention changes.

func init() {
	for k, o := range map[opKey]op{
		{onBucket, "GET", "object-lock", false, false}: {"GetObjectLockConfiguration", gateway.Read, false, (*Server).getLockConfig},
		{onBucket, "PUT", "object-lock", false, false}: {"PutObjectLockConfiguration", gateway.Owner, false, (*Server).putLockConfig},
		{onObject, "GET", "retention", false, false}:   {"GetObjectRetention", gateway.Read, false, (*Server).getRetention},
		{onObject, "PUT", "retention", false, false}:   {"PutObjectRetention", gateway.Write, false, (*Server).putRetention},
		{onObject, "GET", "legal-hold", false, false}:  {"GetObjectLegalHold", gateway.Read, false, (*Server).getLegalHold},
		{onObject, "PUT", "legal-hold", false, false}:  {"PutObjectLegalHold", gateway.Write, false, (*Server).putLegalHold},
	} {
		ops[k] = o
	}
	for name, a := range map[string]access{
		"GetObjectLockConfiguration": {"s3:GetBucketObjectLockConfiguration", "", false},
		"PutObjectLockConfiguration": {"s3:PutBucketObjectLockConfiguration", "", false},
		"GetObjectRetention":         {"s3:GetObjectRetention", "", true},
		"PutObjectRetention":         {"s3:PutObjectRetention", "", true},
		"GetObjectLegalHold":         {"s3:GetObjectLegalHold", "", true},
		"PutObjectLegalHold":         {"s3:PutObjectLegalHold", "", true},
		// Not an operation: the permission bypass checks.
		bypassAction: {"s3:BypassGovernanceRetention", "", true},
	} {
		accessOf[name] = a
	}
	ownerOnly["PutObjectLockConfiguration"] = true
	for _, name := range []string{"GetObjectRetention", "PutObjectRetention", "GetObjectLegalHold", "PutObjectLegalHold"} {
		versionOps[name] = true
	}
}

// bypassAction names the permission to bypass GOVERNANCE retention in
// accessOf.
const bypassAction = "BypassGovernanceRetention"

// lockHeaderOps are the operations that take x-amz-object-lock-*.
var lockHeaderOps = map[string]bool{"PutObject": true, "CopyObject": true, "CreateMultipartUpload": true}

// lockHeaderErr is checkHeaders' answer to header ln (lower case) of
// value v for operation opName: x-amz-object-lock-* on a write of a new
// object only, x-amz-bucket-object-lock-enabled on CreateBucket only.
func lockHeaderErr(opName, ln, v string) error {
	switch {
	case strings.HasPrefix(ln, "x-amz-object-lock-") && !lockHeaderOps[opName]:
		return s3err("InvalidArgument", 400, ln+" is taken by PutObject, CopyObject and CreateMultipartUpload only.")
	case ln == "x-amz-bucket-object-lock-enabled" && opName != "CreateBucket" && strings.EqualFold(v, "true"):
		return s3err("InvalidArgument", 400, ln+" is taken by CreateBucket only.")
	}
	return nil
}

// Object lock's S3 errors.
var (
	errNoLockConfig     = s3err("InvalidRequest", 400, "Bucket is missing Object Lock Configuration")
	errLockConfigAbsent = s3err("ObjectLockConfigurationNotFoundError", 404, "Object Lock configuration does not exist for this bucket")
	errNoObjectLock     = s3err("NoSuchObjectLockConfiguration", 404, "The specified object does not have a ObjectLock configuration")
	errLocked           = s3err("AccessDenied", 403, "Access Denied because object protected by object lock.")
	errLockChecksum     = s3err("InvalidRequest", 400, "Content-MD5 OR x-amz-checksum- HTTP header is required for Put Object requests with Object Lock parameters")
	errLockPast         = s3err("InvalidArgument", 400, "The retain until date must be in the future!")
)

// lockErr is the S3 error of an object lock error of the gateway (nil
// for another error).
func lockErr(err error) *Error {
	switch {
	case errors.Is(err, gateway.ErrLocked):
		return errLocked
	case errors.Is(err, gateway.ErrNoLockConfig):
		return errNoLockConfig
	case errors.Is(err, gateway.ErrLockState):
		return s3err("InvalidBucketState", 409, "Object Lock needs the bucket's versioning Enabled, and keeps it so: versioning cannot be suspended on a bucket with Object Lock.")
	case errors.Is(err, gateway.ErrRetentionPast):
		return errLockPast
	case errors.Is(err, gateway.ErrBadLock):
		return s3err("InvalidArgument", 400, strings.TrimPrefix(err.Error(), "gateway: "))
	}
	return nil
}

// lockTime is the form of retention dates in answers.
const lockTime = "2006-01-02T15:04:05.000Z"

// parseLockTime reads a retention date (ISO 8601, as RFC 3339).
func parseLockTime(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(v))
	return t.UTC(), err
}

// requestLock reads the x-amz-object-lock-* headers (or presigned query
// parameters) of a write (nil: none).
func requestLock(q *request) (*gateway.Lock, error) {
	// Headers, or a presigned URL's query parameters.
	mode := q.param("x-amz-object-lock-mode")
	until := q.param("x-amz-object-lock-retain-until-date")
	hold := q.param("x-amz-object-lock-legal-hold")
	if mode == "" && until == "" && hold == "" {
		return nil, nil
	}
	var l gateway.Lock
	if (mode == "") != (until == "") {
		return nil, s3err("InvalidArgument", 400, "x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
	}
	if mode != "" {
		if mode != gateway.LockGovernance && mode != gateway.LockCompliance {
			return nil, s3err("InvalidArgument", 400, "Unknown wormMode directive: x-amz-object-lock-mode is GOVERNANCE or COMPLIANCE.")
		}
		t, err := parseLockTime(until)
		if err != nil {
			return nil, s3err("InvalidArgument", 400, "The retain until date must be provided in ISO 8601 format")
		}
		if !t.After(time.Now()) {
			return nil, errLockPast
		}
		l.Mode, l.RetainUntil = mode, t
	}
	switch hold {
	case "", "OFF":
	case "ON":
		l.LegalHold = true
	default:
		return nil, s3err("InvalidArgument", 400, "Legal Hold must be either of 'ON' or 'OFF'")
	}
	return &l, nil
}

// writeLock reads a write's lock and checks the bucket takes it: false
// means the answer is sent. checksummed, for PutObject, says whether the
// request's body is checked (hasChecksum): S3 wants Content-MD5 or an
// x-amz-checksum on a write that locks its object, with its own lock or
// the bucket's default retention.
func (s *Server) writeLock(q *request, checksummed *bool) (*gateway.Lock, bool) {
	l, err := requestLock(q)
	if err != nil {
		q.fail(err)
		return nil, false
	}
	if l != nil {
		if _, err := s.gw.ObjectLockConfig(q.r.Context(), q.bucket); err != nil {
			q.fail(err)
			return nil, false
		}
	}
	if checksummed != nil && !*checksummed && s.gw.ObjectLockWanted(q.r.Context(), q.bucket, l) {
		q.fail(errLockChecksum)
		return nil, false
	}
	return l, true
}

// hasChecksum reports whether a request's body is checked: it carries
// Content-MD5, an x-amz-checksum-* header or one in its trailer, or its
// Signature V4 covers the body (x-amz-content-sha256 a SHA-256, or
// signed chunks), as clients over plain HTTP send it.
func hasChecksum(h http.Header) bool {
	if h.Get("Content-MD5") != "" {
		return true
	}
	if ph := h.Get("X-Amz-Content-Sha256"); len(ph) == 64 && strings.Trim(ph, "0123456789abcdef") == "" ||
		strings.HasPrefix(ph, "STREAMING-AWS4-") && !strings.HasPrefix(ph, "STREAMING-UNSIGNED-") {
		return true
	}
	for k := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-checksum-") && !checksumParams[lk] {
			return true
		}
	}
	return strings.Contains(strings.ToLower(strings.Join(h.Values("X-Amz-Trailer"), ",")), "x-amz-checksum-")
}

// setLockHeaders sets the x-amz-object-lock-* headers of a read, as S3
// does: the retention ones if the requester may also
// GetObjectRetention, the legal hold one if it may GetObjectLegalHold.
func (s *Server) setLockHeaders(q *request, h http.Header, info gateway.ObjectInfo) {
	l := info.Lock
	if l == nil {
		return
	}
	may := func(name string) bool { return s.decide(q, name, q.bucket, q.object, gateway.Read) == nil }
	if l.Mode != "" && may("GetObjectRetention") {
		h.Set("x-amz-object-lock-mode", l.Mode)
		h.Set("x-amz-object-lock-retain-until-date", l.RetainUntil.UTC().Format(lockTime))
	}
	if !may("GetObjectLegalHold") {
		return
	}
	if l.LegalHold {
		h.Set("x-amz-object-lock-legal-hold", "ON")
	} else {
		h.Set("x-amz-object-lock-legal-hold", "OFF")
	}
}

// bypass reports whether a request asks to bypass GOVERNANCE retention
// (x-amz-bypass-governance-retention: true) and may: an admin key, a key
// that owns the bucket, or one a bucket policy allows
// s3:BypassGovernanceRetention.
func (s *Server) bypass(q *request, key string) bool {
	if !strings.EqualFold(q.param("x-amz-bypass-governance-retention"), "true") {
		return false
	}
	return s.decide(q, bypassAction, q.bucket, key, gateway.Owner) == nil
}

type defaultRetentionXML struct {
	Mode  string `xml:"Mode,omitempty"`
	Days  int    `xml:"Days,omitempty"`
	Years int    `xml:"Years,omitempty"`
}

type lockConfigXML struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	NS                string   `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled,omitempty"`
	Rule              *struct {
		DefaultRetention *defaultRetentionXML `xml:"DefaultRetention"`
	} `xml:"Rule,omitempty"`
}

func (s *Server) getLockConfig(q *request) {
	c, err := s.gw.ObjectLockConfig(q.r.Context(), q.bucket)
	if errors.Is(err, gateway.ErrNoLockConfig) {
		err = errLockConfigAbsent
	}
	if err != nil {
		q.fail(err)
		return
	}
	out := lockConfigXML{NS: s3ns, ObjectLockEnabled: "Enabled"}
	if c.Mode != "" {
		out.Rule = &struct {
			DefaultRetention *defaultRetentionXML `xml:"DefaultRetention"`
		}{&defaultRetentionXML{c.Mode, c.Days, c.Years}}
	}
	q.xml(200, out)
}

func (s *Server) putLockConfig(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in lockConfigXML
	if err := xml.Unmarshal(body, &in); err != nil || in.ObjectLockEnabled != "Enabled" {
		q.fail(errMalformedXML)
		return
	}
	var c gateway.LockConfig
	if in.Rule != nil {
		d := in.Rule.DefaultRetention
		if d == nil || d.Mode == "" || (d.Days == 0) == (d.Years == 0) {
			q.fail(errMalformedXML)
			return
		}
		if d.Mode != gateway.LockGovernance && d.Mode != gateway.LockCompliance {
			q.fail(errMalformedXML)
			return
		}
		if d.Days < 0 || d.Years < 0 {
			q.fail(s3err("InvalidArgument", 400, "Default retention period must be a positive integer value."))
			return
		}
		c = gateway.LockConfig{Mode: d.Mode, Days: d.Days, Years: d.Years}
	}
	if err := s.gw.SetObjectLockConfig(q.r.Context(), q.bucket, c); err != nil {
		if errors.Is(err, gateway.ErrLockState) {
			err = s3err("InvalidBucketState", 409, "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration")
		}
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

type retentionXML struct {
	XMLName         xml.Name `xml:"Retention"`
	NS              string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

// lockedVersion reads the version a retention or legal hold request
// names; false means the answer is sent.
func (s *Server) lockedVersion(q *request) (gateway.ObjectInfo, bool) {
	if _, err := s.gw.ObjectLockConfig(q.r.Context(), q.bucket); err != nil {
		q.fail(err)
		return gateway.ObjectInfo{}, false
	}
	info, _, err := s.gw.LookupVersion(q.r.Context(), q.bucket, q.object, versionID(q))
	if err != nil {
		q.fail(err)
		return gateway.ObjectInfo{}, false
	}
	return info, true
}

func (s *Server) getRetention(q *request) {
	info, ok := s.lockedVersion(q)
	if !ok {
		return
	}
	if info.Lock == nil || info.Lock.Mode == "" {
		q.fail(errNoObjectLock)
		return
	}
	q.xml(200, retentionXML{NS: s3ns, Mode: info.Lock.Mode, RetainUntilDate: info.Lock.RetainUntil.UTC().Format(lockTime)})
}

func (s *Server) putRetention(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in retentionXML
	if err := xml.Unmarshal(body, &in); err != nil || (in.Mode == "") != (in.RetainUntilDate == "") {
		q.fail(errMalformedXML)
		return
	}
	if in.Mode != "" && in.Mode != gateway.LockGovernance && in.Mode != gateway.LockCompliance {
		q.fail(errMalformedXML)
		return
	}
	var until time.Time
	if in.RetainUntilDate != "" {
		if until, err = parseLockTime(in.RetainUntilDate); err != nil {
			q.fail(errMalformedXML)
			return
		}
	}
	bypass := s.bypass(q, q.object)
	info, err := s.gw.UpdateLock(q.r.Context(), q.bucket, q.object, versionID(q), func(cur *gateway.Lock) (*gateway.Lock, error) {
		if err := gateway.CheckRetentionChange(cur, in.Mode, until, bypass, time.Now()); err != nil {
			return nil, err
		}
		var l gateway.Lock
		if cur != nil {
			l = *cur
		}
		l.Mode, l.RetainUntil = in.Mode, until
		return &l, nil
	})
	if err != nil {
		q.fail(err)
		return
	}
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	q.status = 200
	q.w.WriteHeader(200)
}

type legalHoldXML struct {
	XMLName xml.Name `xml:"LegalHold"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:"Status"`
}

func (s *Server) getLegalHold(q *request) {
	info, ok := s.lockedVersion(q)
	if !ok {
		return
	}
	if info.Lock == nil {
		q.fail(errNoObjectLock)
		return
	}
	out := legalHoldXML{NS: s3ns, Status: "OFF"}
	if info.Lock.LegalHold {
		out.Status = "ON"
	}
	q.xml(200, out)
}

func (s *Server) putLegalHold(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in legalHoldXML
	if err := xml.Unmarshal(body, &in); err != nil || in.Status != "ON" && in.Status != "OFF" {
		q.fail(errMalformedXML)
		return
	}
	info, err := s.gw.UpdateLock(q.r.Context(), q.bucket, q.object, versionID(q), func(cur *gateway.Lock) (*gateway.Lock, error) {
		var l gateway.Lock
		if cur != nil {
			l = *cur
		}
		l.LegalHold = in.Status == "ON"
		return &l, nil
	})
	if err != nil {
		q.fail(err)
		return
	}
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	q.status = 200
	q.w.WriteHeader(200)
}
