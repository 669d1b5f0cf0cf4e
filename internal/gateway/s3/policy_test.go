package s3_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestBucketPolicies drives Put/Get/Delete Bucket Policy and
// GetBucketPolicyStatus with aws-sdk-go-v2: malformed policies, a
// non-owner, public read of a prefix, a per-prefix policy for another
// identity, conditions, Deny over Allow, and Block Public Access of
// policies.
func TestBucketPolicies(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	ka, kb := e.key(t, false), e.key(t, false)
	a, b, anon := e.client(ka), e.client(kb), e.anonClient()
	idb := gateway.KeyIdentity(kb)
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"public/a", "public/secret", "private/b", "home/b/x", "ip/x"} {
		if err := put(t, a, "pol", k, "body of "+k, ""); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy := func(c *awss3.Client, doc string) error {
		_, err := c.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String("pol"), Policy: aws.String(doc)})
		return err
	}
	_, err := a.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	mustCode(t, "GetBucketPolicy of none", err, "NoSuchBucketPolicy")
	_, err = a.GetBucketPolicyStatus(ctx, &awss3.GetBucketPolicyStatusInput{Bucket: aws.String("pol")})
	mustCode(t, "GetBucketPolicyStatus of none", err, "NoSuchBucketPolicy")

	stmt := func(s string) string { return `{"Version":"2012-10-17","Statement":[` + s + `]}` }
	for what, doc := range map[string]string{
		"not JSON":           `{"Statement": [`,
		"no statement":       `{"Version":"2012-10-17"}`,
		"bad version":        `{"Version":"2020-01-01","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}]}`,
		"bad effect":         stmt(`{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"no principal":       stmt(`{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"bad principal":      stmt(`{"Effect":"Allow","Principal":{"AWS":"someone"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"not an s3 action":   stmt(`{"Effect":"Allow","Principal":"*","Action":"iam:PassRole","Resource":"arn:aws:s3:::pol/*"}`),
		"no action":          stmt(`{"Effect":"Allow","Principal":"*","Resource":"arn:aws:s3:::pol/*"}`),
		"another bucket":     stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}`),
		"not an ARN":         stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"pol/*"}`),
		"unknown field":      stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*","Color":"red"}`),
		"unknown operator":   stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*","Condition":{"StringRoughly":{"s3:prefix":"a"}}}`),
		"bad IP":             stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.300/8"}}}`),
		"NotPrincipal":       stmt(`{"Effect":"Deny","NotPrincipal":{"AWS":"alice"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`),
		"bool not a boolean": stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::pol/*","Condition":{"Bool":{"aws:SecureTransport":"perhaps"}}}`),
	} {
		mustCode(t, "malformed policy: "+what, setPolicy(a, doc), "MalformedPolicy")
	}
	big := stmt(`{"Sid":"` + strings.Repeat("x", 21<<10) + `","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/*"}`)
	mustCode(t, "a policy over 20 KB", setPolicy(a, big), "PolicyTooLarge")
	_, err = a.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	mustCode(t, "GetBucketPolicy after malformed ones", err, "NoSuchBucketPolicy")

	public := stmt(`{"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::pol/public/*"]}`)
	mustCode(t, "B's PutBucketPolicy", setPolicy(b, public), "AccessDenied")
	mustCode(t, "anonymous PutBucketPolicy", setPolicy(anon, public), "AccessDenied")
	if err := setPolicy(a, public); err != nil {
		t.Fatal(err)
	}
	gp, err := a.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	if err != nil || *gp.Policy != public {
		t.Fatalf("GetBucketPolicy: %v %v", err, gp)
	}
	_, err = b.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	mustCode(t, "B's GetBucketPolicy", err, "AccessDenied")
	st, err := a.GetBucketPolicyStatus(ctx, &awss3.GetBucketPolicyStatusInput{Bucket: aws.String("pol")})
	if err != nil || !*st.PolicyStatus.IsPublic {
		t.Fatalf("GetBucketPolicyStatus of a public policy: %v %+v", err, st)
	}
	// Public read of a prefix, nothing else.
	if got, err := get(anon, "pol", "public/a"); err != nil || got != "body of public/a" {
		t.Errorf("anonymous GET under the public prefix: %q %v", got, err)
	}
	resp, body := e.anon(t, "GET", "/pol/public/a", nil)
	if resp.StatusCode != 200 || string(body) != "body of public/a" {
		t.Errorf("plain HTTP GET under the public prefix: %d %q", resp.StatusCode, body)
	}
	_, err = get(anon, "pol", "public/missing")
	mustCode(t, "anonymous GET of a missing key under the public prefix", err, "NoSuchKey")
	_, err = get(anon, "pol", "private/b")
	mustCode(t, "anonymous GET outside the public prefix", err, "AccessDenied")
	_, err = anon.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pol")})
	mustCode(t, "anonymous list under a GetObject policy", err, "AccessDenied")
	mustCode(t, "anonymous PUT under a GetObject policy", put(t, anon, "pol", "public/new", "x", ""), "AccessDenied")
	_, err = anon.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("pol"), Key: aws.String("public/a")})
	mustCode(t, "anonymous DELETE under a GetObject policy", err, "AccessDenied")

	// A per-prefix policy for B; the public read stays; a Deny carves
	// out a key from the public prefix, for everyone but admin keys.
	perPrefix := stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/public/*"},
	{"Sid":"ListHome","Effect":"Allow","Principal":{"AWS":["` + idb.ID + `"]},"Action":"s3:ListBucket","Resource":"arn:aws:s3:::pol",
	 "Condition":{"StringLike":{"s3:prefix":["home/b/*"]}}},
	{"Sid":"RWHome","Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + idb.ID + `:root"},"Action":["s3:GetObject","s3:PutObject","s3:Delete*"],"Resource":"arn:aws:s3:::pol/home/b/*"},
	{"Sid":"NoSecrets","Effect":"Deny","Principal":"*","Action":"s3:Get*","Resource":"arn:aws:s3:::pol/public/secret*"},
	{"Sid":"Office","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/ip/*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}`)
	if err := setPolicy(a, perPrefix); err != nil {
		t.Fatal(err)
	}
	if l, err := b.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pol"), Prefix: aws.String("home/b/")}); err != nil || len(l.Contents) != 1 {
		t.Errorf("B's list of its prefix: %v %+v", err, l)
	}
	_, err = b.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pol")})
	mustCode(t, "B's list of the whole bucket", err, "AccessDenied")
	_, err = b.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pol"), Prefix: aws.String("private/")})
	mustCode(t, "B's list of another prefix", err, "AccessDenied")
	if err := put(t, b, "pol", "home/b/y", "by b", ""); err != nil {
		t.Errorf("B's PUT under its prefix: %v", err)
	}
	if got, err := get(b, "pol", "home/b/y"); err != nil || got != "by b" {
		t.Errorf("B's GET under its prefix: %q %v", got, err)
	}
	if _, err := b.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("pol"), Key: aws.String("home/b/y")}); err != nil {
		t.Errorf("B's DELETE under its prefix (s3:Delete*): %v", err)
	}
	// DeleteObjects decides each key.
	if err := put(t, b, "pol", "home/b/z", "by b", ""); err != nil {
		t.Fatal(err)
	}
	do, err := b.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String("pol"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("home/b/z")}, {Key: aws.String("private/b")}}}})
	if err != nil || len(do.Deleted) != 1 || *do.Deleted[0].Key != "home/b/z" || len(do.Errors) != 1 || *do.Errors[0].Code != "AccessDenied" {
		t.Errorf("B's DeleteObjects inside and outside its prefix: %v %+v", err, do)
	}
	if got, err := get(a, "pol", "private/b"); err != nil || got != "body of private/b" {
		t.Errorf("the key B could not delete: %q %v", got, err)
	}
	mustCode(t, "B's PUT outside its prefix", put(t, b, "pol", "private/z", "x", ""), "AccessDenied")
	_, err = get(b, "pol", "private/b")
	mustCode(t, "B's GET outside its prefix", err, "AccessDenied")
	_, err = get(anon, "pol", "home/b/x")
	mustCode(t, "anonymous GET of B's prefix", err, "AccessDenied")
	// Deny wins over the public Allow, and over the owner key's grant.
	_, err = get(anon, "pol", "public/secret")
	mustCode(t, "anonymous GET of a denied key", err, "AccessDenied")
	_, err = get(a, "pol", "public/secret")
	mustCode(t, "owner's GET of a denied key", err, "AccessDenied")
	if got, err := get(e.client(e.admin), "pol", "public/secret"); err != nil || got != "body of public/secret" {
		t.Errorf("admin's GET of a denied key: %q %v", got, err)
	}
	if got, err := get(anon, "pol", "public/a"); err != nil || got != "body of public/a" {
		t.Errorf("anonymous GET beside the denied key: %q %v", got, err)
	}
	// The gateway's test client is 127.0.0.1, not in 10.0.0.0/8.
	_, err = get(anon, "pol", "ip/x")
	mustCode(t, "anonymous GET from outside the allowed network", err, "AccessDenied")

	// A policy that denies everything over plain HTTP: the owner may
	// still read and delete the policy.
	lockout := stmt(`{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::pol","arn:aws:s3:::pol/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}`)
	if err := setPolicy(a, lockout); err != nil {
		t.Fatal(err)
	}
	_, err = get(a, "pol", "public/a")
	mustCode(t, "owner's GET over HTTP under a SecureTransport Deny", err, "AccessDenied")
	_, err = a.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pol")})
	mustCode(t, "owner's list over HTTP under a SecureTransport Deny", err, "AccessDenied")
	if _, err := a.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")}); err != nil {
		t.Errorf("owner's GetBucketPolicy under a Deny of s3:*: %v", err)
	}
	st, err = a.GetBucketPolicyStatus(ctx, &awss3.GetBucketPolicyStatusInput{Bucket: aws.String("pol")})
	if err != nil || *st.PolicyStatus.IsPublic {
		t.Errorf("GetBucketPolicyStatus of a Deny-only policy: %v %+v", err, st)
	}
	if _, err := a.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(a, "pol", "public/a"); err != nil || got != "body of public/a" {
		t.Errorf("owner's GET once the policy is gone: %q %v", got, err)
	}

	// An office network that includes the client: allowed; not public.
	office := stmt(`{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pol/ip/*","Condition":{"IpAddress":{"aws:SourceIp":["10.0.0.0/8","127.0.0.1/32"]}}}`)
	if err := setPolicy(a, office); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "pol", "ip/x"); err != nil || got != "body of ip/x" {
		t.Errorf("anonymous GET from the allowed network: %q %v", got, err)
	}
	st, err = a.GetBucketPolicyStatus(ctx, &awss3.GetBucketPolicyStatusInput{Bucket: aws.String("pol")})
	if err != nil || *st.PolicyStatus.IsPublic {
		t.Errorf("GetBucketPolicyStatus of an IP-limited policy: %v %+v", err, st)
	}

	// Block Public Access: a public policy is refused, and one already
	// there allows nothing under RestrictPublicBuckets.
	if err := setPolicy(a, public); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutPublicAccessBlock(ctx, &awss3.PutPublicAccessBlockInput{Bucket: aws.String("pol"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "public policy under BlockPublicPolicy", setPolicy(a, public), "AccessDenied")
	_, err = get(anon, "pol", "public/a")
	mustCode(t, "anonymous GET under RestrictPublicBuckets", err, "AccessDenied")
	if err := setPolicy(a, office); err != nil {
		t.Errorf("a non-public policy under BlockPublicPolicy: %v", err)
	}
	if _, err := a.DeletePublicAccessBlock(ctx, &awss3.DeletePublicAccessBlockInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	if err := setPolicy(a, public); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "pol", "public/a"); err != nil || got != "body of public/a" {
		t.Errorf("anonymous GET once the block is gone: %q %v", got, err)
	}
	if _, err := a.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	_, err = get(anon, "pol", "public/a")
	mustCode(t, "anonymous GET once the policy is deleted", err, "AccessDenied")

	// A bucket made again under the name has no policy.
	for _, k := range []string{"public/a", "public/secret", "private/b", "home/b/x", "ip/x"} {
		if _, err := a.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("pol"), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := setPolicy(a, public); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pol")}); err != nil {
		t.Fatal(err)
	}
	_, err = b.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: aws.String("pol")})
	mustCode(t, "policy of a bucket made again", err, "NoSuchBucketPolicy")
	if err := put(t, b, "pol", "public/new", "new", ""); err != nil {
		t.Fatal(err)
	}
	_, err = get(anon, "pol", "public/new")
	mustCode(t, "anonymous GET in a bucket made again", err, "AccessDenied")
	if !strings.HasPrefix(idb.DisplayName, "key-") {
		t.Errorf("display name of a key's identity: %q", idb.DisplayName)
	}
}
