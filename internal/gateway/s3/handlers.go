package s3

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quilt-grid/quilt/internal/gateway"
)

const s3ns = "http://s3.amazonaws.com/doc/2006-03-01/"

type owner struct {
	ID          string
	DisplayName string
}

func (s *Server) listBuckets(q *request) {
	// max-buckets (1-10000) pages the list, continuation-token (the
	// last name of the page before) says where a page starts, and prefix
	// filters it, as on S3.
	v := q.r.URL.Query()
	limit := 10000
	if m := v.Get("max-buckets"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 1 || n > 10000 {
			q.fail(s3err("InvalidArgument", 400, "max-buckets must be an integer from 1 to 10000"))
			return
		}
		limit = n
	}
	after := ""
	if tok := v.Get("continuation-token"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			q.fail(s3err("InvalidArgument", 400, "The continuation token provided is incorrect"))
			return
		}
		after = string(b)
	}
	prefix := v.Get("prefix")
	bs, err := s.gw.Buckets(q.r.Context())
	if err != nil {
		q.fail(err)
		return
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
	type bucketXML struct {
		Name         string
		CreationDate string
	}
	out := struct {
		XMLName           xml.Name    `xml:"ListAllMyBucketsResult"`
		NS                string      `xml:"xmlns,attr"`
		Owner             owner       `xml:"Owner"`
		Buckets           []bucketXML `xml:"Buckets>Bucket"`
		ContinuationToken string      `xml:",omitempty"`
		Prefix            string      `xml:",omitempty"`
	}{NS: s3ns, Prefix: prefix}
	me := q.requester()
	out.Owner = owner{me.ID, me.DisplayName}
	for _, b := range bs {
		if b.Name <= after || !strings.HasPrefix(b.Name, prefix) || !q.key.Allowed(b.Name, gateway.Read) {
			continue
		}
		if len(out.Buckets) == limit {
			out.ContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(out.Buckets[limit-1].Name))
			break
		}
		out.Buckets = append(out.Buckets, bucketXML{b.Name, b.Created.Format(time.RFC3339)})
	}
	q.xml(200, out)
}

