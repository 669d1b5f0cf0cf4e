package s3

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// SSE-C: a client's own key, sent with every request that writes or
// reads an object (gateway/customerkey.go says what is stored: never
// the key). The headers are S3's: -algorithm (AES256), -key (base64 of
// 256 bits), -key-MD5 (base64 of the key's MD5, which must match); the
// x-amz-copy-source-... ones name a copy source's key. As on S3, keys
// travel only over HTTPS unless Options.AllowInsecureSSEC says
// otherwise.

const (
	customerKeyPrefix   = "x-amz-server-side-encryption-customer-"
	copySourceKeyPrefix = "x-amz-copy-source-server-side-encryption-customer-"
)

// Answers to customer key requests, as S3 gives them.
var (
	errKeyInsecure   = s3err("InvalidRequest", 400, "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.")
	errKeyRequired   = s3err("InvalidRequest", 400, "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.")
	errKeyNotApplies = s3err("InvalidRequest", 400, "The encryption parameters are not applicable to this object.")
	errKeyAlgorithm  = s3err("InvalidEncryptionAlgorithmError", 400, "The encryption request you specified is not valid. Supported value: AES256.")
	errKeyUpload     = s3err("InvalidRequest", 400, "The multipart upload initiate requested encryption. Subsequent part requests must include the appropriate encryption parameters.")
)

// customerKey reads the customer key headers of prefix (customerKeyPrefix
// or copySourceKeyPrefix): nil if none is given; an S3 error if they are
// incomplete, malformed, inconsistent, or sent over plain HTTP when that
// is not allowed.
func (s *Server) customerKey(r *http.Request, prefix string) (*gateway.CustomerKey, error) {
	h := r.Header
	// A presigned URL may carry them in its query (boto3 puts the
	// algorithm there); headers win.
	get := func(name string) string {
		if v := h.Get(prefix + name); v != "" {
			return v
		}
		q := r.URL.Query()
		if v := q.Get(prefix + name); v != "" {
			return v
		}
		return q.Get(prefix + strings.ToLower(name))
	}
	alg, key, sum := get("algorithm"), get("key"), get("key-MD5")
	if alg == "" && key == "" && sum == "" {
		return nil, nil
	}
	if r.TLS == nil && !s.opt.AllowInsecureSSEC {
		return nil, errKeyInsecure
	}
	if prefix == customerKeyPrefix && h.Get("x-amz-server-side-encryption") != "" {
		return nil, s3err("InvalidArgument", 400, "Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	}
	switch {
	case alg == "":
		return nil, s3err("InvalidArgument", 400, "Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.")
	case alg != "AES256":
		return nil, errKeyAlgorithm
	case key == "":
		return nil, s3err("InvalidArgument", 400, "Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.")
	case sum == "":
		return nil, s3err("InvalidArgument", 400, "Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.")
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != len(gateway.CustomerKey{}) {
		return nil, s3err("InvalidArgument", 400, "The secret key was invalid for the specified algorithm.")
	}
	got := md5.Sum(raw)
	want, err := base64.StdEncoding.DecodeString(sum)
	if err != nil || subtle.ConstantTimeCompare(got[:], want) != 1 {
		return nil, s3err("InvalidArgument", 400, "The calculated MD5 hash of the key did not match the hash that was provided.")
	}
	var k gateway.CustomerKey
	copy(k[:], raw)
	return &k, nil
}

// requestKey is customerKey for the request's own headers; false means
// the answer (an error) is sent.
func (s *Server) requestKey(q *request) (*gateway.CustomerKey, bool) {
	k, err := s.customerKey(q.r, customerKeyPrefix)
	if err != nil {
		q.fail(err)
		return nil, false
	}
	return k, true
}

// echoKey sets the answer's SSE-C headers: the algorithm and the MD5 of
// the key the request gave (never stored: the request's own header,
// checked against the key).
func echoKey(q *request, k *gateway.CustomerKey) {
	if k == nil {
		return
	}
	sum := md5.Sum(k[:])
	q.w.Header()["x-amz-server-side-encryption-customer-algorithm"] = []string{"AES256"}
	q.w.Header()["x-amz-server-side-encryption-customer-key-MD5"] = []string{base64.StdEncoding.EncodeToString(sum[:])}
}

// keyErr turns the gateway's customer key errors into S3's answers.
func keyErr(err error, upload bool) *Error {
	switch {
	case errors.Is(err, gateway.ErrKeyRequired) && upload:
		return errKeyUpload
	case errors.Is(err, gateway.ErrKeyRequired):
		return errKeyRequired
	case errors.Is(err, gateway.ErrWrongKey):
		return s3err("AccessDenied", 403, "Access Denied: the customer key given is not the one the object was encrypted with.")
	case errors.Is(err, gateway.ErrNotEncrypted):
		return errKeyNotApplies
	}
	return nil
}
