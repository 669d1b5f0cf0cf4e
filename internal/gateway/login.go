package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"slices"
)

// Authenticate checks a user's password or one of their app passwords
// and returns the user. An unknown user and a wrong password are both
// ErrDenied, and cost the same: an Argon2id verification (of a dummy
// hash for an unknown user). A password that matched is remembered (by
// its SHA-256) while the hash it matched stays in the user's record, so
// a client that sends it with every request pays Argon2id once; a new
// password, a revoked app password or a removed user ends that at once.
// It reads this gateway's replica of the registry, which its background
// sync keeps within a second of the grid.
func (g *Gateway) Authenticate(ctx context.Context, name, password string) (User, error) {
	rec, err := g.readUser(name)
	if err != nil || len(password) > maxPassword {
		verifyPassword(dummyHash(), password[:min(len(password), maxPassword)])
		return User{}, ErrDenied
	}
	sum := sha256.Sum256([]byte(password))
	current := func(hash string) bool {
		if hash == rec.Hash {
			return true
		}
		return slices.ContainsFunc(rec.AppPasswords, func(a AppPassword) bool { return a.Hash == hash })
	}
	if g.cached(name, sum, current) {
		return rec.public(), nil
	}
	matched := ""
	appHash := hashAppPassword(password)
	for _, a := range rec.AppPasswords {
		if subtle.ConstantTimeCompare([]byte(a.Hash), []byte(appHash)) == 1 {
			matched = a.Hash
		}
	}
	if verifyPassword(rec.Hash, password) {
		matched = rec.Hash
	}
	if matched == "" {
		return User{}, ErrDenied
	}
	g.remember(name, authEntry{sum: sum, hash: matched})
	return rec.public(), nil
}

// cached reports whether a password of this SHA-256 matched one of the
// user's hashes that current still accepts; entries of hashes no longer
// current are dropped.
func (g *Gateway) cached(name string, sum [32]byte, current func(hash string) bool) bool {
	g.acct.authMu.Lock()
	defer g.acct.authMu.Unlock()
	es := g.acct.authed[name]
	ok := false
	kept := es[:0]
	for _, e := range es {
		if !current(e.hash) {
			continue
		}
		kept = append(kept, e)
		if subtle.ConstantTimeCompare(e.sum[:], sum[:]) == 1 {
			ok = true
		}
	}
	if len(kept) == 0 {
		delete(g.acct.authed, name)
	} else {
		g.acct.authed[name] = kept
	}
	return ok
}

// remember adds a verified password, keeping the last few per user.
func (g *Gateway) remember(name string, e authEntry) {
	g.acct.authMu.Lock()
	defer g.acct.authMu.Unlock()
	if g.acct.authed == nil {
		g.acct.authed = map[string][]authEntry{}
	}
	es := append(g.acct.authed[name], e)
	if len(es) > maxCachedPerUser {
		es = es[len(es)-maxCachedPerUser:]
	}
	g.acct.authed[name] = es
}

// forget drops the verified passwords of a user.
func (g *Gateway) forget(name string) {
	g.acct.authMu.Lock()
	delete(g.acct.authed, name)
	g.acct.authMu.Unlock()
}
