package s3

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// How a request is authorized (docs/s3.md, "Access control"):
//
//  1. ListBuckets and CreateBucket need a signed request.
//  2. An admin key may do anything.
//  3. The bucket's policy is evaluated: an explicit Deny that applies
//     refuses the request, whatever else allows it (but the owner's keys
//     may always read, change and delete the policy, so that no policy
//     locks them out).
//  4. The key's grant on the bucket (read, write, owner) allows what it
//     always has.
//  5. An Allow of the policy allows (not when Block Public Access
//     restricts a public policy).
//  6. The ACL (the object's for object reads and object ACLs, the
//     bucket's otherwise) allows what it grants to the requester, to
//     AuthenticatedUsers if signed, to AllUsers (public grants count for
//     nothing under IgnorePublicAcls).
//  7. Anything else is 403 AccessDenied, or 404 NoSuchBucket if the
//     bucket does not exist.

// access is what an operation needs beyond a key's grant: the policy
// action it is, and the ACL permission that allows it (none: a policy
// or a grant only).
type access struct {
	action string
	perm   string
	object bool // the ACL is the object's, not the bucket's
}

var accessOf = map[string]access{
	"HeadBucket":              {"s3:ListBucket", permRead, false},
	"ListObjects":             {"s3:ListBucket", permRead, false},
	"ListObjectVersions":      {"s3:ListBucketVersions", permRead, false},
	"ListMultipartUploads":    {"s3:ListBucketMultipartUploads", permRead, false},
	"GetBucketLocation":       {"s3:GetBucketLocation", "", false},
	"GetBucketVersioning":     {"s3:GetBucketVersioning", "", false},
	"PutBucketVersioning":     {"s3:PutBucketVersioning", "", false},
	"GetBucketCors":           {"s3:GetBucketCORS", "", false},
	"GetBucketTagging":        {"s3:GetBucketTagging", "", false},
	"GetBucketAcl":            {"s3:GetBucketAcl", permReadACP, false},
	"PutBucketAcl":            {"s3:PutBucketAcl", permWriteACP, false},
	"DeleteObjects":           {"s3:DeleteObject", permWrite, false},
	"PutObject":               {"s3:PutObject", permWrite, false},
	"CopyObject":              {"s3:PutObject", permWrite, false},
	"CreateMultipartUpload":   {"s3:PutObject", permWrite, false},
	"UploadPart":              {"s3:PutObject", permWrite, false},
	"UploadPartCopy":          {"s3:PutObject", permWrite, false},
	"CompleteMultipartUpload": {"s3:PutObject", permWrite, false},
	"AbortMultipartUpload":    {"s3:AbortMultipartUpload", permWrite, false},
	"ListParts":               {"s3:ListMultipartUploadParts", permWrite, false},
	"DeleteObject":            {"s3:DeleteObject", permWrite, false},
	"GetObject":               {"s3:GetObject", permRead, true},
	"HeadObject":              {"s3:GetObject", permRead, true},
	"GetObjectAttributes":     {"s3:GetObjectAttributes", permRead, true},
	"GetObjectTagging":        {"s3:GetObjectTagging", "", true},
	"PutObjectTagging":        {"s3:PutObjectTagging", "", true},
	"DeleteObjectTagging":     {"s3:DeleteObjectTagging", "", true},
	"GetObjectAcl":            {"s3:GetObjectAcl", permReadACP, true},
	"PutObjectAcl":            {"s3:PutObjectAcl", permWriteACP, true},
	"GetBucketPolicy":         {"s3:GetBucketPolicy", "", false},
	"PutBucketPolicy":         {"s3:PutBucketPolicy", "", false},
	"DeleteBucketPolicy":      {"s3:DeleteBucketPolicy", "", false},
	"GetBucketPolicyStatus":   {"s3:GetBucketPolicyStatus", "", false},
	"GetPublicAccessBlock":    {"s3:GetBucketPublicAccessBlock", "", false},
	"PutPublicAccessBlock":    {"s3:PutBucketPublicAccessBlock", "", false},
	"DeletePublicAccessBlock": {"s3:PutBucketPublicAccessBlock", "", false},
	"PutBucketCors":           {"s3:PutBucketCORS", "", false},
	"DeleteBucketCors":        {"s3:PutBucketCORS", "", false},
	"PutBucketTagging":        {"s3:PutBucketTagging", "", false},
	"DeleteBucketTagging":     {"s3:PutBucketTagging", "", false},
	"DeleteBucket":            {"s3:DeleteBucket", "", false},
}

// ownerOnly are the operations a policy may deny but never allow: only a
// key that owns the bucket may change who may do what with it.
var ownerOnly = map[string]bool{
	"PutBucketPolicy": true, "DeleteBucketPolicy": true, "GetBucketPolicy": true, "GetBucketPolicyStatus": true,
	"PutPublicAccessBlock": true, "DeletePublicAccessBlock": true, "GetPublicAccessBlock": true, "DeleteBucket": true,
	"PutBucketCors": true, "DeleteBucketCors": true, "PutBucketTagging": true, "DeleteBucketTagging": true,
	"PutBucketVersioning": true,
}

