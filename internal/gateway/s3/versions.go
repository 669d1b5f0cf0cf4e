package s3

import (
	"encoding/xml"
	"strconv"
)

// Buckets are not versioned: every object is its one version, "null"
// (as on an S3 bucket whose versioning was never enabled). So
// GetBucketVersioning answers an empty configuration and
// ListObjectVersions lists each object once, as its latest and only
// version, with no delete markers.

func (s *Server) getVersioning(q *request) {
	q.xml(200, struct {
		XMLName xml.Name `xml:"VersioningConfiguration"`
		NS      string   `xml:"xmlns,attr"`
	}{NS: s3ns})
}

type versionXML struct {
	Key          string
	VersionId    string
	IsLatest     bool
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
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
	if vidMarker != "" && vidMarker != "null" {
		q.fail(s3err("InvalidArgument", 400, "Invalid version id specified"))
		return
	}
	// Each key has one version: what follows the marker (the key, or its
	// null version) is the keys after it.
	l, err := s.gw.List(q.r.Context(), q.bucket, prefix, delim, keyMarker, maxKeys)
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
		Version             []versionXML
		CommonPrefixes      []prefixXML
	}
	out := result{NS: s3ns, Name: q.bucket, Prefix: enc(prefix), KeyMarker: enc(keyMarker), VersionIdMarker: vidMarker,
		MaxKeys: maxKeys, Delimiter: enc(delim), IsTruncated: l.Truncated}
	if urlEnc {
		out.EncodingType = "url"
	}
	for _, o := range l.Objects {
		out.Version = append(out.Version, versionXML{Key: enc(o.Key), VersionId: "null", IsLatest: true,
			LastModified: o.Modified.Format("2006-01-02T15:04:05.000Z"), ETag: `"` + o.ETag + `"`, Size: o.Size,
			StorageClass: "STANDARD", Owner: owner{q.key.ID, q.key.ID}})
	}
	for _, p := range l.Prefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{enc(p)})
	}
	if l.Truncated {
		out.NextKeyMarker = enc(l.Next)
		if len(l.Objects) > 0 && l.Objects[len(l.Objects)-1].Key == l.Next {
			out.NextVersionIdMarker = "null"
		}
	}
	q.xml(200, out)
}
