package sigv4

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// checksumPrefix starts the name of a header or trailer that carries a
// checksum of the object: x-amz-checksum-crc32 and so on, the value being
// the base64 of the big-endian digest.
const checksumPrefix = "x-amz-checksum-"

// crc64NVME is CRC-64/NVME (polynomial 0xAD93D23594C93659, reflected, as
// hash/crc64 wants it), the checksum S3 computes for whole objects.
var crc64NVME = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(0x9a6c9329ac4bc9b5) })

// newChecksum returns the hash of an S3 checksum algorithm, by the lower
// case name that follows x-amz-checksum-, and the name S3 gives it in
// messages.
func newChecksum(alg string) (h hash.Hash, display string, ok bool) {
	switch alg {
	case "crc32":
		return crc32.NewIEEE(), "CRC32", true
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), "CRC32C", true
	case "crc64nvme":
		return crc64.New(crc64NVME()), "CRC64NVME", true
	case "sha1":
		return sha1.New(), "SHA1", true
	case "sha256":
		return sha256.New(), "SHA256", true
	case "sha512":
		return sha512.New(), "SHA512", true
	case "md5":
		return md5.New(), "MD5", true
	case "xxhash64":
		return xxhash.New(), "XXHASH64", true
	case "xxhash3":
		return xxh3.New(), "XXHASH3", true
	case "xxhash128":
		return xxh3.New128(), "XXHASH128", true
	}
	return nil, "", false
}

// check is one digest of the body to compare when the body ends: the
// x-amz-content-sha256 of a signed payload, or an x-amz-checksum-* value
// from the trailer of an aws-chunked body.
type check struct {
	name    string // header or trailer name, lower case
	h       hash.Hash
	want    []byte // nil until known (a trailer)
	invalid bool   // the value sent does not decode
	fail    func() *Error
}

// verify reports the check's error if the digest differs from the value
// sent.
func (c *check) verify() error {
	if c.invalid || !bytes.Equal(c.h.Sum(nil), c.want) {
		return c.fail()
	}
	return nil
}

// payloadCheck checks the hex sha256 of x-amz-content-sha256.
func payloadCheck(hexSum string) (*check, error) {
	want, err := hex.DecodeString(hexSum)
	if err != nil || len(want) != sha256.Size {
		return nil, errInvalidArgument("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, STREAMING-UNSIGNED-PAYLOAD-TRAILER or a valid sha256 value.")
	}
	return &check{name: "x-amz-content-sha256", h: sha256.New(), want: want, fail: errContentSHA256Mismatch}, nil
}

// checksumCheck makes the check of one x-amz-checksum-* trailer; ok is
// false for a name that is not a checksum this package
// knows (x-amz-checksum-type, x-amz-checksum-mode, ...).
func checksumCheck(name string) (c *check, ok bool) {
	alg, found := strings.CutPrefix(name, checksumPrefix)
	if !found {
		return nil, false
	}
	h, display, ok := newChecksum(alg)
	if !ok {
		return nil, false
	}
	return &check{name: name, h: h, fail: func() *Error { return errBadDigest(display) }}, true
}

// setValue records the base64 value sent for a checksum.
func (c *check) setValue(v string) {
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	c.want, c.invalid = want, err != nil
}

// checkedReader passes a body through, feeding every check, and at the
// end of the body returns the first failing check's error instead of
// io.EOF. Errors are sticky.
type checkedReader struct {
	r      io.Reader
	checks []*check
	err    error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	for _, ch := range c.checks {
		ch.h.Write(p[:n])
	}
	if err == io.EOF {
		for _, ch := range c.checks {
			if e := ch.verify(); e != nil {
				err = e
				break
			}
		}
	}
	if err != nil && err != io.EOF {
		err = truncated(err)
	}
	if err != nil {
		c.err = err
	}
	return n, err
}
