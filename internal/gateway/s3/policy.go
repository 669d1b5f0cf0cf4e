package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path"
	"strings"
	"sync"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Bucket policies: S3's JSON policy language, kept as the bucket
// configuration "policy" (the document as the client sent it, checked
// first). See docs/s3.md for what is understood and how a request is
// decided.

// policyDoc is a parsed bucket policy.
type policyDoc struct {
	Version   string
	ID        string `json:"Id"`
	Statement []statement
}

// statement is one policy statement, normalized: every list a list.
type statement struct {
	Sid         string
	Effect      string
	Principal   []string // "*", identity IDs or ARNs; nil: none
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	Condition   []condition
}

// condition is one operator applied to one key: it holds if the key
// has any of values (for the Not operators: none of them).
type condition struct {
	Op       string // StringEquals, IpAddress ... without IfExists
	IfExists bool
	Key      string // lower case
	Values   []string
	nets     []netip.Prefix // IpAddress, NotIpAddress
}

// errMalformedPolicy is S3's answer to a policy it cannot use.
func errMalformedPolicy(msg string) *Error { return s3err("MalformedPolicy", 400, msg) }

// maxPolicy is S3's limit on a bucket policy's size.
const maxPolicy = 20 << 10

// The condition operators understood.
var conditionOps = map[string]bool{
	"StringEquals": true, "StringNotEquals": true, "StringEqualsIgnoreCase": true, "StringNotEqualsIgnoreCase": true,
	"StringLike": true, "StringNotLike": true, "IpAddress": true, "NotIpAddress": true, "Bool": true, "Null": true,
}

// strings1 reads a JSON string or list of strings.
func strings1(raw json.RawMessage, what string) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	return nil, errMalformedPolicy(what + " must be a string or a non-empty list of strings")
}

