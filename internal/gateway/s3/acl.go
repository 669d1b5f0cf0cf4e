package s3

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// S3's access control lists: a bucket's is a bucket configuration
// ("acl"), an object's is kept in its record (gateway.ObjectInfo.ACL).
// Both are aclDoc as JSON. A bucket or object without one is private:
// its owner has FULL_CONTROL, nobody else is granted anything by it.

// ACL permissions.
const (
	permRead        = "READ"
	permWrite       = "WRITE"
	permReadACP     = "READ_ACP"
	permWriteACP    = "WRITE_ACP"
	permFullControl = "FULL_CONTROL"
)

// The groups a grant may name.
const (
	groupAllUsers      = "http://acs.amazonaws.com/groups/global/AllUsers"
	groupAuthenticated = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
)

var knownPerms = map[string]bool{permRead: true, permWrite: true, permReadACP: true, permWriteACP: true, permFullControl: true}

// aclDoc is an access control list as stored.
type aclDoc struct {
	Owner  gateway.Identity `json:"owner"`
	Grants []aclGrant       `json:"grants"`
}

// aclGrant grants one permission to an identity (ID) or a group (URI).
type aclGrant struct {
	ID    string `json:"id,omitempty"`
	Group string `json:"group,omitempty"`
	Perm  string `json:"perm"`
}

// public reports whether the list grants anything to AllUsers or
// AuthenticatedUsers (what Block Public Access calls public).
func (a aclDoc) public() bool {
	for _, g := range a.Grants {
		if g.Group != "" {
			return true
		}
	}
	return false
}

// allows reports whether the list gives who (anonymous if anon) perm:
// by a grant of perm or FULL_CONTROL to who's ID or to a group who is
// in. The owner always has READ_ACP and WRITE_ACP. With ignorePublic,
// grants to groups count for nothing (IgnorePublicAcls).
func (a aclDoc) allows(who gateway.Identity, anon bool, perm string, ignorePublic bool) bool {
	if !anon && who.ID == a.Owner.ID && (perm == permReadACP || perm == permWriteACP) {
		return true
	}
	for _, g := range a.Grants {
		if g.Perm != perm && g.Perm != permFullControl {
			continue
		}
		switch {
		case g.ID != "" && !anon && g.ID == who.ID:
			return true
		case g.Group == groupAllUsers && !ignorePublic:
			return true
		case g.Group == groupAuthenticated && !anon && !ignorePublic:
			return true
		}
	}
	return false
}

// cannedACL is the list a canned ACL (x-amz-acl) stands for, for a
// resource owned by owner in a bucket owned by bucketOwner.
func cannedACL(name string, owner, bucketOwner gateway.Identity) (aclDoc, error) {
	a := aclDoc{Owner: owner, Grants: []aclGrant{{ID: owner.ID, Perm: permFullControl}}}
	switch name {
	case "private":
	case "public-read":
		a.Grants = append(a.Grants, aclGrant{Group: groupAllUsers, Perm: permRead})
	case "public-read-write":
		a.Grants = append(a.Grants, aclGrant{Group: groupAllUsers, Perm: permRead}, aclGrant{Group: groupAllUsers, Perm: permWrite})
	case "authenticated-read":
		a.Grants = append(a.Grants, aclGrant{Group: groupAuthenticated, Perm: permRead})
	case "bucket-owner-read":
		if bucketOwner.ID != owner.ID {
			a.Grants = append(a.Grants, aclGrant{ID: bucketOwner.ID, Perm: permRead})
		}
	case "bucket-owner-full-control":
		if bucketOwner.ID != owner.ID {
			a.Grants = append(a.Grants, aclGrant{ID: bucketOwner.ID, Perm: permFullControl})
		}
	case "log-delivery-write", "aws-exec-read":
		return a, notImpl("Canned ACL " + name + " names an AWS service, which the grid does not have.")
	default:
		return a, s3err("InvalidArgument", 400, "Unknown canned ACL: "+name)
	}
	return a, nil
}

