package sigv4

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxSkew is how far a header-signed request's time may be from the
// server's clock, as on S3.
const DefaultMaxSkew = 15 * time.Minute

// MaxExpires is the longest validity of a presigned URL: 7 days.
const MaxExpires = 7 * 24 * time.Hour

// Verifier checks the signatures of S3 requests. Its fields are read, not
// written, by Verify, so one Verifier may serve concurrent requests if
// Secret and Now may be called concurrently.
type Verifier struct {
	// Secret returns the secret key of an access key ID (ok false: unknown
	// key -> InvalidAccessKeyId, 403). It is called once per signed
	// request and may block (a lookup in the grid's key store).
	Secret func(accessKeyID string) (secret string, ok bool)

	// Now is the server's clock. nil: time.Now.
	Now func() time.Time

	// MaxSkew is how far the time of a request signed in its
	// Authorization header may be from Now (0: DefaultMaxSkew). Past it:
	// RequestTimeTooSkewed, 403.
	MaxSkew time.Duration

	// HostBucket is the bucket that the request's Host names in a
	// virtual-hosted–style request ("" for a path-style one). Signature
	// V2 signs the resource as "/bucket/key" either way, so it needs the
	// bucket; Signature V4 signs the path as sent and ignores it.
	HostBucket string
}

// Payload is how a request's body is authenticated, by its
// x-amz-content-sha256.
type Payload int

const (
	// Signed: x-amz-content-sha256 is the hex sha256 of the body, which
	// the signature covers.
	Signed Payload = iota + 1
	// Unsigned: UNSIGNED-PAYLOAD, as for a presigned URL without
	// X-Amz-Content-Sha256, and every Signature V2 request. Only the
	// transport (TLS) protects the body, and Content-MD5 or a checksum
	// header if the client sent one.
	Unsigned
	// Streaming: STREAMING-AWS4-HMAC-SHA256-PAYLOAD, an aws-chunked body
	// whose chunks are each signed, chained from the request's signature.
	Streaming
	// StreamingTrailer: STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, signed
	// chunks followed by a signed trailer carrying a checksum.
	StreamingTrailer
	// StreamingUnsigned: STREAMING-UNSIGNED-PAYLOAD-TRAILER, an
	// aws-chunked body with unsigned chunks and an unsigned trailer
	// carrying a checksum, which is checked.
	StreamingUnsigned
)

// String names the payload mode by its x-amz-content-sha256 value
// ("signed sha256" for Signed, whose value is the hash).
func (p Payload) String() string {
	switch p {
	case Signed:
		return "signed sha256"
	case Unsigned:
		return unsignedPayload
	case Streaming:
		return streamingPayload
	case StreamingTrailer:
		return streamingPayloadTrailer
	case StreamingUnsigned:
		return streamingUnsignedTrailer
	}
	return "Payload(" + strconv.Itoa(int(p)) + ")"
}

// Result is a verified request.
type Result struct {
	// AccessKey is the access key ID that signed the request.
	AccessKey string

	// Payload is how the body is authenticated.
	Payload Payload

	// Body is the request body to use instead of r.Body: for aws-chunked
	// bodies the decoded bytes, each chunk's signature (and the trailer's
	// signature and checksum, if any: crc32, crc32c, crc64nvme, sha1,
	// sha256) verified as it is read — a mismatch is returned as an
	// *Error from Read (SignatureDoesNotMatch, BadDigest; IncompleteBody
	// for a truncated body); for a signed payload a reader that checks
	// the sha256 at EOF (XAmzContentSHA256Mismatch, 400); for an unsigned
	// payload r.Body unchanged. Body streams with bounded memory (at most
	// one signed chunk). It reads r.Body and is not safe for concurrent
	// use; closing r.Body is still the server's business.
	//
	// x-amz-checksum-* request headers are not checked here: they belong
	// to the operation (CompleteMultipartUpload's describe the object,
	// not the request body).
	Body io.Reader

	// Length is the decoded content length: Content-Length, or
	// x-amz-decoded-content-length for aws-chunked; -1 if unknown.
	Length int64

	// Version is the signature version the request was signed with: 4,
	// or 2 for Signature Version 2, whose Payload is always Unsigned (a
	// V2 signature covers Content-MD5, not the body).
	Version int
}

