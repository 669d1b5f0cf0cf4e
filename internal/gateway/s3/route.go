package s3

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Routing is a whitelist: a request's target (the service, a bucket or an
// object), its method and the one query key that selects an operation
// (the subresource: ?uploads, ?delete, ?location; none for the plain
// operations) name a handler, or the request gets 501 NotImplemented.
// Query keys that only qualify an operation (prefix, uploadId, presigned
// X-Amz-* ...) are not subresources. So ?torrent, ?restore and the rest
// are refused, never mistaken for a GET, a listing or an overwrite.

type target int

const (
	onService target = iota
	onBucket
	onObject
)

// op is an operation the gateway implements.
type op struct {
	name string
	perm gateway.Perm // needed on the bucket; None: open to every key
	// upload: the operation takes ?uploadId (true), refuses it (false).
	upload bool
	serve  func(*Server, *request)
}

type opKey struct {
	t      target
	method string
	sub    string // subresource, "" for none
	upload bool   // ?uploadId given
	copy   bool   // x-amz-copy-source given
}

var ops = map[opKey]op{
	{onService, "GET", "", false, false}: {"ListBuckets", gateway.None, false, (*Server).listBuckets},

	{onBucket, "PUT", "", false, false}:             {"CreateBucket", gateway.None, false, (*Server).createBucket},
	{onBucket, "HEAD", "", false, false}:            {"HeadBucket", gateway.Read, false, (*Server).headBucket},
	{onBucket, "DELETE", "", false, false}:          {"DeleteBucket", gateway.Owner, false, (*Server).deleteBucket},
	{onBucket, "GET", "", false, false}:             {"ListObjects", gateway.Read, false, (*Server).listObjects},
	{onBucket, "GET", "location", false, false}:     {"GetBucketLocation", gateway.Read, false, (*Server).location},
	{onBucket, "GET", "uploads", false, false}:      {"ListMultipartUploads", gateway.Read, false, (*Server).listUploads},
	{onBucket, "POST", "delete", false, false}:      {"DeleteObjects", gateway.Write, false, (*Server).deleteObjects},
	{onBucket, "PUT", "cors", false, false}:         {"PutBucketCors", gateway.Owner, false, (*Server).putCORS},
	{onBucket, "GET", "cors", false, false}:         {"GetBucketCors", gateway.Read, false, (*Server).getCORS},
	{onBucket, "DELETE", "cors", false, false}:      {"DeleteBucketCors", gateway.Owner, false, (*Server).deleteCORS},
	{onBucket, "PUT", "tagging", false, false}:      {"PutBucketTagging", gateway.Owner, false, (*Server).putBucketTagging},
	{onBucket, "GET", "tagging", false, false}:      {"GetBucketTagging", gateway.Read, false, (*Server).getBucketTagging},
	{onBucket, "DELETE", "tagging", false, false}:   {"DeleteBucketTagging", gateway.Owner, false, (*Server).deleteBucketTagging},
	{onBucket, "PUT", "lifecycle", false, false}:    {"PutBucketLifecycleConfiguration", gateway.Owner, false, (*Server).putLifecycle},
	{onBucket, "GET", "lifecycle", false, false}:    {"GetBucketLifecycleConfiguration", gateway.Read, false, (*Server).getLifecycle},
	{onBucket, "DELETE", "lifecycle", false, false}: {"DeleteBucketLifecycle", gateway.Owner, false, (*Server).deleteLifecycle},
	{onBucket, "GET", "versions", false, false}:     {"ListObjectVersions", gateway.Read, false, (*Server).listVersions},
	{onBucket, "GET", "versioning", false, false}:   {"GetBucketVersioning", gateway.Read, false, (*Server).getVersioning},
	{onBucket, "PUT", "versioning", false, false}:   {"PutBucketVersioning", gateway.Owner, false, (*Server).putVersioning},

	{onObject, "PUT", "", false, false}:           {"PutObject", gateway.Write, false, (*Server).putObject},
	{onObject, "PUT", "", false, true}:            {"CopyObject", gateway.Write, false, (*Server).copyObject},
	{onObject, "GET", "", false, false}:           {"GetObject", gateway.Read, false, (*Server).getObject},
	{onObject, "HEAD", "", false, false}:          {"HeadObject", gateway.Read, false, (*Server).getObject},
	{onObject, "DELETE", "", false, false}:        {"DeleteObject", gateway.Write, false, (*Server).deleteObject},
	{onObject, "PUT", "tagging", false, false}:    {"PutObjectTagging", gateway.Write, false, (*Server).putObjectTagging},
	{onObject, "GET", "tagging", false, false}:    {"GetObjectTagging", gateway.Read, false, (*Server).getObjectTagging},
	{onObject, "DELETE", "tagging", false, false}: {"DeleteObjectTagging", gateway.Write, false, (*Server).deleteObjectTagging},
	{onObject, "GET", "attributes", false, false}: {"GetObjectAttributes", gateway.Read, false, (*Server).getAttributes},
	{onObject, "POST", "uploads", false, false}:   {"CreateMultipartUpload", gateway.Write, false, (*Server).createUpload},
	{onObject, "PUT", "", true, false}:            {"UploadPart", gateway.Write, true, (*Server).uploadPart},
	{onObject, "PUT", "", true, true}:             {"UploadPartCopy", gateway.Write, true, (*Server).uploadPartCopy},
	{onObject, "GET", "", true, false}:            {"ListParts", gateway.Read, true, (*Server).listParts},
	{onObject, "POST", "", true, false}:           {"CompleteMultipartUpload", gateway.Write, true, (*Server).completeUpload},
	{onObject, "DELETE", "", true, false}:         {"AbortMultipartUpload", gateway.Write, true, (*Server).abortUpload},
}

