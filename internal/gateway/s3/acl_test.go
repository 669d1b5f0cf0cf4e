package s3_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// anonClient is an aws-sdk-go-v2 client that signs nothing.
func (e *env) anonClient() *awss3.Client {
	return awss3.New(awss3.Options{BaseEndpoint: aws.String(e.srv.URL), Region: "us-east-1", UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}})
}

// anon sends an unsigned request.
func (e *env) anon(t *testing.T, method, pathQuery string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+pathQuery, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func put(t *testing.T, c *awss3.Client, bucket, key, body string, acl types.ObjectCannedACL) error {
	t.Helper()
	_, err := c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body), ACL: acl})
	return err
}

func get(c *awss3.Client, bucket, key string) (string, error) {
	out, err := c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func mustCode(t *testing.T, what string, err error, want string) {
	t.Helper()
	if got := code(err); got != want {
		t.Errorf("%s: %q (%v), want %q", what, got, err, want)
	}
}

// TestAnonymousRefusedByDefault sends every class of operation unsigned
// to a bucket with no ACL and no policy: each is 403 AccessDenied (a
// missing bucket 404), and nothing changes.
func TestAnonymousRefusedByDefault(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	a := e.client(e.admin)
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("closed")}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, a, "closed", "obj", "secret", ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, pq, body string }{
		{"GET", "/", ""},
		{"PUT", "/newbucket", ""},
		{"HEAD", "/closed", ""},
		{"GET", "/closed", ""},
		{"GET", "/closed?list-type=2", ""},
		{"GET", "/closed?versions", ""},
		{"GET", "/closed?versioning", ""},
		{"GET", "/closed?uploads", ""},
		{"GET", "/closed?location", ""},
		{"GET", "/closed?cors", ""},
		{"GET", "/closed?tagging", ""},
		{"PUT", "/closed?tagging", "<Tagging><TagSet/></Tagging>"},
		{"GET", "/closed?acl", ""},
		{"PUT", "/closed?acl", ""},
		{"GET", "/closed?policy", ""},
		{"PUT", "/closed?policy", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::closed/*"}]}`},
		{"DELETE", "/closed?policy", ""},
		{"GET", "/closed?policyStatus", ""},
		{"GET", "/closed?publicAccessBlock", ""},
		{"PUT", "/closed?publicAccessBlock", "<PublicAccessBlockConfiguration/>"},
		{"POST", "/closed?delete", "<Delete><Object><Key>obj</Key></Object></Delete>"},
		{"DELETE", "/closed", ""},
		{"GET", "/closed/obj", ""},
		{"HEAD", "/closed/obj", ""},
		{"GET", "/closed/missing", ""},
		{"GET", "/closed/obj?attributes", ""},
		{"GET", "/closed/obj?tagging", ""},
		{"GET", "/closed/obj?acl", ""},
		{"PUT", "/closed/obj?acl", ""},
		{"PUT", "/closed/obj", "overwritten"},
		{"PUT", "/closed/new", "new"},
		{"DELETE", "/closed/obj", ""},
		{"POST", "/closed/obj?uploads", ""},
		{"GET", "/closed/obj?uploadId=x", ""},
		{"DELETE", "/closed/obj?uploadId=x", ""},
		{"PUT", "/closed/obj?uploadId=x&partNumber=1", "part"},
		{"POST", "/closed/obj?uploadId=x", "<CompleteMultipartUpload/>"},
		{"PUT", "/closed/obj?tagging", "<Tagging><TagSet/></Tagging>"},
		{"DELETE", "/closed/obj?tagging", ""},
		{"PUT", "/closed?cors", "<CORSConfiguration/>"},
		{"DELETE", "/closed?cors", ""},
		{"DELETE", "/closed?tagging", ""},
		{"DELETE", "/closed?publicAccessBlock", ""},
		{"GET", "/closed?ownershipControls", ""},
		{"PUT", "/closed?ownershipControls", "<OwnershipControls><Rule><ObjectOwnership>ObjectWriter</ObjectOwnership></Rule></OwnershipControls>"},
	} {
		hdr := []string{}
		if c.pq == "/closed/obj?acl" && c.method == "PUT" || c.pq == "/closed?acl" && c.method == "PUT" {
			hdr = []string{"x-amz-acl", "public-read"}
		}
		resp, b := e.anon(t, c.method, c.pq, []byte(c.body), hdr...)
		if resp.StatusCode != 403 || c.method != "HEAD" && !strings.Contains(string(b), "<Code>AccessDenied</Code>") {
			t.Errorf("anonymous %s %s: %d %s, want 403 AccessDenied", c.method, c.pq, resp.StatusCode, b)
		}
	}
	// Copying from the closed bucket into one that takes anonymous
	// writes reads nothing.
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("dropbox"), ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
		t.Fatal(err)
	}
	resp, b := e.anon(t, "PUT", "/dropbox/stolen", nil, "x-amz-copy-source", "closed/obj")
	if resp.StatusCode != 403 {
		t.Errorf("anonymous copy out of a closed bucket: %d %s", resp.StatusCode, b)
	}
	// Where the bucket's ACL grants AllUsers WRITE, an anonymous PUT is
	// stored; an aws-chunked one is refused (nothing signs its framing).
	resp, b = e.anon(t, "PUT", "/dropbox/drop", []byte("dropped"))
	if resp.StatusCode != 200 {
		t.Errorf("anonymous PUT into a public-read-write bucket: %d %s", resp.StatusCode, b)
	}
	if got, err := get(a, "dropbox", "drop"); err != nil || got != "dropped" {
		t.Errorf("the anonymous PUT's object: %q %v", got, err)
	}
	resp, b = e.anon(t, "PUT", "/dropbox/chunked", []byte("7\r\ndropped\r\n0\r\n\r\n"),
		"x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding", "aws-chunked", "x-amz-decoded-content-length", "7")
	if resp.StatusCode != 400 || !strings.Contains(string(b), "InvalidRequest") {
		t.Errorf("anonymous aws-chunked PUT: %d %s", resp.StatusCode, b)
	}
	resp, b = e.anon(t, "GET", "/nosuchbucket/k", nil)
	if resp.StatusCode != 404 || !strings.Contains(string(b), "NoSuchBucket") {
		t.Errorf("anonymous GET of a missing bucket: %d %s", resp.StatusCode, b)
	}
	if got, err := get(a, "closed", "obj"); err != nil || got != "secret" {
		t.Fatalf("object after the anonymous requests: %q %v", got, err)
	}
	l, err := a.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("closed")})
	if err != nil || len(l.Contents) != 1 {
		t.Fatalf("listing after the anonymous requests: %v %+v", err, l)
	}
	// The SDK's anonymous client gets the same.
	_, err = get(e.anonClient(), "closed", "obj")
	mustCode(t, "SDK anonymous GetObject", err, "AccessDenied")
}

// TestACLs drives canned ACLs, grants by header and by document, Get/Put
// Bucket and Object ACL, owners in listings, and Block Public Access of
// ACLs, with two keys' clients and an anonymous one.
func TestACLs(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	ka, kb := e.key(t, false), e.key(t, false)
	a, b, anon := e.client(ka), e.client(kb), e.anonClient()
	ida, idb := gateway.KeyIdentity(ka), gateway.KeyIdentity(kb)
	if ida.ID == idb.ID || strings.Contains(ida.ID, ka.ID) || len(ida.ID) != 64 {
		t.Fatalf("identities: %+v %+v", ida, idb)
	}

	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("shared"), ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, a, "shared", "private", "p", ""); err != nil {
		t.Fatal(err)
	}
	if err := put(t, a, "shared", "public", "hello", types.ObjectCannedACLPublicRead); err != nil {
		t.Fatal(err)
	}
	// Owners are identities, not key IDs.
	lb, err := a.ListBuckets(ctx, &awss3.ListBucketsInput{})
	if err != nil || *lb.Owner.ID != ida.ID || *lb.Owner.DisplayName != ida.DisplayName {
		t.Fatalf("ListBuckets owner: %v %+v, want %+v", err, lb.Owner, ida)
	}
	lo, err := a.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("shared"), FetchOwner: aws.Bool(true)})
	if err != nil || len(lo.Contents) != 2 || *lo.Contents[0].Owner.ID != ida.ID {
		t.Fatalf("ListObjectsV2 fetch-owner: %v %+v", err, lo)
	}
	lv, err := a.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("shared")})
	if err != nil || len(lv.Versions) != 2 || *lv.Versions[0].Owner.ID != ida.ID {
		t.Fatalf("ListObjectVersions owner: %v %+v", err, lv)
	}
	ga, err := a.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String("shared")})
	if err != nil || *ga.Owner.ID != ida.ID || len(ga.Grants) != 2 || ga.Grants[1].Grantee.Type != types.TypeGroup ||
		*ga.Grants[1].Grantee.URI != "http://acs.amazonaws.com/groups/global/AllUsers" || ga.Grants[1].Permission != types.PermissionRead {
		t.Fatalf("GetBucketAcl of public-read: %v %+v", err, ga)
	}

	// public-read bucket: anyone lists; objects follow their own ACLs.
	if _, err := anon.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("shared")}); err != nil {
		t.Errorf("anonymous list of a public-read bucket: %v", err)
	}
	if got, err := get(anon, "shared", "public"); err != nil || got != "hello" {
		t.Errorf("anonymous GET of a public-read object: %q %v", got, err)
	}
	if got, err := get(b, "shared", "public"); err != nil || got != "hello" {
		t.Errorf("B's GET of a public-read object: %q %v", got, err)
	}
	_, err = get(anon, "shared", "private")
	mustCode(t, "anonymous GET of a private object", err, "AccessDenied")
	_, err = get(anon, "shared", "missing")
	mustCode(t, "anonymous GET of a missing key in a listable bucket", err, "NoSuchKey")
	mustCode(t, "anonymous PUT into a public-read bucket", put(t, anon, "shared", "x", "x", ""), "AccessDenied")
	mustCode(t, "B's PUT into a public-read bucket", put(t, b, "shared", "x", "x", ""), "AccessDenied")

	// A non-owner changes no ACL.
	_, err = b.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String("shared"), ACL: types.BucketCannedACLPublicReadWrite})
	mustCode(t, "B's PutBucketAcl", err, "AccessDenied")
	_, err = b.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String("shared")})
	mustCode(t, "B's GetBucketAcl", err, "AccessDenied")
	_, err = b.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("private"), ACL: types.ObjectCannedACLPublicRead})
	mustCode(t, "B's PutObjectAcl", err, "AccessDenied")
	_, err = anon.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("public"), ACL: types.ObjectCannedACLPublicReadWrite})
	mustCode(t, "anonymous PutObjectAcl", err, "AccessDenied")

	// Grants by header: B may read the bucket's ACL and write objects.
	_, err = a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String("shared"),
		GrantWrite: aws.String(`id="` + idb.ID + `"`), GrantReadACP: aws.String("id=" + idb.ID), GrantFullControl: aws.String("id=" + ida.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String("shared")}); err != nil {
		t.Errorf("B's GetBucketAcl with READ_ACP: %v", err)
	}
	if err := put(t, b, "shared", "by-b", "b wrote", types.ObjectCannedACLBucketOwnerFullControl); err != nil {
		t.Fatalf("B's PUT with WRITE: %v", err)
	}
	oa, err := b.GetObjectAcl(ctx, &awss3.GetObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("by-b")})
	if err != nil || *oa.Owner.ID != idb.ID || len(oa.Grants) != 2 || *oa.Grants[1].Grantee.ID != ida.ID || oa.Grants[1].Permission != types.PermissionFullControl {
		t.Fatalf("GetObjectAcl of B's bucket-owner-full-control object: %v %+v", err, oa)
	}
	_, err = anon.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("shared")})
	mustCode(t, "anonymous list after the public grant went", err, "AccessDenied")
	lo, err = a.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("shared"), Prefix: aws.String("by-b"), FetchOwner: aws.Bool(true)})
	if err != nil || len(lo.Contents) != 1 || *lo.Contents[0].Owner.ID != idb.ID {
		t.Fatalf("owner of B's object in a listing: %v %+v", err, lo)
	}

	// Grants by document.
	_, err = a.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("private"),
		AccessControlPolicy: &types.AccessControlPolicy{Owner: &types.Owner{ID: aws.String(ida.ID)}, Grants: []types.Grant{
			{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(ida.ID)}, Permission: types.PermissionFullControl},
			{Grantee: &types.Grantee{Type: types.TypeGroup, URI: aws.String("http://acs.amazonaws.com/groups/global/AuthenticatedUsers")}, Permission: types.PermissionRead},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := get(b, "shared", "private"); err != nil || got != "p" {
		t.Errorf("B's GET of an authenticated-read object: %q %v", got, err)
	}
	_, err = get(anon, "shared", "private")
	mustCode(t, "anonymous GET of an authenticated-read object", err, "AccessDenied")
	_, err = a.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("private"),
		AccessControlPolicy: &types.AccessControlPolicy{Owner: &types.Owner{ID: aws.String(idb.ID)}, Grants: []types.Grant{}}})
	mustCode(t, "an ACL document naming another owner", err, "AccessDenied")
	for what, body := range map[string]string{
		"not XML":            "<AccessControlPolicy",
		"unknown permission": `<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>` + idb.ID + `</ID></Grantee><Permission>ALL</Permission></Grant></AccessControlList></AccessControlPolicy>`,
	} {
		resp, rb := e.do(t, ka, "PUT", "/shared/private?acl", []byte(body))
		if resp.StatusCode != 400 || !strings.Contains(string(rb), "MalformedACLError") {
			t.Errorf("PutObjectAcl %s: %d %s", what, resp.StatusCode, rb)
		}
	}
	resp, rb := e.do(t, ka, "PUT", "/shared?acl", nil, "x-amz-grant-read", "uri=http://acs.amazonaws.com/groups/s3/LogDelivery")
	if resp.StatusCode != 400 || !strings.Contains(string(rb), "InvalidArgument") {
		t.Errorf("a grant to an unknown group: %d %s", resp.StatusCode, rb)
	}
	resp, rb = e.do(t, ka, "PUT", "/shared?acl", nil, "x-amz-grant-read", "id="+strings.Repeat("0", 64))
	if resp.StatusCode != 400 || !strings.Contains(string(rb), "InvalidArgument") {
		t.Errorf("a grant to an identity the gateway has not: %d %s", resp.StatusCode, rb)
	}
	resp, rb = e.do(t, ka, "PUT", "/shared?acl", nil)
	if resp.StatusCode != 400 || !strings.Contains(string(rb), "MissingSecurityHeader") {
		t.Errorf("PutBucketAcl of nothing: %d %s", resp.StatusCode, rb)
	}
	resp, rb = e.do(t, ka, "PUT", "/shared?acl", []byte("<AccessControlPolicy/>"), "x-amz-acl", "private")
	if resp.StatusCode != 400 || !strings.Contains(string(rb), "UnexpectedContent") {
		t.Errorf("PutBucketAcl with headers and a body: %d %s", resp.StatusCode, rb)
	}
	resp, rb = e.do(t, ka, "PUT", "/shared?publicAccessBlock", []byte("<Block>"))
	if resp.StatusCode != 400 || !strings.Contains(string(rb), "MalformedXML") {
		t.Errorf("PutPublicAccessBlock of a malformed document: %d %s", resp.StatusCode, rb)
	}

	// Canned ACLs on CopyObject and CreateMultipartUpload.
	if _, err := a.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("shared"), Key: aws.String("copy"),
		CopySource: aws.String("shared/private"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "shared", "copy"); err != nil || got != "p" {
		t.Errorf("anonymous GET of a public-read copy: %q %v", got, err)
	}
	mu, err := a.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("shared"), Key: aws.String("mp"), ACL: types.ObjectCannedACLPublicRead})
	if err != nil {
		t.Fatal(err)
	}
	part, err := a.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("shared"), Key: aws.String("mp"), UploadId: mu.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("parts")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String("shared"), Key: aws.String("mp"), UploadId: mu.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "shared", "mp"); err != nil || got != "parts" {
		t.Errorf("anonymous GET of a public-read multipart object: %q %v", got, err)
	}

	// Block Public Access of ACLs.
	_, err = a.GetPublicAccessBlock(ctx, &awss3.GetPublicAccessBlockInput{Bucket: aws.String("shared")})
	mustCode(t, "GetPublicAccessBlock of none", err, "NoSuchPublicAccessBlockConfiguration")
	_, err = b.PutPublicAccessBlock(ctx, &awss3.PutPublicAccessBlockInput{Bucket: aws.String("shared"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{}})
	mustCode(t, "B's PutPublicAccessBlock", err, "AccessDenied")
	if _, err := a.PutPublicAccessBlock(ctx, &awss3.PutPublicAccessBlockInput{Bucket: aws.String("shared"),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true), IgnorePublicAcls: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	pab, err := a.GetPublicAccessBlock(ctx, &awss3.GetPublicAccessBlockInput{Bucket: aws.String("shared")})
	if err != nil || !*pab.PublicAccessBlockConfiguration.BlockPublicAcls || *pab.PublicAccessBlockConfiguration.BlockPublicPolicy {
		t.Fatalf("GetPublicAccessBlock: %v %+v", err, pab)
	}
	mustCode(t, "public-read PUT under BlockPublicAcls", put(t, a, "shared", "x", "x", types.ObjectCannedACLPublicRead), "AccessDenied")
	_, err = a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String("shared"), ACL: types.BucketCannedACLPublicRead})
	mustCode(t, "public-read PutBucketAcl under BlockPublicAcls", err, "AccessDenied")
	_, err = get(anon, "shared", "public")
	mustCode(t, "anonymous GET of a public-read object under IgnorePublicAcls", err, "AccessDenied")
	if _, err := a.DeletePublicAccessBlock(ctx, &awss3.DeletePublicAccessBlockInput{Bucket: aws.String("shared")}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "shared", "public"); err != nil || got != "hello" {
		t.Errorf("anonymous GET once the block is gone: %q %v", got, err)
	}
	// Back to private.
	if _, err := a.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("shared"), Key: aws.String("public"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	_, err = get(anon, "shared", "public")
	mustCode(t, "anonymous GET once private again", err, "AccessDenied")
}

// TestAccountIdentity: an account's key acts as the account, by name.
func TestAccountIdentity(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	u, k, err := e.gw.CreateUser(ctx, gateway.NewUser{Name: "alice", Password: "correct horse"})
	if err != nil {
		t.Fatal(err)
	}
	c := e.client(k)
	lb, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{})
	if err != nil || *lb.Owner.ID != "alice" || *lb.Owner.DisplayName != "alice" {
		t.Fatalf("ListBuckets of an account's key: %v %+v", err, lb.Owner)
	}
	ga, err := c.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: aws.String(u.Home)})
	if err != nil || *ga.Owner.ID != "alice" {
		t.Fatalf("GetBucketAcl of the home bucket: %v %+v", err, ga)
	}
	// Another key is granted by the account's name.
	kb := e.key(t, false)
	if _, err := c.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String(u.Home), GrantRead: aws.String("id=" + gateway.KeyIdentity(kb).ID)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client(kb).ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(u.Home)}); err != nil {
		t.Errorf("list with a READ grant by ID: %v", err)
	}
	resp, b := e.do(t, k, "GET", "/"+u.Home+"?location", nil, "x-amz-expected-bucket-owner", "alice")
	if resp.StatusCode != 200 {
		t.Errorf("x-amz-expected-bucket-owner by identity: %d %s", resp.StatusCode, b)
	}
}

// TestGatewayBlocksPublicAccess: a gateway-wide block refuses public
// ACLs and policies on every bucket.
func TestGatewayBlocksPublicAccess(t *testing.T) {
	e := newEnvWith(t, testgrid.Options{Nodes: 10}, s3.Options{BlockPublicAccess: s3.PublicAccessBlock{BlockPublicAcls: true, BlockPublicPolicy: true}})
	ctx := context.Background()
	ka := e.key(t, false)
	a := e.client(ka)
	_, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pub"), ACL: types.BucketCannedACLPublicRead})
	mustCode(t, "public-read CreateBucket", err, "AccessDenied")
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pub")}); err != nil {
		t.Fatal(err)
	}
	_, err = a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String("pub"),
		Policy: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::pub/*"}]}`)})
	mustCode(t, "public policy", err, "AccessDenied")
	// A policy for one identity is not public.
	if _, err := a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String("pub"),
		Policy: aws.String(`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::` + gateway.KeyIdentity(e.admin).ID + `:root"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::pub/*"}]}`)}); err != nil {
		t.Errorf("a policy for one identity: %v", err)
	}
	mustCode(t, "public-read PUT", put(t, a, "pub", "k", "v", types.ObjectCannedACLPublicRead), "AccessDenied")
}

// TestObjectOwnership: BucketOwnerEnforced turns ACLs off (refused when
// set, ignored when there, every object the bucket owner's);
// BucketOwnerPreferred gives the bucket owner the objects written with
// bucket-owner-full-control.
func TestObjectOwnership(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	ka, kb := e.key(t, false), e.key(t, false)
	a, b, anon := e.client(ka), e.client(kb), e.anonClient()
	ida, idb := gateway.KeyIdentity(ka), gateway.KeyIdentity(kb)

	_, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("enf"), ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced,
		ACL: types.BucketCannedACLPublicRead})
	mustCode(t, "CreateBucket enforced with a public ACL", err, "InvalidBucketAclWithObjectOwnership")
	resp, body := e.do(t, ka, "PUT", "/enf", nil, "x-amz-object-ownership", "Whoever")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Errorf("an unknown x-amz-object-ownership: %d %s", resp.StatusCode, body)
	}
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("enf"), ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}); err != nil {
		t.Fatal(err)
	}
	oc, err := a.GetBucketOwnershipControls(ctx, &awss3.GetBucketOwnershipControlsInput{Bucket: aws.String("enf")})
	if err != nil || len(oc.OwnershipControls.Rules) != 1 || oc.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipBucketOwnerEnforced {
		t.Fatalf("GetBucketOwnershipControls: %v %+v", err, oc)
	}
	_, err = b.GetBucketOwnershipControls(ctx, &awss3.GetBucketOwnershipControlsInput{Bucket: aws.String("enf")})
	mustCode(t, "B's GetBucketOwnershipControls", err, "AccessDenied")
	mustCode(t, "public-read PUT under BucketOwnerEnforced", put(t, a, "enf", "k", "v", types.ObjectCannedACLPublicRead), "AccessControlListNotSupported")
	if err := put(t, a, "enf", "k", "v", types.ObjectCannedACLBucketOwnerFullControl); err != nil {
		t.Errorf("bucket-owner-full-control PUT under BucketOwnerEnforced: %v", err)
	}
	_, err = a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String("enf"), GrantRead: aws.String("id=" + idb.ID)})
	mustCode(t, "PutBucketAcl under BucketOwnerEnforced", err, "AccessControlListNotSupported")

	// An ACL set before enforcing counts for nothing after.
	if _, err := a.DeleteBucketOwnershipControls(ctx, &awss3.DeleteBucketOwnershipControlsInput{Bucket: aws.String("enf")}); err != nil {
		t.Fatal(err)
	}
	_, err = a.GetBucketOwnershipControls(ctx, &awss3.GetBucketOwnershipControlsInput{Bucket: aws.String("enf")})
	mustCode(t, "GetBucketOwnershipControls of none", err, "OwnershipControlsNotFoundError")
	if _, err := a.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: aws.String("enf"), Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(anon, "enf", "k"); err != nil || got != "v" {
		t.Fatalf("anonymous GET of a public-read object: %q %v", got, err)
	}
	if _, err := a.PutBucketOwnershipControls(ctx, &awss3.PutBucketOwnershipControlsInput{Bucket: aws.String("enf"),
		OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}}}}); err != nil {
		t.Fatal(err)
	}
	_, err = get(anon, "enf", "k")
	mustCode(t, "anonymous GET of a public-read object under BucketOwnerEnforced", err, "AccessDenied")
	oa, err := a.GetObjectAcl(ctx, &awss3.GetObjectAclInput{Bucket: aws.String("enf"), Key: aws.String("k")})
	if err != nil || len(oa.Grants) != 1 || *oa.Owner.ID != ida.ID {
		t.Errorf("GetObjectAcl under BucketOwnerEnforced: %v %+v", err, oa)
	}
	resp, body = e.do(t, ka, "PUT", "/enf?ownershipControls", []byte("<OwnershipControls><Rule><ObjectOwnership>Mine</ObjectOwnership></Rule></OwnershipControls>"))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Errorf("PutBucketOwnershipControls of an unknown setting: %d %s", resp.StatusCode, body)
	}

	// BucketOwnerPreferred: B writes into A's bucket.
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pref"), ObjectOwnership: types.ObjectOwnershipBucketOwnerPreferred}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: aws.String("pref"), GrantWrite: aws.String("id=" + idb.ID), GrantFullControl: aws.String("id=" + ida.ID)}); err != nil {
		t.Fatal(err)
	}
	if err := put(t, b, "pref", "given", "x", types.ObjectCannedACLBucketOwnerFullControl); err != nil {
		t.Fatal(err)
	}
	if err := put(t, b, "pref", "kept", "x", ""); err != nil {
		t.Fatal(err)
	}
	l, err := a.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("pref"), FetchOwner: aws.Bool(true)})
	if err != nil || len(l.Contents) != 2 || *l.Contents[0].Owner.ID != ida.ID || *l.Contents[1].Owner.ID != idb.ID {
		t.Fatalf("owners under BucketOwnerPreferred: %v %+v", err, l)
	}
}

// TestPresignedACL: a presigned URL's ACL, as the SDK signs it (a
// signed x-amz-acl header) and in its query (as other signers put it),
// is the object's.
func TestPresignedACL(t *testing.T) {
	e := newEnv(t, 10)
	ctx := context.Background()
	a := e.client(e.admin)
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pre")}); err != nil {
		t.Fatal(err)
	}
	send := func(u string, hdr http.Header) {
		t.Helper()
		req, err := http.NewRequest("PUT", u, strings.NewReader("presigned"))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range hdr {
			if !strings.EqualFold(k, "host") {
				req.Header[k] = vs
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("presigned PUT %s: %d %s", u, resp.StatusCode, b)
		}
	}
	ps, err := awss3.NewPresignClient(a).PresignPutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("pre"), Key: aws.String("sdk"), ACL: types.ObjectCannedACLPublicRead})
	if err != nil {
		t.Fatal(err)
	}
	send(ps.URL, ps.SignedHeader)
	req, err := http.NewRequest("PUT", e.srv.URL+"/pre/query?x-amz-acl=public-read&X-Amz-Expires=900", nil)
	if err != nil {
		t.Fatal(err)
	}
	creds := aws.Credentials{AccessKeyID: e.admin.ID, SecretAccessKey: e.admin.Secret}
	u, hdr, err := v4.NewSigner().PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now(), noDoubleEscape)
	if err != nil {
		t.Fatal(err)
	}
	send(u, hdr)
	for _, k := range []string{"sdk", "query"} {
		if got, err := get(e.anonClient(), "pre", k); err != nil || got != "presigned" {
			t.Errorf("anonymous GET of %s, put public-read by a presigned URL: %q %v", k, got, err)
		}
	}
	// A query ACL on an operation that takes none is refused as a
	// header is.
	req, _ = http.NewRequest("GET", e.srv.URL+"/pre/sdk?x-amz-acl=public-read&X-Amz-Expires=900", nil)
	u, hdr, err = v4.NewSigner().PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now(), noDoubleEscape)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("presigned GET with x-amz-acl=public-read: %d", resp.StatusCode)
	}
}