func (s *Server) createBucket(q *request) {
	ctx := q.r.Context()
	me := q.requester()
	acl, err := headerACL(q, me, me)
	if err != nil {
		q.fail(err)
		return
	}
	ownership := q.param("x-amz-object-ownership")
	if ownership != "" && !knownOwnership(ownership) {
		q.fail(s3err("InvalidArgument", 400, "x-amz-object-ownership is ObjectWriter, BucketOwnerPreferred or BucketOwnerEnforced, not "+ownership))
		return
	}
	if ownership == ownerEnforced {
		if !aclAllowedWhenEnforced(q) {
			q.fail(s3err("InvalidBucketAclWithObjectOwnership", 400, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"))
			return
		}
		acl = nil
	}
	if acl != nil && acl.public() && s.opt.BlockPublicAccess.BlockPublicAcls {
		q.fail(errBlockedACL)
		return
	}
	if acl != nil {
		if err := s.checkGrantees(q, acl, me); err != nil {
			q.fail(err)
			return
		}
	}
	lock := q.param("x-amz-bucket-object-lock-enabled")
	if lock != "" && !strings.EqualFold(lock, "true") && !strings.EqualFold(lock, "false") {
		q.fail(s3err("InvalidArgument", 400, "x-amz-bucket-object-lock-enabled is true or false"))
		return
	}
	if err := s.gw.CreateBucket(ctx, q.bucket, q.key.ID); err != nil {
		if errors.Is(err, gateway.ErrBucketExists) {
			if owner, _ := s.gw.Owner(ctx, q.bucket); owner != q.key.ID {
				err = s3err("BucketAlreadyExists", 409, "The requested bucket name is not available.")
			}
		}
		q.fail(err)
		return
	}
	if !q.key.Admin {
		// Re-read the key just before changing it, so a change made
		// meanwhile (a grant, a deletion) is not undone.
		k, err := s.gw.Key(ctx, q.key.ID)
		if err != nil {
			q.fail(err)
			return
		}
		if k.Buckets == nil {
			k.Buckets = map[string]gateway.Perm{}
		}
		k.Buckets[q.bucket] = gateway.Owner
		if err := s.gw.PutKey(ctx, k); err != nil {
			q.fail(err)
			return
		}
	}
	if acl != nil {
		doc, _ := json.Marshal(acl)
		if err := s.gw.PutBucketConfig(ctx, q.bucket, "acl", doc); err != nil {
			q.fail(err)
			return
		}
	}
	if ownership != "" {
		if err := s.gw.PutBucketConfig(ctx, q.bucket, "ownershipControls", []byte(ownership)); err != nil {
			q.fail(err)
			return
		}
	}
	if strings.EqualFold(lock, "true") {
		if err := s.gw.EnableObjectLock(ctx, q.bucket); err != nil { // objectlock.go
			q.fail(err)
			return
		}
	}
	q.w.Header().Set("Location", "/"+q.bucket)
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) headBucket(q *request) {
	if _, err := s.gw.List(q.r.Context(), q.bucket, "", "", "", 0); err != nil {
		q.fail(err)
		return
	}
	q.w.Header().Set("x-amz-bucket-region", s.opt.Region)
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) deleteBucket(q *request) {
	if err := s.gw.DeleteBucket(q.r.Context(), q.bucket); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

func (s *Server) location(q *request) {
	if _, err := s.gw.List(q.r.Context(), q.bucket, "", "", "", 0); err != nil {
		q.fail(err)
		return
	}
	loc := s.opt.Region
	if loc == "us-east-1" {
		loc = ""
	}
	q.xml(200, struct {
		XMLName xml.Name `xml:"LocationConstraint"`
		NS      string   `xml:"xmlns,attr"`
		Value   string   `xml:",chardata"`
	}{NS: s3ns, Value: loc})
}

type contentXML struct {
	Key          string
	LastModified string
	ETag         string
	Size         int64
	StorageClass string
	Owner        *owner `xml:",omitempty"`
}

type prefixXML struct{ Prefix string }

// urlEncode is a key, prefix or delimiter of a listing with
// encoding-type=url: percent-encoded as S3 does it, '/' left as it is.
func urlEncode(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(url.QueryEscape(s), "+", "%20"), "%2F", "/")
}

func (s *Server) listObjects(q *request) {
	v := q.r.URL.Query()
	v2 := v.Get("list-type") == "2"
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
	after := v.Get("marker")
	if v2 {
		after = v.Get("start-after")
		if tok := v.Get("continuation-token"); tok != "" {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err != nil {
				q.fail(s3err("InvalidArgument", 400, "The continuation token provided is incorrect"))
				return
			}
			after = string(b)
		}
	}
	l, err := s.gw.List(q.r.Context(), q.bucket, prefix, delim, after, maxKeys)
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
	var contents []contentXML
	var ownerOf func(gateway.ObjectInfo) owner
	if !v2 || v.Get("fetch-owner") == "true" {
		if ownerOf, err = s.listOwners(q); err != nil {
			q.fail(err)
			return
		}
	}
	for _, o := range l.Objects {
		c := contentXML{Key: enc(o.Key), LastModified: o.Modified.Format("2006-01-02T15:04:05.000Z"),
			ETag: `"` + o.ETag + `"`, Size: o.Size, StorageClass: "STANDARD"}
		if !v2 || v.Get("fetch-owner") == "true" {
			o := ownerOf(o)
			c.Owner = &o
		}
		contents = append(contents, c)
	}
	var prefixes []prefixXML
	for _, p := range l.Prefixes {
		prefixes = append(prefixes, prefixXML{enc(p)})
	}
	type result struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		NS                    string   `xml:"xmlns,attr"`
		Name                  string
		Prefix                string
		Marker                *string `xml:",omitempty"`
		NextMarker            string  `xml:",omitempty"`
		StartAfter            string  `xml:",omitempty"`
		ContinuationToken     string  `xml:",omitempty"`
		NextContinuationToken string  `xml:",omitempty"`
		KeyCount              *int    `xml:",omitempty"`
		MaxKeys               int
		Delimiter             string `xml:",omitempty"`
		EncodingType          string `xml:",omitempty"`
		IsTruncated           bool
		Contents              []contentXML
		CommonPrefixes        []prefixXML
	}
	out := result{NS: s3ns, Name: q.bucket, Prefix: enc(prefix), MaxKeys: maxKeys, Delimiter: enc(delim),
		IsTruncated: l.Truncated, Contents: contents, CommonPrefixes: prefixes}
	if urlEnc {
		out.EncodingType = "url"
	}
	if v2 {
		n := len(contents) + len(prefixes)
		out.KeyCount = &n
		out.StartAfter = enc(v.Get("start-after"))
		out.ContinuationToken = v.Get("continuation-token")
		if l.Truncated {
			out.NextContinuationToken = base64.RawURLEncoding.EncodeToString([]byte(l.Next))
		}
	} else {
		m := enc(v.Get("marker"))
		out.Marker = &m
		if l.Truncated && delim != "" {
			out.NextMarker = enc(l.Next)
		}
	}
	q.xml(200, out)
}

func (s *Server) deleteObjects(q *request) {
	var in struct {
		Quiet   bool
		Objects []struct{ Key, VersionId string } `xml:"Object"`
	}
	body, err := io.ReadAll(io.LimitReader(q.body, 2<<20))
	if err != nil {
		q.fail(err)
		return
	}
	if err := xml.Unmarshal(body, &in); err != nil || len(in.Objects) > 1000 {
		q.fail(errMalformedXML)
		return
	}
	type deleted struct {
		Key                   string
		VersionId             string `xml:",omitempty"`
		DeleteMarker          bool   `xml:",omitempty"`
		DeleteMarkerVersionId string `xml:",omitempty"`
	}
	type failed struct {
		Key       string
		VersionId string `xml:",omitempty"`
		Code      string
		Message   string
	}
	out := struct {
		XMLName xml.Name  `xml:"DeleteResult"`
		NS      string    `xml:"xmlns,attr"`
		Deleted []deleted `xml:"Deleted"`
		Errors  []failed  `xml:"Error"`
	}{NS: s3ns}
	for _, o := range in.Objects {
		if q.perKey {
			if err := s.decide(q, "DeleteObject", q.bucket, o.Key, gateway.Write); err != nil {
				e := mapErr(err)
				out.Errors = append(out.Errors, failed{o.Key, o.VersionId, e.Code, e.Message})
				continue
			}
		}
		var res gateway.DeleteResult
		var err error
		if o.VersionId != "" {
			res, err = s.gw.DeleteObjectVersionWith(q.r.Context(), q.bucket, o.Key, o.VersionId, gateway.DeleteOptions{BypassGovernance: s.bypass(q, o.Key)})
		} else {
			res, err = s.gw.DeleteObject(q.r.Context(), q.bucket, o.Key)
		}
		if err != nil {
			e := mapErr(err)
			out.Errors = append(out.Errors, failed{o.Key, o.VersionId, e.Code, e.Message})
			continue
		}
		if !in.Quiet {
			d := deleted{Key: o.Key, VersionId: o.VersionId, DeleteMarker: res.DeleteMarker}
			if o.VersionId == "" && res.DeleteMarker {
				d.DeleteMarkerVersionId = res.VersionID
			}
			out.Deleted = append(out.Deleted, d)
		}
	}
	q.xml(200, out)
}

// keptHeaders are the standard headers stored with an object and
// returned on GET and HEAD.
var keptHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}