// params are query keys that qualify an operation rather than select
// one. Keys starting with x-amz- (presigned URLs) and response- (GET
// overrides) are parameters too, and so are a Signature V2 presigned
// URL's AWSAccessKeyId, Expires and Signature.
var params = map[string]bool{
	"AWSAccessKeyId": true, "Expires": true, "Signature": true,
	"prefix": true, "delimiter": true, "max-keys": true, "marker": true, "encoding-type": true,
	"list-type": true, "continuation-token": true, "start-after": true, "fetch-owner": true,
	"key-marker": true, "upload-id-marker": true, "version-id-marker": true, "max-uploads": true,
	"part-number-marker": true, "max-parts": true, "uploadId": true, "partNumber": true,
	"versionId": true, "x-id": true, "max-buckets": true, "bucket-region": true,
}

// isParam reports whether query key k is a parameter, not a subresource.
func isParam(k string) bool {
	lk := strings.ToLower(k)
	return params[k] || strings.HasPrefix(lk, "x-amz-") || strings.HasPrefix(lk, "response-")
}

// resolve finds the operation of a request; ok is false for one the
// gateway does not implement.
func resolve(r *http.Request, bucket, object string) (op, bool) {
	query := r.URL.Query()
	k := opKey{t: onObject, method: r.Method, upload: query.Has("uploadId"), copy: r.Header.Get("x-amz-copy-source") != ""}
	switch {
	case bucket == "":
		k.t = onService
	case object == "":
		k.t = onBucket
	}
	for name := range query {
		if isParam(name) {
			continue
		}
		if k.sub != "" {
			return op{}, false // two subresources: none is an operation here
		}
		k.sub = name
	}
	// ?partNumber without ?uploadId reads one part of an object: GET and
	// HEAD only (getObject); on anything else it is not a parameter.
	if k.t == onObject && !k.upload && query.Has("partNumber") && k.method != "GET" && k.method != "HEAD" {
		return op{}, false
	}
	o, ok := ops[k]
	return o, ok
}

func (s *Server) route(q *request) {
	o, ok := resolve(q.r, q.bucket, q.object)
	if !ok {
		q.fail(errNotImpl)
		return
	}
	q.op = o.name
	if err := checkHeaders(q.r, o.name); err != nil {
		q.fail(err)
		return
	}
	if err := checkVersion(q.r.URL.Query(), o.name); err != nil {
		q.fail(err)
		return
	}
	if !s.authorize(q, o) { // access.go
		return
	}
	if !s.expectedOwner(q) {
		return
	}
	o.serve(s, q)
}

// versionOps are the operations that take ?versionId.
var versionOps = map[string]bool{"GetObject": true, "HeadObject": true, "DeleteObject": true, "GetObjectTagging": true,
	"PutObjectTagging": true, "DeleteObjectTagging": true, "GetObjectAttributes": true}