// conditionValues reads a condition's values: strings, numbers, booleans
// or a list of them, as strings.
func conditionValues(raw json.RawMessage) ([]string, bool) {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		list = []json.RawMessage{raw}
	}
	var out []string
	for _, v := range list {
		var s string
		var x any
		switch {
		case json.Unmarshal(v, &s) == nil:
			out = append(out, s)
		case json.Unmarshal(v, &x) == nil:
			switch x.(type) {
			case float64, bool:
				out = append(out, strings.TrimSpace(string(v)))
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return out, len(out) > 0
}

// parseBucketPolicy reads and checks a bucket policy for bucket.
func parseBucketPolicy(doc []byte, bucket string) (*policyDoc, error) {
	if len(doc) > maxPolicy {
		return nil, s3err("PolicyTooLarge", 400, "Policies must be 20 KB at most")
	}
	var raw struct {
		Version   string
		ID        string `json:"Id"`
		Statement json.RawMessage
	}
	d := json.NewDecoder(bytes.NewReader(doc))
	if err := d.Decode(&raw); err != nil {
		return nil, errMalformedPolicy("Policies must be valid JSON: " + err.Error())
	}
	if d.More() {
		return nil, errMalformedPolicy("Policies must be one JSON object")
	}
	if raw.Version != "" && raw.Version != "2012-10-17" && raw.Version != "2008-10-17" {
		return nil, errMalformedPolicy("The policy's Version must be 2012-10-17 or 2008-10-17")
	}
	var stmts []json.RawMessage
	if json.Unmarshal(raw.Statement, &stmts) != nil {
		stmts = []json.RawMessage{raw.Statement}
	}
	if len(raw.Statement) == 0 || len(stmts) == 0 {
		return nil, errMalformedPolicy("Missing required field Statement")
	}
	p := &policyDoc{Version: raw.Version, ID: raw.ID}
	for i, rs := range stmts {
		st, err := parseStatement(rs, bucket)
		if err != nil {
			if e, ok := err.(*Error); ok {
				e.Message = fmt.Sprintf("Statement %d: %s", i+1, e.Message)
			}
			return nil, err
		}
		p.Statement = append(p.Statement, st)
	}
	return p, nil
}

func parseStatement(rs json.RawMessage, bucket string) (statement, error) {
	var st statement
	var in struct {
		Sid          string
		Effect       string
		Principal    json.RawMessage
		NotPrincipal json.RawMessage
		Action       json.RawMessage
		NotAction    json.RawMessage
		Resource     json.RawMessage
		NotResource  json.RawMessage
		Condition    map[string]map[string]json.RawMessage
	}
	d := json.NewDecoder(bytes.NewReader(rs))
	d.DisallowUnknownFields()
	if err := d.Decode(&in); err != nil {
		return st, errMalformedPolicy("A statement must be an object of Sid, Effect, Principal, Action, NotAction, Resource, NotResource and Condition: " + err.Error())
	}
	st.Sid = in.Sid
	if in.Effect != "Allow" && in.Effect != "Deny" {
		return st, errMalformedPolicy("Effect must be Allow or Deny")
	}
	st.Effect = in.Effect
	if len(in.NotPrincipal) > 0 {
		return st, errMalformedPolicy("NotPrincipal is not supported: name the principals a statement applies to")
	}
	var err error
	if st.Principal, err = parsePrincipal(in.Principal); err != nil {
		return st, err
	}
	if st.Action, err = strings1(in.Action, "Action"); err != nil {
		return st, err
	}
	if st.NotAction, err = strings1(in.NotAction, "NotAction"); err != nil {
		return st, err
	}
	if (st.Action == nil) == (st.NotAction == nil) {
		return st, errMalformedPolicy("A statement needs one of Action and NotAction")
	}
	for _, a := range append(append([]string{}, st.Action...), st.NotAction...) {
		if a != "*" && !strings.HasPrefix(strings.ToLower(a), "s3:") {
			return st, errMalformedPolicy("Policy has invalid action: " + a + " (bucket policies name s3: actions)")
		}
	}
	if st.Resource, err = strings1(in.Resource, "Resource"); err != nil {
		return st, err
	}
	if st.NotResource, err = strings1(in.NotResource, "NotResource"); err != nil {
		return st, err
	}
	if (st.Resource == nil) == (st.NotResource == nil) {
		return st, errMalformedPolicy("A statement needs one of Resource and NotResource")
	}
	for _, r := range append(append([]string{}, st.Resource...), st.NotResource...) {
		rest, ok := strings.CutPrefix(r, "arn:aws:s3:::")
		b, _, _ := strings.Cut(rest, "/")
		if !ok || !policyMatch(b, bucket, false) {
			return st, errMalformedPolicy("Policy has invalid resource: " + r + " (resources are arn:aws:s3:::" + bucket + " and arn:aws:s3:::" + bucket + "/KEY, with * and ? wildcards)")
		}
	}
	for op, keys := range in.Condition {
		base, ifExists := strings.CutSuffix(op, "IfExists")
		if !conditionOps[base] {
			return st, errMalformedPolicy("Invalid Condition type: " + op)
		}
		for k, raw := range keys {
			vals, ok := conditionValues(raw)
			if !ok {
				return st, errMalformedPolicy("Condition " + op + " " + k + " must have a string, number, boolean or list value")
			}
			c := condition{Op: base, IfExists: ifExists, Key: strings.ToLower(k), Values: vals}
			if base == "IpAddress" || base == "NotIpAddress" {
				for _, v := range vals {
					pfx, err := parseCIDR(v)
					if err != nil {
						return st, errMalformedPolicy("Invalid IP address or CIDR in " + op + ": " + v)
					}
					c.nets = append(c.nets, pfx)
				}
			}
			if base == "Bool" || base == "Null" {
				for _, v := range vals {
					if v != "true" && v != "false" {
						return st, errMalformedPolicy(op + " takes true or false, not " + v)
					}
				}
			}
			st.Condition = append(st.Condition, c)
		}
	}
	return st, nil
}

func parseCIDR(v string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(v); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// parsePrincipal reads "*", {"AWS": ...} or {"CanonicalUser": ...}.
func parsePrincipal(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, errMalformedPolicy("Missing required field Principal")
	}
	var star string
	if json.Unmarshal(raw, &star) == nil {
		if star != "*" {
			return nil, errMalformedPolicy("Invalid principal in policy: " + star)
		}
		return []string{"*"}, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil, errMalformedPolicy("Principal must be \"*\" or an object of AWS and CanonicalUser")
	}
	var out []string
	for kind, v := range m {
		if kind != "AWS" && kind != "CanonicalUser" {
			return nil, errMalformedPolicy("Invalid principal in policy: " + kind + " (AWS and CanonicalUser are understood)")
		}
		ids, err := strings1(v, "Principal "+kind)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if p := principalID(id); p == "" {
				return nil, errMalformedPolicy("Invalid principal in policy: " + id)
			}
		}
		out = append(out, ids...)
	}
	return out, nil
}

// principalID is the identity ID a principal names ("*" for everyone):
// an ID, or arn:aws:iam::ID:root; "" if it names none.
func principalID(p string) string {
	if p == "*" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, "arn:aws:iam::"); ok {
		id, tail, _ := strings.Cut(rest, ":")
		if tail != "root" {
			return ""
		}
		p = id
	}
	if !validID.MatchString(p) {
		return ""
	}
	return p
}

