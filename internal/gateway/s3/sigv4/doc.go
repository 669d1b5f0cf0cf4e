// Package sigv4 verifies AWS Signature Version 4, and the older Version 2,
// on S3 requests (layer 5, S3-specific). It is the authentication step of the S3 gateway: it knows
// S3's dialect of SigV4 — the request path is signed as the client sent it,
// never normalised or encoded twice; the payload may be signed, unsigned,
// or sent aws-chunked with chained chunk signatures and trailing
// checksums — and nothing about buckets, objects or storage.
//
// A handler calls Verify first and then reads the request body only
// through Result.Body:
//
//	res, err := v.Verify(r)
//	switch {
//	case errors.Is(err, sigv4.ErrAnonymous):
//		// no credentials at all: allow or deny by bucket policy
//	case err != nil:
//		var e *sigv4.Error
//		errors.As(err, &e) // e.Code and e.Status go into the S3 error reply
//	default:
//		// res.AccessKey is authenticated; stream res.Body (res.Length
//		// bytes, or -1 if unknown) into storage and commit only if every
//		// Read up to io.EOF succeeded.
//	}
//
// The header part of a request (method, path, query, signed headers) is
// verified before Verify returns. The body cannot be verified before it has
// been read, so Result.Body checks it while it streams and reports a
// mismatch as an *Error from Read, at the latest in place of io.EOF: a
// caller must not make an upload visible before Body has returned io.EOF.
//
// Signature Version 2 (HMAC-SHA1 over a StringToSign of the method,
// Content-MD5, Content-Type, date, x-amz-* headers and the resource with
// its signed subresources) is verified by the same Verify, which tells
// the two apart by the Authorization header's first word or by the
// query's parameters; a V2 signature does not cover the body.
//
// Sources: the S3 developer guide's "Signing and authenticating REST
// requests" (Signature Version 2, with its examples); the S3 API
// reference's "Authenticating Requests (AWS Signature Version 4)" pages — single-chunk header signing, query-string (presigned)
// signing, chunked upload ("sigv4-streaming") and trailing headers
// ("sigv4-streaming-trailers") — and the signer of aws-sdk-go-v2, which the
// tests use as the client.
package sigv4
