package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/sharelink"
	"golang.org/x/crypto/bcrypt"
)

// shareLinks returns the share-link handler served beside WebDAV (/s/,
// /api/shares). Its logged-in user is the WebDAV user whose name and
// password a request carries (HTTP Basic auth against the users file),
// until the web app's session takes that part.
func shareLinks(gw *gateway.Gateway, usersFile string, log *slog.Logger) (*sharelink.Handler, error) {
	return sharelink.New(sharelink.Config{
		Links:  gw,
		Grants: gw,
		User:   basicAuthUser(usersFile),
		Tree:   sftp.GatewayTrees(gw),
		// Grants go to users of the users file; it has no groups.
		Principal: func(ctx context.Context, with string) bool {
			name, ok := strings.CutPrefix(with, "user:")
			return ok && knownUser(usersFile, name)
		},
		// A user taken out of the file takes their links and grants along.
		OwnerActive: func(ctx context.Context, owner string) bool { return knownUser(usersFile, owner) },
		Logger:      log,
	})
}

// basicAuthUser returns the user and bucket of the users file whose name
// and password a request carries.
func basicAuthUser(usersFile string) func(r *http.Request) (string, string, bool) {
	return func(r *http.Request) (string, string, bool) {
		name, pw, ok := r.BasicAuth()
		if !ok {
			return "", "", false
		}
		us, err := sftp.LoadUsers(usersFile)
		if err != nil || us[name] == nil {
			return "", "", false
		}
		for _, h := range us[name].PasswordHashes {
			if bcrypt.CompareHashAndPassword([]byte(h), []byte(pw)) == nil {
				return name, us[name].Bucket, true
			}
		}
		return "", "", false
	}
}

// knownUser reports whether the users file has a user name.
func knownUser(usersFile, name string) bool {
	us, err := sftp.LoadUsers(usersFile)
	return err == nil && us[name] != nil
}

// withShareLinks sends the share links' paths to links and every other
// request to next (WebDAV), unchanged.
func withShareLinks(next, links http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sharelink.Owns(r.URL.Path) {
			links.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