// public reports whether a policy grants anything to everyone (what
// Block Public Access calls public): an Allow to "*" not limited by an
// aws:SourceIp IpAddress condition.
func (p *policyDoc) public() bool {
	for _, st := range p.Statement {
		if st.Effect != "Allow" || !slicesContains(st.Principal, "*") {
			continue
		}
		limited := false
		for _, c := range st.Condition {
			if c.Op == "IpAddress" && c.Key == "aws:sourceip" {
				limited = true
				for _, n := range c.nets {
					if n.Bits() == 0 {
						limited = false
					}
				}
			}
		}
		if !limited {
			return true
		}
	}
	return false
}

func slicesContains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// policyRequest is what a policy is evaluated against.
type policyRequest struct {
	who      gateway.Identity
	anon     bool
	action   string // s3:GetObject ...
	resource string // arn:aws:s3:::bucket[/key]
	keys     map[string]string
}

// decision is a policy's answer: no statement applies, one allows, one
// denies (an explicit Deny wins over every Allow).
type decision int

const (
	noDecision decision = iota
	allow
	deny
)

// decide evaluates p for a request.
func (p *policyDoc) decide(r policyRequest) decision {
	d := noDecision
	for _, st := range p.Statement {
		if !st.applies(r) {
			continue
		}
		if st.Effect == "Deny" {
			return deny
		}
		d = allow
	}
	return d
}

func (st statement) applies(r policyRequest) bool {
	principal := false
	for _, p := range st.Principal {
		id := principalID(p)
		if id == "*" || (!r.anon && id == r.who.ID) {
			principal = true
		}
	}
	if !principal {
		return false
	}
	if st.Action != nil && !anyMatch(st.Action, r.action, true) {
		return false
	}
	if st.NotAction != nil && anyMatch(st.NotAction, r.action, true) {
		return false
	}
	if st.Resource != nil && !anyMatch(st.Resource, r.resource, false) {
		return false
	}
	if st.NotResource != nil && anyMatch(st.NotResource, r.resource, false) {
		return false
	}
	for _, c := range st.Condition {
		if !c.holds(r.keys) {
			return false
		}
	}
	return true
}

func anyMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if policyMatch(p, s, fold) {
			return true
		}
	}
	return false
}

// policyMatch matches s against a pattern where * stands for any
// characters and ? for one (the policy language's wildcards; / is an
// ordinary character).
func policyMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	// path.Match treats / specially and [ as a class: escape both ways.
	var b strings.Builder
	for _, r := range pattern {
		switch r {
		case '*', '?':
			b.WriteRune(r)
		case '[', ']', '\\', '-':
			b.WriteRune('\\')
			b.WriteRune(r)
		case '/':
			b.WriteRune('\x00')
		default:
			b.WriteRune(r)
		}
	}
	ok, err := path.Match(b.String(), strings.ReplaceAll(s, "/", "\x00"))
	return err == nil && ok
}

func (c condition) holds(keys map[string]string) bool {
	v, present := keys[c.Key]
	if c.Op == "Null" {
		return (c.Values[0] == "true") == !present
	}
	if !present {
		// A missing key fails a positive test and passes a negative one.
		return c.IfExists || strings.HasPrefix(c.Op, "StringNot") || c.Op == "NotIpAddress"
	}
	any := false
	for _, want := range c.Values {
		switch c.Op {
		case "StringEquals", "StringNotEquals":
			any = any || v == want
		case "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase":
			any = any || strings.EqualFold(v, want)
		case "StringLike", "StringNotLike":
			any = any || policyMatch(want, v, false)
		case "Bool":
			any = any || strings.EqualFold(v, want)
		}
	}
	if c.Op == "IpAddress" || c.Op == "NotIpAddress" {
		a, err := netip.ParseAddr(v)
		if err == nil {
			a = a.Unmap()
			for _, n := range c.nets {
				any = any || n.Contains(a)
			}
		}
	}
	if strings.HasPrefix(c.Op, "StringNot") || c.Op == "NotIpAddress" {
		return !any
	}
	return any
}