// User metadata is UTF-8 as S3 keeps it: a value sent RFC 2047-encoded
// (=?UTF-8?B?...?=, as the SDKs' documentation asks for non-ASCII
// values) is stored decoded, one sent as raw UTF-8 is stored as it is,
// and a value that is not ASCII is answered RFC 2047-encoded (B), since
// HTTP header values are not UTF-8 (clients read them as Latin-1).
var metaEncoder = mime.BEncoding

// metaValue is a user metadata value as received, RFC 2047 words decoded.
func metaValue(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil || !utf8.ValidString(d) {
		return v
	}
	return d
}

func putOptions(h http.Header) gateway.PutOptions {
	opt := gateway.PutOptions{ContentType: h.Get("Content-Type"), Meta: map[string]string{}, Headers: map[string]string{}}
	if opt.ContentType == "" {
		opt.ContentType = "binary/octet-stream"
	}
	for k, v := range h {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-meta-") {
			opt.Meta[strings.TrimPrefix(lk, "x-amz-meta-")] = metaValue(strings.Join(v, ","))
		}
	}
	for _, k := range keptHeaders {
		if v := h.Get(k); v != "" {
			opt.Headers[k] = v
		}
	}
	// aws-chunked says how this request's body is framed, not what the
	// object is: S3 strips it, keeping any other coding (gzip).
	if ce, ok := opt.Headers["Content-Encoding"]; ok {
		var keep []string
		for _, c := range strings.Split(ce, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "aws-chunked") {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			delete(opt.Headers, "Content-Encoding")
		} else {
			opt.Headers["Content-Encoding"] = strings.Join(keep, ",")
		}
	}
	return opt
}

