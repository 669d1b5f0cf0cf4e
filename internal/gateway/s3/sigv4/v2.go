package sigv4

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2, as S3's "Signing and authenticating REST requests"
// describes it:
//
//	Authorization = "AWS" + " " + AWSAccessKeyId + ":" + Signature
//	Signature     = Base64(HMAC-SHA1(secret, StringToSign))
//	StringToSign  = HTTP-Verb + "\n" + Content-MD5 + "\n" + Content-Type + "\n" +
//	                Date + "\n" + CanonicalizedAmzHeaders + CanonicalizedResource
//
// Date is empty when the request has an x-amz-date header (whose line
// among the canonical x-amz-* headers then carries the time); a presigned
// URL (AWSAccessKeyId, Expires, Signature in the query) puts Expires in
// its place.

// v2Algorithm is the first word of a V2 Authorization header.
const v2Algorithm = "AWS"

// v2Subresources are the query parameters that a V2 signature covers
// (CanonicalizedResource), sorted. Every other query parameter (prefix,
// max-keys, ...) goes unsigned, as on S3. The list is S3's, as its
// developer guide and the signers of minio-go and botocore have it.
var v2Subresources = []string{
	"accelerate",
	"acl",
	"analytics",
	"cors",
	"delete",
	"encryption",
	"inventory",
	"legal-hold",
	"lifecycle",
	"location",
	"logging",
	"metrics",
	"notification",
	"object-lock",
	"partNumber",
	"policy",
	"replication",
	"requestPayment",
	"response-cache-control",
	"response-content-disposition",
	"response-content-encoding",
	"response-content-language",
	"response-content-type",
	"response-expires",
	"restore",
	"retention",
	"select",
	"select-type",
	"tagging",
	"torrent",
	"uploadId",
	"uploads",
	"versionId",
	"versioning",
	"versions",
	"website",
}

// v2Disputed are the subresources that some V2 signers leave out of the
// CanonicalizedResource: minio-go does not sign accelerate, analytics,
// inventory, metrics, object-lock or restore; botocore does not sign
// encryption, legal-hold or retention. A request with any of them is
// accepted if its signature covers all of them or none.
var v2Disputed = []string{
	"accelerate", "analytics", "encryption", "inventory", "legal-hold",
	"metrics", "object-lock", "restore", "retention",
}

// v2Auth is what a V2-signed request says about its signature.
type v2Auth struct {
	presigned bool
	accessKey string
	signature []byte // decoded from base64
	date      string // the StringToSign's Date line: Date, "" or Expires
	time      time.Time
	expires   time.Time // presigned only
}

// isV2 reports whether a request is signed with Signature V2: an
// Authorization header "AWS <key>:<signature>", or a query with
// AWSAccessKeyId or Signature and no X-Amz-Algorithm.
func isV2(r *http.Request, query []param) bool {
	if h := strings.TrimSpace(r.Header.Get("Authorization")); h != "" {
		alg, _, _ := strings.Cut(h, " ")
		return alg == v2Algorithm
	}
	if _, v4 := lookup(query, "X-Amz-Algorithm"); v4 {
		return false
	}
	_, key := lookup(query, "AWSAccessKeyId")
	_, sig := lookup(query, "Signature")
	return key || sig
}

// verifyV2 checks a Signature V2 request. The body is not covered by a V2
// signature (only its Content-MD5 header is, if sent, which the operation
// checks against the body): Result.Payload is Unsigned.
func (v *Verifier) verifyV2(r *http.Request, path string, query []param) (*Result, error) {
	a, err := parseV2(r, query)
	if err != nil {
		return nil, err
	}
	secret, err := v.secretOf(a.accessKey)
	if err != nil {
		return nil, err
	}
	if err := v.checkV2Time(a); err != nil {
		return nil, err
	}
	if p := r.Header.Get("X-Amz-Content-Sha256"); strings.HasPrefix(p, "STREAMING-") || strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") {
		return nil, errInvalidArgument("An aws-chunked body needs AWS Signature Version 4.")
	}

	resource := path
	if v.HostBucket != "" {
		resource = "/" + v.HostBucket + path
	}
	paths := []string{resource}
	if len(resource) > 1 && !strings.Contains(resource[1:], "/") {
		// A bucket's path-style "/bucket": botocore signs "/bucket/",
		// the resource of the virtual-hosted–style form.
		paths = append(paths, resource+"/")
	}
	var resources []string
	for _, p := range paths {
		resources = append(resources, canonicalResourceV2(p, query, nil))
		if v2HasDisputed(query) {
			resources = append(resources, canonicalResourceV2(p, query, v2Disputed))
		}
	}
	ok := false
	for _, head := range v2Heads(r, a) {
		for _, res := range resources {
			ok = hmac.Equal(a.signature, v2Sign(secret, head+res)) || ok
		}
	}
	if !ok {
		return nil, errSignatureDoesNotMatch()
	}
	in := r.Body
	if in == nil {
		in = http.NoBody
	}
	return &Result{AccessKey: a.accessKey, Payload: Unsigned, Body: in, Length: r.ContentLength, Version: 2}, nil
}