// grantHeaders are the x-amz-grant-* headers and the permission each
// grants.
var grantHeaders = []struct{ header, perm string }{
	{"x-amz-grant-read", permRead}, {"x-amz-grant-write", permWrite},
	{"x-amz-grant-read-acp", permReadACP}, {"x-amz-grant-write-acp", permWriteACP},
	{"x-amz-grant-full-control", permFullControl},
}

// grantee is one of a header's comma-separated grantees:
// id="ID", uri="GROUP-URI" or emailAddress="...".
var grantee = regexp.MustCompile(`^\s*(?i:(id|uri|emailAddress))\s*=\s*"?([^",]*)"?\s*$`)

// validID reports whether id can name an identity: an account name or
// a key's 64 hex digits.
var validID = regexp.MustCompile(`^([0-9a-f]{64}|[a-z][a-z0-9-]{0,31})$`)

// checkGrant checks a grant's grantee and permission.
func checkGrant(g aclGrant) error {
	switch {
	case !knownPerms[g.Perm]:
		return s3err("MalformedACLError", 400, "The XML you provided was not well-formed or did not validate against our published schema: unknown permission "+g.Perm)
	case g.Group != "" && g.Group != groupAllUsers && g.Group != groupAuthenticated:
		return s3err("InvalidArgument", 400, "Invalid group uri: "+g.Group+" (AllUsers and AuthenticatedUsers are the groups)")
	case g.Group == "" && !validID.MatchString(g.ID):
		return s3err("InvalidArgument", 400, "Invalid id: "+g.ID)
	}
	return nil
}

// headerACL is the ACL a request's x-amz-acl or x-amz-grant-* headers
// ask for (nil if none), for a resource owner owns in a bucket
// bucketOwner owns.
func headerACL(q *request, owner, bucketOwner gateway.Identity) (*aclDoc, error) {
	canned := amzParam(q.r, "x-amz-acl")
	var grants []aclGrant
	for _, gh := range grantHeaders {
		for _, v := range amzParams(q.r, gh.header) {
			for _, part := range strings.Split(v, ",") {
				m := grantee.FindStringSubmatch(part)
				if m == nil {
					return nil, s3err("InvalidArgument", 400, "Invalid grantee in "+gh.header+": "+strings.TrimSpace(part))
				}
				g := aclGrant{Perm: gh.perm}
				switch strings.ToLower(m[1]) {
				case "id":
					g.ID = m[2]
				case "uri":
					g.Group = m[2]
				default:
					return nil, s3err("UnresolvableGrantByEmailAddress", 400, "The e-mail address you provided does not match any account on record: grants name identities by ID.")
				}
				if err := checkGrant(g); err != nil {
					return nil, err
				}
				grants = append(grants, g)
			}
		}
	}
	switch {
	case canned != "" && grants != nil:
		return nil, s3err("InvalidRequest", 400, "Specifying both Canned ACLs and Header Grants is not allowed")
	case grants != nil:
		return &aclDoc{Owner: owner, Grants: grants}, nil
	case canned != "":
		a, err := cannedACL(canned, owner, bucketOwner)
		return &a, err
	}
	return nil, nil
}

// The AccessControlPolicy document of Get/Put Bucket/Object ACL.
type aclXML struct {
	XMLName xml.Name   `xml:"AccessControlPolicy"`
	NS      string     `xml:"xmlns,attr,omitempty"`
	Owner   owner      `xml:"Owner"`
	Grants  []grantXML `xml:"AccessControlList>Grant"`
}

type grantXML struct {
	Grantee    granteeXML `xml:"Grantee"`
	Permission string     `xml:"Permission"`
}

type granteeXML struct {
	XSI          string `xml:"xmlns:xsi,attr,omitempty"`
	Type         string `xml:"xsi:type,attr,omitempty"`
	ID           string `xml:"ID,omitempty"`
	DisplayName  string `xml:"DisplayName,omitempty"`
	URI          string `xml:"URI,omitempty"`
	EmailAddress string `xml:"EmailAddress,omitempty"`
}

