package webdav

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/quilt-grid/quilt/internal/tree"
	xwebdav "golang.org/x/net/webdav"
)

// The XML namespaces of ownCloud's and Nextcloud's properties.
const (
	OCNS = "http://owncloud.org/ns"
	NCNS = "http://nextcloud.org/ns"
)

// ServerVersion is the ownCloud server version status.php and the
// capabilities give: one the ownCloud and Nextcloud desktop clients
// accept without a warning.
const ServerVersion = "10.11.0"

// instanceID ends every oc:id, as an ownCloud server's instance ID does.
const instanceID = "ocquilt"

// metaFileID is the user metadata key of a file's ID (docs/files.md):
// a MOVE keeps it (the tree's rename copies the metadata), a PUT over the
// file keeps it, a new file or a copy gets a new one.
const metaFileID = "oc-fileid"

// ErrChecksum is a PUT's body that does not match its OC-Checksum
// header: nothing is written.
var ErrChecksum = errors.New("webdav: checksum mismatch")

// metaSHA1 is the user metadata key of a file's SHA-1 (hex), hashed as
// a PUT or a chunked upload wrote it, for oc:checksums beside the MD5
// that the ETag is. A file written through another door has none.
const metaSHA1 = "oc-sha1"

// newFileID returns a random file ID in [2^52, 2^53): a number that
// JavaScript and JSON readers hold exactly, and apart from the IDs
// derived from paths.
func newFileID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])>>12 | 1<<52
}

// fileID returns the ID of a file or directory: the one in its metadata,
// else one derived from its path, in [0, 2^52) (directories made with
// MKCOL and files written through other doors have none stored; their
// ID changes when they move).
func fileID(i tree.Info) uint64 {
	if v, err := strconv.ParseUint(i.Object.Meta[metaFileID], 10, 64); err == nil {
		return v
	}
	h := fnv.New64a()
	h.Write([]byte("/" + i.Path))
	return h.Sum64() >> 12
}

// ocID is a file ID as oc:id and the OC-FileId header give it.
func ocID(id uint64) string { return fmt.Sprintf("%020d%s", id, instanceID) }

// permissions is oc:permissions: D delete, N rename, V move, W write
// (files), C and K create files and directories (directories). The root
// can be written into but not deleted or moved.
func permissions(i tree.Info) string {
	switch {
	case i.Path == "":
		return "CK"
	case i.IsDir():
		return "DNVCK"
	}
	return "DNVW"
}

// summary is what a directory's getetag and oc:size come from: every
// key under it, walked.
type summary struct {
	etag string
	size int64
}

