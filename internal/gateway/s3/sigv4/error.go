package sigv4

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an S3 authentication failure: the S3 error code a client expects
// and the HTTP status. Verify returns it for a request whose headers fail,
// and Result.Body returns it from Read for a body that fails. Message is
// safe to send to the client (it names no secret).
type Error struct {
	Code    string // S3 error code, as in S3's <Error><Code>, e.g. "SignatureDoesNotMatch"
	Status  int    // HTTP status to answer with, e.g. 403
	Message string // detail for the client's <Message>
}

// Error returns the code and the message, prefixed with the package name.
func (e *Error) Error() string { return "sigv4: " + e.Code + ": " + e.Message }

// ErrAnonymous is returned by Verify for a request that carries no
// signature at all: no Authorization header and no X-Amz-Algorithm query
// parameter. The caller decides whether the operation is open to anonymous
// users; if it is, it reads r.Body itself. (A browser POST-policy upload also
// looks anonymous here: its signature is in the form, not in the request.)
var ErrAnonymous = errors.New("sigv4: request carries no signature")

func newError(code string, status int, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

// The failures, by S3 error code.

func errAccessDenied(format string, args ...any) *Error {
	return newError("AccessDenied", http.StatusForbidden, format, args...)
}

func errInvalidAccessKeyID() *Error {
	return newError("InvalidAccessKeyId", http.StatusForbidden,
		"The AWS Access Key Id you provided does not exist in our records.")
}

func errSignatureDoesNotMatch() *Error {
	return newError("SignatureDoesNotMatch", http.StatusForbidden,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}

func errChunkSignature(what string) *Error {
	return newError("SignatureDoesNotMatch", http.StatusForbidden,
		"The %s signature we calculated does not match the signature you provided.", what)
}

func errTimeTooSkewed() *Error {
	return newError("RequestTimeTooSkewed", http.StatusForbidden,
		"The difference between the request time and the current time is too large.")
}

func errInvalidArgument(format string, args ...any) *Error {
	return newError("InvalidArgument", http.StatusBadRequest, format, args...)
}

func errMissingSecurityHeader(header string) *Error {
	return newError("MissingSecurityHeader", http.StatusBadRequest,
		"Your request is missing a required header: %s.", header)
}

func errContentSHA256Mismatch() *Error {
	return newError("XAmzContentSHA256Mismatch", http.StatusBadRequest,
		"The provided 'x-amz-content-sha256' header does not match what was computed.")
}

func errBadDigest(algorithm string) *Error {
	return newError("BadDigest", http.StatusBadRequest,
		"The %s you specified did not match the calculated checksum.", algorithm)
}

func errIncompleteBody(format string, args ...any) *Error {
	return newError("IncompleteBody", http.StatusBadRequest, format, args...)
}

// errMalformed reports a malformed signature in the Authorization header
// (AuthorizationHeaderMalformed) or in a presigned URL's query
// (AuthorizationQueryParametersError).
func errMalformed(presigned bool, format string, args ...any) *Error {
	if presigned {
		return newError("AuthorizationQueryParametersError", http.StatusBadRequest, format, args...)
	}
	return newError("AuthorizationHeaderMalformed", http.StatusBadRequest, format, args...)
}
