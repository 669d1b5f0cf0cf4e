package swift

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Accounts and containers: listings, counts and metadata.

// setContainers is the registry's record set of container metadata.
const setContainers = "swift-containers"

// containerRecord is what Swift keeps of a container beyond the bucket:
// its metadata, for the bucket made at Created (a bucket deleted and
// made again under the name does not inherit it).
type containerRecord struct {
	Created time.Time         `json:"created"`
	Meta    map[string]string `json:"meta,omitempty"`
	// Referrers and Listings are X-Container-Read's .r: elements and
	// .rlistings (acl.go); its projects are grants of their keys.
	Referrers []string `json:"referrers,omitempty"`
	Listings  bool     `json:"rlistings,omitempty"`
	// ReadUsers and WriteUsers are the ACLs' user elements
	// (PROJECT:USER), which access keys' grants cannot hold.
	ReadUsers  []string `json:"read_users,omitempty"`
	WriteUsers []string `json:"write_users,omitempty"`
}

// lastModified is Swift's listing time format.
const lastModified = "2006-01-02T15:04:05.000000"

// format is the listing format a request asks for: ?format= first, then
// Accept.
func format(r *http.Request) string {
	switch f := r.URL.Query().Get("format"); f {
	case "json", "xml", "plain":
		return f
	}
	acc := r.Header.Get("Accept")
	switch {
	case strings.Contains(acc, "application/json"):
		return "json"
	case strings.Contains(acc, "application/xml"), strings.Contains(acc, "text/xml"):
		return "xml"
	}
	return "plain"
}

// listParams are a listing's query parameters.
type listParams struct {
	prefix, delimiter, marker, endMarker string
	limit                                int
	reverse, path                        bool
}

func parseList(r *http.Request) (listParams, error) {
	v := r.URL.Query()
	lp := listParams{prefix: v.Get("prefix"), delimiter: v.Get("delimiter"), marker: v.Get("marker"),
		endMarker: v.Get("end_marker"), limit: ListingLimit}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return lp, serr(400, "Bad Request: limit must be a number")
		}
		if n > ListingLimit {
			return lp, serr(412, fmt.Sprintf("Precondition Failed: limit is at most %d", ListingLimit))
		}
		lp.limit = n
	}
	if len(lp.delimiter) > 1 {
		return lp, serr(412, "Precondition Failed: bad delimiter (one character)")
	}
	switch strings.ToLower(v.Get("reverse")) {
	case "true", "1", "yes", "on", "t", "y":
		lp.reverse = true
	}
	if v.Has("path") {
		// path=P lists the objects directly under P, as prefix P/ and
		// delimiter / would, without the subdirectories.
		p := strings.TrimSuffix(v.Get("path"), "/")
		lp.prefix, lp.delimiter, lp.path = "", "/", true
		if p != "" {
			lp.prefix = p + "/"
		}
	}
	return lp, nil
}

// entry is one line of a container listing: an object or a subdir.
type entry struct {
	name   string
	subdir bool
	info   gateway.ObjectInfo
}

// scanLimit bounds the pages one listing or count reads.
const scanLimit = 100000

// listObjects returns the entries of a container a listing asks for.
func (s *Server) listObjects(q *request, lp listParams) ([]entry, error) {
	ctx := q.r.Context()
	var out []entry
	after := ""
	if !lp.reverse {
		after = lp.marker
	}
	for range scanLimit {
		page, err := s.gw.List(ctx, q.container, lp.prefix, lp.delimiter, after, 1000)
		if err != nil {
			return nil, err
		}
		merged := make([]entry, 0, len(page.Objects)+len(page.Prefixes))
		for _, o := range page.Objects {
			merged = append(merged, entry{name: o.Key, info: o})
		}
		for _, p := range page.Prefixes {
			merged = append(merged, entry{name: p, subdir: true})
		}
		slices.SortFunc(merged, func(a, b entry) int { return strings.Compare(a.name, b.name) })
		for _, e := range merged {
			if !lp.reverse && lp.endMarker != "" && e.name >= lp.endMarker {
				return out, nil
			}
			if lp.path && e.subdir {
				continue
			}
			out = append(out, e)
			if !lp.reverse && len(out) >= lp.limit {
				return out, nil
			}
		}
		if !page.Truncated {
			break
		}
		after = page.Next
	}
	if lp.reverse {
		var rev []entry
		for i := len(out) - 1; i >= 0 && len(rev) < lp.limit; i-- {
			n := out[i].name
			if lp.marker != "" && n >= lp.marker || lp.endMarker != "" && n <= lp.endMarker {
				continue
			}
			rev = append(rev, out[i])
		}
		out = rev
	}
	return out, nil
}