// auth is what a request says about its signature.
type auth struct {
	presigned   bool
	accessKey   string
	scope       scope
	signed      []string // signed header names, in the order given
	signature   string
	time        time.Time
	expires     time.Duration // presigned only
	payloadHash string        // the last line of the canonical request
}

// Verify checks the request's signature, in the Authorization header or in
// a presigned URL's query (X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
// X-Amz-Expires (max 7 days), X-Amz-SignedHeaders, X-Amz-Signature;
// expired -> AccessDenied "Request has expired", 403). It returns
// ErrAnonymous for a request with neither, or an *Error. Verify does not
// read the body: the body is checked as Result.Body is read.
//
// The credential scope may name any region (the signature is checked with
// the region the client used); the service must be s3.
//
// A request signed with Signature Version 2 — an Authorization header
// "AWS <key>:<signature>", or a presigned URL's AWSAccessKeyId, Expires
// (seconds since the epoch; past -> AccessDenied "Request has expired")
// and Signature — is verified the V2 way (see StringToSignV2), with the
// same clock skew for header-signed requests, and gives a Result with
// Version 2 and an Unsigned payload.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	path, rawQuery := requestTarget(r)
	query := parseQuery(rawQuery)
	if isV2(r, query) {
		return v.verifyV2(r, path, query)
	}

	a, err := parseAuth(r, query)
	if err != nil {
		return nil, err
	}

	secret, err := v.secretOf(a.accessKey)
	if err != nil {
		return nil, err
	}

	if err := v.checkTime(a); err != nil {
		return nil, err
	}

	if err := checkAllSigned(r, a); err != nil {
		return nil, err
	}

	skip := ""
	if a.presigned {
		skip = "X-Amz-Signature"
	}
	canonical := canonicalRequest(r, path, canonicalQuery(query, skip), a.signed, a.payloadHash)
	key := signingKey(secret, a.scope)
	if !signatureEqual(a.signature, sign(key, stringToSign(a.time, a.scope, canonical))) {
		return nil, errSignatureDoesNotMatch()
	}

	return body(r, a, key)
}

// checkTime checks a presigned URL's validity period, or a header-signed
// request's time against the clock.
func (v *Verifier) checkTime(a *auth) error {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	t := now()
	skew := v.MaxSkew
	if skew <= 0 {
		skew = DefaultMaxSkew
	}
	if a.presigned {
		if a.time.Sub(t) > skew {
			return errAccessDenied("Request is not valid yet")
		}
		if t.After(a.time.Add(a.expires)) {
			return errAccessDenied("Request has expired")
		}
		return nil
	}
	if d := t.Sub(a.time); d > skew || d < -skew {
		return errTimeTooSkewed()
	}
	return nil
}

// checkAllSigned refuses x-amz-* headers that the signature does not
// cover, as S3 does: they carry meaning (an ACL, a copy source, a storage
// class) that a man in the middle could otherwise add. x-amz-content-sha256
// is exempt: a header-signed request's signature covers its value through
// the canonical request's payload line, and a presigned request ignores it.
func checkAllSigned(r *http.Request, a *auth) error {
	for k := range r.Header {
		name := strings.ToLower(k)
		if !strings.HasPrefix(name, "x-amz-") || name == "x-amz-content-sha256" {
			continue
		}
		if !slices.Contains(a.signed, name) {
			return errAccessDenied("There were headers present in the request which were not signed: %s", name)
		}
	}
	return nil
}

// body makes the Result of a request whose headers verified.
func body(r *http.Request, a *auth, key []byte) (*Result, error) {
	in := r.Body
	if in == nil {
		in = http.NoBody
	}
	res := &Result{AccessKey: a.accessKey, Body: in, Length: r.ContentLength, Version: 4}

	switch a.payloadHash {
	case unsignedPayload:
		res.Payload = Unsigned
		return res, nil
	case streamingPayload, streamingPayloadTrailer, streamingUnsignedTrailer:
		if a.presigned {
			return nil, errInvalidArgument("A presigned URL cannot carry an aws-chunked payload.")
		}
		return chunked(r, a, key, in)
	}

	c, err := payloadCheck(a.payloadHash)
	if err != nil {
		return nil, err
	}
	res.Payload = Signed
	res.Body = &checkedReader{r: in, checks: []*check{c}}
	return res, nil
}

