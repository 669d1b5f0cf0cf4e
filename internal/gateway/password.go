package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Passwords of accounts are kept as Argon2id hashes in the PHC string
// format,
//
//	$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH
//
// (salt and hash in unpadded standard base64), with OWASP's parameters:
// 19 MiB of memory, two passes, one lane. A hash carries its parameters,
// so hashes made with other ones still verify.

// Argon2id parameters of new password hashes.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonSaltLen = 16
	argonKeyLen  = 32
)

// maxArgonMemory bounds the memory a stored hash may ask for (1 GiB): a
// damaged or hostile record cannot make a login allocate more.
const maxArgonMemory = 1 << 20

// argonSlots bounds the Argon2id computations running at once, so that a
// flood of logins costs time, not memory (each takes argonMemory).
var argonSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// hashPassword returns the Argon2id hash of password in PHC form.
func hashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	rand.Read(salt)
	argonSlots <- struct{}{}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-argonSlots
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// phc is a parsed Argon2id hash.
type phc struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// errHashFormat means a stored hash is not an Argon2id PHC string this
// package can verify.
var errHashFormat = errors.New("gateway: not an Argon2id password hash")

func parsePHC(s string) (phc, error) {
	var h phc
	f := strings.Split(s, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" || f[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return h, errHashFormat
	}
	var m, t, p uint32
	if n, err := fmt.Sscanf(f[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || n != 3 ||
		m < 8 || m > maxArgonMemory || t < 1 || t > 100 || p < 1 || p > 255 || fmt.Sprintf("m=%d,t=%d,p=%d", m, t, p) != f[3] {
		return h, errHashFormat
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(f[4])
	key, err2 := b64.DecodeString(f[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 || len(key) > 64 {
		return h, errHashFormat
	}
	return phc{memory: m, time: t, threads: uint8(p), salt: salt, key: key}, nil
}

// verifyPassword reports whether password matches the PHC hash; a hash
// that does not parse matches nothing.
func verifyPassword(hash, password string) bool {
	h, err := parsePHC(hash)
	if err != nil {
		return false
	}
	argonSlots <- struct{}{}
	key := argon2.IDKey([]byte(password), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	<-argonSlots
	return subtle.ConstantTimeCompare(key, h.key) == 1
}

// dummyHash is verified against when a login names no account, so that
// an unknown name costs what a wrong password does.
var dummyHash = sync.OnceValue(func() string { return hashPassword("no such user") })

// App passwords are 160 random bits, so a fast hash keeps them as safe
// as a slow one would (there is nothing to guess a dictionary of): they
// are kept as "sha256$HEX" and checked in microseconds.
func hashAppPassword(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return "sha256$" + hex.EncodeToString(s[:])
}

// newAppSecret returns a new app password: 32 lower-case base32
// characters.
func newAppSecret() string { return NewPassword() }

// NewPassword returns a new random password: 32 lower-case letters and
// digits (160 bits, base32), so that no command line takes it for an
// option (owncloudcmd reads a password that starts with "-" as one, and
// prints its usage) and no shell expands it.
func NewPassword() string {
	b := make([]byte, 20)
	rand.Read(b)
	return strings.ToLower(b32.EncodeToString(b))
}

// MinPassword is the shortest password an account may have.
const MinPassword = 8

// maxPassword bounds a password (Argon2id reads all of it).
const maxPassword = 1024

// ErrBadPassword means a password cannot be set: too short or too long.
var ErrBadPassword = errors.New("gateway: unusable password")

// CheckPassword tells whether password may be an account's: at least
// MinPassword and at most 1024 bytes.
func CheckPassword(password string) error {
	switch {
	case len(password) < MinPassword:
		return fmt.Errorf("%w: at least %d characters", ErrBadPassword, MinPassword)
	case len(password) > maxPassword:
		return fmt.Errorf("%w: at most %d bytes", ErrBadPassword, maxPassword)
	}
	return nil
}