const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

func (a aclDoc) xml() aclXML {
	out := aclXML{NS: s3ns, Owner: owner{a.Owner.ID, a.Owner.DisplayName}}
	for _, g := range a.Grants {
		gx := granteeXML{XSI: xsiNS}
		if g.Group != "" {
			gx.Type, gx.URI = "Group", g.Group
		} else {
			gx.Type, gx.ID = "CanonicalUser", g.ID
			switch {
			case g.ID == a.Owner.ID:
				gx.DisplayName = a.Owner.DisplayName
			case len(g.ID) != 64: // an account: its name is its ID
				gx.DisplayName = g.ID
			}
		}
		out.Grants = append(out.Grants, grantXML{gx, g.Perm})
	}
	return out
}

// bodyACL reads an AccessControlPolicy document: its grants, for a
// resource owner owns (the document's Owner, if any, must be owner).
func bodyACL(q *request, own gateway.Identity) (*aclDoc, error) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		return nil, err
	}
	var in struct {
		Owner  *owner `xml:"Owner"`
		Grants []struct {
			Grantee struct {
				ID           string `xml:"ID"`
				URI          string `xml:"URI"`
				EmailAddress string `xml:"EmailAddress"`
			} `xml:"Grantee"`
			Permission string `xml:"Permission"`
		} `xml:"AccessControlList>Grant"`
	}
	if err := xml.Unmarshal(body, &in); err != nil {
		return nil, s3err("MalformedACLError", 400, "The XML you provided was not well-formed or did not validate against our published schema.")
	}
	if in.Owner != nil && in.Owner.ID != "" && in.Owner.ID != own.ID {
		return nil, s3err("AccessDenied", 403, "The ACL's Owner is not the owner of the resource: an ACL cannot change the owner.")
	}
	a := &aclDoc{Owner: own, Grants: []aclGrant{}}
	for _, g := range in.Grants {
		ag := aclGrant{ID: g.Grantee.ID, Group: g.Grantee.URI, Perm: g.Permission}
		if g.Grantee.EmailAddress != "" {
			return nil, s3err("UnresolvableGrantByEmailAddress", 400, "The e-mail address you provided does not match any account on record: grants name identities by ID.")
		}
		if err := checkGrant(ag); err != nil {
			return nil, err
		}
		a.Grants = append(a.Grants, ag)
	}
	return a, nil
}

// requestACL is the ACL a Put Bucket/Object ACL request sets: from its
// headers or its body, not both.
func requestACL(q *request, owner, bucketOwner gateway.Identity) (*aclDoc, error) {
	a, err := headerACL(q, owner, bucketOwner)
	if err != nil {
		return nil, err
	}
	if a != nil {
		if q.length > 0 {
			return nil, s3err("UnexpectedContent", 400, "This request does not support content when ACL headers are given.")
		}
		return a, nil
	}
	if q.length == 0 {
		return nil, s3err("MissingSecurityHeader", 400, "Your request was missing a required header: x-amz-acl, x-amz-grant-* or an AccessControlPolicy body.")
	}
	return bodyACL(q, owner)
}

// bucketACL is a bucket's ACL: the stored one, or private to its owner.
func (s *Server) bucketACL(q *request, bucket string) (aclDoc, error) {
	if raw, err := s.gw.BucketConfig(q.r.Context(), bucket, "acl"); err == nil {
		var a aclDoc
		if json.Unmarshal(raw, &a) == nil {
			return a, nil
		}
	}
	o, err := s.gw.BucketOwner(q.r.Context(), bucket)
	if err != nil {
		return aclDoc{}, err
	}
	return aclDoc{Owner: o, Grants: []aclGrant{{ID: o.ID, Perm: permFullControl}}}, nil
}

