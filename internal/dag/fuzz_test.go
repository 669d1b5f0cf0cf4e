package dag

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"
)

// fuzzRecords are the encodings of one record of every kind, made by a
// Writer, and the read key that opens their sealed parts.
func fuzzRecords() ([][]byte, ReadKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	var ns NSID
	copy(ns[:], priv.Public().(ed25519.PublicKey))
	var key ReadKey
	key[0] = 9
	clock := &Clock{Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
	w := &Writer{NS: ns, Key: priv, Read: key, Clock: clock}
	root := w.Root()
	rh := root.Hash()
	dir := w.Entry(Mkdir, rh, nil, "docs", nil)
	small := w.Entry(Write, dir.Hash(), nil, "a.txt", []byte("hello"))
	big, blocks := w.File(dir.Hash(), []Hash{small.Hash()}, "a.txt", bytes.Repeat([]byte("0123456789"), 150))
	grant := w.GrantKey(rh, "laptop", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32)).Public().(ed25519.PublicKey))
	out := [][]byte{root.Encode(), dir.Encode(), small.Encode(), big.Encode(), grant.Encode(),
		w.ObjectFile(rh, nil, "obj", "quilt:r:aaaa", 1<<30).Encode(),
		w.RevokeGrant(rh, grant.Hash(), []Hash{small.Hash()}).Encode(),
		w.Ack(rh, []Hash{dir.Hash()}).Encode(),
		w.Pointer(Write, dir.Hash(), nil, "a.txt", small.Hash()).Encode()}
	for _, b := range blocks {
		out = append(out, b.Encode())
	}
	return out, key
}

// FuzzDecode decodes records as a replica does with what peers send: a
// record that decodes re-encodes to exactly its bytes (one record, one
// hash), and its sealed part may be opened without harm.
func FuzzDecode(f *testing.F) {
	seeds, key := fuzzRecords()
	for _, s := range seeds {
		f.Add(s)
	}
	f.Add([]byte{entryTag, byte(Write), byte(Inline), MaxParents + 1})
	f.Add([]byte{blockTag})
	f.Add(append([]byte{entryTag, byte(Mkdir), 0, 0}, make([]byte, 8)...))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := Decode(raw)
		if r.Hash != RawHash(raw) {
			t.Fatalf("Decode hash %v, want %v", r.Hash, RawHash(raw))
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			if r.Entry != nil || r.Block != nil {
				t.Fatalf("failed Decode returned a record")
			}
			return
		}
		switch {
		case r.Entry != nil && r.Block == nil:
			if got := r.Entry.Encode(); !bytes.Equal(got, raw) {
				t.Fatalf("entry re-encodes to %x, was %x", got, raw)
			}
			if r.Entry.Hash() != r.Hash {
				t.Fatalf("entry hash %v, record hash %v", r.Entry.Hash(), r.Hash)
			}
			if err := r.Entry.wellFormed(); err != nil {
				t.Fatalf("decoded entry is not well formed: %v", err)
			}
			if _, _, err := key.Open(r.Entry.Sealed); err != nil && !errors.Is(err, ErrBadKey) {
				t.Fatalf("Open: %v", err)
			}
		case r.Block != nil && r.Entry == nil:
			if got := r.Block.Encode(); !bytes.Equal(got, raw) || r.Block.Hash() != r.Hash {
				t.Fatalf("block re-encodes to %x, was %x", got, raw)
			}
			if _, _, err := key.Open(r.Block.Sealed); err != nil && !errors.Is(err, ErrBadKey) {
				t.Fatalf("Open: %v", err)
			}
		default:
			t.Fatalf("Decode gave entry %v and block %v", r.Entry, r.Block)
		}
	})
}

// TestFuzzRecordsDecode checks that the fuzz seeds are records.
func TestFuzzRecordsDecode(t *testing.T) {
	seeds, _ := fuzzRecords()
	for i, s := range seeds {
		if _, err := Decode(s); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
}

// FuzzParseIDs parses the text forms of namespace IDs, read keys and
// entry hashes (the parts of a quilt:ns: capability, and what the sync API
// takes in its paths): what parses formats back to the input, trimmed and
// in lower case.
func FuzzParseIDs(f *testing.F) {
	var ns NSID
	var key ReadKey
	var h Hash
	for i := range ns {
		ns[i], key[i], h[i] = byte(i), byte(255-i), byte(3*i)
	}
	f.Add(ns.String())
	f.Add(" " + strings.ToUpper(key.String()) + "\n")
	f.Add(h.String())
	f.Add(ns.String()[:51] + "b")
	f.Add(ns.String() + "=")
	f.Add(h.String()[:63])
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.ToLower(strings.TrimSpace(s))
		if id, err := ParseNSID(s); err == nil && id.String() != want {
			t.Errorf("ParseNSID(%q).String() = %q", s, id.String())
		}
		if k, err := ParseReadKey(s); err == nil && k.String() != want {
			t.Errorf("ParseReadKey(%q).String() = %q", s, k.String())
		}
		if h, err := ParseHash(s); err == nil && h.String() != strings.ToLower(s) {
			t.Errorf("ParseHash(%q).String() = %q", s, h.String())
		}
	})
}