// chunked makes the Result of an aws-chunked request.
func chunked(r *http.Request, a *auth, key []byte, in io.Reader) (*Result, error) {
	cr := &chunkedReader{
		br:       bufio.NewReaderSize(in, maxLine),
		head:     a.time.UTC().Format(iso8601) + "\n" + a.scope.String() + "\n",
		prev:     a.signature,
		declared: -1,
	}
	res := &Result{AccessKey: a.accessKey, Body: cr, Length: -1, Version: 4}
	switch a.payloadHash {
	case streamingPayload:
		res.Payload, cr.key = Streaming, key
	case streamingPayloadTrailer:
		res.Payload, cr.key, cr.trailer = StreamingTrailer, key, true
	case streamingUnsignedTrailer:
		res.Payload, cr.trailer = StreamingUnsigned, true
	}

	if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return nil, errInvalidArgument("Invalid x-amz-decoded-content-length: %q.", v)
		}
		cr.declared, res.Length = n, n
	}

	if cr.trailer {
		cr.trailers = make(map[string]*check)
		for _, v := range r.Header.Values("X-Amz-Trailer") {
			for name := range strings.SplitSeq(v, ",") {
				name = strings.ToLower(strings.TrimSpace(name))
				if name == "" {
					continue
				}
				c, ok := checksumCheck(name)
				if !ok {
					return nil, errInvalidArgument("Unsupported trailer in x-amz-trailer: %q.", name)
				}
				if _, dup := cr.trailers[name]; !dup {
					cr.trailers[name] = c
					cr.checks = append(cr.checks, c)
				}
			}
		}
	}
	return res, nil
}

// parseAuth reads the signature's parameters from the Authorization
// header or the query.
func parseAuth(r *http.Request, query []param) (*auth, error) {
	header := r.Header.Get("Authorization")
	_, hasAlgorithm := lookup(query, "X-Amz-Algorithm")
	switch {
	case header != "" && hasAlgorithm:
		return nil, errInvalidArgument("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	case header != "":
		return parseHeaderAuth(r, header)
	case hasAlgorithm:
		return parseQueryAuth(query)
	}
	return nil, ErrAnonymous
}

// parseHeaderAuth parses
//
//	AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/s3/aws4_request, SignedHeaders=<h1;h2>, Signature=<hex>
//
// and the request time and payload hash that go with it.
func parseHeaderAuth(r *http.Request, header string) (*auth, error) {
	alg, rest, _ := strings.Cut(strings.TrimSpace(header), " ")
	switch alg {
	case algorithm:
	case "AWS4-ECDSA-P256-SHA256":
		return nil, errInvalidArgument("Signature Version 4A is not supported.")
	default:
		return nil, errInvalidArgument("Unsupported Authorization Type")
	}

	fields := make(map[string]string)
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, errMalformed(false, "The authorization header is malformed; the authorization component %q is malformed.", strings.TrimSpace(part))
		}
		if _, dup := fields[k]; dup {
			return nil, errMalformed(false, "The authorization header is malformed; %s is given twice.", k)
		}
		fields[k] = strings.TrimSpace(v)
	}
	for _, k := range []string{"Credential", "SignedHeaders", "Signature"} {
		if fields[k] == "" {
			return nil, errMalformed(false, "The authorization header is malformed; it has no %s.", k)
		}
	}

	a := &auth{signature: fields["Signature"]}
	var err error
	if a.time, err = headerTime(r); err != nil {
		return nil, err
	}
	if a.accessKey, a.scope, err = parseCredential(fields["Credential"], a.time, false); err != nil {
		return nil, err
	}
	if a.signed, err = parseSignedHeaders(fields["SignedHeaders"], false); err != nil {
		return nil, err
	}
	if !slices.Contains(a.signed, "x-amz-date") && !slices.Contains(a.signed, "date") {
		return nil, errAccessDenied("The request date (x-amz-date or Date) must be signed.")
	}
	a.payloadHash = r.Header.Get("X-Amz-Content-Sha256")
	if a.payloadHash == "" {
		return nil, errMissingSecurityHeader("x-amz-content-sha256")
	}
	return a, nil
}