// effectiveBucketACL is the bucket's ACL as it counts: private to the
// owner under BucketOwnerEnforced.
func (s *Server) effectiveBucketACL(q *request, bucket string) (aclDoc, error) {
	if s.ownership(q, bucket) == ownerEnforced {
		o, err := s.gw.BucketOwner(q.r.Context(), bucket)
		if err != nil {
			return aclDoc{}, err
		}
		return aclDoc{Owner: o, Grants: []aclGrant{{ID: o.ID, Perm: permFullControl}}}, nil
	}
	return s.bucketACL(q, bucket)
}

// objectACL is an object's ACL: its record's, or private to the
// bucket's owner.
func objectACL(info gateway.ObjectInfo, bucketOwner gateway.Identity) aclDoc {
	var a aclDoc
	if len(info.ACL) > 0 && json.Unmarshal(info.ACL, &a) == nil {
		return a
	}
	return aclDoc{Owner: bucketOwner, Grants: []aclGrant{{ID: bucketOwner.ID, Perm: permFullControl}}}
}

// listOwners returns who listings of the request's bucket name as an
// object's owner: its ACL's owner, or the bucket's (always, under
// BucketOwnerEnforced).
func (s *Server) listOwners(q *request) (func(gateway.ObjectInfo) owner, error) {
	bo, err := s.gw.BucketOwner(q.r.Context(), q.bucket)
	if err != nil {
		return nil, err
	}
	enforced := s.ownership(q, q.bucket) == ownerEnforced
	return func(info gateway.ObjectInfo) owner {
		o := bo
		if !enforced {
			o = objectACL(info, bo).Owner
		}
		return owner{o.ID, o.DisplayName}
	}, nil
}

// requester is the identity a request acts as (none if anonymous).
func (q *request) requester() gateway.Identity {
	if q.anon {
		return gateway.Identity{}
	}
	return gateway.KeyIdentity(q.key)
}

