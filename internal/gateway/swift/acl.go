package swift

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
)

// Container ACLs (X-Container-Read, X-Container-Write). A project named
// in them gets the same grant S3 keys have on a bucket: its access key
// gets read (X-Container-Read) or write (X-Container-Write, which
// includes reading, as S3's grants nest) on the container, so one grant
// serves both protocols. Elements naming users (PROJECT:USER, *:USER,
// *:*), which S3's per-key grants cannot hold, and the referrer elements
// (.r:*, .r:.example.com, .r:-host) and .rlistings, which let requests
// without a token read, are kept in the container's record and honoured
// by Swift only.

// acl is a parsed ACL header.
type acl struct {
	referrers []string // .r: values, in order
	listings  bool     // .rlistings
	projects  []string // whole projects (PROJECT, PROJECT:*), without :* or AUTH_
	users     []string // PROJECT:USER elements (either may be *), as given
}

// parseACL reads an ACL header as Swift's parse_acl does: elements
// separated by commas, .r:/.ref:/.referer:/.referrer: referrers,
// .rlistings, and groups: a whole project (PROJECT, PROJECT:*,
// PROJECT_ID:* or AUTH_PROJECT_ID) or users (PROJECT:USER, by name or
// ID, either of them * for any).
func parseACL(v string) (acl, error) {
	var a acl
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.HasPrefix(e, ".") {
			d, val, _ := strings.Cut(e, ":")
			switch d {
			case ".r", ".ref", ".referer", ".referrer":
				if val == "" || val == "-" {
					return a, serr(400, "Bad Request: a referrer ACL element needs a host (.r:*, .r:.example.com, .r:-host)")
				}
				if val == "-*" {
					return a, serr(400, "Bad Request: .r:-* is not allowed in an ACL")
				}
				a.referrers = append(a.referrers, val)
			case ".rlistings":
				a.listings = true
			default:
				return a, serr(400, fmt.Sprintf("Bad Request: unknown designator %s in an ACL", d))
			}
			continue
		}
		p, user, ok := strings.Cut(e, ":")
		switch {
		case p == "" || ok && user == "":
			return a, serr(400, fmt.Sprintf("Bad Request: ACL element %q is not PROJECT, PROJECT:USER or a designator", e))
		case ok && (user != "*" || p == "*"):
			a.users = append(a.users, e)
		case p == "*":
			return a, serr(400, fmt.Sprintf("Bad Request: ACL element %q: write *:* for any user", e))
		default:
			a.projects = append(a.projects, strings.TrimPrefix(p, "AUTH_"))
		}
	}
	return a, nil
}

// referrerAllowed reports whether a Referer is allowed by referrer ACL
// elements, as Swift's referrer_allowed: the last element that matches
// the referrer's host decides; * matches any, .example.com any host
// under it, and a leading - denies.
func referrerAllowed(referer string, elems []string) bool {
	host := "unknown"
	if u, err := url.Parse(referer); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	allow := false
	for _, m := range elems {
		deny := strings.HasPrefix(m, "-")
		m = strings.TrimPrefix(m, "-")
		match := m == host || strings.HasPrefix(m, ".") && strings.HasSuffix(host, m)
		switch {
		case deny && match:
			allow = false
		case !deny && (m == "*" || match):
			allow = true
		}
	}
	return allow
}

// aclHeaders are the ACL headers a container request may carry.
var aclHeaders = []string{"X-Container-Read", "X-Container-Write"}

// hasACL reports whether a request sets or removes an ACL.
func hasACL(h http.Header) bool {
	for _, k := range aclHeaders {
		if _, ok := h[k]; ok {
			return true
		}
		if _, ok := h["X-Remove-"+strings.TrimPrefix(k, "X-")]; ok {
			return true
		}
	}
	return false
}

// aclValue is the new value of an ACL header, and whether the request
// changes it (X-Remove-Container-Read clears it as an empty value does).
func aclValue(h http.Header, k string) (string, bool) {
	if _, ok := h["X-Remove-"+strings.TrimPrefix(k, "X-")]; ok {
		return "", true
	}
	v, ok := h[k]
	if !ok {
		return "", false
	}
	return strings.Join(v, ","), true
}

