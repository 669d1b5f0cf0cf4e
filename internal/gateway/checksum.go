package gateway

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"
)

// Checksums of objects, as S3's x-amz-checksum-*: an object keeps the
// ones its upload carried (algorithm → base64 of the big-endian digest).
// A multipart object's is computed from its parts' when they were
// uploaded with its upload's algorithm: COMPOSITE, the algorithm's hash
// of the parts' digests with "-N" appended, or FULL_OBJECT, the CRC of
// the whole object combined from the parts' CRCs.

// Checksum types of a multipart upload.
const (
	Composite  = "COMPOSITE"
	FullObject = "FULL_OBJECT"
)

// reflected polynomials and widths of the CRCs, for combining them.
var crcPoly = map[string]struct {
	poly  uint64
	width uint
}{
	"crc32":     {0xedb88320, 32},
	"crc32c":    {0x82f63b78, 32},
	"crc64nvme": {0x9a6c9329ac4bc9b5, 64},
}

// NewChecksum returns a new hash of algorithm alg, lower case as it
// follows x-amz-checksum- (crc32, crc32c, crc64nvme, sha1, sha256,
// sha512, md5, xxhash64, xxhash3, xxhash128: XXH64, XXH3 64-bit and
// 128-bit, seed 0, digests big-endian); ok is false for another.
func NewChecksum(alg string) (h hash.Hash, ok bool) {
	switch alg {
	case "crc32":
		return crc32.NewIEEE(), true
	case "crc32c":
		return crc32.New(crc32.MakeTable(crc32.Castagnoli)), true
	case "crc64nvme":
		// MinIO's, with the carry-less multiply of the CPU: forty times
		// hash/crc64's speed on a 1 MiB body.
		return crc64nvme.New(), true
	case "sha1":
		return sha1.New(), true
	case "sha256":
		return sha256.New(), true
	case "sha512":
		return sha512.New(), true
	case "md5":
		return md5.New(), true
	case "xxhash64":
		return xxhash.New(), true
	case "xxhash3":
		return xxh3.New(), true
	case "xxhash128":
		return xxh3.New128(), true
	}
	return nil, false
}

// CheckChecksumType reports whether a multipart upload may use algorithm
// alg with checksum type typ, as S3 allows: CRC64NVME only FULL_OBJECT,
// the SHAs only COMPOSITE, CRC32 and CRC32C either.
func CheckChecksumType(alg, typ string) error {
	if _, ok := NewChecksum(alg); !ok {
		return fmt.Errorf("unknown checksum algorithm %q", alg)
	}
	switch typ {
	case Composite:
		if alg == "crc64nvme" {
			return errors.New("the CRC64NVME checksum supports only the FULL_OBJECT type")
		}
	case FullObject:
		if _, ok := crcPoly[alg]; !ok {
			return fmt.Errorf("the %s checksum supports only the COMPOSITE type", alg)
		}
	default:
		return fmt.Errorf("unknown checksum type %q", typ)
	}
	return nil
}

// DefaultChecksumType is S3's type for a multipart upload that names an
// algorithm but no type.
func DefaultChecksumType(alg string) string {
	if alg == "crc64nvme" {
		return FullObject
	}
	return Composite
}

// multipartChecksum computes the checksum of an object made of parts
// whose own checksums of algorithm alg are given (base64), or "" if a
// part has none.
func multipartChecksum(alg, typ string, parts []Part) string {
	if len(parts) == 0 {
		return ""
	}
	if typ == FullObject {
		c, ok := crcPoly[alg]
		if !ok {
			return ""
		}
		var crc uint64
		for i, p := range parts {
			v, err := base64.StdEncoding.DecodeString(p.Checksums[alg])
			if err != nil || len(v) != int(c.width/8) {
				return ""
			}
			var pc uint64
			for _, b := range v {
				pc = pc<<8 | uint64(b)
			}
			if i == 0 {
				crc = pc
			} else {
				crc = crcCombine(c.poly, c.width, crc, pc, p.Size)
			}
		}
		out := make([]byte, c.width/8)
		for i := range out {
			out[len(out)-1-i] = byte(crc >> (8 * i))
		}
		return base64.StdEncoding.EncodeToString(out)
	}
	h, ok := NewChecksum(alg)
	if !ok {
		return ""
	}
	for _, p := range parts {
		v, err := base64.StdEncoding.DecodeString(p.Checksums[alg])
		if err != nil || len(v) == 0 {
			return ""
		}
		h.Write(v)
	}
	return fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(parts))
}

// crcCombine returns the CRC of A followed by B from the CRC of A, the
// CRC of B and B's length, for a reflected CRC with polynomial poly of
// width bits whose initial value and final XOR are all ones (CRC-32,
// CRC-32C, CRC-64/NVME): zlib's method, multiplying by the operator that
// appends len2 zero bytes, squared up by powers of two.
func crcCombine(poly uint64, width uint, crc1, crc2 uint64, len2 int64) uint64 {
	if len2 <= 0 {
		return crc1
	}
	times := func(mat []uint64, vec uint64) uint64 {
		var sum uint64
		for i := 0; vec != 0; i, vec = i+1, vec>>1 {
			if vec&1 != 0 {
				sum ^= mat[i]
			}
		}
		return sum
	}
	square := func(sq, mat []uint64) {
		for n := range mat {
			sq[n] = times(mat, mat[n])
		}
	}
	odd, even := make([]uint64, width), make([]uint64, width)
	odd[0] = poly // the operator for one zero bit
	row := uint64(1)
	for n := uint(1); n < width; n++ {
		odd[n] = row
		row <<= 1
	}
	square(even, odd) // two zero bits
	square(odd, even) // four zero bits
	for len2 != 0 {
		square(even, odd) // the first square gives one zero byte
		if len2&1 != 0 {
			crc1 = times(even, crc1)
		}
		len2 >>= 1
		if len2 == 0 {
			break
		}
		square(odd, even)
		if len2&1 != 0 {
			crc1 = times(odd, crc1)
		}
		len2 >>= 1
	}
	return crc1 ^ crc2
}
