package s3

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Bucket versioning (the gateway's versions.go keeps the versions):
// Get/PutBucketVersioning, ListObjectVersions, the x-amz-version-id
// header of writes and reads, and the answers for delete markers. A
// bucket never versioned answers as S3's: every object is its one
// "null" version.

func (s *Server) getVersioning(q *request) {
	mode, err := s.gw.Versioning(q.r.Context(), q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	q.xml(200, struct {
		XMLName xml.Name `xml:"VersioningConfiguration"`
		NS      string   `xml:"xmlns,attr"`
		Status  string   `xml:",omitempty"`
	}{NS: s3ns, Status: mode})
}

func (s *Server) putVersioning(q *request) {
	if q.r.Header.Get("x-amz-mfa") != "" {
		q.fail(notImpl("MFA Delete is not implemented: the gateway has no MFA devices."))
		return
	}
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in struct {
		XMLName   xml.Name `xml:"VersioningConfiguration"`
		Status    string
		MfaDelete string
	}
	if err := xml.Unmarshal(body, &in); err != nil {
		q.fail(errMalformedXML)
		return
	}
	switch in.MfaDelete {
	case "", "Disabled":
	case "Enabled":
		q.fail(notImpl("MFA Delete is not implemented: the gateway has no MFA devices."))
		return
	default:
		q.fail(errMalformedXML)
		return
	}
	if in.Status != gateway.VersioningEnabled && in.Status != gateway.VersioningSuspended {
		q.fail(errMalformedXML)
		return
	}
	if err := s.gw.SetVersioning(q.r.Context(), q.bucket, in.Status); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

// versionID is the request's ?versionId ("" if none; route checked its
// form).
func versionID(q *request) string { return q.r.URL.Query().Get("versionId") }

// setVersionHeader sets x-amz-version-id for a version of an object of
// bucket: its ID, or "null" on a versioned bucket; none on a bucket
// never versioned.
func (s *Server) setVersionHeader(q *request, h http.Header, bucket string, info gateway.ObjectInfo) {
	if info.VersionID != "" {
		h.Set("x-amz-version-id", info.VersionID)
		return
	}
	if mode, _ := s.gw.Versioning(q.r.Context(), bucket); mode != "" {
		h.Set("x-amz-version-id", gateway.NullVersion)
	}
}

// deleteMarkerHeaders sets the headers of an answer about a delete
// marker (a GET of one: 404 or 405).
func deleteMarkerHeaders(h http.Header, err error) {
	var dm *gateway.DeleteMarkerError
	if errors.As(err, &dm) {
		h.Set("x-amz-delete-marker", "true")
		h.Set("x-amz-version-id", dm.VersionID)
		if !dm.Current {
			h.Set("Last-Modified", dm.Modified.UTC().Format(http.TimeFormat))
			h.Set("Allow", "DELETE")
		}
	}
}

type versionXML struct {
	XMLName      xml.Name `xml:"Version"`
	Key          string
	VersionId    string
	IsLatest     bool
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
	Owner        owner
}

type deleteMarkerXML struct {
	XMLName      xml.Name `xml:"DeleteMarker"`
	Key          string
	VersionId    string
	IsLatest     bool
	LastModified string
	Owner        owner
}

func (s *Server) listVersions(q *request) {
	v := q.r.URL.Query()
	maxKeys := 1000
	if m := v.Get("max-keys"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			q.fail(s3err("InvalidArgument", 400, "max-keys must be a non-negative integer"))
			return
		}
		maxKeys = min(n, 1000)
	}
	prefix, delim := v.Get("prefix"), v.Get("delimiter")
	keyMarker, vidMarker := v.Get("key-marker"), v.Get("version-id-marker")
	if vidMarker != "" && keyMarker == "" {
		q.fail(s3err("InvalidArgument", 400, "A version-id marker cannot be specified without a key marker."))
		return
	}
	l, err := s.gw.ListVersions(q.r.Context(), q.bucket, prefix, delim, keyMarker, vidMarker, maxKeys)
	if err != nil {
		q.fail(err)
		return
	}
	urlEnc := v.Get("encoding-type") == "url"
	enc := func(s string) string {
		if urlEnc {
			return urlEncode(s)
		}
		return s
	}
	type result struct {
		XMLName             xml.Name `xml:"ListVersionsResult"`
		NS                  string   `xml:"xmlns,attr"`
		Name                string
		Prefix              string
		KeyMarker           string
		VersionIdMarker     string
		NextKeyMarker       string `xml:",omitempty"`
		NextVersionIdMarker string `xml:",omitempty"`
		MaxKeys             int
		Delimiter           string `xml:",omitempty"`
		EncodingType        string `xml:",omitempty"`
		IsTruncated         bool
		Entries             []any
		CommonPrefixes      []prefixXML
	}
	out := result{NS: s3ns, Name: q.bucket, Prefix: enc(prefix), KeyMarker: enc(keyMarker), VersionIdMarker: vidMarker,
		MaxKeys: maxKeys, Delimiter: enc(delim), IsTruncated: l.Truncated,
		NextKeyMarker: enc(l.NextKey), NextVersionIdMarker: l.NextVersion}
	if urlEnc {
		out.EncodingType = "url"
	}
	ownerOf, err := s.listOwners(q)
	if err != nil {
		q.fail(err)
		return
	}
	stamp := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	for _, o := range l.Versions {
		if o.DeleteMarker {
			out.Entries = append(out.Entries, deleteMarkerXML{Key: enc(o.Key), VersionId: o.VersionID, IsLatest: o.IsLatest,
				LastModified: stamp(o.Modified), Owner: ownerOf(o.ObjectInfo)})
			continue
		}
		out.Entries = append(out.Entries, versionXML{Key: enc(o.Key), VersionId: o.VersionID, IsLatest: o.IsLatest,
			LastModified: stamp(o.Modified), ETag: `"` + o.ETag + `"`, Size: o.Size, StorageClass: "STANDARD", Owner: ownerOf(o.ObjectInfo)})
	}
	for _, p := range l.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{enc(p)})
	}
	q.xml(200, out)
}
