package s3

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// CORS, as S3's: a bucket's CORSConfiguration (PutBucketCors,
// GetBucketCors, DeleteBucketCors) is a list of rules, each naming the
// origins (one * wildcard each at most), methods and request headers it
// allows, the response headers a page may read and how long a browser
// may cache a preflight. An OPTIONS preflight is answered from the first
// rule that allows its origin, method and headers, or refused with 403;
// an actual request whose Origin and method a rule allows gets that
// rule's Access-Control-* headers. Neither needs a signature.

// corsRule is one CORSRule.
type corsRule struct {
	ID             string   `xml:"ID,omitempty" json:"id,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader" json:"headers,omitempty"`
	AllowedMethods []string `xml:"AllowedMethod" json:"methods"`
	AllowedOrigins []string `xml:"AllowedOrigin" json:"origins"`
	ExposeHeaders  []string `xml:"ExposeHeader" json:"expose,omitempty"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds,omitempty" json:"maxage,omitempty"`
}

type corsXML struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	NS      string     `xml:"xmlns,attr,omitempty"`
	Rules   []corsRule `xml:"CORSRule"`
}

// maxCORSRules is S3's limit on a configuration's rules.
const maxCORSRules = 100

var corsMethods = []string{"GET", "PUT", "HEAD", "POST", "DELETE"}

// checkCORS applies S3's rules to a configuration.
func checkCORS(c corsXML) error {
	if len(c.Rules) == 0 || len(c.Rules) > maxCORSRules {
		return errMalformedXML
	}
	for _, r := range c.Rules {
		if len(r.AllowedMethods) == 0 || len(r.AllowedOrigins) == 0 || len(r.ID) > 255 {
			return errMalformedXML
		}
		for _, m := range r.AllowedMethods {
			if !slices.Contains(corsMethods, m) {
				return s3err("InvalidRequest", 400, "Found unsupported HTTP method in CORS config. Unsupported method is "+m)
			}
		}
		for _, o := range r.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return s3err("InvalidRequest", 400, `AllowedOrigin "`+o+`" can not have more than one wildcard.`)
			}
		}
		for _, h := range r.AllowedHeaders {
			if strings.Count(h, "*") > 1 {
				return s3err("InvalidRequest", 400, `AllowedHeader "`+h+`" can not have more than one wildcard.`)
			}
		}
		if r.MaxAgeSeconds != nil && *r.MaxAgeSeconds < 0 {
			return errMalformedXML
		}
	}
	return nil
}

var errNoCORS = s3err("NoSuchCORSConfiguration", 404, "The CORS configuration does not exist")

func (s *Server) putCORS(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10+1))
	if err != nil {
		q.fail(err)
		return
	}
	var c corsXML
	if len(body) > 64<<10 || xml.Unmarshal(body, &c) != nil {
		q.fail(errMalformedXML)
		return
	}
	if err := checkCORS(c); err != nil {
		q.fail(err)
		return
	}
	doc, _ := json.Marshal(c.Rules)
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "cors", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) getCORS(q *request) {
	rules, err := s.corsRules(q)
	if err != nil {
		q.fail(err)
		return
	}
	q.xml(200, corsXML{NS: s3ns, Rules: rules})
}

func (s *Server) deleteCORS(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "cors"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

// corsRules reads the bucket's rules (errNoCORS if none).
func (s *Server) corsRules(q *request) ([]corsRule, error) {
	doc, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "cors")
	if errors.Is(err, gateway.ErrNoConfig) {
		return nil, errNoCORS
	}
	if err != nil {
		return nil, err
	}
	var rules []corsRule
	if err := json.Unmarshal(doc, &rules); err != nil {
		return nil, err
	}
	return rules, nil
}

// wildMatch matches s against a pattern with at most one *, which stands
// for any run of characters; fold compares without case.
func wildMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	pre, post, wild := strings.Cut(pattern, "*")
	if !wild {
		return pattern == s
	}
	return len(s) >= len(pre)+len(post) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, post)
}

// match finds the first rule allowing origin, method and the request
// headers (lower case); which origin pattern matched is returned too.
func matchCORS(rules []corsRule, origin, method string, headers []string) (*corsRule, string) {
	for i := range rules {
		r := &rules[i]
		if !slices.Contains(r.AllowedMethods, method) {
			continue
		}
		pattern := ""
		for _, o := range r.AllowedOrigins {
			if wildMatch(o, origin, false) {
				pattern = o
				break
			}
		}
		if pattern == "" {
			continue
		}
		ok := true
		for _, h := range headers {
			if !slices.ContainsFunc(r.AllowedHeaders, func(p string) bool { return wildMatch(p, h, true) }) {
				ok = false
				break
			}
		}
		if ok {
			return r, pattern
		}
	}
	return nil, ""
}

// setCORSHeaders sets the Access-Control-* headers a matching rule gives.
func setCORSHeaders(h http.Header, r *corsRule, pattern, origin string) {
	if pattern == "*" {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(r.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		h.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
	h.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// preflight answers an OPTIONS request.
func (s *Server) preflight(q *request) {
	q.op = "PreflightCORS"
	r := q.r
	origin := r.Header.Get("Origin")
	method := r.Header.Get("Access-Control-Request-Method")
	if q.bucket == "" || origin == "" {
		q.fail(s3err("BadRequest", 400, "Insufficient information. Origin request header needed."))
		return
	}
	if method == "" {
		q.fail(s3err("BadRequest", 400, "Invalid Access-Control-Request-Method: null"))
		return
	}
	rules, err := s.corsRules(q)
	if errors.Is(err, errNoCORS) {
		q.fail(s3err("AccessForbidden", 403, "CORSResponse: CORS is not enabled for this bucket."))
		return
	}
	if err != nil {
		q.fail(err)
		return
	}
	headers := requestHeaders(r)
	rule, pattern := matchCORS(rules, origin, method, headers)
	if rule == nil {
		q.fail(s3err("AccessForbidden", 403, "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."))
		return
	}
	h := q.w.Header()
	setCORSHeaders(h, rule, pattern, origin)
	if len(headers) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	q.status = 200
	q.w.WriteHeader(200)
}

// requestHeaders is a preflight's Access-Control-Request-Headers, lower
// case.
func requestHeaders(r *http.Request) []string {
	var headers []string
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for h := range strings.SplitSeq(v, ",") {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				headers = append(headers, h)
			}
		}
	}
	return headers
}

// corsActual sets the Access-Control-* headers of an actual request with
// an Origin that a rule of its bucket allows. The rule is matched by the
// request's method or, when the request carries
// Access-Control-Request-Method as a preflight does, by that header and
// the Access-Control-Request-Headers, as S3 does (and then, as S3, the
// answer has the preflight's Access-Control-Allow-Headers too).
func (s *Server) corsActual(q *request) {
	origin := q.r.Header.Get("Origin")
	if origin == "" || q.bucket == "" {
		return
	}
	rules, err := s.corsRules(q)
	if err != nil {
		return
	}
	method, headers := q.r.Method, []string(nil)
	if m := q.r.Header.Get("Access-Control-Request-Method"); m != "" {
		method, headers = m, requestHeaders(q.r)
	}
	if rule, pattern := matchCORS(rules, origin, method, headers); rule != nil {
		setCORSHeaders(q.w.Header(), rule, pattern, origin)
		if len(headers) > 0 {
			q.w.Header().Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
		}
	}
}
