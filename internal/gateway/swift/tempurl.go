package swift

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway/keystone"
)

// Temporary URLs, as Swift's tempurl middleware: a request on an object
// signed with a key kept in the account's (or container's) metadata,
// X-Account-Meta-Temp-URL-Key or -Key-2, needs no token until the time
// it names.

// tempURLMethods are the methods a temporary URL may sign.
var tempURLMethods = []string{"GET", "HEAD", "PUT", "POST", "DELETE"}

// tempURLDigests are the HMAC digests a signature may use, by name.
var tempURLDigests = map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}

// tempURLDisallowed are request headers a temporary URL may not carry:
// they would point the object at data the URL does not give access to.
var tempURLDisallowed = []string{"X-Object-Manifest", "X-Symlink-Target"}

var errTempURL = serr(401, "Unauthorized: Temp URL invalid")

// tempURL is a request's temporary URL, once its signature is checked.
type tempURL struct {
	expires  int64
	filename string
	inline   bool
}

// isTempURL reports whether a request is made with a temporary URL.
func isTempURL(r *http.Request) bool {
	q := r.URL.Query()
	return q.Has("temp_url_sig") || q.Has("temp_url_expires")
}

// tempURLExpires reads temp_url_expires: Unix seconds, or ISO 8601 UTC
// (2006-01-02T15:04:05Z).
func tempURLExpires(v string) (int64, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return n, true
	}
	if t, err := time.Parse("2006-01-02T15:04:05Z", v); err == nil {
		return t.Unix(), true
	}
	return 0, false
}

// tempURLSig reads temp_url_sig: hex (SHA-1: 40 digits, SHA-256: 64), or
// DIGEST:BASE64 (standard or URL-safe alphabet). It returns the digest's
// name and the signature's bytes.
func tempURLSig(v string) (string, []byte, bool) {
	if alg, b64, ok := strings.Cut(v, ":"); ok {
		b64 = strings.TrimRight(b64, "=")
		if strings.ContainsAny(b64, "-_") && !strings.ContainsAny(b64, "+/") {
			b64 = strings.NewReplacer("-", "+", "_", "/").Replace(b64)
		}
		sig, err := base64.RawStdEncoding.DecodeString(b64)
		return alg, sig, err == nil
	}
	alg := map[int]string{40: "sha1", 64: "sha256"}[len(v)]
	sig, err := hex.DecodeString(v)
	return alg, sig, err == nil && alg != ""
}