// checkVersion refuses a versionId the gateway cannot have made
// (400 InvalidArgument, as S3), and one on an operation that takes none.
func checkVersion(v url.Values, opName string) error {
	if !v.Has("versionId") {
		return nil
	}
	if !versionOps[opName] {
		return s3err("InvalidArgument", 400, opName+" does not take a versionId.")
	}
	if gateway.CheckVersionID(v.Get("versionId")) != nil {
		return errBadVersion
	}
	return nil
}

// allowed checks the key's permission on the bucket. A bucket that does
// not exist is NoSuchBucket, as S3 answers, whatever the key.
func (s *Server) allowed(q *request, p gateway.Perm) bool {
	return s.allowedOn(q, q.bucket, p)
}

// allowedOn is allowed for another bucket than the request's (a copy's
// source).
func (s *Server) allowedOn(q *request, bucket string, p gateway.Perm) bool {
	if q.key.Allowed(bucket, p) {
		return true
	}
	if _, err := s.gw.Owner(q.r.Context(), bucket); err != nil {
		q.fail(errNoBucket)
		return false
	}
	q.fail(errDenied)
	return false
}

// expectedOwner checks x-amz-expected-bucket-owner (the owner's
// identity ID, or the access key ID that made the bucket) against the
// bucket's owner.
func (s *Server) expectedOwner(q *request) bool {
	want := q.r.Header.Get("x-amz-expected-bucket-owner")
	if want == "" || q.bucket == "" {
		return true
	}
	owner, err := s.gw.Owner(q.r.Context(), q.bucket)
	if err != nil {
		return true
	}
	if id, err := s.gw.BucketOwner(q.r.Context(), q.bucket); err == nil && id.ID == want {
		return true
	}
	if owner != want {
		q.fail(errDenied)
		return false
	}
	return true
}

// writeOps are the operations that store an object's bytes or metadata.
var writeOps = map[string]bool{"PutObject": true, "PostObject": true, "CopyObject": true, "CreateMultipartUpload": true, "UploadPart": true, "UploadPartCopy": true, "CompleteMultipartUpload": true}

// conditionalOps are the writes that take If-None-Match: * and If-Match.
var conditionalOps = map[string]bool{"PutObject": true, "PostObject": true, "CompleteMultipartUpload": true}

// customerKeyOps are the operations that take a customer key
// (x-amz-server-side-encryption-customer-*: SSE-C, sse.go), and
// copySourceKeyOps those that take the copy source's.
var (
	customerKeyOps = map[string]bool{"PutObject": true, "GetObject": true, "HeadObject": true, "CopyObject": true,
		"CreateMultipartUpload": true, "UploadPart": true, "UploadPartCopy": true, "CompleteMultipartUpload": true,
		"ListParts": true, "GetObjectAttributes": true}
	copySourceKeyOps = map[string]bool{"CopyObject": true, "UploadPartCopy": true}
)

// checksumParams are x-amz-checksum-* headers that name no checksum.
var checksumParams = map[string]bool{"x-amz-checksum-mode": true, "x-amz-checksum-type": true, "x-amz-checksum-algorithm": true}

// knownChecksums are the checksum algorithms the gateway computes.
const knownChecksums = "CRC32, CRC32C, CRC64NVME, SHA1, SHA256, SHA512, MD5, XXHASH64, XXHASH3 and XXHASH128"

// storageClasses are S3's storage classes. Any is accepted (the grid
// has one: objects list as STANDARD); another name is refused.
var storageClasses = map[string]bool{"STANDARD": true, "REDUCED_REDUNDANCY": true, "STANDARD_IA": true, "ONEZONE_IA": true,
	"INTELLIGENT_TIERING": true, "GLACIER": true, "DEEP_ARCHIVE": true, "OUTPOSTS": true, "GLACIER_IR": true, "SNOW": true,
	"EXPRESS_ONEZONE": true, "FSX_OPENZFS": true}

// kmsRefusal is why SSE-KMS is refused.
const kmsRefusal = "Server-side encryption with KMS keys (aws:kms, aws:kms:dsse) is refused: this gateway has no key management service configured. " +
	"The grid encrypts every object with keys of its own (x-amz-server-side-encryption: AES256 is accepted and changes nothing); " +
	"for a key of your own, use SSE-C (x-amz-server-side-encryption-customer-algorithm, -key, -key-MD5)."

