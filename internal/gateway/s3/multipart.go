package s3

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// MinPart is the smallest size of a part that is not the last (S3's).
const MinPart = 5 << 20

func (s *Server) createUpload(q *request) {
	opt := putOptions(q.r.Header)
	tags, err := tagsHeader(q.r.Header)
	if err != nil {
		q.fail(err)
		return
	}
	opt.Tags = tags
	if opt.ACL, err = s.newObjectACL(q); err != nil {
		q.fail(err)
		return
	}
	alg := strings.ToLower(q.r.Header.Get("x-amz-checksum-algorithm"))
	typ := strings.ToUpper(q.r.Header.Get("x-amz-checksum-type"))
	if alg == "" && typ != "" {
		q.fail(s3err("InvalidRequest", 400, "x-amz-checksum-type requires x-amz-checksum-algorithm."))
		return
	}
	if alg != "" {
		if typ == "" {
			typ = gateway.DefaultChecksumType(alg)
		}
		if err := gateway.CheckChecksumType(alg, typ); err != nil {
			q.fail(s3err("InvalidRequest", 400, "Checksum: "+err.Error()+"."))
			return
		}
		opt.ChecksumAlgorithm, opt.ChecksumType = alg, typ
	}
	var ok bool
	if opt.CustomerKey, ok = s.requestKey(q); !ok {
		return
	}
	if opt.Lock, ok = s.writeLock(q, nil); !ok { // objectlock.go
		return
	}
	u, err := s.gw.CreateUpload(q.r.Context(), q.bucket, q.object, opt)
	if err != nil {
		q.fail(err)
		return
	}
	echoKey(q, opt.CustomerKey)
	if alg != "" {
		q.w.Header().Set("x-amz-checksum-algorithm", strings.ToUpper(alg))
		q.w.Header().Set("x-amz-checksum-type", typ)
	}
	q.xml(200, struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		NS       string   `xml:"xmlns,attr"`
		Bucket   string
		Key      string
		UploadID string `xml:"UploadId"`
	}{NS: s3ns, Bucket: q.bucket, Key: q.object, UploadID: u.ID})
}

