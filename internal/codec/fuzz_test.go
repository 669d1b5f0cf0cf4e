package codec

import (
	"errors"
	"strings"
	"testing"
)

// fuzzCanonical is the capability string that one which parsed should
// format back to: white space trimmed, the base32 lowercased (parsing
// accepts either case).
func fuzzCanonical(s string) string {
	s = strings.TrimSpace(s)
	for _, p := range []string{readPrefix, verifyPrefix} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return p + strings.ToLower(rest)
		}
	}
	return s
}

// FuzzParseCap parses capability strings both ways (parse, then format,
// gives the canonical string; format, then parse, gives the capability),
// and formats capabilities built from the fuzzer's fields.
func FuzzParseCap(f *testing.F) {
	rc := ReadCap{Params: Params{3, 10, 1 << 20}, Size: 123456789}
	for i := range rc.Key {
		rc.Key[i] = byte(i)
	}
	rc.Root[0] = 0xaa
	empty := ReadCap{Params: Params{1, 1, 1}}
	for _, s := range []string{rc.String(), rc.Verify().String(), empty.String(), empty.Verify().String(),
		"  " + strings.ToUpper(rc.String()[len(readPrefix):]) + "\n", "quilt:r:", "quilt:v:aaaa", "quilt:x:" + rc.String()[8:]} {
		f.Add(s, rc.Key[:], uint8(3), uint8(10), uint32(1<<20), uint64(123456789))
	}
	f.Add(rc.String()[:len(rc.String())-3], []byte{1}, uint8(0), uint8(0), uint32(0), uint64(1<<63))
	f.Fuzz(func(t *testing.T, s string, key []byte, k, n uint8, seg uint32, size uint64) {
		r, rerr := ParseReadCap(s)
		v, verr := ParseVerifyCap(s)
		for _, err := range []error{rerr, verr} {
			if err != nil && !errors.Is(err, ErrBadCap) {
				t.Fatalf("error %v does not match ErrBadCap", err)
			}
		}
		if rerr == nil {
			if got := r.String(); got != fuzzCanonical(s) {
				t.Fatalf("ParseReadCap(%q).String() = %q", s, got)
			}
			if r2, err := ParseReadCap(r.String()); err != nil || r2 != r {
				t.Fatalf("read cap %q does not parse back: %+v, %v", r.String(), r2, err)
			}
			if verr != nil || v != r.Verify() {
				t.Fatalf("ParseVerifyCap of read cap %q = %+v, %v; want %+v", s, v, verr, r.Verify())
			}
		}
		if verr == nil && rerr != nil {
			if got := v.String(); got != fuzzCanonical(s) {
				t.Fatalf("ParseVerifyCap(%q).String() = %q", s, got)
			}
			if v2, err := ParseVerifyCap(v.String()); err != nil || v2 != v {
				t.Fatalf("verify cap %q does not parse back: %+v, %v", v.String(), v2, err)
			}
		}

		// format, then parse
		c := ReadCap{Params: Params{int(k), int(n), int(seg)}, Size: int64(size)}
		copy(c.Key[:], key)
		copy(c.Root[:], key)
		if c.Params.Validate() != nil || size > 1<<62 {
			return
		}
		if got, err := ParseReadCap(c.String()); err != nil || got != c {
			t.Fatalf("ParseReadCap(%q) = %+v, %v; want %+v", c.String(), got, err, c)
		}
		vc := c.Verify()
		if got, err := ParseVerifyCap(vc.String()); err != nil || got != vc {
			t.Fatalf("ParseVerifyCap(%q) = %+v, %v; want %+v", vc.String(), got, err, vc)
		}
		_ = vc.Layout()
	})
}
