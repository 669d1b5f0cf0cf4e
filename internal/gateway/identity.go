package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Identity is who a request acts as, as S3's ACLs, policies and listings
// name it: an ID that stays the same for as long as the identity lives,
// and a name to show. An account's key acts as the account: its ID and
// display name are the account's name (users.go). Any other access key
// is an identity of its own, whose ID is a SHA-256 of the key's ID (64
// hex digits, like S3's canonical user IDs; it does not reveal the key
// ID) and whose display name is "key-" and the ID's first 8 digits.
// IDs of the two kinds never collide: account names are at most 32
// characters.
type Identity struct {
	ID          string `json:"id"`
	DisplayName string `json:"name,omitempty"`
}

// KeyIdentity is the identity access key k acts as.
func KeyIdentity(k AccessKey) Identity {
	if k.User != "" {
		return Identity{ID: k.User, DisplayName: k.User}
	}
	return keyIdentity(k.ID)
}

func keyIdentity(keyID string) Identity {
	sum := sha256.Sum256([]byte("quilt-s3-identity\x00" + keyID))
	id := hex.EncodeToString(sum[:])
	return Identity{ID: id, DisplayName: "key-" + id[:8]}
}

// BucketOwner is the identity of the access key that made a bucket
// (ErrNoBucket if there is none of the name). A key since deleted
// keeps its identity (derived from its ID); an account's key is the
// account.
func (g *Gateway) BucketOwner(ctx context.Context, bucketName string) (Identity, error) {
	keyID, err := g.Owner(ctx, bucketName)
	if err != nil {
		return Identity{}, err
	}
	if k, err := g.Key(ctx, keyID); err == nil {
		return KeyIdentity(k), nil
	}
	return keyIdentity(keyID), nil
}

// SetACL replaces an object's access control list (ObjectInfo.ACL),
// keeping its bytes, ETag, tags and time: the record is written again,
// under the key's lock, as the current version has it. A missing key is
// ErrNoKey.
func (g *Gateway) SetACL(ctx context.Context, bucketName, key string, acl json.RawMessage) (ObjectInfo, error) {
	return g.rewriteCurrent(ctx, bucketName, key, func(info *ObjectInfo) { info.ACL = acl })
}
