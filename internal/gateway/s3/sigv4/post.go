package sigv4

import (
	"strings"
	"time"
)

// PostCredential is what a browser-based upload (S3's POST Object) says
// of its signature in its form fields.
type PostCredential struct {
	AccessKey string
	Date      string // YYYYMMDD
	Region    string
}

// ParsePostCredential checks a POST form's x-amz-algorithm,
// x-amz-credential (<key>/<date>/<region>/s3/aws4_request) and x-amz-date
// (whose day must be the credential's), as S3 does.
func ParsePostCredential(alg, credential, date string) (PostCredential, error) {
	if alg != algorithm {
		return PostCredential{}, errInvalidArgument("x-amz-algorithm only supports \"AWS4-HMAC-SHA256\"")
	}
	t, err := time.Parse(iso8601, date)
	if err != nil {
		return PostCredential{}, errInvalidArgument("x-amz-date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	parts := strings.Split(credential, "/")
	n := len(parts)
	if n < 5 || parts[n-1] != terminator || parts[n-2] != service || parts[n-3] == "" {
		return PostCredential{}, errInvalidArgument("The x-amz-credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	c := PostCredential{AccessKey: strings.Join(parts[:n-4], "/"), Date: parts[n-4], Region: parts[n-3]}
	if c.AccessKey == "" || c.Date != t.UTC().Format(yyyymmdd) {
		return PostCredential{}, errInvalidArgument("The x-amz-credential is mal-formed or its date is not the day of x-amz-date.")
	}
	return c, nil
}

// VerifyPostPolicy checks the x-amz-signature of a POST form: the hex
// HMAC-SHA256 of the base64 policy document with the signing key derived
// from secret and the credential's scope (SignatureDoesNotMatch, 403,
// if it differs).
func VerifyPostPolicy(secret string, c PostCredential, policy, signature string) error {
	key := signingKey(secret, scope{date: c.Date, region: c.Region, service: service})
	if !signatureEqual(signature, sign(key, policy)) {
		return errSignatureDoesNotMatch()
	}
	return nil
}

// SignPostPolicy returns the x-amz-signature of a base64 policy document
// (for tests and tools that make POST forms).
func SignPostPolicy(secret string, c PostCredential, policy string) string {
	return sign(signingKey(secret, scope{date: c.Date, region: c.Region, service: service}), policy)
}