// newObjectACL is the ACL a write (PutObject, CopyObject,
// CreateMultipartUpload) asks for in its headers, as JSON for the
// object's record. The writer owns the object: nil (no ACL kept, the
// object is private to the bucket's owner) when the writer is the
// bucket's owner (a key owning the bucket, an admin key) or anonymous
// and asks for nothing. A public ACL on a bucket that blocks public ACLs
// is refused.
func (s *Server) newObjectACL(q *request) ([]byte, error) {
	get := q.param
	asked := get("x-amz-acl") != "" || hasGrantHeader(get)
	if !asked && (q.anon || q.key.Allowed(q.bucket, gateway.Owner)) {
		return nil, nil
	}
	switch s.ownership(q, q.bucket) {
	case ownerEnforced:
		if !aclAllowedWhenEnforced(q) {
			return nil, errACLsOff
		}
		return nil, nil // the bucket's owner owns every object
	case ownerPreferred:
		if get("x-amz-acl") == "bucket-owner-full-control" {
			return nil, nil
		}
	}
	bo, err := s.gw.BucketOwner(q.r.Context(), q.bucket)
	if err != nil {
		return nil, err
	}
	own := q.requester()
	if q.anon || q.key.Allowed(q.bucket, gateway.Owner) {
		own = bo
	}
	a, err := headerACL(q, own, bo)
	if err != nil {
		return nil, err
	}
	if a == nil {
		a = &aclDoc{Owner: own, Grants: []aclGrant{{ID: own.ID, Perm: permFullControl}}}
	}
	if own.ID == bo.ID && len(a.Grants) == 1 && a.Grants[0] == (aclGrant{ID: own.ID, Perm: permFullControl}) {
		return nil, nil // private to the bucket's owner: what no ACL means
	}
	if a.public() && s.publicBlock(q, q.bucket).BlockPublicAcls {
		return nil, errBlockedACL
	}
	if err := s.checkGrantees(q, a, bo); err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// amzParams are the values of header name, or if the request has none,
// of the query parameter of the name (any case): a presigned URL carries
// the x-amz-* headers it signs in its query.
func amzParams(r *http.Request, name string) []string {
	if vs := r.Header.Values(name); len(vs) > 0 {
		return vs
	}
	if r.URL == nil {
		return nil
	}
	for k, vs := range r.URL.Query() {
		if strings.EqualFold(k, name) {
			return vs
		}
	}
	return nil
}

// amzParam is the first of amzParams ("" if none).
func amzParam(r *http.Request, name string) string {
	if vs := amzParams(r, name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// param is amzParam of the request.
func (q *request) param(name string) string { return amzParam(q.r, name) }

// hasGrantHeader reports whether get finds any x-amz-grant-* value.
func hasGrantHeader(get func(string) string) bool {
	for _, gh := range grantHeaders {
		if get(gh.header) != "" {
			return true
		}
	}
	return false
}

// checkGrantees refuses an ACL granting to an identity the gateway does
// not have. The ACL's owner and known (the bucket's owner) are not
// looked up: a canned ACL names only them, and costs no lookup.
func (s *Server) checkGrantees(q *request, a *aclDoc, known gateway.Identity) error {
	var ids []string
	for _, g := range a.Grants {
		if g.ID != "" && g.ID != a.Owner.ID && g.ID != known.ID {
			ids = append(ids, g.ID)
		}
	}
	return s.checkIdentities(q, ids, func(id string) *Error {
		return s3err("InvalidArgument", 400, "Invalid id: "+id+" is no account or access key of the gateway")
	})
}

var errBlockedACL = s3err("AccessDenied", 403, "Access Denied: Block Public Access (BlockPublicAcls, the bucket's or the gateway's) refuses public ACLs.")

func (s *Server) getBucketACL(q *request) {
	a, err := s.effectiveBucketACL(q, q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	q.xml(200, a.xml())
}

func (s *Server) putBucketACL(q *request) {
	if s.ownership(q, q.bucket) == ownerEnforced {
		if !aclAllowedWhenEnforced(q) || q.length > 0 {
			q.fail(errACLsOff)
			return
		}
		q.status = 200
		q.w.WriteHeader(200)
		return
	}
	cur, err := s.bucketACL(q, q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	a, err := requestACL(q, cur.Owner, cur.Owner)
	if err != nil {
		q.fail(err)
		return
	}
	if a.public() && s.publicBlock(q, q.bucket).BlockPublicAcls {
		q.fail(errBlockedACL)
		return
	}
	if err := s.checkGrantees(q, a, cur.Owner); err != nil {
		q.fail(err)
		return
	}
	doc, _ := json.Marshal(a)
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "acl", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) getObjectACL(q *request) {
	info, err := s.gw.Head(q.r.Context(), q.bucket, q.object)
	if err != nil {
		q.fail(err)
		return
	}
	bo, err := s.gw.BucketOwner(q.r.Context(), q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	if s.ownership(q, q.bucket) == ownerEnforced {
		info.ACL = nil
	}
	q.xml(200, objectACL(info, bo).xml())
}

func (s *Server) putObjectACL(q *request) {
	ctx := q.r.Context()
	info, err := s.gw.Head(ctx, q.bucket, q.object)
	if err != nil {
		q.fail(err)
		return
	}
	bo, err := s.gw.BucketOwner(ctx, q.bucket)
	if err != nil {
		q.fail(err)
		return
	}
	if s.ownership(q, q.bucket) == ownerEnforced {
		if !aclAllowedWhenEnforced(q) || q.length > 0 {
			q.fail(errACLsOff)
			return
		}
		q.status = 200
		q.w.WriteHeader(200)
		return
	}
	cur := objectACL(info, bo)
	a, err := requestACL(q, cur.Owner, bo)
	if err != nil {
		q.fail(err)
		return
	}
	if a.public() && s.publicBlock(q, q.bucket).BlockPublicAcls {
		q.fail(errBlockedACL)
		return
	}
	if err := s.checkGrantees(q, a, bo); err != nil {
		q.fail(err)
		return
	}
	doc, _ := json.Marshal(a)
	if _, err := s.gw.SetACL(ctx, q.bucket, q.object, doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}
