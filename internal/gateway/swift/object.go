package swift

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Headers kept with an object to mark Swift's large objects. They are
// the object's stored headers, which S3 also returns.
const (
	hdrDLO     = "X-Object-Manifest"     // container/prefix of a dynamic large object's segments
	hdrSLO     = "X-Static-Large-Object" // "True": the content is an SLO manifest
	hdrSLOSize = "X-Slo-Size"            // the SLO's total size
	hdrSLOEtag = "X-Slo-Etag"            // the SLO's ETag: MD5 of its segments' ETags
)

// keptHeaders are the standard headers stored with an object (the same
// as the S3 front end keeps).
var keptHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}

// sloSegment is a segment of a static large object as the manifest is
// kept (and returned by ?multipart-manifest=get).
type sloSegment struct {
	Name         string `json:"name"` // /container/object
	Hash         string `json:"hash"`
	Bytes        int64  `json:"bytes"`
	ContentType  string `json:"content_type,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

// segment is a piece of a large object to read.
type segment struct {
	container, object string
	size              int64
}

func splitPath(p string) (container, object string, ok bool) {
	container, object, ok = strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return container, object, ok && container != "" && object != ""
}

// contentType is the request's Content-Type, or one guessed from the
// object's name.
func contentType(h http.Header, name string) string {
	ct := h.Get("Content-Type")
	if ct == "" || strings.EqualFold(h.Get("X-Detect-Content-Type"), "true") {
		if g := mime.TypeByExtension(path.Ext(name)); g != "" {
			return g
		}
		if ct == "" {
			return "application/octet-stream"
		}
	}
	return ct
}

// unsupportedObjectHeaders are answered 501.
var unsupportedObjectHeaders = []string{"X-Symlink-Target"}

func checkUnsupported(h http.Header) error {
	for _, k := range unsupportedObjectHeaders {
		if h.Get(k) != "" {
			return notImplemented(k)
		}
	}
	return nil
}

// dloManifest reads an X-Object-Manifest value: container/prefix.
func dloManifest(v string) (container, prefix string, err error) {
	v, err = url.PathUnescape(v)
	c, p, ok := strings.Cut(strings.TrimPrefix(v, "/"), "/")
	if err != nil || !ok || c == "" {
		return "", "", serr(400, "Bad Request: X-Object-Manifest must be CONTAINER/PREFIX")
	}
	return c, p, nil
}

func (s *Server) putObject(q *request) {
	if !s.allowed(q, q.container, gateway.Write) {
		return
	}
	h := q.r.Header
	if err := checkUnsupported(h); err != nil {
		q.fail(err)
		return
	}
	if cf := h.Get("X-Copy-From"); cf != "" {
		src, err := url.PathUnescape(cf)
		sc, so, ok := splitPath(src)
		if err != nil || !ok {
			q.fail(serr(412, "Precondition Failed: X-Copy-From header must be of the form <container name>/<object name>"))
			return
		}
		if h.Get("X-Copy-From-Account") != "" && h.Get("X-Copy-From-Account") != q.account {
			q.fail(notImplemented("copying from another account"))
			return
		}
		s.copy(q, sc, so, q.container, q.object)
		return
	}
	switch q.r.URL.Query().Get("multipart-manifest") {
	case "put":
		s.putSLO(q)
		return
	}
	at, err := s.deleteAt(h)
	if err != nil {
		q.fail(err)
		return
	}
	ctx := q.r.Context()
	if inm := h.Get("If-None-Match"); inm != "" {
		if inm != "*" {
			q.fail(serr(400, "Bad Request: If-None-Match only accepts '*'"))
			return
		}
		if _, _, err := s.lookup(ctx, q.container, q.object); err == nil {
			q.fail(errPrecondition)
			return
		}
	}
	size := q.r.ContentLength
	if size < 0 && !chunked(q.r) {
		q.fail(serr(411, "Length Required: Content-Length or chunked Transfer-Encoding"))
		return
	}
	if size > MaxFileSize {
		q.fail(serr(413, fmt.Sprintf("Request Entity Too Large: one PUT is at most %d bytes; segment larger objects", MaxFileSize)))
		return
	}
	meta, err := metaUpdate(h, "object", nil)
	if err != nil {
		q.fail(err)
		return
	}
	opt := gateway.PutOptions{ContentType: contentType(h, q.object), Meta: meta, Headers: map[string]string{}}
	for _, k := range keptHeaders {
		if v := h.Get(k); v != "" {
			opt.Headers[k] = v
		}
	}
	if m := h.Get(hdrDLO); m != "" {
		if _, _, err := dloManifest(m); err != nil {
			q.fail(err)
			return
		}
		opt.Headers[hdrDLO] = m
	}
	if at != 0 {
		opt.Headers[hdrDeleteAt] = strconv.FormatInt(at, 10)
	}
	if e := strings.Trim(h.Get("ETag"), `"`); e != "" {
		want, err := hex.DecodeString(e)
		if err != nil || len(want) != md5.Size {
			q.fail(serr(422, "Unprocessable Entity: the ETag given is not an MD5 in hex."))
			return
		}
		opt.WantMD5 = want
	}
	var body io.Reader = q.r.Body
	if body == nil {
		body = http.NoBody
	}
	info, err := s.gw.Put(ctx, q.container, q.object, body, size, opt)
	if err == nil {
		err = s.schedule(ctx, q.container, q.object, at)
	}
	if err != nil {
		q.fail(err)
		return
	}
	q.bytes = info.Size
	q.w.Header().Set("ETag", info.ETag)
	q.w.Header().Set("Last-Modified", info.Modified.UTC().Format(http.TimeFormat))
	q.empty(201)
}

