package s3

import (
	"encoding/xml"
	"github.com/quilt-grid/quilt/internal/gateway"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// objectAttributes are the names x-amz-object-attributes may list.
var objectAttributes = map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}

// getAttributes is GetObjectAttributes (GET ?attributes): what the
// x-amz-object-attributes header asks of an object, without its bytes.
// ObjectParts lists a multipart object's parts, paged by
// x-amz-max-parts and x-amz-part-number-marker.
func (s *Server) getAttributes(q *request) {
	h := q.r.Header
	want := map[string]bool{}
	for _, v := range h.Values("x-amz-object-attributes") {
		for a := range strings.SplitSeq(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if !objectAttributes[a] {
					q.fail(s3err("InvalidArgument", 400, "Invalid attribute name specified: "+a))
					return
				}
				want[a] = true
			}
		}
	}
	if len(want) == 0 {
		q.fail(s3err("InvalidArgument", 400, "x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty"))
		return
	}
	maxParts, marker := 1000, 0
	if m := h.Get("x-amz-max-parts"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			q.fail(s3err("InvalidArgument", 400, "x-amz-max-parts must be a non-negative integer"))
			return
		}
		maxParts = min(n, 1000)
	}
	if m := h.Get("x-amz-part-number-marker"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			q.fail(s3err("InvalidArgument", 400, "x-amz-part-number-marker must be a non-negative integer"))
			return
		}
		marker = n
	}
	key, ok := s.requestKey(q)
	if !ok {
		return
	}
	info, _, err := s.gw.Lookup(q.r.Context(), q.bucket, q.object)
	if err == nil {
		err = gateway.CheckCustomerKey(info.Encryption, key)
	}
	if err != nil {
		q.fail(err)
		return
	}
	echoKey(q, key)
	type checksum struct {
		checksumXML
		ChecksumType string `xml:",omitempty"`
	}
	type part struct {
		PartNumber int
		Size       int64
		checksumXML
	}
	type parts struct {
		TotalPartsCount      int `xml:"PartsCount"`
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Part                 []part
	}
	out := struct {
		XMLName      xml.Name  `xml:"GetObjectAttributesResponse"`
		NS           string    `xml:"xmlns,attr"`
		ETag         string    `xml:",omitempty"`
		Checksum     *checksum `xml:",omitempty"`
		ObjectParts  *parts    `xml:",omitempty"`
		StorageClass string    `xml:",omitempty"`
		ObjectSize   *int64    `xml:",omitempty"`
	}{NS: s3ns}
	if want["ETag"] {
		out.ETag = info.ETag // without quotes, as S3 answers here
	}
	if want["Checksum"] && len(info.Checksums) > 0 {
		// A COMPOSITE checksum goes without its "-N" here: the part
		// count is ObjectParts' (as S3 answers, and minio-go expects).
		sums := map[string]string{}
		for alg, v := range info.Checksums {
			if info.ChecksumType == gateway.Composite {
				if i := strings.LastIndexByte(v, '-'); i > 0 {
					v = v[:i]
				}
			}
			sums[alg] = v
		}
		out.Checksum = &checksum{toChecksumXML(sums), info.ChecksumType}
	}
	if want["ObjectParts"] && len(info.Parts) > 0 {
		ps := &parts{TotalPartsCount: len(info.Parts), PartNumberMarker: marker, MaxParts: maxParts}
		for _, p := range info.Parts {
			if p.Number <= marker {
				continue
			}
			if len(ps.Part) == maxParts {
				ps.IsTruncated = true
				break
			}
			ps.Part = append(ps.Part, part{p.Number, p.Size, toChecksumXML(p.Checksums)})
			ps.NextPartNumberMarker = p.Number
		}
		out.ObjectParts = ps
	}
	if want["StorageClass"] {
		out.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		out.ObjectSize = &info.Size
	}
	q.w.Header().Set("Last-Modified", info.Modified.Truncate(time.Second).Format(http.TimeFormat))
	q.xml(200, out)
}
