package gateway

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/argon2"
)

// TestPasswordHashFormat: hashes are Argon2id in PHC form with the
// parameters of password.go and a salt of their own; they verify the
// password and nothing else; a damaged or hostile hash verifies nothing.
func TestPasswordHashFormat(t *testing.T) {
	h := hashPassword("correct horse")
	re := regexp.MustCompile(`^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)
	if !re.MatchString(h) {
		t.Fatalf("hash %q is not Argon2id PHC", h)
	}
	if h2 := hashPassword("correct horse"); h2 == h {
		t.Fatal("two hashes of a password are the same: no salt")
	}
	if !verifyPassword(h, "correct horse") {
		t.Fatal("the password does not verify")
	}
	for _, wrong := range []string{"", "correct horse ", "Correct horse", "correct hors"} {
		if verifyPassword(h, wrong) {
			t.Errorf("%q verifies", wrong)
		}
	}
	f := strings.Split(h, "$")
	for _, bad := range []string{
		"", "correct horse", "$argon2i" + h[len("$argon2id"):], strings.Replace(h, "v=19", "v=16", 1),
		strings.Replace(h, "m=19456", "m=99999999", 1), // over the memory bound
		strings.Replace(h, "t=2", "t=0", 1), strings.Replace(h, "m=19456,", "m=19456,x=1,", 1),
		strings.Join(f[:5], "$"), h + "$", strings.Replace(h, f[4], "!!!", 1),
	} {
		if verifyPassword(bad, "correct horse") {
			t.Errorf("damaged hash %q verifies", bad)
		}
		if _, err := parsePHC(bad); err == nil {
			t.Errorf("damaged hash %q parses", bad)
		}
	}
	// Parameters other than today's still verify (they are in the hash).
	salt := []byte("sixteen byte slt")
	key := argon2.IDKey([]byte("pw"), salt, 1, 64, 2, 32)
	other := "$argon2id$v=19$m=64,t=1,p=2$" + base64.RawStdEncoding.EncodeToString(salt) + "$" + base64.RawStdEncoding.EncodeToString(key)
	if !verifyPassword(other, "pw") || verifyPassword(other, "pw2") {
		t.Fatal("a hash of other parameters does not verify right")
	}
	if a := hashAppPassword("s"); !strings.HasPrefix(a, "sha256$") || len(a) != 7+64 || a != hashAppPassword("s") {
		t.Fatalf("app password hash %q", a)
	}
}