func chunked(r *http.Request) bool {
	for _, te := range r.TransferEncoding {
		if te == "chunked" {
			return true
		}
	}
	return false
}

// putSLO stores a static large object's manifest: the segments must
// exist, with the ETags and sizes the manifest gives for them.
func (s *Server) putSLO(q *request) {
	ctx := q.r.Context()
	raw, err := io.ReadAll(io.LimitReader(q.r.Body, MaxManifestSize+1))
	if err != nil {
		q.fail(err)
		return
	}
	if len(raw) > MaxManifestSize {
		q.fail(serr(413, fmt.Sprintf("Request Entity Too Large: a manifest is at most %d bytes", MaxManifestSize)))
		return
	}
	var in []struct {
		Path  string  `json:"path"`
		ETag  *string `json:"etag"`
		Size  *int64  `json:"size_bytes"`
		Range string  `json:"range"`
		Data  string  `json:"data"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		q.fail(serr(400, "Bad Request: Manifest must be valid JSON: "+err.Error()))
		return
	}
	if len(in) == 0 || len(in) > MaxManifestSegments {
		q.fail(serr(400, fmt.Sprintf("Bad Request: a manifest has 1 to %d segments", MaxManifestSegments)))
		return
	}
	var problems []string
	var segs []sloSegment
	var total int64
	sum := md5.New()
	for i, e := range in {
		if e.Range != "" || e.Data != "" {
			q.fail(notImplemented("SLO segment ranges and data segments"))
			return
		}
		c, o, ok := splitPath(e.Path)
		if !ok {
			problems = append(problems, fmt.Sprintf("Index %d: path %q is not /container/object", i, e.Path))
			continue
		}
		if !s.may(q, c, gateway.Read) {
			problems = append(problems, fmt.Sprintf("%s: 403 Forbidden", e.Path))
			continue
		}
		info, err := s.gw.Head(ctx, c, o)
		if err != nil {
			if errors.Is(err, gateway.ErrNoKey) || errors.Is(err, gateway.ErrNoBucket) {
				problems = append(problems, fmt.Sprintf("%s: 404 Not Found", e.Path))
				continue
			}
			q.fail(err)
			return
		}
		if info.Headers[hdrSLO] != "" || info.Headers[hdrDLO] != "" || len(info.Parts) > 0 {
			problems = append(problems, fmt.Sprintf("%s: a segment may not be a large object itself (not supported here)", e.Path))
			continue
		}
		if e.ETag != nil && *e.ETag != "" && strings.Trim(*e.ETag, `"`) != info.ETag {
			problems = append(problems, fmt.Sprintf("%s: Etag Mismatch", e.Path))
		}
		if e.Size != nil && *e.Size != info.Size {
			problems = append(problems, fmt.Sprintf("%s: Size Mismatch", e.Path))
		}
		total += info.Size
		sum.Write([]byte(info.ETag))
		segs = append(segs, sloSegment{Name: "/" + c + "/" + o, Hash: info.ETag, Bytes: info.Size,
			ContentType: info.ContentType, LastModified: info.Modified.UTC().Format(lastModified)})
	}
	if len(problems) > 0 {
		q.fail(serr(400, "Bad Request: Errors:\n"+strings.Join(problems, "\n")))
		return
	}
	etag := hex.EncodeToString(sum.Sum(nil))
	if want := strings.Trim(q.r.Header.Get("ETag"), `"`); want != "" && want != etag {
		q.fail(serr(422, "Unprocessable Entity: the ETag given is not the manifest's (MD5 of its segments' ETags)."))
		return
	}
	meta, err := metaUpdate(q.r.Header, "object", nil)
	if err != nil {
		q.fail(err)
		return
	}
	at, err := s.deleteAt(q.r.Header)
	if err != nil {
		q.fail(err)
		return
	}
	opt := gateway.PutOptions{ContentType: contentType(q.r.Header, q.object), Meta: meta,
		Headers: map[string]string{hdrSLO: "True", hdrSLOSize: strconv.FormatInt(total, 10), hdrSLOEtag: etag}}
	if at != 0 {
		opt.Headers[hdrDeleteAt] = strconv.FormatInt(at, 10)
	}
	for _, k := range keptHeaders {
		if v := q.r.Header.Get(k); v != "" {
			opt.Headers[k] = v
		}
	}
	body, _ := json.Marshal(segs)
	info, err := s.gw.Put(ctx, q.container, q.object, bytes.NewReader(body), int64(len(body)), opt)
	if err == nil {
		err = s.schedule(ctx, q.container, q.object, at)
	}
	if err != nil {
		q.fail(err)
		return
	}
	q.w.Header().Set("ETag", `"`+etag+`"`)
	q.w.Header().Set("Last-Modified", info.Modified.UTC().Format(http.TimeFormat))
	q.empty(201)
}

