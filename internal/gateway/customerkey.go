package gateway

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"
)

// Objects encrypted with a customer's key (S3's SSE-C). The client sends
// a 256-bit key with every request that writes or reads the object; the
// gateway never stores it. What it stores, in the object's record, is a
// random salt and HMAC-SHA256(key, "quilt sse-c check" || salt), enough
// to tell the right key from a wrong one and nothing more. The bytes
// themselves are encrypted with AES-256-CTR under
// HMAC-SHA256(key, "quilt sse-c data" || salt) before they become inline
// bytes or a grid object (which the grid encrypts again with its own
// per-object key): without the customer's key, whoever holds the
// bucket's keys and capabilities reads only that ciphertext. Each part
// of a multipart object has a salt of its own, so no two pieces share a
// key stream. CTR keeps sizes and offsets: a range is decrypted from its
// offset alone, and the grid's hash trees already make every read
// tamper-evident, which an AEAD would otherwise have added.

// CustomerKey is a key a client gave with a request, used for one
// request and never stored.
type CustomerKey [32]byte

// CustomerEncryption describes an object encrypted with a customer key:
// what checks a key (never the key).
type CustomerEncryption struct {
	Algorithm string `json:"alg"`  // AES256
	Salt      []byte `json:"salt"` // random, 32 bytes
	MAC       []byte `json:"mac"`  // HMAC-SHA256(key, "quilt sse-c check" || Salt)
}

// Errors of customer-key encryption.
var (
	// ErrKeyRequired: the object is encrypted with a customer key and
	// the request gave none.
	ErrKeyRequired = errors.New("gateway: the object is encrypted with a customer key, which the request must give")
	// ErrWrongKey: the key given is not the one the object was
	// encrypted with.
	ErrWrongKey = errors.New("gateway: the customer key given is not the object's")
	// ErrNotEncrypted: a customer key was given for an object that is
	// not encrypted with one.
	ErrNotEncrypted = errors.New("gateway: the object is not encrypted with a customer key")
)

const (
	labelCheck = "quilt sse-c check"
	labelData  = "quilt sse-c data"
)

func newSalt() []byte {
	s := make([]byte, 32)
	rand.Read(s)
	return s
}

func derive(k CustomerKey, label string, salt []byte) []byte {
	m := hmac.New(sha256.New, k[:])
	m.Write([]byte(label))
	m.Write(salt)
	return m.Sum(nil)
}

// newCustomerEncryption makes the record of a new object (or upload)
// encrypted with k.
func newCustomerEncryption(k CustomerKey) *CustomerEncryption {
	salt := newSalt()
	return &CustomerEncryption{Algorithm: "AES256", Salt: salt, MAC: derive(k, labelCheck, salt)}
}

// CheckCustomerKey tells whether a request may read an object (or write
// a part of an upload) encrypted as e with key k: nil when both are nil
// or k is e's key; ErrKeyRequired, ErrWrongKey or ErrNotEncrypted
// otherwise.
func CheckCustomerKey(e *CustomerEncryption, k *CustomerKey) error {
	switch {
	case e == nil && k == nil:
		return nil
	case e == nil:
		return ErrNotEncrypted
	case k == nil:
		return ErrKeyRequired
	case !hmac.Equal(e.MAC, derive(*k, labelCheck, e.Salt)):
		return ErrWrongKey
	}
	return nil
}

// keyStream is the AES-256-CTR key stream of the piece (object or part)
// salted salt, from byte off on.
func keyStream(k CustomerKey, salt []byte, off int64) cipher.Stream {
	block, _ := aes.NewCipher(derive(k, labelData, salt))
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off/aes.BlockSize))
	s := cipher.NewCTR(block, iv[:])
	var skip [aes.BlockSize]byte
	n := off % aes.BlockSize
	s.XORKeyStream(skip[:n], skip[:n])
	return s
}

// encryptReader encrypts r from its first byte.
func encryptReader(k CustomerKey, salt []byte, r io.Reader) io.Reader {
	return cipher.StreamReader{S: keyStream(k, salt, 0), R: r}
}

// decryptWriter decrypts what is written to it, bytes from off of the
// piece, into w.
func decryptWriter(k CustomerKey, salt []byte, off int64, w io.Writer) io.Writer {
	return cipher.StreamWriter{S: keyStream(k, salt, off), W: w}
}

// customerWrite is a body being encrypted with a customer key on its way
// to the store: the MD5 a client announced (Content-MD5) is of the bytes
// it sent, so it is checked here, before encryption.
type customerWrite struct {
	r    io.Reader
	want []byte
	sum  hash.Hash
}

func newCustomerWrite(k CustomerKey, salt []byte, r io.Reader, want []byte) *customerWrite {
	c := &customerWrite{want: want}
	if want != nil {
		c.sum = md5.New()
		r = io.TeeReader(r, c.sum)
	}
	c.r = encryptReader(k, salt, r)
	return c
}

func (c *customerWrite) Read(p []byte) (int, error) { return c.r.Read(p) }

// check is ErrBadDigest if the bytes read were not the announced ones.
func (c *customerWrite) check() error {
	if c.want != nil && !bytes.Equal(c.sum.Sum(nil), c.want) {
		return ErrBadDigest
	}
	return nil
}
