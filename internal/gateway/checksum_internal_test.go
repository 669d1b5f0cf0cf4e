package gateway

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// TestMultipartChecksum: a FULL_OBJECT CRC combined from the parts' is
// the CRC of the whole, for each CRC and for parts of any length, empty
// ones included; a part without the checksum gives none.
func TestMultipartChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, alg := range []string{"crc32", "crc32c", "crc64nvme"} {
		for range 20 {
			var whole []byte
			var parts []Part
			for range 1 + rng.IntN(5) {
				b := make([]byte, rng.IntN(3000))
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				h, _ := NewChecksum(alg)
				h.Write(b)
				parts = append(parts, Part{Size: int64(len(b)), Checksums: map[string]string{alg: base64.StdEncoding.EncodeToString(h.Sum(nil))}})
				whole = append(whole, b...)
			}
			h, _ := NewChecksum(alg)
			h.Write(whole)
			if got, want := multipartChecksum(alg, FullObject, parts), base64.StdEncoding.EncodeToString(h.Sum(nil)); got != want {
				t.Fatalf("%s of %d parts: %s, want %s", alg, len(parts), got, want)
			}
			parts[0].Checksums = nil
			if got := multipartChecksum(alg, FullObject, parts); got != "" {
				t.Fatalf("%s with a part lacking it: %s", alg, got)
			}
		}
	}
}