// readManifest reads the segments of a static large object.
func (s *Server) readManifest(ctx context.Context, info gateway.ObjectInfo, inline []byte) ([]sloSegment, error) {
	if info.Size > MaxManifestSize {
		return nil, fmt.Errorf("swift: manifest of %d bytes", info.Size)
	}
	var buf bytes.Buffer
	if err := s.gw.ReadVersion(ctx, info, inline, &buf, 0, info.Size); err != nil {
		return nil, err
	}
	var segs []sloSegment
	if err := json.Unmarshal(buf.Bytes(), &segs); err != nil {
		return nil, fmt.Errorf("swift: damaged manifest: %w", err)
	}
	return segs, nil
}

// view is what a GET or HEAD of an object shows: its size and ETag, and
// how to read its bytes.
type view struct {
	size   int64
	etag   string // without quotes
	quoted bool   // Swift quotes the ETags of large objects
	segs   []segment
	raw    bool // read the object's own bytes (not segments)
	ctype  string
	manif  bool // the body is an SLO manifest, not the object
}

// resolve works out what an object shows: its own bytes, or for a
// large object its segments.
func (s *Server) resolve(q *request, info gateway.ObjectInfo, inline []byte) (view, error) {
	ctx := q.r.Context()
	v := view{size: info.Size, etag: info.ETag, raw: true, ctype: info.ContentType}
	mm := q.r.URL.Query().Get("multipart-manifest") == "get"
	switch {
	case info.Headers[hdrSLO] != "" && mm:
		v.ctype, v.manif = "application/json; charset=utf-8", true
	case info.Headers[hdrSLO] != "":
		segs, err := s.readManifest(ctx, info, inline)
		if err != nil {
			return v, err
		}
		v.raw, v.size, v.quoted, v.etag = false, 0, true, info.Headers[hdrSLOEtag]
		for _, sg := range segs {
			c, o, _ := splitPath(sg.Name)
			if !s.may(q, c, gateway.Read) {
				return v, errForbidden
			}
			v.segs = append(v.segs, segment{c, o, sg.Bytes})
			v.size += sg.Bytes
		}
	case info.Headers[hdrDLO] != "" && !mm:
		c, prefix, err := dloManifest(info.Headers[hdrDLO])
		if err != nil {
			return v, err
		}
		if !s.may(q, c, gateway.Read) {
			return v, errForbidden
		}
		v.raw, v.size, v.quoted = false, 0, true
		sum := md5.New()
		after := ""
		for range scanLimit {
			page, err := s.gw.List(ctx, c, prefix, "", after, 1000)
			if errors.Is(err, gateway.ErrNoBucket) {
				break
			}
			if err != nil {
				return v, err
			}
			for _, o := range page.Objects {
				if len(v.segs) >= ListingLimit {
					return v, serr(409, fmt.Sprintf("Conflict: a dynamic large object has at most %d segments", ListingLimit))
				}
				v.segs = append(v.segs, segment{c, o.Key, o.Size})
				v.size += o.Size
				sum.Write([]byte(o.ETag))
			}
			if !page.Truncated {
				break
			}
			after = page.Next
		}
		v.etag = hex.EncodeToString(sum.Sum(nil))
	case len(info.Parts) > 0:
		// Completed from an S3 multipart upload: its ETag is S3's
		// (MD5 of the parts' MD5s, -N), not the content's MD5; marked a
		// static large object so clients do not check it against the
		// body, with an empty manifest.
		v.quoted = true
		if mm {
			v.manif, v.ctype = true, "application/json; charset=utf-8"
		}
	}
	return v, nil
}