// stats counts a container's objects and bytes.
func (s *Server) stats(q *request, container string) (count, bytes int64, err error) {
	after := ""
	for range scanLimit {
		page, err := s.gw.List(q.r.Context(), container, "", "", after, 1000)
		if err != nil {
			return 0, 0, err
		}
		for _, o := range page.Objects {
			count++
			bytes += o.Size
		}
		if !page.Truncated {
			break
		}
		after = page.Next
	}
	return count, bytes, nil
}

// containerMeta returns the metadata record of a container.
func (s *Server) containerMeta(q *request, container string, created time.Time) (containerRecord, error) {
	var rec containerRecord
	raw, err := s.gw.Record(q.r.Context(), setContainers, container)
	if err != nil || raw == nil {
		return containerRecord{Created: created}, err
	}
	if json.Unmarshal(raw, &rec) != nil || !rec.Created.Equal(created) {
		return containerRecord{Created: created}, nil
	}
	return rec, nil
}

// bucketInfo returns a bucket's info, ErrNoBucket if there is none.
func (s *Server) bucketInfo(q *request, name string) (gateway.BucketInfo, error) {
	bs, err := s.gw.Buckets(q.r.Context())
	if err != nil {
		return gateway.BucketInfo{}, err
	}
	for _, b := range bs {
		if b.Name == name {
			return b, nil
		}
	}
	return gateway.BucketInfo{}, gateway.ErrNoBucket
}

// metaUpdate reads X-KIND-Meta-* (set; an empty value removes) and
// X-Remove-KIND-Meta-* (remove) headers into meta, and checks Swift's
// limits on the result.
func metaUpdate(h http.Header, kind string, meta map[string]string) (map[string]string, error) {
	if meta == nil {
		meta = map[string]string{}
	}
	set := "x-" + kind + "-meta-"
	rm := "x-remove-" + kind + "-meta-"
	for k, vs := range h {
		lk := strings.ToLower(k)
		v := strings.Join(vs, ",")
		switch {
		case strings.HasPrefix(lk, set) && len(lk) > len(set):
			name := lk[len(set):]
			if len(name) > MaxMetaName {
				return nil, serr(400, fmt.Sprintf("Bad Request: metadata name too long (at most %d bytes)", MaxMetaName))
			}
			if len(v) > MaxMetaValue {
				return nil, serr(400, fmt.Sprintf("Bad Request: metadata value too long (at most %d bytes)", MaxMetaValue))
			}
			if v == "" && kind != "object" {
				delete(meta, name)
			} else {
				meta[name] = v
			}
		case strings.HasPrefix(lk, rm) && len(lk) > len(rm):
			delete(meta, lk[len(rm):])
		}
	}
	total := 0
	for k, v := range meta {
		total += len(k) + len(v)
	}
	if len(meta) > MaxMetaCount || total > MaxMetaOverall {
		return nil, serr(400, fmt.Sprintf("Bad Request: too much metadata (at most %d items, %d bytes)", MaxMetaCount, MaxMetaOverall))
	}
	return meta, nil
}

func setMeta(h http.Header, kind string, meta map[string]string) {
	for k, v := range meta {
		h.Set(http.CanonicalHeaderKey("X-"+kind+"-Meta-"+k), v)
	}
}

func timestamp(t time.Time) string {
	return fmt.Sprintf("%d.%05d", t.Unix(), t.Nanosecond()/10000)
}

// Account.