// summarize walks every object under directory i: the ETag is a hash of
// their keys, sizes and write times, so it changes when anything below
// changes (the sync clients descend only into directories whose ETag
// changed); the size is their total.
func (f *fileSystem) summarize(ctx context.Context, i tree.Info) (summary, error) {
	prefix := ""
	if i.Path != "" {
		prefix = i.Path + "/"
	}
	h := sha256.New()
	var sum summary
	after := ""
	for {
		l, err := f.t.Store().List(ctx, prefix, "", after, 1000)
		if err != nil {
			return summary{}, err
		}
		for _, o := range l.Objects {
			fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s\x00", o.Key, o.Size, o.Modified.UnixNano(), o.Meta[tree.MetaMtime])
			sum.size += o.Size
			after = o.Key
		}
		if !l.More || len(l.Objects) == 0 {
			break
		}
	}
	sum.etag = `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
	return sum, nil
}

// ocProps are the computed ownCloud and Nextcloud properties of i that a
// PROPFIND names (f.want), which it shows beside the dead ones: only
// those asked for are computed, so a directory is walked only for its
// getetag, oc:size or quota, and a file's object looked up only for
// oc:checksums.
func (f *fileSystem) ocProps(ctx context.Context, fi *fileInfo) map[xml.Name]xwebdav.Property {
	m := map[xml.Name]xwebdav.Property{}
	want := func(space, local string) bool { return f.want[xml.Name{Space: space, Local: local}] }
	set := func(space, local, inner string) {
		if want(space, local) {
			n := xml.Name{Space: space, Local: local}
			m[n] = xwebdav.Property{XMLName: n, InnerXML: []byte(inner)}
		}
	}
	i := fi.Info
	id := fileID(i)
	set(OCNS, "id", ocID(id))
	set(OCNS, "fileid", strconv.FormatUint(id, 10))
	set(OCNS, "permissions", permissions(i))
	set(OCNS, "downloadURL", "")
	set(OCNS, "dDC", "")
	set(OCNS, "share-types", "")
	set(NCNS, "has-preview", "false")
	if f.user != "" {
		set(OCNS, "owner-id", xmlText(f.user))
		set(OCNS, "owner-display-name", xmlText(f.user))
	}
	if !i.IsDir() {
		set(OCNS, "size", strconv.FormatInt(i.Size, 10))
		if !want(OCNS, "checksums") {
			return m // no object lookup
		}
		var sums []string
		if v := i.Object.Meta[metaSHA1]; len(v) == 40 {
			sums = append(sums, "SHA1:"+v)
		}
		if e, _ := fi.object(ctx); md5Hex.MatchString(e) {
			sums = append(sums, "MD5:"+e)
		}
		if len(sums) > 0 {
			set(OCNS, "checksums", `<checksum xmlns="`+OCNS+`">`+strings.Join(sums, " ")+`</checksum>`)
		}
		return m
	}
	if i.Path == "" {
		set(OCNS, "data-fingerprint", "")
	}
	if !want(OCNS, "size") && !want("DAV:", "getetag") && !want("DAV:", "quota-used-bytes") && !want("DAV:", "quota-available-bytes") {
		return m // no walk
	}
	s, err := fi.summary(ctx)
	if err != nil {
		return m
	}
	set(OCNS, "size", strconv.FormatInt(s.size, 10))
	// x/net/webdav gives no getetag for a collection; the clients need
	// one that changes with anything below.
	set("DAV:", "getetag", s.etag)
	used, avail := s.size, int64(-3) // -3: unlimited, as ownCloud says it
	if f.usage != nil && (want("DAV:", "quota-used-bytes") || want("DAV:", "quota-available-bytes")) {
		if u, q, err := f.usage(ctx); err == nil {
			if i.Path == "" {
				used = u
			}
			if q > 0 {
				avail = max(q-u, 0)
			}
		}
	}
	set("DAV:", "quota-used-bytes", strconv.FormatInt(used, 10))
	set("DAV:", "quota-available-bytes", strconv.FormatInt(avail, 10))
	return m
}

// md5Hex is an ETag that is the MD5 of the content (one PUT's, not a
// multipart upload's).
var md5Hex = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ocComputed says whether n is a computed property, which PROPPATCH
// cannot set or remove.
func ocComputed(n xml.Name) bool {
	switch n.Space {
	case OCNS, NCNS:
		return true
	case "DAV:":
		return n.Local == "quota-used-bytes" || n.Local == "quota-available-bytes"
	}
	return false
}

func xmlText(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// propfindNames returns the properties a PROPFIND body names in its
// <prop>, or nil for allprop, propname or no body (which show no
// computed property, as ownCloud's allprop does not).
func propfindNames(body []byte) map[xml.Name]bool {
	var pf struct {
		Prop struct {
			Any []struct{ XMLName xml.Name } `xml:",any"`
		} `xml:"DAV: prop"`
	}
	if len(bytes.TrimSpace(body)) == 0 || xml.Unmarshal(body, &pf) != nil || len(pf.Prop.Any) == 0 {
		return nil
	}
	m := map[xml.Name]bool{}
	for _, p := range pf.Prop.Any {
		m[p.XMLName] = true
	}
	return m
}

// preconditions evaluates a PUT's If-Match and If-None-Match against the
// file's current ETag (x/net/webdav does not); it returns 412 if they do
// not hold, else 0.
func (f *fileSystem) preconditions(ctx context.Context, name string, h http.Header) int {
	im, inm := h.Get("If-Match"), h.Get("If-None-Match")
	if im == "" && inm == "" {
		return 0
	}
	cur := ""
	if i, err := f.t.Stat(ctx, name); err == nil {
		fi := &fileInfo{Info: i, fs: f}
		cur, _ = fi.ETag(ctx)
		if cur == "" {
			cur = "*" // exists, ETag unknown
		}
	}
	match := func(list string) bool {
		for _, t := range strings.Split(list, ",") {
			t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
			if cur != "" && (t == "*" || t == cur) {
				return true
			}
		}
		return false
	}
	if im != "" && !match(im) {
		return http.StatusPreconditionFailed
	}
	if inm != "" && match(inm) {
		return http.StatusPreconditionFailed
	}
	return 0
}

// serveStatus answers status.php: an installed server, not in
// maintenance, of a version the clients accept.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "quilt: status.php is read with GET", http.StatusMethodNotAllowed)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"installed": true, "maintenance": false, "needsDbUpgrade": false,
		"version": ServerVersion + ".0", "versionstring": ServerVersion,
		"edition": "Community", "productname": s.cfg.Product, "product": s.cfg.Product,
		"extendedSupport": false,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// serveOCS answers the OCS API's capabilities and user, in JSON or XML
// (format=json|xml; XML without it), version 1 (status code 100) or 2
// (200).
func (s *Server) serveOCS(w http.ResponseWriter, r *http.Request, user, rest string) {
	ver, call, ok := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	v2 := ver == "v2.php"
	format := r.URL.Query().Get("format")
	if format == "" && strings.Contains(r.Header.Get("Accept"), "application/json") {
		format = "json"
	}
	if format != "" && format != "json" && format != "xml" {
		ocsReply(w, v2, "xml", http.StatusBadRequest, 400, "format is json or xml", nil)
		return
	}
	if !ok || (ver != "v1.php" && !v2) {
		http.Error(w, "quilt: the OCS API is at /ocs/v1.php/ and /ocs/v2.php/", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		ocsReply(w, v2, format, http.StatusMethodNotAllowed, 405, "read with GET", nil)
		return
	}
	switch strings.TrimSuffix(call, "/") {
	case "cloud/capabilities":
		ocsReply(w, v2, format, http.StatusOK, 0, "OK", s.capabilities())
	case "cloud/user":
		data := map[string]any{"id": user, "display-name": user, "displayname": user, "email": ""}
		if s.cfg.Usage != nil {
			if used, quota, err := s.cfg.Usage(r.Context(), user); err == nil {
				q := map[string]any{"used": used, "total": quota, "free": max(quota-used, 0)}
				if quota <= 0 {
					q["quota"], q["free"] = -3, -3
				} else {
					q["quota"] = quota
				}
				data["quota"] = q
			}
		}
		ocsReply(w, v2, format, http.StatusOK, 0, "OK", data)
	default:
		ocsReply(w, v2, format, http.StatusNotFound, 998, "not found: only cloud/capabilities and cloud/user are served", nil)
	}
}

// capabilities are what the OCS capabilities call gives: chunking NG
// (dav.chunking 1.0; ownCloud's client also wants files.bigfilechunking),
// MD5 checksums, no sharing, no trash or versions
// over OCS.
func (s *Server) capabilities() map[string]any {
	maj, rest, _ := strings.Cut(ServerVersion, ".")
	min, mic, _ := strings.Cut(rest, ".")
	n := func(v string) int { i, _ := strconv.Atoi(v); return i }
	return map[string]any{
		"version": map[string]any{"major": n(maj), "minor": n(min), "micro": n(mic), "string": ServerVersion,
			"edition": "Community", "product": s.cfg.Product},
		"capabilities": map[string]any{
			"core": map[string]any{"pollinterval": 60000, "webdav-root": "remote.php/webdav",
				"status": map[string]any{"installed": true, "maintenance": false, "version": ServerVersion + ".0",
					"versionstring": ServerVersion, "productname": s.cfg.Product}},
			"dav":             map[string]any{"chunking": "1.0", "reports": []any{}},
			"files":           map[string]any{"bigfilechunking": true, "undelete": false, "versioning": false, "blacklisted_files": []any{".htaccess"}},
			"checksums":       map[string]any{"supportedTypes": []any{"MD5", "SHA1", "ADLER32"}, "preferredUploadType": "MD5"},
			"files_sharing":   map[string]any{"api_enabled": false},
			"notifications":   map[string]any{"ocs-endpoints": []any{}},
			"provisioning":    map[string]any{"enabled": false},
			"password_policy": map[string]any{},
		},
	}
}

// ocsReply writes an OCS envelope: meta (status, code, message) and data.
// A success's code is 100 in version 1 and 200 in version 2.
func ocsReply(w http.ResponseWriter, v2 bool, format string, httpCode, code int, msg string, data any) {
	status := "failure"
	if httpCode == http.StatusOK {
		status, code = "ok", 100
		if v2 {
			code = 200
		}
	}
	if data == nil {
		data = []any{}
	}
	meta := map[string]any{"status": status, "statuscode": code, "message": msg, "totalitems": "", "itemsperpage": ""}
	if v2 && httpCode >= 400 {
		// version 2 says a failure in the HTTP status too; version 1
		// always answers 200 with the code in meta.
	} else if !v2 {
		httpCode = http.StatusOK
	}
	if format == "json" {
		writeJSON(w, httpCode, map[string]any{"ocs": map[string]any{"meta": meta, "data": data}})
		return
	}
	var b bytes.Buffer
	b.WriteString(xml.Header + "<ocs>\n<meta>")
	writeXML(&b, meta)
	b.WriteString("</meta>\n<data>")
	writeXML(&b, data)
	b.WriteString("</data>\n</ocs>\n")
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(httpCode)
	w.Write(b.Bytes())
}

// writeXML writes v (maps, lists, scalars) as OCS's XML: a map's keys as
// elements in order, a list's items as <element>.
func writeXML(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(b, "<%s>", k)
			writeXML(b, v[k])
			fmt.Fprintf(b, "</%s>", k)
		}
	case []any:
		for _, e := range v {
			b.WriteString("<element>")
			writeXML(b, e)
			b.WriteString("</element>")
		}
	case bool:
		if v {
			b.WriteString("1")
		}
	case string:
		xml.EscapeText(b, []byte(v))
	default:
		fmt.Fprint(b, v)
	}
}

// ocHeaders sets the response headers the sync clients read after a
// write: OC-FileId, OC-ETag (and ETag), X-OC-MTime when the time was
// taken from X-OC-Mtime.
func (f *fileSystem) ocHeaders(ctx context.Context, name string) {
	if f.hdr == nil {
		return
	}
	i, err := f.t.Stat(ctx, name)
	if err != nil {
		return
	}
	f.hdr.Set("OC-FileId", ocID(fileID(i)))
	fi := &fileInfo{Info: i, fs: f}
	if e, err := fi.ETag(ctx); err == nil {
		f.hdr.Set("OC-ETag", e)
		f.hdr.Set("ETag", e)
	}
	if !f.mtime.IsZero() {
		f.hdr.Set("X-OC-MTime", "accepted")
	}
}