func (s *Server) getObject(q *request) {
	if !s.allowed(q, q.container, gateway.Read) {
		return
	}
	ctx := q.r.Context()
	info, inline, err := s.lookup(ctx, q.container, q.object)
	if err == nil && info.Encryption != nil {
		// Refused before any header is sent: the read would fail
		// without the customer key, after a 200.
		err = errCustomerKey
	}
	if err != nil {
		q.fail(err)
		return
	}
	v, err := s.resolve(q, info, inline)
	if err != nil {
		q.fail(err)
		return
	}
	var manifest []byte
	if v.manif {
		if info.Headers[hdrSLO] != "" {
			var buf bytes.Buffer
			if err := s.gw.ReadVersion(ctx, info, inline, &buf, 0, info.Size); err != nil {
				q.fail(err)
				return
			}
			manifest = buf.Bytes()
		} else {
			manifest = []byte("[]")
		}
		v.size = int64(len(manifest))
		sum := md5.Sum(manifest)
		v.etag, v.quoted = hex.EncodeToString(sum[:]), false
	}
	h := q.w.Header()
	etag := v.etag
	if v.quoted {
		etag = `"` + etag + `"`
	}
	mod := info.Modified.Truncate(time.Second)
	h.Set("ETag", etag)
	h.Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
	h.Set("X-Timestamp", timestamp(info.Modified))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Type", v.ctype)
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/octet-stream")
	}
	setMeta(h, "Object", info.Meta)
	for _, k := range keptHeaders {
		if x := info.Headers[k]; x != "" {
			h.Set(k, x)
		}
	}
	if m := info.Headers[hdrDLO]; m != "" {
		h.Set(hdrDLO, m)
	}
	if at := info.Headers[hdrDeleteAt]; at != "" {
		h.Set(hdrDeleteAt, at)
	}
	if info.Headers[hdrSLO] != "" || len(info.Parts) > 0 {
		h.Set(hdrSLO, "True")
	}
	// Conditions, in Swift's (RFC 9110's) order.
	r := q.r
	if im := r.Header.Get("If-Match"); im != "" && !etagMatch(im, v.etag) {
		q.fail(errPrecondition)
		return
	}
	if ius := r.Header.Get("If-Unmodified-Since"); ius != "" && r.Header.Get("If-Match") == "" {
		if t, err := http.ParseTime(ius); err == nil && mod.After(t) {
			q.fail(errPrecondition)
			return
		}
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, v.etag) {
		q.empty(304)
		return
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" && r.Header.Get("If-None-Match") == "" {
		if t, err := http.ParseTime(ims); err == nil && !mod.After(t) {
			q.empty(304)
			return
		}
	}
	off, n, status := int64(0), v.size, 200
	if rg := r.Header.Get("Range"); rg != "" && rangeSyntaxOK(rg) {
		if off, n, err = parseRange(rg, v.size); err != nil {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", v.size))
			q.fail(errRange)
			return
		}
		status = 206
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, v.size))
	}
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	q.status = status
	q.w.WriteHeader(status)
	if r.Method == http.MethodHead || n == 0 {
		return
	}
	cw := &countWriter{w: q.w}
	switch {
	case manifest != nil:
		_, err = cw.Write(manifest[off : off+n])
	case v.raw:
		err = s.gw.ReadVersion(ctx, info, inline, cw, off, n)
	default:
		err = s.readSegments(ctx, v.segs, cw, off, n)
	}
	q.bytes = cw.n
	if err != nil {
		// Too late for an error answer: cut the connection short, so the
		// client sees fewer bytes than Content-Length.
		s.log.Warn("swift: get failed mid-stream", "id", q.id, "container", q.container, "object", q.object, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// readSegments writes length bytes from off of a large object's
// segments. A segment that is gone or has changed size fails the read.
func (s *Server) readSegments(ctx context.Context, segs []segment, w io.Writer, off, length int64) error {
	for _, sg := range segs {
		if length <= 0 {
			return nil
		}
		if off >= sg.size {
			off -= sg.size
			continue
		}
		n := min(sg.size-off, length)
		info, err := s.gw.Get(ctx, sg.container, sg.object, w, off, n)
		if err != nil {
			return fmt.Errorf("segment %s/%s: %w", sg.container, sg.object, err)
		}
		if info.Size != sg.size {
			return fmt.Errorf("segment %s/%s: %d bytes, the manifest says %d", sg.container, sg.object, info.Size, sg.size)
		}
		off, length = 0, length-n
	}
	return nil
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

func etagMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}

// rangeSyntaxOK reports whether a Range header is one byte range; others
// (several ranges among them) are ignored and the whole object sent.
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
	spec, _ := strings.CutPrefix(h, "bytes=")
	a, b, _ := strings.Cut(spec, "-")
	if a == "" {
		k, err := strconv.ParseInt(b, 10, 64)
		if err != nil || k <= 0 || size == 0 {
			return 0, 0, errRange
		}
		k = min(k, size)
		return size - k, k, nil
	}
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

// postObject replaces an object's metadata (X-Object-Meta-*, and the
// content type and standard headers given), keeping its bytes.
func (s *Server) postObject(q *request) {
	if !s.allowed(q, q.container, gateway.Write) {
		return
	}
	h := q.r.Header
	if err := checkUnsupported(h); err != nil {
		q.fail(err)
		return
	}
	meta, err := metaUpdate(h, "object", nil)
	if err != nil {
		q.fail(err)
		return
	}
	if m := h.Get(hdrDLO); m != "" {
		if _, _, err := dloManifest(m); err != nil {
			q.fail(err)
			return
		}
	}
	at, err := s.deleteAt(h)
	if err != nil {
		q.fail(err)
		return
	}
	ctx := q.r.Context()
	if _, _, err := s.lookup(ctx, q.container, q.object); err != nil {
		q.fail(err)
		return
	}
	_, err = s.gw.Rewrite(ctx, q.container, q.object, q.container, q.object, func(info *gateway.ObjectInfo) {
		info.Meta = meta
		if ct := h.Get("Content-Type"); ct != "" {
			info.ContentType = ct
		}
		hd := map[string]string{}
		for _, k := range []string{hdrDLO, hdrSLO, hdrSLOSize, hdrSLOEtag} {
			if v := info.Headers[k]; v != "" {
				hd[k] = v
			}
		}
		for _, k := range append(keptHeaders, hdrDLO) {
			if v := h.Get(k); v != "" {
				hd[k] = v
			}
		}
		if at != 0 { // POST replaces the expiry too: none unless given
			hd[hdrDeleteAt] = strconv.FormatInt(at, 10)
		}
		info.Headers = hd
	})
	if err == nil {
		err = s.schedule(ctx, q.container, q.object, at)
	}
	if err != nil {
		q.fail(err)
		return
	}
	q.empty(202)
}

func (s *Server) deleteObject(q *request) {
	if !s.allowed(q, q.container, gateway.Write) {
		return
	}
	ctx := q.r.Context()
	info, inline, err := s.lookup(ctx, q.container, q.object)
	if err != nil {
		q.fail(err)
		return
	}
	if q.r.URL.Query().Get("multipart-manifest") != "delete" || info.Headers[hdrSLO] == "" {
		if err := s.gw.Delete(ctx, q.container, q.object); err != nil {
			q.fail(err)
			return
		}
		q.empty(204)
		return
	}
	// A static large object with its segments.
	segs, err := s.readManifest(ctx, info, inline)
	if err != nil {
		q.fail(err)
		return
	}
	deleted, notFound := 0, 0
	var problems [][2]string
	for _, sg := range segs {
		c, o, _ := splitPath(sg.Name)
		if !s.may(q, c, gateway.Write) {
			problems = append(problems, [2]string{sg.Name, "403 Forbidden"})
			continue
		}
		if _, err := s.gw.Head(ctx, c, o); err != nil {
			notFound++
			continue
		}
		if err := s.gw.Delete(ctx, c, o); err != nil {
			problems = append(problems, [2]string{sg.Name, mapErr(err).msg})
			continue
		}
		deleted++
	}
	if len(problems) == 0 {
		if err := s.gw.Delete(ctx, q.container, q.object); err != nil {
			q.fail(err)
			return
		}
		deleted++
	}
	status := "200 OK"
	if len(problems) > 0 {
		status = "400 Bad Request"
	}
	if format(q.r) == "json" {
		errs := make([][]string, 0, len(problems))
		for _, p := range problems {
			errs = append(errs, []string{p[0], p[1]})
		}
		b, _ := json.Marshal(map[string]any{"Number Deleted": deleted, "Number Not Found": notFound,
			"Response Body": "", "Response Status": status, "Errors": errs})
		q.body(200, "application/json; charset=utf-8", b)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Number Deleted: %d\nNumber Not Found: %d\nResponse Body: \nResponse Status: %s\nErrors: \n", deleted, notFound, status)
	for _, p := range problems {
		fmt.Fprintf(&b, "%s, %s\n", p[0], p[1])
	}
	q.body(200, "text/plain; charset=utf-8", []byte(b.String()))
}

// copyMethod serves COPY with a Destination header.
func (s *Server) copyMethod(q *request) {
	d := q.r.Header.Get("Destination")
	if a := q.r.Header.Get("Destination-Account"); a != "" && a != q.account {
		q.fail(notImplemented("copying to another account"))
		return
	}
	dst, err := url.PathUnescape(d)
	dc, do, ok := splitPath(dst)
	if err != nil || !ok {
		q.fail(serr(412, "Precondition Failed: Destination header must be of the form <container name>/<object name>"))
		return
	}
	if !s.allowed(q, dc, gateway.Write) {
		return
	}
	if err := checkUnsupported(q.r.Header); err != nil {
		q.fail(err)
		return
	}
	s.copy(q, q.container, q.object, dc, do)
}

// copy copies an object: by reference (no bytes read or stored again)
// unless the source is a large object, whose assembled bytes are copied
// (with ?multipart-manifest=get, the manifest itself). Metadata is the
// source's, updated by the request's (only the request's with
// X-Fresh-Metadata: true).
func (s *Server) copy(q *request, sc, so, dc, do string) {
	if !s.allowed(q, sc, gateway.Read) {
		return
	}
	ctx := q.r.Context()
	h := q.r.Header
	at, err := s.deleteAt(h)
	if err != nil {
		q.fail(err)
		return
	}
	src, inline, err := s.lookup(ctx, sc, so)
	if err == nil && src.Encryption != nil {
		err = errCustomerKey
	}
	if err != nil {
		q.fail(err)
		return
	}
	fresh := strings.EqualFold(h.Get("X-Fresh-Metadata"), "true")
	meta := map[string]string{}
	if !fresh {
		for k, v := range src.Meta {
			meta[k] = v
		}
	}
	if meta, err = metaUpdate(h, "object", meta); err != nil {
		q.fail(err)
		return
	}
	edit := func(info *gateway.ObjectInfo) {
		info.Meta = meta
		if ct := h.Get("Content-Type"); ct != "" {
			info.ContentType = ct
		}
		for _, k := range keptHeaders {
			if v := h.Get(k); v != "" {
				if info.Headers == nil {
					info.Headers = map[string]string{}
				}
				info.Headers[k] = v
			}
		}
		// A copy is a new object: it expires only if the request says so.
		delete(info.Headers, hdrDeleteAt)
		if at != 0 {
			if info.Headers == nil {
				info.Headers = map[string]string{}
			}
			info.Headers[hdrDeleteAt] = strconv.FormatInt(at, 10)
		}
	}
	v, err := s.resolve(q, src, inline)
	if err != nil {
		q.fail(err)
		return
	}
	var out gateway.ObjectInfo
	if v.raw && !v.manif || v.manif && src.Headers[hdrSLO] != "" {
		// The object's own bytes (or an SLO manifest asked for as such).
		out, err = s.gw.Rewrite(ctx, sc, so, dc, do, edit)
	} else {
		opt := gateway.PutOptions{ContentType: src.ContentType, Headers: map[string]string{}}
		for _, k := range keptHeaders {
			if x := src.Headers[k]; x != "" {
				opt.Headers[k] = x
			}
		}
		info := gateway.ObjectInfo{ContentType: opt.ContentType, Headers: opt.Headers}
		edit(&info)
		opt.ContentType, opt.Meta, opt.Headers = info.ContentType, info.Meta, info.Headers
		pr, pw := io.Pipe()
		go func() {
			if v.raw {
				pw.CloseWithError(s.gw.ReadVersion(ctx, src, inline, pw, 0, src.Size))
				return
			}
			pw.CloseWithError(s.readSegments(ctx, v.segs, pw, 0, v.size))
		}()
		size := v.size
		if v.raw {
			size = src.Size
		}
		out, err = s.gw.Put(ctx, dc, do, pr, size, opt)
		pr.CloseWithError(io.ErrClosedPipe)
	}
	if err == nil {
		err = s.schedule(ctx, dc, do, at)
	}
	if err != nil {
		q.fail(err)
		return
	}
	rh := q.w.Header()
	rh.Set("X-Copied-From", url.PathEscape(sc)+"/"+url.PathEscape(so))
	rh.Set("X-Copied-From-Last-Modified", src.Modified.UTC().Format(http.TimeFormat))
	rh.Set("Last-Modified", out.Modified.UTC().Format(http.TimeFormat))
	if out.Headers[hdrSLO] != "" {
		rh.Set("ETag", `"`+out.Headers[hdrSLOEtag]+`"`)
	} else if len(out.Parts) > 0 {
		rh.Set("ETag", `"`+out.ETag+`"`)
	} else {
		rh.Set("ETag", out.ETag)
	}
	q.empty(201)
}