func (s *Server) putObject(q *request) {
	r := q.r
	opt := putOptions(r.Header)
	want, ok := contentMD5(q)
	if !ok {
		return
	}
	opt.WantMD5 = want
	opt.Checksums = q.sums.Sums
	opt.If = writeCondition(r.Header)
	tags, err := tagsHeader(r.Header)
	if err != nil {
		q.fail(err)
		return
	}
	opt.Tags = tags
	if opt.ACL, err = s.newObjectACL(q); err != nil {
		q.fail(err)
		return
	}
	if opt.CustomerKey, ok = s.requestKey(q); !ok {
		return
	}
	checksummed := hasChecksum(r.Header)
	if opt.Lock, ok = s.writeLock(q, &checksummed); !ok { // objectlock.go
		return
	}
	info, err := s.gw.Put(r.Context(), q.bucket, q.object, q.body, q.length, opt)
	if err != nil {
		q.fail(err)
		return
	}
	q.bytes = info.Size
	echoKey(q, opt.CustomerKey)
	s.setExpiration(q, info)
	q.w.Header().Set("ETag", `"`+info.ETag+`"`)
	s.setVersionHeader(q, q.w.Header(), q.bucket, info)
	setChecksumHeaders(q.w.Header(), info.Checksums, info.ChecksumType)
	q.status = 200
	q.w.WriteHeader(200)
}

// writeCondition is the condition of a PutObject or
// CompleteMultipartUpload: If-None-Match: * (checkHeaders refuses other
// values), If-Match: ETAG.
func writeCondition(h http.Header) gateway.Condition {
	return gateway.Condition{IfNoneMatch: h.Get("If-None-Match") == "*", IfMatch: strings.Trim(h.Get("If-Match"), `"`)}
}

// contentMD5 reads a Content-MD5 header (nil if none); false means it was
// malformed and the answer is sent.
func contentMD5(q *request) ([]byte, bool) {
	m := q.r.Header.Get("Content-MD5")
	if m == "" {
		return nil, true
	}
	b, err := base64.StdEncoding.DecodeString(m)
	if err != nil || len(b) != md5.Size {
		q.fail(s3err("InvalidDigest", 400, "The Content-MD5 you specified was invalid."))
		return nil, false
	}
	return b, true
}