// policyKept are the operations an explicit Deny does not refuse to a
// key that owns the bucket.
var policyKept = map[string]bool{"PutBucketPolicy": true, "DeleteBucketPolicy": true, "GetBucketPolicy": true, "GetBucketPolicyStatus": true}

// knownIdentity reports whether id is the identity of an account or of
// an access key of the gateway (grants and policies name no other).
func (s *Server) knownIdentity(q *request, id string) bool {
	ctx := q.r.Context()
	if len(id) != 64 {
		_, err := s.gw.User(ctx, id)
		return err == nil
	}
	keys, err := s.gw.Keys(ctx)
	if err != nil {
		return false
	}
	for _, k := range keys {
		if gateway.KeyIdentity(k).ID == id {
			return true
		}
	}
	return false
}

// checkIdentities refuses an ACL or a policy that names an identity the
// gateway does not have: it would allow nothing, and a later key or
// account could never come to be that identity by chance, so it is a
// mistake.
func (s *Server) checkIdentities(q *request, ids []string, bad func(id string) *Error) error {
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "*" || seen[id] {
			continue
		}
		seen[id] = true
		if !s.knownIdentity(q, id) {
			return bad(id)
		}
	}
	return nil
}

func init() {
	for k, o := range map[opKey]op{
		{onBucket, "GET", "acl", false, false}:                  {"GetBucketAcl", gateway.Read, false, (*Server).getBucketACL},
		{onBucket, "PUT", "acl", false, false}:                  {"PutBucketAcl", gateway.Owner, false, (*Server).putBucketACL},
		{onObject, "GET", "acl", false, false}:                  {"GetObjectAcl", gateway.Read, false, (*Server).getObjectACL},
		{onObject, "PUT", "acl", false, false}:                  {"PutObjectAcl", gateway.Write, false, (*Server).putObjectACL},
		{onBucket, "GET", "policy", false, false}:               {"GetBucketPolicy", gateway.Owner, false, (*Server).getPolicy},
		{onBucket, "PUT", "policy", false, false}:               {"PutBucketPolicy", gateway.Owner, false, (*Server).putPolicy},
		{onBucket, "DELETE", "policy", false, false}:            {"DeleteBucketPolicy", gateway.Owner, false, (*Server).deletePolicy},
		{onBucket, "GET", "policyStatus", false, false}:         {"GetBucketPolicyStatus", gateway.Owner, false, (*Server).getPolicyStatus},
		{onBucket, "GET", "publicAccessBlock", false, false}:    {"GetPublicAccessBlock", gateway.Owner, false, (*Server).getPublicAccessBlock},
		{onBucket, "PUT", "publicAccessBlock", false, false}:    {"PutPublicAccessBlock", gateway.Owner, false, (*Server).putPublicAccessBlock},
		{onBucket, "DELETE", "publicAccessBlock", false, false}: {"DeletePublicAccessBlock", gateway.Owner, false, (*Server).deletePublicAccessBlock},
	} {
		ops[k] = o
	}
}

// authorize decides whether the request may do o; false means the
// answer (403 or 404) is sent.
func (s *Server) authorize(q *request, o op) bool {
	if o.perm == gateway.None {
		if q.anon {
			q.fail(errDenied)
			return false
		}
		return true
	}
	if q.key.Admin {
		return true
	}
	if o.name == "DeleteObjects" {
		// A policy may allow deleting some keys and not others: with
		// one, each key is decided as a DeleteObject (refused keys are
		// errors of the answer, as S3 reports them).
		err := s.decide(q, o.name, q.bucket, "", o.perm)
		if err == errDenied && s.bucketPolicy(q, q.bucket) != nil {
			q.perKey = true
			return true
		}
		if err != nil {
			q.fail(err)
			return false
		}
		return true
	}
	return s.authorizeOn(q, o.name, q.bucket, q.object, o.perm)
}

// authorizeOn decides whether the request may do operation name on
// bucket (and key, for an object operation) where a key's grant needs
// perm; false means the answer is sent.
func (s *Server) authorizeOn(q *request, name, bucket, key string, perm gateway.Perm) bool {
	if err := s.decide(q, name, bucket, key, perm); err != nil {
		q.fail(err)
		return false
	}
	return true
}

