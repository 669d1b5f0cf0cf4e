package s3

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"
	"sync"
)

// crc64NVME is CRC-64/NVME, reflected as hash/crc64 wants it.
var crc64NVME = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(0x9a6c9329ac4bc9b5) })

// checksumOf returns a new hash for an x-amz-checksum-ALG header name
// (lower case); ok is false for other names (x-amz-checksum-mode,
// x-amz-checksum-type, ...).
func checksumOf(name string) (hash.Hash, bool) {
	alg, found := strings.CutPrefix(name, "x-amz-checksum-")
	if !found {
		return nil, false
	}
	switch alg {
	case "crc32":
		return crc32.NewIEEE(), true
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), true
	case "crc64nvme":
		return crc64.New(crc64NVME()), true
	case "sha1":
		return sha1.New(), true
	case "sha256":
		return sha256.New(), true
	}
	return nil, false
}

// headerChecks wraps body so that the x-amz-checksum-* headers of the
// request are checked when it ends: a mismatch (or a value that does not
// decode) is returned by Read instead of io.EOF, as BadDigest, so the
// object is not stored.
func headerChecks(h http.Header, body io.Reader) io.Reader {
	var cr *checksumReader
	for name, v := range h {
		ln := strings.ToLower(name)
		hs, ok := checksumOf(ln)
		if !ok || len(v) == 0 {
			continue
		}
		if cr == nil {
			cr = &checksumReader{r: body}
		}
		want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[0]))
		if err != nil {
			want = nil
		}
		cr.checks = append(cr.checks, headerCheck{name: ln, h: hs, want: want})
	}
	if cr == nil {
		return body
	}
	return cr
}

type headerCheck struct {
	name string
	h    hash.Hash
	want []byte
}

type checksumReader struct {
	r      io.Reader
	checks []headerCheck
	err    error
}

func (c *checksumReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	for _, ch := range c.checks {
		ch.h.Write(p[:n])
	}
	if err == io.EOF {
		for _, ch := range c.checks {
			if !bytes.Equal(ch.h.Sum(nil), ch.want) {
				err = s3err("BadDigest", 400, "The "+ch.name+" you specified did not match the calculated checksum.")
				break
			}
		}
	}
	if err != nil {
		c.err = err
	}
	return n, err
}
