package s3

import (
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

// POST Object: a browser uploads a file with an HTML form
// (multipart/form-data) to the bucket's URL. The form carries the key, a
// policy document (base64 JSON: an expiration and conditions every field
// must meet) and the policy's Signature V4 made with an access key's
// secret, so a page can upload without holding the secret. The fields
// come first and the file last, as S3 requires; the file streams into
// the grid as it arrives, never held whole, and is stored only if its
// size is within the policy's content-length-range.

// maxPostFields is S3's limit on the size of the fields before the file.
const maxPostFields = 20 << 10

var (
	errMalformedPost = s3err("MalformedPOSTRequest", 400, "The body of your POST request is not well-formed multipart/form-data.")
	errPostNoFile    = s3err("InvalidArgument", 400, "POST requires exactly one file upload per request.")
	errPostFields    = s3err("MaxPostPreDataLengthExceeded", 400, "Your POST request fields preceding the upload file were too large.")
	errTooLarge      = s3err("EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed size")
	errTooSmall      = s3err("EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed size")
)

func policyDenied(why string) *Error {
	return s3err("AccessDenied", 403, "Invalid according to Policy: "+why)
}

func badPolicy(why string) *Error {
	return s3err("InvalidPolicyDocument", 400, "Invalid Policy: "+why)
}

// isPostObject reports whether r is a POST Object: a form posted to a
// bucket's URL.
func isPostObject(r *http.Request, bucket, object string) bool {
	if r.Method != http.MethodPost || bucket == "" || object != "" || r.URL.RawQuery != "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// postForm is a POST's fields, by lower-case name, and its file.
type postForm struct {
	fields   map[string]string
	order    []string // field names as they came
	file     *multipart.Part
	filename string
}

// readPostForm reads the fields up to the file part.
func readPostForm(r *http.Request) (*postForm, error) {
	_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, errMalformedPost
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	f := &postForm{fields: map[string]string{}}
	total := 0
	for range 1000 {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, errPostNoFile
		}
		if err != nil {
			return nil, errMalformedPost
		}
		name := strings.ToLower(p.FormName())
		if name == "" {
			// A part without a form name (RFC 7578 requires one):
			// neither a field nor the file.
			return nil, errMalformedPost
		}
		if name == "file" {
			f.file, f.filename = p, p.FileName()
			return f, nil
		}
		v, err := io.ReadAll(io.LimitReader(p, int64(maxPostFields-total+1)))
		if err != nil {
			return nil, errMalformedPost
		}
		total += len(name) + len(v)
		if total > maxPostFields {
			return nil, errPostFields
		}
		if _, dup := f.fields[name]; !dup {
			f.order = append(f.order, name)
		}
		f.fields[name] = string(v)
	}
	return nil, errMalformedPost
}

// postPolicy is a decoded policy document.
type postPolicy struct {
	expiration time.Time
	conds      []postCond
	minSize    int64
	maxSize    int64 // -1: no limit
}

// postCond is one condition on a field: eq or starts-with.
type postCond struct {
	op, field, value string
	text             string // for the error message, as S3 writes it
}

// condText is a condition as S3's error message writes it, whatever its
// form in the policy: ["eq", "$key", "value"] (the field's name as the
// policy spells it).
func condText(op, field, value string) string {
	q := strconv.Quote
	return "[" + q(op) + ", " + q("$"+field) + ", " + q(value) + "]"
}

// parsePolicy decodes a base64 policy document.
func parsePolicy(b64 string) (*postPolicy, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, badPolicy("Invalid Base64 encoding.")
	}
	var doc struct {
		Expiration *string           `json:"expiration"`
		Conditions []json.RawMessage `json:"conditions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, badPolicy("Invalid JSON.")
	}
	if doc.Expiration == nil {
		return nil, badPolicy("Policy missing expiration.")
	}
	p := &postPolicy{maxSize: -1}
	if p.expiration, err = time.Parse(time.RFC3339, *doc.Expiration); err != nil {
		return nil, badPolicy("Invalid 'expiration' value: '" + *doc.Expiration + "'")
	}
	for _, c := range doc.Conditions {
		var obj map[string]string
		if json.Unmarshal(c, &obj) == nil {
			if len(obj) != 1 {
				return nil, badPolicy("Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.")
			}
			for k, v := range obj {
				p.conds = append(p.conds, postCond{"eq", strings.ToLower(k), v, condText("eq", k, v)})
			}
			continue
		}
		var arr []any
		if json.Unmarshal(c, &arr) != nil || len(arr) != 3 {
			return nil, badPolicy("Invalid Condition: " + string(c))
		}
		op, _ := arr[0].(string)
		switch strings.ToLower(op) {
		case "eq", "starts-with":
			field, ok1 := arr[1].(string)
			value, ok2 := arr[2].(string)
			if !ok1 || !ok2 || !strings.HasPrefix(field, "$") {
				return nil, badPolicy("Invalid Condition: " + string(c))
			}
			p.conds = append(p.conds, postCond{strings.ToLower(op), strings.ToLower(field[1:]), value, condText(strings.ToLower(op), field[1:], value)})
		case "content-length-range":
			lo, ok1 := policyInt(arr[1])
			hi, ok2 := policyInt(arr[2])
			if !ok1 || !ok2 || lo < 0 || hi < lo {
				return nil, badPolicy("Invalid content-length-range: " + string(c))
			}
			p.minSize, p.maxSize = lo, hi
		default:
			return nil, badPolicy("Invalid Condition: unknown operation " + strconv.Quote(op))
		}
	}
	return p, nil
}

// policyInt reads a JSON number, or a string of one.
func policyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		return int64(x), x == float64(int64(x))
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// check applies the policy's conditions to the form's fields (the bucket
// being the one posted to), and S3's rule that every field but the
// signature (x-amz-signature, or V2's signature and AWSAccessKeyId), the
// policy, the file and x-ignore-* ones is named by a condition.
func (p *postPolicy) check(f *postForm, bucket string, now time.Time) error {
	if now.After(p.expiration) {
		return policyDenied("Policy expired.")
	}
	named := map[string]bool{}
	for _, c := range p.conds {
		named[c.field] = true
		v := f.fields[c.field]
		if c.field == "bucket" {
			v = bucket
		}
		ok := false
		switch c.op {
		case "eq":
			ok = v == c.value
		case "starts-with":
			if c.field == "content-type" {
				// Each of a comma-separated list of types must start so.
				ok = true
				for t := range strings.SplitSeq(v, ",") {
					ok = ok && strings.HasPrefix(strings.TrimSpace(t), c.value)
				}
			} else {
				ok = strings.HasPrefix(v, c.value)
			}
		}
		if !ok {
			return policyDenied("Policy Condition failed: " + c.text)
		}
	}
	var extra []string
	for _, name := range f.order {
		switch {
		case name == "policy", name == "x-amz-signature", name == "signature", name == "awsaccesskeyid", name == "file", strings.HasPrefix(name, "x-ignore-"), named[name]:
		default:
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		return policyDenied("Extra input fields: " + strings.Join(extra, ", "))
	}
	return nil
}

// sizeRange ends a file outside [min, max] bytes with EntityTooLarge (as
// soon as it passes max) or EntityTooSmall (at its end); other errors of
// the multipart reader are a malformed form.
type sizeRange struct {
	r        io.Reader
	min, max int64
	n        int64
	err      error
}

func (s *sizeRange) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	switch {
	case s.max >= 0 && s.n > s.max:
		n, err = 0, errTooLarge
	case err == io.EOF && s.n < s.min:
		err = errTooSmall
	case err != nil && err != io.EOF:
		var se *Error
		if !errors.As(err, &se) {
			err = errMalformedPost
		}
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

// postSums computes and checks the file's checksums as it streams, as a
// PUT's headers would: the form's x-amz-checksum-ALG fields are checked
// (a mismatch is BadDigest and nothing is stored); an
// x-amz-checksum-algorithm field without a value names one to compute;
// with neither, CRC64NVME is computed. The checksums are kept with the
// object and returned.
func postSums(fields map[string]string, file io.Reader) (*sumReader, error) {
	h := http.Header{}
	for name, v := range fields {
		if _, ok := checksumOf(name); ok {
			h.Set(name, v)
		}
	}
	if alg := fields["x-amz-checksum-algorithm"]; alg != "" {
		if len(h) > 0 && h.Get("x-amz-checksum-"+alg) == "" {
			return nil, s3err("InvalidRequest", 400, "The x-amz-checksum-algorithm field names "+strings.ToUpper(alg)+" but the form carries the value of another checksum.")
		}
		h.Set("x-amz-checksum-algorithm", alg)
	}
	return newSums(h, file), nil
}

// postObject serves a POST Object.
func (s *Server) postObject(q *request) {
	q.op = "PostObject"
	r := q.r
	ctx := r.Context()
	f, err := readPostForm(r)
	if err != nil {
		q.fail(err)
		return
	}
	fields := f.fields
	if fields["policy"] == "" {
		// No policy, no signature: an anonymous upload, and no bucket
		// here is open to anonymous writes.
		q.fail(errDenied)
		return
	}
	if err := s.postSignature(q, fields); err != nil {
		q.fail(err)
		return
	}
	policy, err := parsePolicy(fields["policy"])
	if err != nil {
		q.fail(err)
		return
	}
	if err := policy.check(f, q.bucket, time.Now()); err != nil {
		q.fail(err)
		return
	}
	// The object's headers are the form's fields, as for a PUT.
	h := http.Header{}
	for name, v := range fields {
		h.Set(name, v)
	}
	if acl := fields["acl"]; acl != "" {
		h.Set("x-amz-acl", acl)
	}
	if err := checkHeaders(&http.Request{Header: h}, "PostObject"); err != nil {
		q.fail(err)
		return
	}
	if !s.allowed(q, gateway.Write) {
		return
	}
	key := strings.ReplaceAll(fields["key"], "${filename}", f.filename)
	q.object = key
	opt := putOptions(h)
	opt.If = writeCondition(h)
	// The form's acl field, as a PUT's x-amz-acl.
	fq := *q
	fq.r = r.Clone(ctx)
	fq.r.Header = h
	if opt.ACL, err = s.newObjectACL(&fq); err != nil {
		q.fail(err)
		return
	}
	if opt.Tags, err = tagsHeader(h); err != nil {
		q.fail(err)
		return
	}
	if doc := fields["tagging"]; doc != "" { // S3's form field: a Tagging document
		var t taggingXML
		if xml.Unmarshal([]byte(doc), &t) != nil {
			q.fail(errMalformedXML)
			return
		}
		if opt.Tags, err = checkTags(t.TagSet.Tags, maxObjectTags, "Object"); err != nil {
			q.fail(err)
			return
		}
	}
	sr, err := postSums(fields, &sizeRange{r: f.file, min: policy.minSize, max: policy.maxSize})
	if err != nil {
		q.fail(err)
		return
	}
	opt.Checksums = sr.Sums
	q.dec = &bodyErrors{r: sr}
	info, err := s.gw.Put(ctx, q.bucket, key, q.dec, -1, opt)
	if err != nil {
		q.fail(err)
		return
	}
	q.bytes = info.Size
	etag := `"` + info.ETag + `"`
	loc := "/" + q.bucket + "/" + (&url.URL{Path: key}).EscapedPath()
	if r.Host != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		loc = scheme + "://" + r.Host + loc
	}
	w := q.w
	w.Header().Set("ETag", etag)
	w.Header().Set("Location", loc)
	setChecksumHeaders(w.Header(), info.Checksums, info.ChecksumType)
	redirect := fields["success_action_redirect"]
	if redirect == "" {
		redirect = fields["redirect"]
	}
	if u, err := url.Parse(redirect); redirect != "" && err == nil && u.IsAbs() {
		v := u.Query()
		v.Set("bucket", q.bucket)
		v.Set("key", key)
		v.Set("etag", etag)
		u.RawQuery = v.Encode()
		w.Header().Set("Location", u.String())
		q.status = http.StatusSeeOther
		w.WriteHeader(http.StatusSeeOther)
		return
	}
	switch fields["success_action_status"] {
	case "200":
		q.status = 200
		w.WriteHeader(200)
	case "201":
		q.xml(201, struct {
			XMLName  xml.Name `xml:"PostResponse"`
			Location string
			Bucket   string
			Key      string
			ETag     string
		}{Location: loc, Bucket: q.bucket, Key: key, ETag: etag})
	default:
		q.status = 204
		w.WriteHeader(204)
	}
}

// postSignature checks the signature of a POST form and sets q.key to the
// key that signed it: Signature V4 (x-amz-algorithm, x-amz-credential,
// x-amz-date, x-amz-signature) or Signature V2 (AWSAccessKeyId and
// signature, the base64 HMAC-SHA1 of the policy).
func (s *Server) postSignature(q *request, fields map[string]string) error {
	v2 := fields["x-amz-algorithm"] == "" && fields["awsaccesskeyid"] != ""
	required := []string{"key", "x-amz-algorithm", "x-amz-credential", "x-amz-date", "x-amz-signature"}
	if v2 {
		required = []string{"key", "awsaccesskeyid", "signature"}
	}
	for _, name := range required {
		if fields[name] == "" {
			return s3err("InvalidArgument", 400, "Bucket POST must contain a field named '"+name+"'.  If it is specified, please check the order of the fields.")
		}
	}
	access := fields["awsaccesskeyid"]
	var cred sigv4.PostCredential
	if !v2 {
		var err error
		if cred, err = sigv4.ParsePostCredential(fields["x-amz-algorithm"], fields["x-amz-credential"], fields["x-amz-date"]); err != nil {
			return err
		}
		access = cred.AccessKey
	}
	k, err := s.gw.Key(q.r.Context(), access)
	if err != nil {
		return s3err("InvalidAccessKeyId", 403, "The AWS Access Key Id you provided does not exist in our records.")
	}
	q.key = k
	if v2 {
		q.sigAlg = sigAlg(2)
		return sigv4.VerifyPostPolicyV2(k.Secret, fields["policy"], fields["signature"])
	}
	q.sigAlg = sigAlg(4)
	return sigv4.VerifyPostPolicy(k.Secret, cred, fields["policy"], fields["x-amz-signature"])
}
