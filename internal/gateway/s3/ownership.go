package s3

import (
	"encoding/xml"
	"errors"
	"io"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Object Ownership (S3's ownership controls): who owns the objects
// written into a bucket, and whether ACLs are used at all. Kept as the
// bucket configuration "ownershipControls" (the setting's name); none is
// ObjectWriter, the gateway's default.

// The Object Ownership settings.
const (
	// ownerWriter: the writer owns an object; ACLs apply.
	ownerWriter = "ObjectWriter"
	// ownerPreferred: an object written with bucket-owner-full-control
	// is the bucket owner's; ACLs apply.
	ownerPreferred = "BucketOwnerPreferred"
	// ownerEnforced: ACLs are off: the bucket's owner owns every object,
	// ACLs grant nothing, and setting one other than private or
	// bucket-owner-full-control is refused.
	ownerEnforced = "BucketOwnerEnforced"
)

func knownOwnership(v string) bool {
	return v == ownerWriter || v == ownerPreferred || v == ownerEnforced
}

var errACLsOff = s3err("AccessControlListNotSupported", 400, "The bucket does not allow ACLs (Object Ownership is BucketOwnerEnforced).")

// ownership is a bucket's Object Ownership setting.
func (s *Server) ownership(q *request, bucket string) string {
	if raw, err := s.gw.BucketConfig(q.r.Context(), bucket, "ownershipControls"); err == nil && knownOwnership(string(raw)) {
		return string(raw)
	}
	return ownerWriter
}

// aclAllowedWhenEnforced reports whether ACL headers ask for nothing but
// what BucketOwnerEnforced means anyway (S3 takes these).
func aclAllowedWhenEnforced(q *request) bool {
	acl := q.param("x-amz-acl")
	return !hasGrantHeader(q.param) && (acl == "" || acl == "private" || acl == "bucket-owner-full-control")
}

type ownershipXML struct {
	XMLName xml.Name `xml:"OwnershipControls"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		ObjectOwnership string
	} `xml:"Rule"`
}

func (s *Server) putOwnership(q *request) {
	body, err := io.ReadAll(io.LimitReader(q.body, 64<<10))
	if err != nil {
		q.fail(err)
		return
	}
	var in ownershipXML
	if err := xml.Unmarshal(body, &in); err != nil || in.XMLName.Local != "OwnershipControls" || len(in.Rules) != 1 {
		q.fail(errMalformedXML)
		return
	}
	v := in.Rules[0].ObjectOwnership
	if !knownOwnership(v) {
		q.fail(s3err("InvalidArgument", 400, "ObjectOwnership is ObjectWriter, BucketOwnerPreferred or BucketOwnerEnforced, not "+v))
		return
	}
	if err := s.gw.PutBucketConfig(q.r.Context(), q.bucket, "ownershipControls", []byte(v)); err != nil {
		q.fail(err)
		return
	}
	q.status = 200
	q.w.WriteHeader(200)
}

func (s *Server) getOwnership(q *request) {
	raw, err := s.gw.BucketConfig(q.r.Context(), q.bucket, "ownershipControls")
	if err != nil {
		if errors.Is(err, gateway.ErrNoConfig) {
			err = s3err("OwnershipControlsNotFoundError", 404, "The bucket ownership controls were not found")
		}
		q.fail(err)
		return
	}
	out := ownershipXML{NS: s3ns}
	out.Rules = append(out.Rules, struct{ ObjectOwnership string }{string(raw)})
	q.xml(200, out)
}

func (s *Server) deleteOwnership(q *request) {
	if err := s.gw.DeleteBucketConfig(q.r.Context(), q.bucket, "ownershipControls"); err != nil {
		q.fail(err)
		return
	}
	q.status = 204
	q.w.WriteHeader(204)
}

func init() {
	for k, o := range map[opKey]op{
		{onBucket, "GET", "ownershipControls", false, false}:    {"GetBucketOwnershipControls", gateway.Owner, false, (*Server).getOwnership},
		{onBucket, "PUT", "ownershipControls", false, false}:    {"PutBucketOwnershipControls", gateway.Owner, false, (*Server).putOwnership},
		{onBucket, "DELETE", "ownershipControls", false, false}: {"DeleteBucketOwnershipControls", gateway.Owner, false, (*Server).deleteOwnership},
	} {
		ops[k] = o
	}
	// For owner keys only; a policy may deny them (S3's actions: a
	// DELETE is s3:PutBucketOwnershipControls).
	for name, action := range map[string]string{"GetBucketOwnershipControls": "s3:GetBucketOwnershipControls",
		"PutBucketOwnershipControls": "s3:PutBucketOwnershipControls", "DeleteBucketOwnershipControls": "s3:PutBucketOwnershipControls"} {
		ownerOnly[name] = true
		accessOf[name] = access{action: action}
	}
}
