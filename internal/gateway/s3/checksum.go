package s3

import (
	"bytes"
	"encoding/base64"
	"hash"
	"io"
	"net/http"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// checksumOf returns a new hash for an x-amz-checksum-ALG header name
// (lower case); ok is false for other names (x-amz-checksum-mode,
// x-amz-checksum-type, ...).
func checksumOf(name string) (hash.Hash, bool) {
	alg, found := strings.CutPrefix(name, "x-amz-checksum-")
	if !found {
		return nil, false
	}
	return gateway.NewChecksum(alg)
}

// defaultChecksum is the checksum computed of a body that names none, as
// S3 does since 2025.
const defaultChecksum = "crc64nvme"

// newSums wraps body so that its checksums are computed as it streams:
// those of the x-amz-checksum-* headers, checked when it ends (a mismatch,
// or a value that does not decode, is returned by Read instead of io.EOF,
// as BadDigest, so the object is not stored); those the x-amz-trailer
// header names (sigv4 checks the trailer's values before the body's end);
// or that of an x-amz-checksum-algorithm header alone; or, if the request
// names none, CRC64NVME.
func newSums(h http.Header, body io.Reader) *sumReader {
	cr := &sumReader{r: body}
	seen := map[string]bool{}
	for name, v := range h {
		ln := strings.ToLower(name)
		hs, ok := checksumOf(ln)
		if !ok || len(v) == 0 {
			continue
		}
		want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[0]))
		if err != nil || len(want) == 0 {
			want = []byte{} // never matches
		}
		seen[ln] = true
		cr.checks = append(cr.checks, headerCheck{name: ln, h: hs, want: want})
	}
	for _, v := range h.Values("X-Amz-Trailer") {
		for name := range strings.SplitSeq(v, ",") {
			ln := strings.ToLower(strings.TrimSpace(name))
			if hs, ok := checksumOf(ln); ok && !seen[ln] {
				seen[ln] = true
				cr.checks = append(cr.checks, headerCheck{name: ln, h: hs})
			}
		}
	}
	if alg := strings.ToLower(h.Get("x-amz-checksum-algorithm")); len(cr.checks) == 0 && alg != "" {
		// An algorithm without a value (MinIO's clients send it so):
		// computed, kept and returned.
		if hs, ok := gateway.NewChecksum(alg); ok {
			cr.checks = append(cr.checks, headerCheck{name: "x-amz-checksum-" + alg, h: hs})
		}
	}
	if len(cr.checks) == 0 {
		hs, _ := gateway.NewChecksum(defaultChecksum)
		cr.checks = append(cr.checks, headerCheck{name: "x-amz-checksum-" + defaultChecksum, h: hs})
		cr.implicit = true
	}
	return cr
}

type headerCheck struct {
	name string
	h    hash.Hash
	want []byte // nil: computed, not checked here
}

// sumReader computes (and checks) a body's checksums.
type sumReader struct {
	r        io.Reader
	checks   []headerCheck
	implicit bool // the request named no checksum
	err      error
	done     bool
}

func (c *sumReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	for _, ch := range c.checks {
		ch.h.Write(p[:n])
	}
	if err == io.EOF {
		c.done = true
		for _, ch := range c.checks {
			if ch.want != nil && !bytes.Equal(ch.h.Sum(nil), ch.want) {
				err = s3err("BadDigest", 400, "The "+ch.name+" you specified did not match the calculated checksum.")
				c.done = false
				break
			}
		}
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// describesObject says the request's x-amz-checksum-* headers are not
// the body's (CompleteMultipartUpload's describe the object): they are
// computed, not checked.
func (c *sumReader) describesObject() {
	for i := range c.checks {
		c.checks[i].want = nil
	}
}

// Sums returns the body's checksums by algorithm, base64; nil until the
// body has been read to its end and checked.
func (c *sumReader) Sums() map[string]string {
	if !c.done {
		return nil
	}
	out := map[string]string{}
	for _, ch := range c.checks {
		out[strings.TrimPrefix(ch.name, "x-amz-checksum-")] = base64.StdEncoding.EncodeToString(ch.h.Sum(nil))
	}
	return out
}

// setChecksumHeaders sets the x-amz-checksum-ALG headers of an answer
// (and x-amz-checksum-type if typ is given).
func setChecksumHeaders(h http.Header, sums map[string]string, typ string) {
	for alg, v := range sums {
		h["x-amz-checksum-"+alg] = []string{v}
	}
	if typ != "" && len(sums) > 0 {
		h["x-amz-checksum-type"] = []string{typ}
	}
}

// checksumXML is the Checksum* elements of parts and results.
type checksumXML struct {
	ChecksumCRC32     string `xml:",omitempty"`
	ChecksumCRC32C    string `xml:",omitempty"`
	ChecksumCRC64NVME string `xml:",omitempty"`
	ChecksumSHA1      string `xml:",omitempty"`
	ChecksumSHA256    string `xml:",omitempty"`
	ChecksumSHA512    string `xml:",omitempty"`
	ChecksumMD5       string `xml:",omitempty"`
	ChecksumXXHASH64  string `xml:",omitempty"`
	ChecksumXXHASH3   string `xml:",omitempty"`
	ChecksumXXHASH128 string `xml:",omitempty"`
}

func (c checksumXML) sums() map[string]string {
	out := map[string]string{}
	for alg, v := range map[string]string{"crc32": c.ChecksumCRC32, "crc32c": c.ChecksumCRC32C,
		"crc64nvme": c.ChecksumCRC64NVME, "sha1": c.ChecksumSHA1, "sha256": c.ChecksumSHA256,
		"sha512": c.ChecksumSHA512, "md5": c.ChecksumMD5, "xxhash64": c.ChecksumXXHASH64, "xxhash3": c.ChecksumXXHASH3,
		"xxhash128": c.ChecksumXXHASH128} {
		if v != "" {
			out[alg] = v
		}
	}
	return out
}

func toChecksumXML(sums map[string]string) checksumXML {
	return checksumXML{ChecksumCRC32: sums["crc32"], ChecksumCRC32C: sums["crc32c"],
		ChecksumCRC64NVME: sums["crc64nvme"], ChecksumSHA1: sums["sha1"], ChecksumSHA256: sums["sha256"],
		ChecksumSHA512: sums["sha512"], ChecksumMD5: sums["md5"], ChecksumXXHASH64: sums["xxhash64"],
		ChecksumXXHASH3: sums["xxhash3"], ChecksumXXHASH128: sums["xxhash128"]}
}
