package sftp

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/crypto/ssh"
)

// User is one account of the SFTP server: who may log in, how, and the
// bucket whose tree is their whole world (their "/").
type User struct {
	Name   string
	Bucket string
	// PasswordHashes are bcrypt hashes; empty: no password login.
	PasswordHashes []string
	// Keys are the authorized public keys.
	Keys []ssh.PublicKey
}

// Users are the accounts, by name.
type Users map[string]*User

// ParseUsers reads a users file. Each line that is not blank or a
// comment (#) is
//
//	NAME BUCKET key AUTHORIZED_KEYS_LINE
//	NAME BUCKET password BCRYPT_HASH
//
// and a user may have several of each; all of a user's lines must name
// the same bucket. An error names the line.
func ParseUsers(r io.Reader) (Users, error) {
	us := Users{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("sftp: users line %d: want NAME BUCKET key|password VALUE", n)
		}
		name, bucket, kind := f[0], f[1], f[2]
		u := us[name]
		if u == nil {
			u = &User{Name: name, Bucket: bucket}
			us[name] = u
		} else if u.Bucket != bucket {
			return nil, fmt.Errorf("sftp: users line %d: %s has bucket %s, earlier %s", n, name, bucket, u.Bucket)
		}
		switch kind {
		case "key":
			k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(strings.Join(f[3:], " ")))
			if err != nil {
				return nil, fmt.Errorf("sftp: users line %d: key: %w", n, err)
			}
			u.Keys = append(u.Keys, k)
		case "password":
			if len(f) != 4 {
				return nil, fmt.Errorf("sftp: users line %d: password: want one bcrypt hash", n)
			}
			if _, err := bcrypt.Cost([]byte(f[3])); err != nil {
				return nil, fmt.Errorf("sftp: users line %d: password: not a bcrypt hash: %w", n, err)
			}
			u.PasswordHashes = append(u.PasswordHashes, f[3])
		default:
			return nil, fmt.Errorf("sftp: users line %d: %q: want key or password", n, kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sftp: users: %w", err)
	}
	return us, nil
}

// LoadUsers reads the users file at path; a missing file is no users.
func LoadUsers(path string) (Users, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Users{}, nil
	}
	if err != nil {
		return nil, err
	}
	us, err := ParseUsers(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return us, nil
}

// KeyLine is the users file line that lets name log in to bucket with key.
func KeyLine(name, bucket string, key ssh.PublicKey) string {
	return fmt.Sprintf("%s %s key %s", name, bucket, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))))
}

// PasswordLine is the users file line that lets name log in to bucket
// with password (hashed with bcrypt).
func PasswordLine(name, bucket, password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("sftp: %w", err)
	}
	return fmt.Sprintf("%s %s password %s", name, bucket, h), nil
}

// checkPassword reports whether password matches one of u's hashes.
func (u *User) checkPassword(password []byte) bool {
	for _, h := range u.PasswordHashes {
		if bcrypt.CompareHashAndPassword([]byte(h), password) == nil {
			return true
		}
	}
	return false
}

// hasKey reports whether k is one of u's keys.
func (u *User) hasKey(k ssh.PublicKey) bool {
	m := k.Marshal()
	for _, a := range u.Keys {
		if subtle.ConstantTimeCompare(a.Marshal(), m) == 1 {
			return true
		}
	}
	return false
}
