package gateway

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"testing"
)

// TestCustomerKeyStream: bytes encrypted whole decrypt from any offset,
// any length (CTR's counter and the skip within a block); another salt
// or key gives other bytes; the check tells the key from another.
func TestCustomerKeyStream(t *testing.T) {
	var k, other CustomerKey
	rand.Read(k[:])
	rand.Read(other[:])
	e := newCustomerEncryption(k)
	plain := make([]byte, 10_000)
	rand.Read(plain)
	ct, err := io.ReadAll(encryptReader(k, e.Salt, bytes.NewReader(plain)))
	if err != nil || len(ct) != len(plain) || bytes.Equal(ct, plain) {
		t.Fatalf("encrypt: %d bytes, %v", len(ct), err)
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	for i := range 500 {
		off := rng.IntN(len(plain))
		n := rng.IntN(len(plain)-off) + 1
		if i < 40 { // block edges
			off, n = i*8, min(len(plain)-i*8, 1+i%17)
		}
		var out bytes.Buffer
		w := decryptWriter(k, e.Salt, int64(off), &out)
		// Written in uneven pieces, as a grid read delivers them.
		for p := ct[off : off+n]; len(p) > 0; {
			m := min(len(p), rng.IntN(40)+1)
			if _, err := w.Write(p[:m]); err != nil {
				t.Fatal(err)
			}
			p = p[m:]
		}
		if !bytes.Equal(out.Bytes(), plain[off:off+n]) {
			t.Fatalf("decrypt %d+%d differs", off, n)
		}
	}
	other2, _ := io.ReadAll(encryptReader(k, newSalt(), bytes.NewReader(plain)))
	other3, _ := io.ReadAll(encryptReader(other, e.Salt, bytes.NewReader(plain)))
	if bytes.Equal(other2, ct) || bytes.Equal(other3, ct) {
		t.Fatal("another salt or key gives the same ciphertext")
	}
	if err := CheckCustomerKey(e, &k); err != nil {
		t.Fatalf("the right key: %v", err)
	}
	for _, c := range []struct {
		e    *CustomerEncryption
		k    *CustomerKey
		want error
	}{{e, &other, ErrWrongKey}, {e, nil, ErrKeyRequired}, {nil, &k, ErrNotEncrypted}, {nil, nil, nil}} {
		if err := CheckCustomerKey(c.e, c.k); !errors.Is(err, c.want) || c.want == nil && err != nil {
			t.Errorf("check %v: %v, want %v", c.k != nil, err, c.want)
		}
	}
	// The record holds neither the key nor the data key.
	if bytes.Contains(e.MAC, k[:]) || bytes.Equal(e.MAC, derive(k, labelData, e.Salt)) {
		t.Fatal("the check is the key or the data key")
	}
}
