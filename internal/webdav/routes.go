package webdav

import "strings"

// The URLs of ownCloud and Nextcloud servers that their clients use,
// served beside Prefix (docs/files.md).
const (
	// StatusPath is the server's status (no login needed).
	StatusPath = "/status.php"
	// OCSPrefix is the start of the OCS API (capabilities, the user).
	OCSPrefix = "/ocs/"
	// FilesPrefix is where user NAME's tree is served again:
	// FilesPrefix+NAME+"/".
	FilesPrefix = "/remote.php/dav/files/"
	// UploadsPrefix is where user NAME's chunked uploads are:
	// UploadsPrefix+NAME+"/ID/CHUNK" (docs/files.md).
	UploadsPrefix = "/remote.php/dav/uploads/"
	// LegacyPrefix is the logged-in user's tree without a user in the
	// path (ownCloud's old WebDAV URL).
	LegacyPrefix = "/remote.php/webdav"
)

// routeKind says what a URL path is.
type routeKind int

const (
	routeFiles   routeKind = iota // a user's tree
	routeUploads                  // a user's chunked uploads
	routeOCS                      // the OCS API
)

// route is a URL path taken apart.
type route struct {
	kind routeKind
	// user is the user named by the path; "" for LegacyPrefix and OCS
	// (the logged-in user).
	user string
	// prefix is the part before the tree's (or the uploads') path, such
	// as "/dav/alice"; rest is the path after it ("", or starting with
	// "/").
	prefix, rest string
}

// parseRoute takes a URL path apart; ok is false for a path the server
// does not serve.
func parseRoute(p string) (route, bool) {
	withUser := func(kind routeKind, base string) (route, bool) {
		rest, ok := strings.CutPrefix(p, base)
		if !ok {
			return route{}, false
		}
		u, tail, slash := strings.Cut(rest, "/")
		if u == "" {
			return route{}, false
		}
		r := route{kind: kind, user: u, prefix: base + u}
		if slash {
			r.rest = "/" + tail
		}
		return r, true
	}
	switch {
	case strings.HasPrefix(p, Prefix):
		return withUser(routeFiles, Prefix)
	case strings.HasPrefix(p, FilesPrefix):
		return withUser(routeFiles, FilesPrefix)
	case strings.HasPrefix(p, UploadsPrefix):
		return withUser(routeUploads, UploadsPrefix)
	case p == LegacyPrefix || strings.HasPrefix(p, LegacyPrefix+"/"):
		return route{kind: routeFiles, prefix: LegacyPrefix, rest: strings.TrimPrefix(p, LegacyPrefix)}, true
	case strings.HasPrefix(p, OCSPrefix):
		return route{kind: routeOCS, prefix: OCSPrefix, rest: "/" + strings.TrimPrefix(p, OCSPrefix)}, true
	}
	return route{}, false
}

// badPath reports whether a decoded URL path's part after its route
// prefix (rest) has an empty, "." or ".." element, or a NUL: such a path
// is refused, not cleaned, so no spelling (%2e%2e, a/../b) reaches
// another user's tree. A trailing slash is no empty element.
func badPath(rest string) bool {
	if strings.ContainsRune(rest, 0) {
		return true
	}
	es := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	for i, e := range es {
		if e == "." || e == ".." || (e == "" && i < len(es)-1) {
			return true
		}
	}
	return false
}