// decide is authorizeOn's decision: nil if allowed, else the error to
// answer.
func (s *Server) decide(q *request, name, bucket, key string, perm gateway.Perm) error {
	if q.key.Admin {
		return nil
	}
	ctx := q.r.Context()
	granted := !q.anon && q.key.Allowed(bucket, perm)
	pol := s.bucketPolicy(q, bucket)
	if granted && pol == nil {
		return nil // the common case: one read of the local registry
	}
	if _, err := s.gw.Owner(ctx, bucket); err != nil {
		return errNoBucket
	}
	acc, known := accessOf[name]
	d := noDecision
	if known && pol != nil {
		resource := "arn:aws:s3:::" + bucket
		if acc.object || key != "" {
			resource += "/" + key
		}
		d = pol.decide(policyRequest{who: q.requester(), anon: q.anon, action: acc.action, resource: resource, keys: conditionKeys(q)})
	}
	if d == deny && !(policyKept[name] && granted) {
		return errDenied
	}
	if granted {
		return nil
	}
	if !known || ownerOnly[name] {
		return errDenied
	}
	bpa := s.publicBlock(q, bucket)
	if d == allow && !(bpa.RestrictPublicBuckets && pol.public()) {
		return nil
	}
	if acc.perm != "" && s.ownership(q, bucket) != ownerEnforced {
		var list aclDoc
		if acc.object && key != "" {
			info, err := s.gw.Head(ctx, bucket, key)
			if err != nil {
				// No object: a reader the bucket's ACL lets list may
				// learn it is missing; anyone else learns nothing.
				if errors.Is(err, gateway.ErrNoKey) {
					if b, e := s.bucketACL(q, bucket); e == nil && b.allows(q.requester(), q.anon, permRead, bpa.IgnorePublicAcls) {
						return err
					}
				}
				return errDenied
			}
			bo, err := s.gw.BucketOwner(ctx, bucket)
			if err != nil {
				return err
			}
			list = objectACL(info, bo)
		} else {
			var err error
			if list, err = s.bucketACL(q, bucket); err != nil {
				return err
			}
		}
		if list.allows(q.requester(), q.anon, acc.perm, bpa.IgnorePublicAcls) {
			return nil
		}
	}
	return errDenied
}

// mayRead decides whether the request may read object key of bucket (a
// copy's source); false means the answer is sent.
func (s *Server) mayRead(q *request, bucket, key string) bool {
	return s.authorizeOn(q, "GetObject", bucket, key, gateway.Read)
}

// PublicAccessBlock is S3's Block Public Access configuration, of a
// bucket or of the gateway (Options.BlockPublicAccess).
type PublicAccessBlock struct {
	// BlockPublicAcls refuses ACLs that grant to AllUsers or
	// AuthenticatedUsers (PutBucketAcl, PutObjectAcl, and writes with
	// such an x-amz-acl or x-amz-grant-*).
	BlockPublicAcls bool
	// IgnorePublicAcls makes grants to AllUsers or AuthenticatedUsers
	// allow nothing.
	IgnorePublicAcls bool
	// BlockPublicPolicy refuses a bucket policy that allows anything to
	// everyone.
	BlockPublicPolicy bool
	// RestrictPublicBuckets makes a public policy's Allow statements
	// allow nothing (keys granted the bucket keep their grants).
	RestrictPublicBuckets bool
}

type publicAccessBlockXML struct {
	XMLName xml.Name `xml:"PublicAccessBlockConfiguration"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	PublicAccessBlock
}

// publicBlock is what blocks public access to bucket: its own setting
// and the gateway's, each part on if either has it on.
func (s *Server) publicBlock(q *request, bucket string) PublicAccessBlock {
	p := s.opt.BlockPublicAccess
	if raw, err := s.gw.BucketConfig(q.r.Context(), bucket, "publicAccessBlock"); err == nil {
		var b PublicAccessBlock
		if json.Unmarshal(raw, &b) == nil {
			p.BlockPublicAcls = p.BlockPublicAcls || b.BlockPublicAcls
			p.IgnorePublicAcls = p.IgnorePublicAcls || b.IgnorePublicAcls
			p.BlockPublicPolicy = p.BlockPublicPolicy || b.BlockPublicPolicy
			p.RestrictPublicBuckets = p.RestrictPublicBuckets || b.RestrictPublicBuckets
		}
	}
	return p
}

var errNoPAB = s3err("NoSuchPublicAccessBlockConfiguration", 404, "The public access block configuration was not found")

func (s *Server) getPublicAccessBlock(q *request) {
	raw, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "publicAccessBlock")
	if err != nil {
		if errors.Is(err, gateway.ErrNoConfig) {
			err = errNoPAB
		}
		q.fail(err)
		return
	}
	var b PublicAccessBlock
	if err := json.Unmarshal(raw, &b); err != nil {
		q.fail(err)
		return
	}
	q.xml(200, publicAccessBlockXML{NS: s3ns, PublicAccessBlock: b})
}

func (s *Server) putPublicAccessBlock(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in publicAccessBlockXML
	if err := xml.Unmarshal(body, &in); err != nil || in.XMLName.Local != "PublicAccessBlockConfiguration" {
		q.fail(errMalformedXML)
		return
	}
	doc, _ := json.Marshal(in.PublicAccessBlock)
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "publicAccessBlock", doc); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) deletePublicAccessBlock(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "publicAccessBlock"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

// aclOps are the operations that take x-amz-acl and x-amz-grant-*.
var aclOps = map[string]bool{"CreateBucket": true, "PutObject": true, "CopyObject": true, "CreateMultipartUpload": true,
	"PutBucketAcl": true, "PutObjectAcl": true, "PostObject": true}