// setACL applies a request's ACL headers to a container: the projects'
// keys' grants on it, and the referrer elements in rec. Only a project
// whose key owns the container may.
func (s *Server) setACL(q *request, container string, rec *containerRecord) error {
	h := q.r.Header
	if !q.key.Allowed(container, gateway.Owner) {
		return serr(403, "Forbidden: only a project owning the container may change its ACLs.")
	}
	ctx := q.r.Context()
	projects, err := s.ids.Projects(ctx)
	if err != nil {
		return err
	}
	// The keys the projects act as, and their present grants.
	keys := map[string]gateway.AccessKey{}
	for _, p := range projects {
		if _, ok := keys[p.Key]; ok {
			continue
		}
		k, err := s.gw.Key(ctx, p.Key)
		if err != nil {
			continue // a project whose key is gone grants nothing
		}
		keys[p.Key] = k
	}
	want := func(p gateway.Perm) map[string]bool { // keys granted exactly p now
		out := map[string]bool{}
		for id, k := range keys {
			if !k.Admin && k.Buckets[container] == p {
				out[id] = true
			}
		}
		return out
	}
	readers, writers := want(gateway.Read), want(gateway.Write)
	project := func(e string) (keystone.Project, error) {
		i := slices.IndexFunc(projects, func(p keystone.Project) bool { return p.Name == e || p.ID == e })
		if i < 0 {
			return keystone.Project{}, serr(400, fmt.Sprintf("Bad Request: ACL names %q, which is no project (quilt swift project list)", e))
		}
		return projects[i], nil
	}
	resolve := func(a acl) (map[string]bool, error) {
		out := map[string]bool{}
		for _, e := range a.projects {
			p, err := project(e)
			if err != nil {
				return nil, err
			}
			out[p.Key] = true
		}
		for _, u := range a.users {
			if p, _, _ := strings.Cut(u, ":"); p != "*" {
				if _, err := project(p); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	if v, ok := aclValue(h, "X-Container-Read"); ok {
		a, err := parseACL(v)
		if err != nil {
			return err
		}
		if readers, err = resolve(a); err != nil {
			return err
		}
		rec.Referrers, rec.Listings, rec.ReadUsers = a.referrers, a.listings, a.users
	}
	if v, ok := aclValue(h, "X-Container-Write"); ok {
		a, err := parseACL(v)
		if err != nil {
			return err
		}
		if len(a.referrers) > 0 || a.listings {
			return serr(400, "Bad Request: referrers and .rlistings belong in X-Container-Read")
		}
		if writers, err = resolve(a); err != nil {
			return err
		}
		rec.WriteUsers = a.users
	}
	for id, k := range keys {
		cur := k.Buckets[container]
		if k.Admin || cur == gateway.Owner {
			continue // owners and admin keys keep what they have
		}
		next := gateway.None
		switch {
		case writers[id]:
			next = gateway.Write
		case readers[id]:
			next = gateway.Read
		}
		if next == cur {
			continue
		}
		if k.Buckets == nil {
			k.Buckets = map[string]gateway.Perm{}
		}
		if next == gateway.None {
			delete(k.Buckets, container)
		} else {
			k.Buckets[container] = next
		}
		if err := s.gw.PutKey(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// aclOut sets a container's ACL headers on an answer to a project owning
// it: the referrer elements and the projects whose keys have read or
// write on it (by name, as PROJECT:*).
func (s *Server) aclOut(q *request, container string, rec containerRecord) error {
	if !q.key.Allowed(container, gateway.Owner) || q.key.ID == "" {
		return nil
	}
	ctx := q.r.Context()
	projects, err := s.ids.Projects(ctx)
	if err != nil {
		return err
	}
	var read, write []string
	for _, r := range rec.Referrers {
		read = append(read, ".r:"+r)
	}
	if rec.Listings {
		read = append(read, ".rlistings")
	}
	read = append(read, rec.ReadUsers...)
	write = append(write, rec.WriteUsers...)
	for _, p := range projects {
		k, err := s.gw.Key(ctx, p.Key)
		if err != nil || k.Admin {
			continue
		}
		switch k.Buckets[container] {
		case gateway.Read:
			read = append(read, p.Name+":*")
		case gateway.Write:
			write = append(write, p.Name+":*")
		}
	}
	if len(read) > 0 {
		q.w.Header().Set("X-Container-Read", strings.Join(read, ","))
	}
	if len(write) > 0 {
		q.w.Header().Set("X-Container-Write", strings.Join(write, ","))
	}
	return nil
}

// authorizePublic lets a request without a token read a container whose
// X-Container-Read allows its Referer (.r:*: any): GET and HEAD of its
// objects, and of its listing if it also has .rlistings. It acts with a
// key that may read that container only.
func (s *Server) authorizePublic(q *request) bool {
	m := q.r.Method
	if q.container == "" || (m != "GET" && m != "HEAD") {
		return false
	}
	if _, err := s.projectByAccount(q, q.account); err != nil {
		return false
	}
	b, err := s.bucketInfo(q, q.container)
	if err != nil {
		return false
	}
	rec, err := s.containerMeta(q, q.container, b.Created)
	if err != nil || !referrerAllowed(q.r.Header.Get("Referer"), rec.Referrers) {
		return false
	}
	if q.object == "" && !rec.Listings {
		return false
	}
	q.key = gateway.AccessKey{Buckets: map[string]gateway.Perm{q.container: gateway.Read}}
	return true
}

// userMatches reports whether an ACL's user elements name a token's
// user: PROJECT:USER by name or ID, either of them * for any.
func userMatches(elems []string, t keystone.Token) bool {
	for _, e := range elems {
		p, u, _ := strings.Cut(e, ":")
		if (p == "*" || p == t.Project || p == t.ProjectID) && (u == "*" || u == t.User || u == t.UserID) {
			return true
		}
	}
	return false
}

// may reports whether the request may use a container with permission
// p: its project's key's grant, or for read and write a user element of
// the container's ACL naming the token's user (write includes read, as
// for projects).
func (s *Server) may(q *request, container string, p gateway.Perm) bool {
	if q.key.Allowed(container, p) {
		return true
	}
	if q.token == nil || p > gateway.Write {
		return false
	}
	b, err := s.bucketInfo(q, container)
	if err != nil {
		return false
	}
	rec, err := s.containerMeta(q, container, b.Created)
	if err != nil {
		return false
	}
	return userMatches(rec.WriteUsers, *q.token) || p == gateway.Read && userMatches(rec.ReadUsers, *q.token)
}