func (s *Server) uploadPart(q *request) {
	v := q.r.URL.Query()
	n, err := strconv.Atoi(v.Get("partNumber"))
	if err != nil || n < 1 || n > gateway.MaxParts {
		q.fail(s3err("InvalidArgument", 400, "Part number must be an integer between 1 and 10000, inclusive"))
		return
	}
	want, ok := contentMD5(q)
	if !ok {
		return
	}
	key, ok := s.requestKey(q)
	if !ok {
		return
	}
	p, err := s.gw.PutPartKey(q.r.Context(), q.bucket, q.object, v.Get("uploadId"), n, q.body, q.length, want, q.sums.Sums, key)
	if err != nil {
		q.fail(uploadKeyErr(err))
		return
	}
	q.bytes = p.Size
	echoKey(q, key)
	q.w.Header().Set("ETag", `"`+p.ETag+`"`)
	if !q.sums.implicit {
		setChecksumHeaders(q.w.Header(), p.Checksums, "")
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) listParts(q *request) {
	id := q.r.URL.Query().Get("uploadId")
	if !s.uploadKey(q, id) {
		return
	}
	parts, err := s.gw.Parts(q.r.Context(), q.bucket, q.object, id)
	if err != nil {
		q.fail(err)
		return
	}
	type partXML struct {
		PartNumber   int
		LastModified string
		ETag         string
		Size         int64
		checksumXML
	}
	out := struct {
		XMLName     xml.Name `xml:"ListPartsResult"`
		NS          string   `xml:"xmlns,attr"`
		Bucket      string
		Key         string
		UploadID    string `xml:"UploadId"`
		MaxParts    int
		IsTruncated bool
		Parts       []partXML `xml:"Part"`
	}{NS: s3ns, Bucket: q.bucket, Key: q.object, UploadID: id, MaxParts: gateway.MaxParts}
	for _, p := range parts {
		out.Parts = append(out.Parts, partXML{p.Number, p.Time.Format("2006-01-02T15:04:05.000Z"), `"` + p.ETag + `"`, p.Size, toChecksumXML(p.Checksums)})
	}
	q.xml(200, out)
}

func (s *Server) completeUpload(q *request) {
	var in struct {
		Parts []struct {
			PartNumber int
			ETag       string
			checksumXML
		} `xml:"Part"`
	}
	q.sums.describesObject()
	body, err := io.ReadAll(io.LimitReader(q.body, 4<<20))
	if err != nil {
		q.fail(err)
		return
	}
	if err := xml.Unmarshal(body, &in); err != nil || len(in.Parts) == 0 {
		q.fail(errMalformedXML)
		return
	}
	if !s.uploadKey(q, q.r.URL.Query().Get("uploadId")) {
		return
	}
	refs := make([]gateway.PartRef, len(in.Parts))
	for i, p := range in.Parts {
		refs[i] = gateway.PartRef{Number: p.PartNumber, ETag: strings.Trim(p.ETag, `"`), Checksums: p.sums()}
	}
	// x-amz-checksum-ALG headers here are the whole object's checksum.
	var want map[string]string
	for name, v := range q.r.Header {
		if alg, ok := strings.CutPrefix(strings.ToLower(name), "x-amz-checksum-"); ok && len(v) > 0 {
			if _, known := gateway.NewChecksum(alg); known {
				if want == nil {
					want = map[string]string{}
				}
				want[alg] = strings.TrimSpace(v[0])
			}
		}
	}
	info, err := s.gw.CompleteUploadIf(q.r.Context(), q.bucket, q.object, q.r.URL.Query().Get("uploadId"), refs, MinPart, want, writeCondition(q.r.Header))
	if errors.Is(err, gateway.ErrNoUpload) {
		// A completion sent again (a client retrying after a lost
		// answer) gets the first one's result, as on S3, while the key
		// holds the object those parts made.
		if done, ok := s.completed(q, refs); ok {
			info, err = done, nil
		}
	}
	if err != nil {
		q.fail(err)
		return
	}
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	s.setExpiration(q, info)
	q.xml(200, struct {
		XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
		NS       string   `xml:"xmlns,attr"`
		Location string
		Bucket   string
		Key      string
		ETag     string
		checksumXML
		ChecksumType string `xml:",omitempty"`
	}{NS: s3ns, Location: "/" + q.bucket + "/" + q.object, Bucket: q.bucket, Key: q.object, ETag: `"` + info.ETag + `"`,
		checksumXML: toChecksumXML(info.Checksums), ChecksumType: info.ChecksumType})
}

func (s *Server) abortUpload(q *request) {
	if err := s.gw.AbortUpload(q.r.Context(), q.bucket, q.object, q.r.URL.Query().Get("uploadId")); err != nil {
		q.fail(err)
		return
	}
	q.status = http.StatusNoContent
	q.w.WriteHeader(http.StatusNoContent)
}

// listUploads is ListMultipartUploads: the bucket's uploads in progress
// by key, then by initiation, as S3 lists them, with its parameters:
// prefix, delimiter (common prefixes), key-marker and upload-id-marker
// (resume after them), max-uploads (1-1000; 0 lists none) and
// encoding-type=url.
func (s *Server) listUploads(q *request) {
	v := q.r.URL.Query()
	prefix, delim := v.Get("prefix"), v.Get("delimiter")
	keyMarker, idMarker := v.Get("key-marker"), v.Get("upload-id-marker")
	limit := 1000
	if m := v.Get("max-uploads"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 0 {
			q.fail(s3err("InvalidArgument", 400, "max-uploads must be an integer from 0 to 2147483647"))
			return
		}
		limit = min(n, 1000)
	}
	enc := v.Get("encoding-type")
	if enc != "" && enc != "url" {
		q.fail(s3err("InvalidArgument", 400, "Invalid Encoding Method specified in Request"))
		return
	}
	name := func(s string) string {
		if enc == "url" {
			return urlEncode(s)
		}
		return s
	}
	us, err := s.gw.Uploads(q.r.Context(), q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	type uploadXML struct {
		Key       string
		UploadID  string `xml:"UploadId"`
		Initiated string
	}
	type prefixXML struct{ Prefix string }
	out := struct {
		XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
		NS                 string   `xml:"xmlns,attr"`
		Bucket             string
		KeyMarker          string
		UploadIDMarker     string `xml:"UploadIdMarker"`
		NextKeyMarker      string `xml:",omitempty"`
		NextUploadIDMarker string `xml:"NextUploadIdMarker,omitempty"`
		Prefix             string
		Delimiter          string `xml:",omitempty"`
		EncodingType       string `xml:",omitempty"`
		MaxUploads         int
		IsTruncated        bool
		Uploads            []uploadXML `xml:"Upload"`
		CommonPrefixes     []prefixXML `xml:"CommonPrefixes"`
	}{NS: s3ns, Bucket: q.bucket, KeyMarker: name(keyMarker), UploadIDMarker: idMarker, Prefix: name(prefix),
		Delimiter: name(delim), EncodingType: enc, MaxUploads: limit}
	sort.Slice(us, func(i, j int) bool {
		return us[i].Key < us[j].Key || us[i].Key == us[j].Key && us[i].Initiated.Before(us[j].Initiated)
	})
	// The uploads of key-marker listed already: all of them, or those up
	// to upload-id-marker (by ID if it is not one of them).
	markerAt := -1
	for i, u := range us {
		if idMarker != "" && u.Key == keyMarker && u.ID == idMarker {
			markerAt = i
		}
	}
	// A key-marker that is a common prefix resumes past every key under it.
	skipUnder := ""
	if delim != "" && idMarker == "" && strings.HasPrefix(keyMarker, prefix) && strings.HasSuffix(keyMarker, delim) &&
		strings.Contains(keyMarker[len(prefix):], delim) {
		skipUnder = keyMarker
	}
	n, lastPrefix := 0, ""
	for i, u := range us {
		if !strings.HasPrefix(u.Key, prefix) || u.Key < keyMarker {
			continue
		}
		if skipUnder != "" && strings.HasPrefix(u.Key, skipUnder) {
			continue // a common prefix listed already
		}
		if u.Key == keyMarker && (idMarker == "" || markerAt >= 0 && i <= markerAt || markerAt < 0 && u.ID <= idMarker) {
			continue
		}
		cp := ""
		if delim != "" {
			if j := strings.Index(u.Key[len(prefix):], delim); j >= 0 {
				cp = u.Key[:len(prefix)+j+len(delim)]
			}
		}
		if cp != "" && cp == lastPrefix {
			continue
		}
		if n == limit {
			out.IsTruncated = true
			break
		}
		n++
		if cp != "" {
			lastPrefix = cp
			out.CommonPrefixes = append(out.CommonPrefixes, prefixXML{name(cp)})
			out.NextKeyMarker, out.NextUploadIDMarker = name(cp), ""
			continue
		}
		out.Uploads = append(out.Uploads, uploadXML{name(u.Key), u.ID, u.Initiated.Format(time.RFC3339)})
		out.NextKeyMarker, out.NextUploadIDMarker = name(u.Key), u.ID
	}
	if !out.IsTruncated {
		out.NextKeyMarker, out.NextUploadIDMarker = "", ""
	}
	q.xml(200, out)
}

// uploadPartCopy is UploadPart with x-amz-copy-source: the part's bytes
// are the source object's, or the x-amz-copy-source-range of them,
// streamed from the grid into a new part.
func (s *Server) uploadPartCopy(q *request) {
	v := q.r.URL.Query()
	n, err := strconv.Atoi(v.Get("partNumber"))
	if err != nil || n < 1 || n > gateway.MaxParts {
		q.fail(s3err("InvalidArgument", 400, "Part number must be an integer between 1 and 10000, inclusive"))
		return
	}
	ctx := q.r.Context()
	id := v.Get("uploadId")
	u, err := s.gw.Upload(ctx, q.bucket, q.object, id)
	if err != nil {
		q.fail(err)
		return
	}
	key, ok := s.requestKey(q)
	if !ok {
		return
	}
	if err := gateway.CheckCustomerKey(u.Encryption, key); err != nil {
		q.fail(uploadKeyErr(err))
		return
	}
	src, ok := s.copySource(q)
	if !ok {
		return
	}
	info := src.info
	off, length := int64(0), info.Size
	if rg := q.r.Header.Get("x-amz-copy-source-range"); rg != "" {
		if off, length, ok = copyRange(rg, info.Size); !ok {
			q.fail(s3err("InvalidArgument", 400, fmt.Sprintf("The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy, within the source object of size %d.", info.Size)))
			return
		}
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.gw.ReadVersionKey(ctx, info, src.inline, src.key, pw, off, length))
	}()
	// The part gets the checksum of the upload's algorithm, computed as
	// it streams (CRC64NVME when the upload names none).
	hdr := http.Header{}
	if u.Options.ChecksumAlgorithm != "" {
		hdr.Set("X-Amz-Trailer", "x-amz-checksum-"+u.Options.ChecksumAlgorithm)
	}
	sr := newSums(hdr, pr)
	p, err := s.gw.PutPartKey(ctx, q.bucket, q.object, id, n, sr, length, nil, sr.Sums, key)
	pr.CloseWithError(io.ErrClosedPipe) // stops the reader if PutPart gave up early
	if err != nil {
		q.fail(uploadKeyErr(err))
		return
	}
	q.bytes = p.Size
	echoKey(q, key)
	out := struct {
		XMLName      xml.Name `xml:"CopyPartResult"`
		NS           string   `xml:"xmlns,attr"`
		LastModified string
		ETag         string
		checksumXML
	}{NS: s3ns, LastModified: p.Time.Format("2006-01-02T15:04:05.000Z"), ETag: `"` + p.ETag + `"`}
	if u.Options.ChecksumAlgorithm != "" {
		out.checksumXML = toChecksumXML(p.Checksums)
	}
	q.xml(200, out)
}

// copyRange parses x-amz-copy-source-range, bytes=first-last, both
// within an object of size bytes.
func copyRange(h string, size int64) (off, length int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	a, b, cut := strings.Cut(spec, "-")
	if !found || !cut {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first || last >= size {
		return 0, 0, false
	}
	return first, last - first + 1, true
}

// completed returns the object at the request's key if it is the one a
// completion of exactly refs made: its parts are refs, by number and
// ETag, in order.
func (s *Server) completed(q *request, refs []gateway.PartRef) (gateway.ObjectInfo, bool) {
	info, err := s.gw.Head(q.r.Context(), q.bucket, q.object)
	if err != nil || len(info.Parts) != len(refs) {
		return info, false
	}
	for i, p := range info.Parts {
		if p.Number != refs[i].Number || p.ETag != refs[i].ETag {
			return info, false
		}
	}
	return info, true
}

// uploadKey checks the customer key headers of a request on upload id
// that may give them (ListParts, CompleteMultipartUpload): if given,
// they must be the upload's key; false means the answer is sent.
func (s *Server) uploadKey(q *request, id string) bool {
	key, ok := s.requestKey(q)
	if !ok {
		return false
	}
	if key == nil {
		return true
	}
	u, err := s.gw.Upload(q.r.Context(), q.bucket, q.object, id)
	if err == nil {
		err = gateway.CheckCustomerKey(u.Encryption, key)
	}
	if err != nil {
		q.fail(uploadKeyErr(err))
		return false
	}
	echoKey(q, key)
	return true
}

// uploadKeyErr is the answer to a part request whose customer key is
// missing (the upload has one: S3's message says so) or wrong.
func uploadKeyErr(err error) error {
	if e := keyErr(err, true); e != nil {
		return e
	}
	return err
}