func (s *Server) copyObject(q *request) {
	r := q.r
	ctx := r.Context()
	src, ok := s.copySource(q)
	if !ok {
		return
	}
	info := src.info
	dstKey, ok := s.requestKey(q)
	if !ok {
		return
	}
	if ontoItself(q) && r.Header.Get("x-amz-metadata-directive") != "REPLACE" && src.key == nil && dstKey == nil &&
		r.Header.Get("x-amz-server-side-encryption") == "" && r.Header.Get("x-amz-storage-class") == "" {
		q.fail(s3err("InvalidRequest", 400, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."))
		return
	}
	opt := gateway.PutOptions{ContentType: info.ContentType, Meta: info.Meta, Headers: info.Headers}
	if r.Header.Get("x-amz-metadata-directive") == "REPLACE" {
		opt = putOptions(r.Header)
	}
	switch d := r.Header.Get("x-amz-tagging-directive"); d {
	case "", "COPY":
		opt.Tags = info.Tags
	case "REPLACE":
		tags, err := tagsHeader(r.Header)
		if err != nil {
			q.fail(err)
			return
		}
		opt.Tags = tags
	default:
		q.fail(s3err("InvalidArgument", 400, "Unknown tagging directive: "+d))
		return
	}
	acl, err := s.newObjectACL(q)
	if err != nil {
		q.fail(err)
		return
	}
	opt.ACL = acl
	opt.CustomerKey = dstKey
	if opt.Lock, ok = s.writeLock(q, nil); !ok { // objectlock.go
		return
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.gw.ReadVersionKey(ctx, info, src.inline, src.key, pw, 0, info.Size))
	}()
	// The copy keeps the source's whole-object checksum; a COMPOSITE one
	// describes parts the copy does not have, so it gets the whole
	// object's of the same algorithm, computed as it streams, as S3 does
	// (a CRC64NVME if the source has none). x-amz-checksum-algorithm
	// asks for that algorithm's instead, computed as it streams.
	var body io.Reader = pr
	alg := strings.ToLower(r.Header.Get("x-amz-checksum-algorithm"))
	if info.ChecksumType == gateway.FullObject && (alg == "" || len(info.Checksums) == 1 && info.Checksums[alg] != "") {
		opt.Checksums = func() map[string]string { return info.Checksums }
	} else {
		hdr := http.Header{}
		if alg != "" {
			hdr.Add("X-Amz-Trailer", "x-amz-checksum-"+alg)
		} else {
			for a := range info.Checksums {
				hdr.Add("X-Amz-Trailer", "x-amz-checksum-"+a)
			}
		}
		sr := newSums(hdr, pr)
		body, opt.Checksums = sr, sr.Sums
	}
	out, err := s.gw.Put(ctx, q.bucket, q.object, body, info.Size, opt)
	pr.CloseWithError(io.ErrClosedPipe) // stops the reader if Put gave up early
	if err != nil {
		q.fail(err)
		return
	}
	echoKey(q, dstKey)
	s.setExpiration(q, out)
	s.setVersionHeader(q, q.w.Header(), q.bucket, out)
	if sv := copySourceVersion(r); sv != "" || info.VersionID != "" {
		q.w.Header().Set("x-amz-copy-source-version-id", gateway.VersionOf(info))
	}
	q.xml(200, struct {
		XMLName      xml.Name `xml:"CopyObjectResult"`
		NS           string   `xml:"xmlns,attr"`
		LastModified string
		ETag         string
	}{NS: s3ns, LastModified: out.Modified.Format("2006-01-02T15:04:05.000Z"), ETag: `"` + out.ETag + `"`})
}

// ontoItself reports whether a CopyObject's x-amz-copy-source names the
// object it writes, and no version of it (copying a version onto its key
// restores it).
func ontoItself(q *request) bool {
	src, err := url.PathUnescape(q.r.Header.Get("x-amz-copy-source"))
	if err != nil || strings.Contains(src, "?versionId=") {
		return false
	}
	return strings.TrimPrefix(src, "/") == q.bucket+"/"+q.object
}

// source is a copy's source object, and the customer key it was given
// with (nil: none).
type source struct {
	info   gateway.ObjectInfo
	inline []byte
	key    *gateway.CustomerKey
}

// copySource finds the object x-amz-copy-source names (bucket/key, an
// optional ?versionId=null), checks the key may read it, that the
// x-amz-copy-source-server-side-encryption-customer-* headers give its
// customer key if it has one, and applies the x-amz-copy-source-if-*
// conditions; false means the answer is sent.
func (s *Server) copySource(q *request) (source, bool) {
	r := q.r
	src, err := url.PathUnescape(r.Header.Get("x-amz-copy-source"))
	if err != nil {
		q.fail(s3err("InvalidArgument", 400, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey"))
		return source{}, false
	}
	src, version, versioned := strings.Cut(src, "?versionId=")
	if versioned && gateway.CheckVersionID(version) != nil {
		q.fail(errBadVersion)
		return source{}, false
	}
	sb, sk, ok := strings.Cut(strings.TrimPrefix(src, "/"), "/")
	if !ok || sk == "" {
		q.fail(s3err("InvalidArgument", 400, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey"))
		return source{}, false
	}
	key, err := s.customerKey(r, copySourceKeyPrefix)
	if err != nil {
		q.fail(err)
		return source{}, false
	}
	if !s.mayRead(q, sb, sk) {
		return source{}, false
	}
	info, inline, err := s.gw.LookupVersion(r.Context(), sb, sk, version)
	var dm *gateway.DeleteMarkerError
	if errors.As(err, &dm) {
		// A delete marker as the source: 404 if it is the current
		// version, 400 if named (as S3).
		if dm.Current {
			err = errNoKey
		} else {
			err = s3err("InvalidRequest", 400, "The source of a copy request may not specifically refer to a delete marker by version id.")
		}
	}
	if err != nil {
		q.fail(err)
		return source{}, false
	}
	if err := gateway.CheckCustomerKey(info.Encryption, key); err != nil {
		q.fail(err)
		return source{}, false
	}
	if err := copyConditions(r.Header, info); err != nil {
		q.fail(err)
		return source{}, false
	}
	return source{info, inline, key}, true
}

// copySourceVersion is the version ID x-amz-copy-source names ("" if
// none).
func copySourceVersion(r *http.Request) string {
	src, _ := url.PathUnescape(r.Header.Get("x-amz-copy-source"))
	_, v, _ := strings.Cut(src, "?versionId=")
	return v
}

// copyConditions applies x-amz-copy-source-if-* to the source: in S3's
// order, a match or an unmodified-since that fails is 412; a none-match
// or modified-since that fails is 412 as well (S3 answers a copy with no
// 304).
func copyConditions(h http.Header, src gateway.ObjectInfo) error {
	mod := src.Modified.Truncate(time.Second)
	im, inm := h.Get("x-amz-copy-source-if-match"), h.Get("x-amz-copy-source-if-none-match")
	ius, ims := h.Get("x-amz-copy-source-if-unmodified-since"), h.Get("x-amz-copy-source-if-modified-since")
	if im != "" && !etagMatch(im, src.ETag) {
		return errPrecondition
	}
	if ius != "" && im == "" {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			return errPrecondition
		}
	}
	if inm != "" && etagMatch(inm, src.ETag) {
		return errPrecondition
	}
	if ims != "" && inm == "" {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			return errPrecondition
		}
	}
	return nil
}

// rangeSyntaxOK reports whether a Range header is one byte range S3
// honours; others are ignored (RFC 9110), and the whole object is sent.
func rangeSyntaxOK(h string) bool {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return false
	}
	a, b, ok := strings.Cut(spec, "-")
	isNum := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	return ok && (a == "" && isNum(b) || isNum(a) && (b == "" || isNum(b)))
}

// parseRange reads a single "bytes=a-b" range of an object of size bytes.
func parseRange(h string, size int64) (off, n int64, err error) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, 0, errRange
	}
	a, b, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, 0, errRange
	}
	switch {
	case a == "":
		k, err := strconv.ParseInt(b, 10, 64)
		if err != nil || k <= 0 || size == 0 {
			return 0, 0, errRange
		}
		k = min(k, size)
		return size - k, k, nil
	default:
		start, err := strconv.ParseInt(a, 10, 64)
		if err != nil || start < 0 || start >= size {
			return 0, 0, errRange
		}
		end := size - 1
		if b != "" {
			if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
				return 0, 0, errRange
			}
			end = min(end, size-1)
		}
		return start, end - start + 1, nil
	}
}

func etagMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}

func (s *Server) getObject(q *request) {
	r, w := q.r, q.w
	ctx := r.Context()
	key, ok := s.requestKey(q)
	if !ok {
		return
	}
	info, inline, err := s.gw.LookupVersion(ctx, q.bucket, q.object, versionID(q))
	if err != nil {
		q.fail(err)
		return
	}
	if err := gateway.CheckCustomerKey(info.Encryption, key); err != nil {
		q.fail(err)
		return
	}
	echoKey(q, key)
	mod := info.Modified.Truncate(time.Second)
	h := w.Header()
	s.setVersionHeader(q, h, q.bucket, info)
	h.Set("ETag", `"`+info.ETag+`"`)
	h.Set("Last-Modified", mod.Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", info.ContentType)
	for k, v := range info.Meta {
		// Lower case, as S3 sends them: clients keep the name's case
		// after the prefix (Go would write X-Amz-Meta-Who).
		h["x-amz-meta-"+k] = []string{metaEncoder.Encode("UTF-8", v)}
	}
	for k, v := range info.Headers {
		h.Set(k, v)
	}
	setTagCount(h, info.Tags)
	s.setLockHeaders(q, h, info) // objectlock.go
	s.setExpiration(q, info)
	// response-* parameters override the stored headers (presigned
	// downloads name the file this way).
	for _, o := range responseOverrides {
		if v := r.URL.Query().Get(o.param); v != "" {
			h.Set(o.header, v)
		}
	}
	// Conditions, in S3's order.
	if im := r.Header.Get("If-Match"); im != "" && !etagMatch(im, info.ETag) {
		q.fail(errPrecondition)
		return
	}
	if ius := r.Header.Get("If-Unmodified-Since"); ius != "" && r.Header.Get("If-Match") == "" {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			q.fail(errPrecondition)
			return
		}
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, info.ETag) {
		q.status = 304
		w.WriteHeader(304)
		return
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && r.Header.Get("If-None-Match") == "" {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			q.status = 304
			w.WriteHeader(304)
			return
		}
	}
	off, n, status := int64(0), info.Size, 200
	var partSums map[string]string // the checksums of the part read
	if pn := r.URL.Query().Get("partNumber"); pn != "" {
		if r.Header.Get("Range") != "" {
			q.fail(s3err("InvalidRequest", 400, "Cannot specify both Range header and partNumber query parameter"))
			return
		}
		var ok bool
		if off, n, ok = partRange(info, pn); !ok {
			q.fail(s3err("InvalidPartNumber", 416, "The requested partnumber is not satisfiable"))
			return
		}
		if len(info.Parts) > 0 {
			i, _ := strconv.Atoi(pn)
			partSums = info.Parts[i-1].Checksums
			h.Set("x-amz-mp-parts-count", strconv.Itoa(len(info.Parts)))
			if n > 0 {
				status = 206
				h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, info.Size))
			}
		}
	} else if rg := r.Header.Get("Range"); rg != "" && rangeSyntaxOK(rg) {
		if off, n, err = parseRange(rg, info.Size); err != nil {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
			q.fail(err)
			return
		}
		status = 206
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, info.Size))
	}
	// Checksums describe the whole object, or one part of it: not sent
	// with a range.
	if strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		switch {
		case status == 200:
			setChecksumHeaders(h, info.Checksums, info.ChecksumType)
		case partSums != nil:
			setChecksumHeaders(h, partSums, "")
		}
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	q.status = status
	w.WriteHeader(status)
	if r.Method == http.MethodHead || n == 0 {
		return
	}
	cw := &countWriter{w: w}
	if err := s.gw.ReadVersionKey(ctx, info, inline, key, cw, off, n); err != nil {
		// Too late for an error answer: cut the connection short, so the
		// client sees fewer bytes than Content-Length.
		s.log.Warn("s3: get failed mid-stream", "id", q.id, "bucket", q.bucket, "key", q.object, "err", err)
		panic(http.ErrAbortHandler)
	}
	q.bytes = cw.n
}

