package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/sharelink"
	"github.com/quilt-grid/quilt/internal/webapp"
	"github.com/quilt-grid/quilt/internal/webdav"
)

// shareLinks returns the share-link handler served beside WebDAV (/s/,
// /api/shares). Its logged-in user is session's (the web app's), or, for
// scripts, the account whose name and password (or app password) a
// request carries in HTTP Basic auth (auth, as WebDAV checks it).
// Principals are the gateway's accounts and groups, and the users of an
// older gateway's users file.
func shareLinks(gw *gateway.Gateway, usersFile string, session func(r *http.Request) (string, string, bool),
	auth func(ctx context.Context, user, password string) (string, error), log *slog.Logger) (*sharelink.Handler, error) {
	return sharelink.New(sharelink.Config{
		Links:  gw,
		Grants: gw,
		User: func(r *http.Request) (string, string, bool) {
			if name, bucket, ok := session(r); ok {
				return name, bucket, true
			}
			name, pw, ok := r.BasicAuth()
			if !ok {
				return "", "", false
			}
			bucket, err := auth(r.Context(), name, pw)
			return name, bucket, err == nil
		},
		Tree: sftp.GatewayTrees(gw),
		Groups: func(ctx context.Context, user string) []string {
			u, err := gw.User(ctx, user)
			if err != nil {
				return nil
			}
			return u.Groups
		},
		Principal: func(ctx context.Context, with string) bool {
			if name, ok := strings.CutPrefix(with, "user:"); ok {
				return gw.KnowsUser(name) || knownUser(usersFile, name)
			}
			if name, ok := strings.CutPrefix(with, "group:"); ok {
				gs, _ := gw.Groups(ctx)
				for _, g := range gs {
					if g.Name == name {
						return true
					}
				}
			}
			return false
		},
		// A user removed takes their links and grants along.
		OwnerActive: func(ctx context.Context, owner string) bool {
			return gw.KnowsUser(owner) || knownUser(usersFile, owner)
		},
		// The web app's trash is its owner's alone.
		Hidden: webapp.Hidden,
		Logger: log,
	})
}

// knownUser reports whether an older gateway's users file has a user name.
func knownUser(usersFile, name string) bool {
	us, err := sftp.LoadUsers(usersFile)
	return err == nil && us[name] != nil
}

// davPaths are the listener's paths WebDAV serves: its own and the ones
// ownCloud's and Nextcloud's clients use.
var davPaths = []string{webdav.Prefix, "/remote.php/", "/status.php", "/ocs/"}

// filesMux sends the share links' paths to links, WebDAV's to dav and
// every other request to the web app. It matches prefixes of the path as
// sent, without cleaning it (an http.ServeMux would redirect a path with
// "..", which WebDAV refuses with 400).
func filesMux(dav, links, app http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if sharelink.Owns(p) {
			links.ServeHTTP(w, r)
			return
		}
		for _, d := range davPaths {
			if strings.HasPrefix(p, d) || p+"/" == d {
				dav.ServeHTTP(w, r)
				return
			}
		}
		app.ServeHTTP(w, r)
	})
}