// accountContainers returns the containers the project may read, in
// name order.
func (s *Server) accountContainers(q *request) ([]gateway.BucketInfo, error) {
	bs, err := s.gw.Buckets(q.r.Context())
	if err != nil {
		return nil, err
	}
	var out []gateway.BucketInfo
	for _, b := range bs {
		if q.key.Allowed(b.Name, gateway.Read) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b gateway.BucketInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

type accountEntry struct {
	Name         string `json:"name" xml:"name"`
	Count        int64  `json:"count" xml:"count"`
	Bytes        int64  `json:"bytes" xml:"bytes"`
	LastModified string `json:"last_modified" xml:"last_modified"`
}

func (s *Server) accountHeaders(q *request, cs []gateway.BucketInfo) error {
	var count, bytes int64
	for _, c := range cs {
		n, b, err := s.stats(q, c.Name)
		if err != nil && !errors.Is(err, gateway.ErrNoBucket) {
			return err
		}
		count, bytes = count+n, bytes+b
	}
	h := q.w.Header()
	h.Set("X-Account-Container-Count", strconv.Itoa(len(cs)))
	h.Set("X-Account-Object-Count", strconv.FormatInt(count, 10))
	h.Set("X-Account-Bytes-Used", strconv.FormatInt(bytes, 10))
	h.Set("X-Timestamp", timestamp(q.project.Created))
	h.Set("X-Account-Storage-Policy-Grid-Container-Count", strconv.Itoa(len(cs)))
	setMeta(h, "Account", q.project.Meta)
	return nil
}

func (s *Server) headAccount(q *request) {
	cs, err := s.accountContainers(q)
	if err == nil {
		err = s.accountHeaders(q, cs)
	}
	if err != nil {
		q.fail(err)
		return
	}
	q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	q.empty(204)
}

func (s *Server) listAccount(q *request) {
	lp, err := parseList(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	cs, err := s.accountContainers(q)
	if err == nil {
		err = s.accountHeaders(q, cs)
	}
	if err != nil {
		q.fail(err)
		return
	}
	var sel []gateway.BucketInfo
	for _, c := range cs {
		if strings.HasPrefix(c.Name, lp.prefix) {
			sel = append(sel, c)
		}
	}
	if lp.reverse {
		slices.Reverse(sel)
	}
	var out []accountEntry
	for _, c := range sel {
		if len(out) >= lp.limit {
			break
		}
		if !lp.reverse && (lp.marker != "" && c.Name <= lp.marker || lp.endMarker != "" && c.Name >= lp.endMarker) ||
			lp.reverse && (lp.marker != "" && c.Name >= lp.marker || lp.endMarker != "" && c.Name <= lp.endMarker) {
			continue
		}
		n, b, err := s.stats(q, c.Name)
		if err != nil && !errors.Is(err, gateway.ErrNoBucket) {
			q.fail(err)
			return
		}
		out = append(out, accountEntry{Name: c.Name, Count: n, Bytes: b, LastModified: c.Created.UTC().Format(lastModified)})
	}
	names := make([]string, len(out))
	for i, e := range out {
		names[i] = e.Name
	}
	switch format(q.r) {
	case "json":
		if out == nil {
			out = []accountEntry{}
		}
		b, _ := json.Marshal(out)
		q.body(200, "application/json; charset=utf-8", b)
	case "xml":
		x := struct {
			XMLName    xml.Name       `xml:"account"`
			Name       string         `xml:"name,attr"`
			Containers []accountEntry `xml:"container"`
		}{Name: q.account, Containers: out}
		b, _ := xml.Marshal(x)
		q.body(200, "application/xml; charset=utf-8", append([]byte(xml.Header), b...))
	default:
		q.plainList(names)
	}
}

func (s *Server) postAccount(q *request) {
	// Re-read the project just before changing it, so a change made
	// meanwhile is not undone.
	p, err := s.ids.Project(q.r.Context(), q.project.Name)
	if err != nil {
		q.fail(err)
		return
	}
	if p.Meta, err = metaUpdate(q.r.Header, "account", p.Meta); err != nil {
		q.fail(err)
		return
	}
	if err := s.ids.PutProject(q.r.Context(), p); err != nil {
		q.fail(err)
		return
	}
	q.empty(204)
}

// body sends a listing or document.
func (q *request) body(status int, ctype string, b []byte) {
	h := q.w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	q.status = status
	q.w.WriteHeader(status)
	if q.r.Method != "HEAD" {
		n, _ := q.w.Write(b)
		q.bytes = int64(n)
	}
}

// plainList sends names one a line; an empty listing is 204.
func (q *request) plainList(names []string) {
	if len(names) == 0 {
		q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		q.empty(204)
		return
	}
	q.body(200, "text/plain; charset=utf-8", []byte(strings.Join(names, "\n")+"\n"))
}

// Containers.

func (s *Server) containerHeaders(q *request) (gateway.BucketInfo, bool) {
	b, err := s.bucketInfo(q, q.container)
	if err != nil {
		q.fail(err)
		return b, false
	}
	if !s.allowed(q, q.container, gateway.Read) {
		return b, false
	}
	rec, err := s.containerMeta(q, q.container, b.Created)
	if err != nil {
		q.fail(err)
		return b, false
	}
	n, bytes, err := s.stats(q, q.container)
	if err != nil {
		q.fail(err)
		return b, false
	}
	h := q.w.Header()
	h.Set("X-Container-Object-Count", strconv.FormatInt(n, 10))
	h.Set("X-Container-Bytes-Used", strconv.FormatInt(bytes, 10))
	h.Set("X-Timestamp", timestamp(b.Created))
	h.Set("X-Storage-Policy", "grid")
	setMeta(h, "Container", rec.Meta)
	if err := s.aclOut(q, q.container, rec); err != nil {
		q.fail(err)
		return b, false
	}
	return b, true
}

func (s *Server) headContainer(q *request) {
	if _, ok := s.containerHeaders(q); !ok {
		return
	}
	q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	q.empty(204)
}

type objectEntry struct {
	Name         string `json:"name,omitempty" xml:"name"`
	Hash         string `json:"hash,omitempty" xml:"hash"`
	Bytes        int64  `json:"bytes" xml:"bytes"`
	ContentType  string `json:"content_type,omitempty" xml:"content_type"`
	LastModified string `json:"last_modified,omitempty" xml:"last_modified"`
}

func (s *Server) listContainer(q *request) {
	lp, err := parseList(q.r)
	if err != nil {
		q.fail(err)
		return
	}
	if _, ok := s.containerHeaders(q); !ok {
		return
	}
	es, err := s.listObjects(q, lp)
	if err != nil {
		q.fail(err)
		return
	}
	switch format(q.r) {
	case "json":
		out := make([]any, 0, len(es))
		for _, e := range es {
			if e.subdir {
				out = append(out, map[string]string{"subdir": e.name})
				continue
			}
			out = append(out, listEntry(e.info))
		}
		b, _ := json.Marshal(out)
		q.body(200, "application/json; charset=utf-8", b)
	case "xml":
		type subdir struct {
			Name string `xml:"name,attr"`
			Elem string `xml:"name"`
		}
		type item struct {
			Object *objectEntry `xml:"object,omitempty"`
			Subdir *subdir      `xml:"subdir,omitempty"`
		}
		var b strings.Builder
		b.WriteString(xml.Header)
		fmt.Fprintf(&b, `<container name="%s">`, xmlEscape(q.container))
		for _, e := range es {
			var x []byte
			if e.subdir {
				x, _ = xml.Marshal(struct {
					XMLName xml.Name `xml:"subdir"`
					subdir
				}{subdir: subdir{e.name, e.name}})
			} else {
				o := listEntry(e.info)
				x, _ = xml.Marshal(struct {
					XMLName xml.Name `xml:"object"`
					objectEntry
				}{objectEntry: o})
			}
			b.Write(x)
		}
		b.WriteString("</container>\n")
		q.body(200, "application/xml; charset=utf-8", []byte(b.String()))
	default:
		names := make([]string, len(es))
		for i, e := range es {
			names[i] = e.name
		}
		q.plainList(names)
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// listEntry is an object as listings show it: its ETag as Swift's hash;
// a static large object with its total size and its ETag (the MD5 of
// its segments' ETags), as Swift lists it.
func listEntry(info gateway.ObjectInfo) objectEntry {
	ct := info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	e := objectEntry{Name: info.Key, Hash: info.ETag, Bytes: info.Size, ContentType: ct,
		LastModified: info.Modified.UTC().Format(lastModified)}
	if info.Headers[hdrSLO] != "" {
		e.Hash = info.Headers[hdrSLOEtag]
		if n, err := strconv.ParseInt(info.Headers[hdrSLOSize], 10, 64); err == nil {
			e.Bytes = n
		}
	}
	return e
}

func (s *Server) putContainer(q *request) {
	h := q.r.Header
	for _, unsupported := range []string{"X-Versions-Location", "X-History-Location", "X-Container-Sync-To"} {
		if h.Get(unsupported) != "" {
			q.fail(notImplemented(unsupported))
			return
		}
	}
	meta, err := metaUpdate(h, "container", nil)
	if err != nil {
		q.fail(err)
		return
	}
	created, err := s.makeContainer(q, q.container)
	if err != nil {
		q.fail(err)
		return
	}
	status := 202
	if created {
		status = 201
	}
	if len(meta) > 0 || hasACL(h) {
		b, err := s.bucketInfo(q, q.container)
		if err != nil {
			q.fail(err)
			return
		}
		rec, err := s.containerMeta(q, q.container, b.Created)
		if err != nil {
			q.fail(err)
			return
		}
		if rec.Meta, err = metaUpdate(h, "container", rec.Meta); err != nil {
			q.fail(err)
			return
		}
		if hasACL(h) {
			if err := s.setACL(q, q.container, &rec); err != nil {
				q.fail(err)
				return
			}
		}
		if err := s.putContainerMeta(q, rec); err != nil {
			q.fail(err)
			return
		}
	}
	q.empty(status)
}

// makeContainer makes a container (a bucket owned by the project's key)
// unless it exists and the key may write to it; it reports whether it
// made it. A new container starts with no metadata.
func (s *Server) makeContainer(q *request, name string) (bool, error) {
	ctx := q.r.Context()
	err := s.gw.CreateContainer(ctx, name, q.key.ID)
	switch {
	case errors.Is(err, gateway.ErrBucketExists):
		if !s.may(q, name, gateway.Write) {
			return false, serr(403, "Forbidden: the container name is taken by another project (containers are S3 buckets, one namespace for all).")
		}
		return false, nil
	case err != nil:
		return false, err
	case !q.key.Admin:
		k, err := s.gw.Key(ctx, q.key.ID)
		if err != nil {
			return false, err
		}
		if k.Buckets == nil {
			k.Buckets = map[string]gateway.Perm{}
		}
		k.Buckets[name] = gateway.Owner
		if err := s.gw.PutKey(ctx, k); err != nil {
			return false, err
		}
		q.key = k
	}
	b, err := s.bucketInfo(q, name)
	if err != nil {
		return true, err
	}
	rec, _ := json.Marshal(containerRecord{Created: b.Created})
	return true, s.gw.PutRecord(ctx, setContainers, name, rec)
}

func (s *Server) putContainerMeta(q *request, rec containerRecord) error {
	b, _ := json.Marshal(rec)
	return s.gw.PutRecord(q.r.Context(), setContainers, q.container, b)
}

func (s *Server) postContainer(q *request) {
	h := q.r.Header
	for _, unsupported := range []string{"X-Versions-Location", "X-History-Location", "X-Container-Sync-To"} {
		if h.Get(unsupported) != "" {
			q.fail(notImplemented(unsupported))
			return
		}
	}
	b, err := s.bucketInfo(q, q.container)
	if err != nil {
		q.fail(err)
		return
	}
	if !s.allowed(q, q.container, gateway.Write) {
		return
	}
	rec, err := s.containerMeta(q, q.container, b.Created)
	if err != nil {
		q.fail(err)
		return
	}
	if rec.Meta, err = metaUpdate(h, "container", rec.Meta); err != nil {
		q.fail(err)
		return
	}
	if hasACL(h) {
		if err := s.setACL(q, q.container, &rec); err != nil {
			q.fail(err)
			return
		}
	}
	if err := s.putContainerMeta(q, rec); err != nil {
		q.fail(err)
		return
	}
	q.empty(204)
}

func (s *Server) deleteContainer(q *request) {
	if err := s.removeContainer(q, q.container); err != nil {
		q.fail(err)
		return
	}
	q.empty(204)
}