// tempURLSign is the signature of method on path (the object's
// /v1/ACCOUNT/CONTAINER/OBJECT, or prefix:/v1/ACCOUNT/CONTAINER/PREFIX)
// until expires, with key and digest alg: what a client computes.
func tempURLSign(alg, key, method string, expires int64, path, ipRange string) []byte {
	body := fmt.Sprintf("%s\n%d\n%s", method, expires, path)
	if ipRange != "" {
		body = "ip=" + ipRange + "\n" + body
	}
	m := hmac.New(tempURLDigests[alg], []byte(key))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// projectByAccount returns the project whose account is account.
func (s *Server) projectByAccount(q *request, account string) (keystone.Project, error) {
	id, ok := strings.CutPrefix(account, "AUTH_")
	if !ok {
		return keystone.Project{}, errNotFound
	}
	ps, err := s.ids.Projects(q.r.Context())
	if err != nil {
		return keystone.Project{}, err
	}
	for _, p := range ps {
		if p.ID == id {
			return p, nil
		}
	}
	return keystone.Project{}, errNotFound
}

// tempURLKeys returns the keys a signature may be made with: the
// account's, then the container's.
func (s *Server) tempURLKeys(q *request) []string {
	var keys []string
	for _, k := range []string{"temp-url-key", "temp-url-key-2"} {
		if v := q.project.Meta[k]; v != "" {
			keys = append(keys, v)
		}
	}
	if b, err := s.bucketInfo(q, q.container); err == nil {
		if rec, err := s.containerMeta(q, q.container, b.Created); err == nil {
			for _, k := range []string{"temp-url-key", "temp-url-key-2"} {
				if v := rec.Meta[k]; v != "" {
					keys = append(keys, v)
				}
			}
		}
	}
	return keys
}

// authorizeTempURL checks a temporary URL's signature and loads the
// account's project and access key, as authorize does for a token; the
// request then acts as the project, on the object (or prefix) signed.
func (s *Server) authorizeTempURL(q *request) bool {
	r := q.r
	qs := r.URL.Query()
	m := r.Method
	if !contains(tempURLMethods, m) || q.container == "" || strings.Trim(q.object, "/") == "" {
		q.fail(errTempURL)
		return false
	}
	expires, ok := tempURLExpires(qs.Get("temp_url_expires"))
	if !ok || expires < s.now().Unix() {
		q.fail(errTempURL)
		return false
	}
	alg, sig, ok := tempURLSig(qs.Get("temp_url_sig"))
	if !ok || tempURLDigests[alg] == nil {
		q.fail(errTempURL)
		return false
	}
	ipRange := qs.Get("temp_url_ip_range")
	if ipRange != "" && !clientIn(r.RemoteAddr, ipRange) {
		q.fail(errTempURL)
		return false
	}
	p, err := s.projectByAccount(q, q.account)
	if err != nil {
		q.fail(errTempURL)
		return false
	}
	q.project = p
	signed := "/v1/" + q.account + "/" + q.container + "/" + q.object
	if qs.Has("temp_url_prefix") {
		prefix := qs.Get("temp_url_prefix")
		if !strings.HasPrefix(q.object, prefix) {
			q.fail(errTempURL)
			return false
		}
		signed = "prefix:/v1/" + q.account + "/" + q.container + "/" + prefix
	}
	methods := []string{m}
	if m == "HEAD" {
		methods = []string{"HEAD", "GET", "POST", "PUT"}
	}
	valid := false
	for _, key := range s.tempURLKeys(q) {
		for _, mm := range methods {
			if hmac.Equal(sig, tempURLSign(alg, key, mm, expires, signed, ipRange)) {
				valid = true
			}
		}
	}
	if !valid {
		q.fail(errTempURL)
		return false
	}
	for _, h := range tempURLDisallowed {
		if r.Header.Get(h) != "" {
			q.fail(serr(400, fmt.Sprintf("Bad Request: The header %q is not allowed in this tempurl", h)))
			return false
		}
	}
	if q.key, err = s.gw.Key(r.Context(), p.Key); err != nil {
		q.fail(errTempURL)
		return false
	}
	q.w = &tempURLWriter{ResponseWriter: q.w, method: m, object: q.object,
		t: tempURL{expires: expires, filename: qs.Get("filename"), inline: qs.Has("inline")}}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clientIn reports whether the client's address is in an IP address or
// prefix.
func clientIn(remote, ipRange string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if p, err := netip.ParsePrefix(ipRange); err == nil {
		return p.Contains(a)
	}
	b, err := netip.ParseAddr(ipRange)
	return err == nil && b.Unmap() == a
}

// tempURLWriter adjusts the answers to a temporary URL as Swift's
// middleware does: object metadata is not shown (but for
// X-Object-Meta-Public-*), and a successful GET or HEAD says how to save
// the object (Content-Disposition) and until when the URL works
// (Expires).
type tempURLWriter struct {
	http.ResponseWriter
	method, object string
	t              tempURL
	wrote          bool
}

func (w *tempURLWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-object-meta-") && !strings.HasPrefix(lk, "x-object-meta-public-") {
			delete(h, k)
		}
	}
	if (w.method == "GET" || w.method == "HEAD") && status/100 == 2 {
		var d string
		switch {
		case w.t.inline && w.t.filename != "":
			d = disposition("inline", w.t.filename)
		case w.t.inline:
			d = "inline"
		case w.t.filename != "":
			d = disposition("attachment", w.t.filename)
		case h.Get("Content-Disposition") != "":
			d = h.Get("Content-Disposition")
		default:
			d = disposition("attachment", path.Base(strings.TrimRight(w.object, "/")))
		}
		h.Set("Content-Disposition", strings.ReplaceAll(d, "\n", "%0A"))
		h.Set("Expires", time.Unix(w.t.expires, 0).UTC().Format(http.TimeFormat))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *tempURLWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// disposition is a Content-Disposition value naming a file (RFC 6266,
// with the UTF-8 form of RFC 5987).
func disposition(kind, filename string) string {
	plain := strings.NewReplacer(`"`, "%22", "\\", "%5C", "\r", "%0D", "\n", "%0A").Replace(filename)
	return fmt.Sprintf(`%s; filename="%s"; filename*=UTF-8''%s`, kind, plain, url.PathEscape(filename))
}