// parseV2 reads a V2 signature from the Authorization header or from a
// presigned URL's query.
func parseV2(r *http.Request, query []param) (*v2Auth, error) {
	_, qKey := lookup(query, "AWSAccessKeyId")
	_, qSig := lookup(query, "Signature")
	_, qAlg := lookup(query, "X-Amz-Algorithm")
	header := strings.TrimSpace(r.Header.Get("Authorization"))
	if header != "" && (qKey || qSig || qAlg) {
		return nil, errInvalidArgument("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	}
	if header != "" {
		_, cred, _ := strings.Cut(header, " ")
		key, sig, ok := strings.Cut(strings.TrimSpace(cred), ":")
		if !ok || key == "" || sig == "" {
			return nil, errMalformed(false, "The authorization header is malformed; expecting \"AWS <AWSAccessKeyId>:<Signature>\".")
		}
		a := &v2Auth{accessKey: key}
		var err error
		if a.signature, err = decodeV2Signature(sig); err != nil {
			return nil, errSignatureDoesNotMatch()
		}
		if a.time, a.date, err = v2Time(r); err != nil {
			return nil, err
		}
		return a, nil
	}

	get := func(k string) string { v, _ := lookup(query, k); return v }
	key, sig, exp := get("AWSAccessKeyId"), get("Signature"), get("Expires")
	if key == "" || sig == "" || exp == "" {
		return nil, errAccessDenied("Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
	}
	secs, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || secs < 0 {
		return nil, errAccessDenied("Invalid date (should be seconds since epoch): %s", exp)
	}
	a := &v2Auth{presigned: true, accessKey: key, date: exp, expires: time.Unix(secs, 0).UTC()}
	if a.signature, err = decodeV2Signature(sig); err != nil {
		// A '+' of the base64 sent unescaped reads as a space.
		if a.signature, err = decodeV2Signature(strings.ReplaceAll(sig, " ", "+")); err != nil {
			return nil, errSignatureDoesNotMatch()
		}
	}
	return a, nil
}

// decodeV2Signature decodes a base64 HMAC-SHA1 signature.
func decodeV2Signature(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err == nil && len(b) != sha1.Size {
		return nil, base64.CorruptInputError(0)
	}
	return b, err
}

// v2Time is the time of a header-signed V2 request and the Date line of
// its StringToSign: x-amz-date (Date line empty) or else Date. S3 takes
// both in the HTTP date formats; x-amz-date may also be ISO 8601.
func v2Time(r *http.Request) (time.Time, string, error) {
	if v := strings.TrimSpace(r.Header.Get("X-Amz-Date")); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			return t.UTC(), "", nil
		}
		if t, err := time.Parse(time.RFC1123Z, v); err == nil {
			return t.UTC(), "", nil
		}
		if t, err := time.Parse(iso8601, v); err == nil {
			return t, "", nil
		}
		return time.Time{}, "", errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
	}
	v := strings.TrimSpace(r.Header.Get("Date"))
	if v != "" {
		if t, err := http.ParseTime(v); err == nil {
			return t.UTC(), v, nil
		}
		if t, err := time.Parse(time.RFC1123Z, v); err == nil {
			return t.UTC(), v, nil
		}
	}
	return time.Time{}, "", errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
}

// checkV2Time checks a presigned URL's expiry, or a header-signed
// request's time against the clock.
func (v *Verifier) checkV2Time(a *v2Auth) error {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now()
	if a.presigned {
		if t.After(a.expires) {
			return errAccessDenied("Request has expired")
		}
		return nil
	}
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if d := t.Sub(a.time); d > skew || d < -skew {
		return errTimeTooSkewed()
	}
	return nil
}

// v2Heads are the heads of the StringToSign that a request may have been
// signed with. With x-amz-date, S3's rule is an empty Date line and
// x-amz-date among the x-amz-* headers (as s3cmd signs); the developer
// guide's own DELETE example puts x-amz-date's value in the Date line
// instead and leaves it out of the headers, and MinIO's server keeps the
// Date header's value in the Date line. Each signs the x-amz-date the
// request's time is checked against, so each is accepted.
func v2Heads(r *http.Request, a *v2Auth) []string {
	if a.presigned || r.Header.Get("X-Amz-Date") == "" {
		return []string{v2Head(r, a.date)}
	}
	heads := []string{v2Head(r, "")}
	h := r.Header.Clone()
	amzDate := strings.TrimSpace(h.Get("X-Amz-Date"))
	h.Del("X-Amz-Date")
	heads = append(heads, v2HeadOf(r.Method, h, amzDate))
	if d := strings.TrimSpace(r.Header.Get("Date")); d != "" {
		heads = append(heads, v2Head(r, d))
	}
	return heads
}

// v2Head is the StringToSign up to the CanonicalizedResource: the verb,
// Content-MD5, Content-Type and date lines and the canonical x-amz-*
// headers.
func v2Head(r *http.Request, date string) string {
	return v2HeadOf(r.Method, r.Header, date)
}

func v2HeadOf(method string, h http.Header, date string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(strings.TrimSpace(h.Get("Content-Md5")))
	b.WriteByte('\n')
	b.WriteString(strings.TrimSpace(h.Get("Content-Type")))
	b.WriteByte('\n')
	b.WriteString(date)
	b.WriteByte('\n')
	b.WriteString(canonicalAmzHeadersV2(h))
	return b.String()
}

// canonicalAmzHeadersV2 is the CanonicalizedAmzHeaders element of a
// V2 StringToSign: every x-amz-* header, its name in lower case, sorted
// by name, as "name:value\n" with the values of a repeated header joined
// by ',' and each value trimmed.
func canonicalAmzHeadersV2(h http.Header) string {
	var names []string
	values := map[string][]string{}
	for k, vs := range h {
		name := strings.ToLower(k)
		if !strings.HasPrefix(name, "x-amz-") {
			continue
		}
		if _, seen := values[name]; !seen {
			names = append(names, name)
		}
		for _, v := range vs {
			values[name] = append(values[name], strings.TrimSpace(v))
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(strings.Join(values[name], ","))
		b.WriteByte('\n')
	}
	return b.String()
}

// canonicalResourceV2 is the CanonicalizedResource element of a V2
// StringToSign: the request path as sent (with "/bucket" in front for a
// virtual-hosted–style request), then the signed subresources of the
// query, decoded, sorted by name, "?name" or "?name=value" joined by '&'.
// A subresource in omit is left out.
func canonicalResourceV2(path string, query []param, omit []string) string {
	var b strings.Builder
	b.WriteString(path)
	sep := byte('?')
	for _, name := range v2Subresources {
		if slices.Contains(omit, name) {
			continue
		}
		v, ok := lookup(query, name)
		if !ok {
			continue
		}
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(name)
		if v != "" {
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}

// v2HasDisputed reports whether the query has a subresource that some
// signers do not sign.
func v2HasDisputed(query []param) bool {
	for _, p := range query {
		if slices.Contains(v2Disputed, p.key) {
			return true
		}
	}
	return false
}

// v2Sign is the V2 signature of a StringToSign: HMAC-SHA1 with the secret.
func v2Sign(secret, stringToSign string) []byte {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(stringToSign))
	return m.Sum(nil)
}

// StringToSignV2 is the StringToSign of a request signed with Signature
// V2 in its Authorization header (presigned false) or in its query
// (presigned true, the Expires parameter in the place of the date):
// method, Content-MD5, Content-Type, the date (empty if x-amz-date is
// set), the canonical x-amz-* headers and the canonical resource, whose
// path is r's as the client sent it with "/"+hostBucket in front if
// hostBucket is not empty (a virtual-hosted–style request). It is what a
// client signs; Verify computes the same.
func StringToSignV2(r *http.Request, hostBucket string, presigned bool) string {
	path, rawQuery := requestTarget(r)
	query := parseQuery(rawQuery)
	if hostBucket != "" {
		path = "/" + hostBucket + path
	}
	date := ""
	if presigned {
		date, _ = lookup(query, "Expires")
	} else if r.Header.Get("X-Amz-Date") == "" {
		date = strings.TrimSpace(r.Header.Get("Date"))
	}
	return v2Head(r, date) + canonicalResourceV2(path, query, nil)
}

// SignV2 returns the base64 Signature V2 of a StringToSign (for tests
// and tools that sign requests or V2 POST forms).
func SignV2(secret, stringToSign string) string {
	return base64.StdEncoding.EncodeToString(v2Sign(secret, stringToSign))
}

// VerifyPostPolicyV2 checks the signature field of a POST form signed
// with Signature V2: the base64 HMAC-SHA1 of the base64 policy document
// with the secret (SignatureDoesNotMatch, 403, if it differs).
func VerifyPostPolicyV2(secret, policy, signature string) error {
	got, err := decodeV2Signature(strings.TrimSpace(signature))
	if err != nil || !hmac.Equal(got, v2Sign(secret, policy)) {
		return errSignatureDoesNotMatch()
	}
	return nil
}