// checkHeaders refuses headers that ask for what the gateway does not do,
// rather than ignore them and give a false guarantee.
func checkHeaders(r *http.Request, opName string) error {
	h := r.Header
	// A header or, in a presigned URL, a query parameter.
	get := func(name string) string {
		if v := h.Get(name); v != "" || r.URL == nil {
			return v
		}
		for k, v := range r.URL.Query() {
			if strings.EqualFold(k, name) && len(v) > 0 {
				return v[0]
			}
		}
		return ""
	}
	names := slices.Collect(maps.Keys(h))
	if r.URL != nil {
		// Presigned URLs may carry x-amz-* headers in their query.
		for k := range r.URL.Query() {
			names = append(names, k)
		}
	}
	for _, name := range names {
		ln := strings.ToLower(name)
		switch {
		case strings.HasPrefix(ln, customerKeyPrefix) && !customerKeyOps[opName]:
			return notImpl(opName + " takes no customer key (x-amz-server-side-encryption-customer-*): SSE-C applies to object reads and writes only.")
		case strings.HasPrefix(ln, copySourceKeyPrefix) && !copySourceKeyOps[opName]:
			return notImpl(opName + " takes no copy source customer key (x-amz-copy-source-server-side-encryption-customer-*): only CopyObject and UploadPartCopy do.")
		case ln == "x-amz-server-side-encryption-aws-kms-key-id", ln == "x-amz-server-side-encryption-context",
			ln == "x-amz-server-side-encryption-bucket-key-enabled":
			return notImpl(kmsRefusal)
		case strings.HasPrefix(ln, "x-amz-object-lock-"), ln == "x-amz-bucket-object-lock-enabled":
			if err := lockHeaderErr(opName, ln, get(name)); err != nil { // objectlock.go
				return err
			}
		case ln == "x-amz-website-redirect-location":
			return notImpl("Website redirects are not implemented.")
		case ln == "x-amz-meta-snowball-auto-extract" && strings.EqualFold(get(name), "true"):
			// MinIO's extension (minio-py's upload_snowball_objects):
			// stored as it is, the archive would be one object.
			return notImpl("Extracting an uploaded archive (X-Amz-Meta-Snowball-Auto-Extract, MinIO's) is not implemented.")
		case strings.HasPrefix(ln, "x-amz-checksum-") && !checksumParams[ln]:
			if _, ok := checksumOf(ln); !ok {
				return notImpl("Checksum " + ln + " is not implemented: the gateway checks " + knownChecksums + ".")
			}
		}
	}
	if a := get("x-amz-checksum-algorithm"); a != "" {
		if _, ok := gateway.NewChecksum(strings.ToLower(a)); !ok {
			return notImpl("Checksum algorithm " + a + " is not implemented: the gateway checks " + knownChecksums + ".")
		}
	}
	switch sse := get("x-amz-server-side-encryption"); sse {
	case "", "AES256":
	case "aws:kms", "aws:kms:dsse":
		return notImpl(kmsRefusal)
	default:
		return s3err("InvalidArgument", 400, "Server-side encryption "+sse+" is not valid: AES256 is accepted (the grid encrypts every object), aws:kms is refused (no key management service is configured).")
	}
	if sc := get("x-amz-storage-class"); sc != "" && !storageClasses[sc] {
		return s3err("InvalidStorageClass", 400, "The storage class you specified is not valid: "+sc)
	}
	// x-amz-acl: private asks for what every object and bucket is
	// anyway: clients that send it with every request are not refused.
	acl := func(name string) string { return amzParam(r, name) } // header or presigned query
	if !aclOps[opName] && (acl("x-amz-acl") != "" && acl("x-amz-acl") != "private" || hasGrantHeader(acl)) {
		return s3err("InvalidArgument", 400, "x-amz-acl and x-amz-grant-* are taken by CreateBucket, PutObject, CopyObject, CreateMultipartUpload and PutBucketAcl/PutObjectAcl only.")
	}
	if writeOps[opName] && (h.Get("If-Match") != "" || h.Get("If-None-Match") != "") {
		if !conditionalOps[opName] {
			return notImpl("Conditional writes (If-Match, If-None-Match) are implemented on PutObject and CompleteMultipartUpload only.")
		}
		if v := h.Get("If-None-Match"); v != "" && v != "*" {
			return notImpl("If-None-Match on a write takes only *: create the object if it does not exist.")
		}
	}
	return nil
}

func notImpl(msg string) *Error { return s3err("NotImplemented", 501, msg) }
