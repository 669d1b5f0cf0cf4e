package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node", "state")
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.key")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("key file mode %o, want 600", m)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := di.Mode().Perm(); m&0o077 != 0 {
		t.Errorf("key directory mode %o, want no group/other access", m)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only node.key (temp file left?)", len(entries))
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key file is not a PEM PRIVATE KEY:\n%s", data)
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		t.Fatalf("key file is not PKCS#8: %v", err)
	}

	again, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Equal(key) {
		t.Fatal("second LoadOrCreateKey returned a different key")
	}
	other, err := LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if other.Equal(key) {
		t.Fatal("two directories got the same key")
	}
}

func TestLoadOrCreateKeyCorrupt(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	good, err := LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	goodDER, err := x509.MarshalPKCS8PrivateKey(good)
	if err != nil {
		t.Fatal(err)
	}
	goodPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: goodDER})

	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte("not a key at all\n")},
		{"wrong PEM type", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: goodDER})},
		{"bad DER", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{0x30, 0x03, 1, 2}})},
		{"ECDSA key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})},
		{"trailing data", append(append([]byte(nil), goodPEM...), "junk"...)},
		{"truncated", goodPEM[:len(goodPEM)/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "node.key")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			key, err := LoadOrCreateKey(dir)
			if err == nil {
				t.Fatalf("LoadOrCreateKey accepted a corrupt file, returned key %x", key)
			}
			if !errors.Is(err, ErrBadKey) {
				t.Errorf("error %q does not wrap ErrBadKey", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !bytes.Equal(after, tc.data) {
				t.Errorf("corrupt key file was changed")
			}
		})
	}
}

func TestLoadOrCreateKeyTrailingNewlines(t *testing.T) {
	dir := t.TempDir()
	key, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.key")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, "\n\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatalf("key file with trailing blank lines: %v", err)
	}
	if !again.Equal(key) {
		t.Fatal("different key after adding blank lines")
	}
}
