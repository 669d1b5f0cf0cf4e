package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The strings of the protocol.
const (
	algorithm      = "AWS4-HMAC-SHA256"
	chunkAlgorithm = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgo    = "AWS4-HMAC-SHA256-TRAILER"
	terminator     = "aws4_request"
	service        = "s3"

	iso8601  = "20060102T150405Z"
	yyyymmdd = "20060102"

	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	unsignedPayload          = "UNSIGNED-PAYLOAD"
	streamingPayload         = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingPayloadTrailer  = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// scope is a credential scope: date/region/service/aws4_request.
type scope struct {
	date, region, service string
}

func (s scope) String() string {
	return s.date + "/" + s.region + "/" + s.service + "/" + terminator
}

// signingKey derives the key that signs strings for one scope.
func signingKey(secret string, s scope) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), s.date)
	k = hmacSHA256(k, s.region)
	k = hmacSHA256(k, s.service)
	return hmacSHA256(k, terminator)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// sign returns the hex signature of a string to sign.
func sign(key []byte, stringToSign string) string {
	return hex.EncodeToString(hmacSHA256(key, stringToSign))
}

// signatureEqual compares two hex signatures in constant time.
func signatureEqual(got, want string) bool {
	return hmac.Equal([]byte(got), []byte(want))
}

// stringToSign is the string a request's signature signs.
func stringToSign(t time.Time, s scope, canonicalRequest string) string {
	return algorithm + "\n" +
		t.UTC().Format(iso8601) + "\n" +
		s.String() + "\n" +
		hexSHA256([]byte(canonicalRequest))
}

// requestTarget returns the path and the query of the request exactly as
// the client sent them, still escaped. S3 signs the path as sent: it
// neither normalises it (no removal of "." or "//") nor escapes it again.
// A server request's RequestURI is the request line's target untouched;
// r.URL is only used when that is not in origin form (a request built in
// process, or a proxy's absolute form), through EscapedPath, which is the
// path the client would send.
func requestTarget(r *http.Request) (path, query string) {
	if strings.HasPrefix(r.RequestURI, "/") {
		path, query, _ = strings.Cut(r.RequestURI, "?")
		return path, query
	}
	path = r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	return path, r.URL.RawQuery
}

// param is one decoded query parameter, in the order of the query.
type param struct {
	key, value string
}

// parseQuery decodes a raw query. Unlike url.ParseQuery it keeps every
// parameter, whatever its characters (a semicolon is not a separator, an
// invalid escape is taken literally), because what matters is what the
// client signed, not whether Go would accept the query.
func parseQuery(raw string) []param {
	var ps []param
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		ps = append(ps, param{key: queryUnescape(k), value: queryUnescape(v)})
	}
	return ps
}

func queryUnescape(s string) string {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// lookup returns the value of the first parameter named key.
func lookup(ps []param, key string) (string, bool) {
	for _, p := range ps {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

// canonicalQuery is the query part of the canonical request: every
// parameter but skip, name and value each URI-encoded, sorted by encoded
// name and then by encoded value, joined with '&'.
func canonicalQuery(ps []param, skip string) string {
	enc := make([]param, 0, len(ps))
	for _, p := range ps {
		if p.key == skip {
			continue
		}
		enc = append(enc, param{key: uriEncode(p.key), value: uriEncode(p.value)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].key != enc[j].key {
			return enc[i].key < enc[j].key
		}
		return enc[i].value < enc[j].value
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// uriEncode encodes s the SigV4 way: the RFC 3986 unreserved characters
// (A-Z a-z 0-9 - . _ ~) stay, every other byte becomes %XX with upper-case
// hex, so a space is %20 (never '+') and '/' is %2F.
func uriEncode(s string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	return b.String()
}

// headerValue is the canonical value of one signed header: its values
// joined with ',', each trimmed and with inner runs of spaces collapsed to
// one. Go's server moves some headers out of r.Header; those are read back
// from where it put them.
func headerValue(r *http.Request, name string) string {
	var values []string
	switch name {
	case "host":
		values = []string{r.Host}
	case "content-length":
		values = r.Header.Values("Content-Length")
		if len(values) == 0 && r.ContentLength >= 0 {
			values = []string{strconv.FormatInt(r.ContentLength, 10)}
		}
	case "transfer-encoding":
		values = r.Header.Values("Transfer-Encoding")
		if len(values) == 0 && len(r.TransferEncoding) > 0 {
			values = []string{strings.Join(r.TransferEncoding, ",")}
		}
	default:
		values = r.Header.Values(name)
	}
	for i, v := range values {
		values[i] = collapseSpaces(v)
	}
	return strings.Join(values, ",")
}

// collapseSpaces trims v and replaces each inner run of spaces with one.
func collapseSpaces(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalRequest builds the canonical request of r, with the given
// escaped path, canonical query, signed header names and payload hash.
func canonicalRequest(r *http.Request, path, query string, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(headerValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}
