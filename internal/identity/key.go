package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// keyFile is the name of the node key file inside a node's directory.
const keyFile = "node.key"

const pemPrivateKey = "PRIVATE KEY"

// LoadOrCreateKey reads the node key from dir/node.key (PEM "PRIVATE KEY",
// PKCS#8, Ed25519). If the file does not exist it generates a new key and
// writes it durably: mode 0600, to a temporary file that is fsynced and then
// renamed into place (and the directory fsynced). dir is created with mode
// 0700 if needed.
//
// A file that exists but cannot be parsed is an error that names the file
// and wraps [ErrBadKey]; it is never replaced, since it may be the only copy
// of the node's identity.
func LoadOrCreateKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, keyFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		return parseKey(path, data)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("identity: read node key: %w", err)
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("identity: create key directory: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity: generate node key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("identity: encode node key: %w", err)
	}
	data = pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der})
	if err := writeFileAtomic(path, data); err != nil {
		return nil, fmt.Errorf("identity: write node key: %w", err)
	}
	return key, nil
}

// parseKey decodes the contents of a node key file; path is for messages.
func parseKey(path string, data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: %s: no PEM block", ErrBadKey, path)
	}
	if block.Type != pemPrivateKey {
		return nil, fmt.Errorf("%w: %s: PEM block is %q, want %q", ErrBadKey, path, block.Type, pemPrivateKey)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%w: %s: trailing data after PEM block", ErrBadKey, path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadKey, path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: %s: key is %T, want Ed25519", ErrBadKey, path, k)
	}
	return key, nil
}

// writeFileAtomic writes data to path with mode 0600 through a temporary file
// in the same directory, fsyncs it, renames it into place and fsyncs the
// directory, so that after a crash path is either absent or complete.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