// headerTime is the request time of a header-signed request: x-amz-date,
// or else Date.
func headerTime(r *http.Request) (time.Time, error) {
	if v := r.Header.Get("X-Amz-Date"); v != "" {
		t, err := time.Parse(iso8601, v)
		if err != nil {
			return time.Time{}, errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
		}
		return t, nil
	}
	if v := r.Header.Get("Date"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
}

// parseQueryAuth reads a presigned URL's parameters.
func parseQueryAuth(query []param) (*auth, error) {
	get := func(k string) string { v, _ := lookup(query, k); return v }
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"} {
		if get(k) == "" {
			return nil, errMalformed(true, "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
		}
	}
	if alg := get("X-Amz-Algorithm"); alg != algorithm {
		return nil, errMalformed(true, "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
	}
	a := &auth{presigned: true, signature: get("X-Amz-Signature")}
	var err error
	if a.time, err = time.Parse(iso8601, get("X-Amz-Date")); err != nil {
		return nil, errMalformed(true, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	secs, err := strconv.ParseInt(get("X-Amz-Expires"), 10, 64)
	switch {
	case err != nil:
		return nil, errMalformed(true, "X-Amz-Expires should be a number")
	case secs < 0:
		return nil, errMalformed(true, "X-Amz-Expires must be non-negative")
	case secs > int64(MaxExpires/time.Second):
		return nil, errMalformed(true, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	a.expires = time.Duration(secs) * time.Second
	if a.accessKey, a.scope, err = parseCredential(get("X-Amz-Credential"), a.time, true); err != nil {
		return nil, err
	}
	if a.signed, err = parseSignedHeaders(get("X-Amz-SignedHeaders"), true); err != nil {
		return nil, err
	}
	a.payloadHash = unsignedPayload
	if v := get("X-Amz-Content-Sha256"); v != "" {
		a.payloadHash = v
	}
	return a, nil
}

// parseCredential splits <key>/<date>/<region>/s3/aws4_request; the date
// must be the request's.
func parseCredential(cred string, t time.Time, presigned bool) (string, scope, error) {
	parts := strings.Split(cred, "/")
	if len(parts) < 5 || parts[len(parts)-1] != terminator {
		return "", scope{}, errMalformed(presigned, "The authorization header is malformed; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	n := len(parts)
	key := strings.Join(parts[:n-4], "/")
	s := scope{date: parts[n-4], region: parts[n-3], service: parts[n-2]}
	switch {
	case key == "" || s.region == "":
		return "", scope{}, errMalformed(presigned, "The authorization header is malformed; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	case s.service != service:
		return "", scope{}, errMalformed(presigned, "The authorization header is malformed; incorrect service %q. This endpoint belongs to \"s3\".", s.service)
	case s.date != t.UTC().Format(yyyymmdd):
		return "", scope{}, errMalformed(presigned, "The authorization header is malformed; Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	return key, s, nil
}

// parseSignedHeaders splits h1;h2;...: lower-case names, host among them.
func parseSignedHeaders(list string, presigned bool) ([]string, error) {
	names := strings.Split(list, ";")
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.ContainsAny(n, " \t:") {
			return nil, errMalformed(presigned, "The authorization header is malformed; SignedHeaders %q is not a list of lower-case header names.", list)
		}
	}
	if !slices.Contains(names, "host") {
		return nil, errMalformed(presigned, "The authorization header is malformed; the host header must be signed.")
	}
	return names, nil
}

// secretOf is the secret of an access key, or InvalidAccessKeyId.
func (v *Verifier) secretOf(key string) (string, error) {
	if v.Secret != nil {
		if secret, ok := v.Secret(key); ok {
			return secret, nil
		}
	}
	return "", errInvalidAccessKeyID()
}