// conditionKeys are the condition keys a request has.
func conditionKeys(q *request) map[string]string {
	r := q.r
	keys := map[string]string{"aws:securetransport": "false"}
	if r.TLS != nil {
		keys["aws:securetransport"] = "true"
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		keys["aws:sourceip"] = host
	}
	if ua := r.UserAgent(); ua != "" {
		keys["aws:useragent"] = ua
	}
	if ref := r.Referer(); ref != "" {
		keys["aws:referer"] = ref
	}
	if q.sigAlg != "" {
		keys["s3:signatureversion"] = q.sigAlg
	}
	if !q.anon {
		keys["aws:username"] = q.requester().DisplayName
		keys["aws:userid"] = q.requester().ID
	}
	if q.object == "" {
		v := r.URL.Query()
		for _, k := range []string{"prefix", "delimiter", "max-keys"} {
			if v.Has(k) {
				keys["s3:"+k] = v.Get(k)
			}
		}
	}
	for _, h := range []string{"x-amz-acl", "x-amz-server-side-encryption", "x-amz-copy-source", "x-amz-metadata-directive"} {
		if v := amzParam(r, h); v != "" {
			keys["s3:"+h] = v
		}
	}
	return keys
}

// parsedPolicies keeps the last policy parsed for each bucket name, with
// the document it was parsed from: a request to a bucket with a policy
// reads the document (a local read of the registry) and parses it only
// when it changed.
var parsedPolicies sync.Map // bucket name -> parsedPolicy

type parsedPolicy struct {
	raw []byte
	doc *policyDoc
}

// bucketPolicy is a bucket's policy (nil if none).
func (s *Server) bucketPolicy(q *request, bucket string) *policyDoc {
	raw, err := s.gw.BucketConfig(q.r.Context(), bucket, "policy")
	if err != nil {
		return nil
	}
	if v, ok := parsedPolicies.Load(bucket); ok && bytes.Equal(v.(parsedPolicy).raw, raw) {
		return v.(parsedPolicy).doc
	}
	p, err := parseBucketPolicy(raw, bucket)
	if err != nil {
		q.log.Warn("s3: stored bucket policy unreadable", "bucket", bucket, "err", err)
		return nil
	}
	parsedPolicies.Store(bucket, parsedPolicy{raw, p})
	return p
}

func (s *Server) putPolicy(q *request) {
	doc, err := io.ReadAll(io.LimitReader(q.body, maxPolicy+1))
	if err != nil {
		q.fail(err)
		return
	}
	p, err := parseBucketPolicy(doc, q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	var ids []string
	for _, st := range p.Statement {
		for _, pr := range st.Principal {
			ids = append(ids, principalID(pr))
		}
	}
	if err := s.checkIdentities(q, ids, func(id string) *Error {
		return errMalformedPolicy("Invalid principal in policy: " + id + " is no account or access key of the gateway")
	}); err != nil {
		q.fail(err)
		return
	}
	if p.public() && s.publicBlock(q, q.bucket).BlockPublicPolicy {
		q.fail(s3err("AccessDenied", 403, "Access Denied: Block Public Access (BlockPublicPolicy, the bucket's or the gateway's) refuses public policies."))
		return
	}
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "policy", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

var errNoPolicy = s3err("NoSuchBucketPolicy", 404, "The bucket policy does not exist")

func (s *Server) getPolicy(q *request) {
	doc, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "policy")
	if err != nil {
		if err == gateway.ErrNoConfig {
			err = errNoPolicy
		}
		q.fail(err)
		return
	}
	q.w.Header().Set("Content-Type", "application/json")
	q.status = 200
	q.w.WriteHeader(200)
	q.w.Write(doc)
}

func (s *Server) deletePolicy(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "policy"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

func (s *Server) getPolicyStatus(q *request) {
	if _, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "policy"); err != nil {
		if err == gateway.ErrNoConfig {
			err = errNoPolicy
		}
		q.fail(err)
		return
	}
	p := s.bucketPolicy(q, q.bucket)
	q.xml(200, struct {
		XMLName  struct{} `xml:"PolicyStatus"`
		NS       string   `xml:"xmlns,attr"`
		IsPublic bool
	}{NS: s3ns, IsPublic: p != nil && p.public()})
}