// partRange is where part pn (1-based) of an object lies; an object not
// made of parts is its one part.
func partRange(info gateway.ObjectInfo, pn string) (off, n int64, ok bool) {
	i, err := strconv.Atoi(pn)
	if err != nil || i < 1 || i > gateway.MaxParts {
		return 0, 0, false
	}
	if len(info.Parts) == 0 {
		return 0, info.Size, i == 1
	}
	if i > len(info.Parts) {
		return 0, 0, false
	}
	for _, p := range info.Parts[:i-1] {
		off += p.Size
	}
	return off, info.Parts[i-1].Size, true
}

var responseOverrides = []struct{ param, header string }{
	{"response-content-type", "Content-Type"}, {"response-content-language", "Content-Language"},
	{"response-expires", "Expires"}, {"response-cache-control", "Cache-Control"},
	{"response-content-disposition", "Content-Disposition"}, {"response-content-encoding", "Content-Encoding"},
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) deleteObject(q *request) {
	var res gateway.DeleteResult
	var err error
	if vid := versionID(q); vid != "" {
		res, err = s.gw.DeleteObjectVersionWith(q.r.Context(), q.bucket, q.object, vid, gateway.DeleteOptions{BypassGovernance: s.bypass(q, q.object)})
	} else {
		res, err = s.gw.DeleteObject(q.r.Context(), q.bucket, q.object)
	}
	if err != nil {
		q.fail(err)
		return
	}
	if res.VersionID != "" {
		q.w.Header().Set("x-amz-version-id", res.VersionID)
	}
	if res.DeleteMarker {
		q.w.Header().Set("x-amz-delete-marker", "true")
	}
	q.status = 204
	q.w.WriteHeader(204)
}
