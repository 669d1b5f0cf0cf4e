package keystone

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Handler serves the identity API: TempAuth's GET /auth/v1.0, and
// Keystone v3's version document (GET /v3) and tokens (POST, GET, HEAD
// and DELETE /v3/auth/tokens).
type Handler struct {
	S *Service
	// PublicURL is the base URL of this gateway's Swift API, for the
	// storage URL of v1.0 answers; if empty, http:// and the request's
	// Host.
	PublicURL string
}

// v1Prefixes are the paths of TempAuth. Keystone's paths are also
// answered under them: the swift CLI, given ST_AUTH (a v1.0 URL) and
// asked for v3 (OS_IDENTITY_API_VERSION=3), appends /v3 to ST_AUTH.
var v1Prefixes = []string{"/auth/v1.0", "/auth/v1", "/v1.0"}

// route is the identity path a request path names.
func route(path string) string {
	path = strings.TrimSuffix(path, "/")
	for _, p := range v1Prefixes {
		if rest, ok := strings.CutPrefix(path, p); ok && (rest == "/v3" || rest == "/v3/auth/tokens") {
			return rest
		}
	}
	return path
}

// Handles reports whether path is one of the handler's.
func Handles(path string) bool {
	switch route(path) {
	case "/auth/v1.0", "/auth/v1", "/v1.0", "/v3", "/v3/auth/tokens":
		return true
	}
	return false
}

// ServeHTTP answers an identity request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch route(r.URL.Path) {
	case "/auth/v1.0", "/auth/v1", "/v1.0":
		h.v1(w, r)
	case "/v3":
		if r.Method != "GET" && r.Method != "HEAD" {
			ksError(w, http.StatusMethodNotAllowed, "Method Not Allowed", "the method is not allowed here")
			return
		}
		base := h.base(r)
		writeJSON(w, 200, map[string]any{"version": versionDoc(base)})
	case "/v3/auth/tokens":
		switch r.Method {
		case "POST":
			h.issue(w, r)
		case "GET", "HEAD":
			h.validate(w, r)
		case "DELETE":
			h.revoke(w, r)
		default:
			ksError(w, http.StatusMethodNotAllowed, "Method Not Allowed", "the method is not allowed here")
		}
	default:
		ksError(w, 404, "Not Found", "the resource could not be found")
	}
}

func (h *Handler) base(r *http.Request) string {
	if h.PublicURL != "" {
		return strings.TrimSuffix(h.PublicURL, "/")
	}
	return "http://" + r.Host
}

func versionDoc(base string) map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       []map[string]string{{"rel": "self", "href": base + "/v3/"}},
		"media-types": []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

// v1 is TempAuth: X-Auth-User PROJECT:USER and X-Auth-Key.
func (h *Handler) v1(w http.ResponseWriter, r *http.Request) {
	if r.Method != "GET" && r.Method != "HEAD" {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	user, key := r.Header.Get("X-Auth-User"), r.Header.Get("X-Auth-Key")
	if user == "" {
		user, key = r.Header.Get("X-Storage-User"), r.Header.Get("X-Storage-Pass")
	}
	project, name, ok := strings.Cut(user, ":")
	if !ok || key == "" {
		plain(w, 401, "Unauthorized: X-Auth-User PROJECT:USER and X-Auth-Key are required\n")
		return
	}
	t, secret, err := h.S.Authenticate(r.Context(), project, name, key, "password")
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			plain(w, 401, "Unauthorized\n")
		} else {
			plain(w, 503, "Service Unavailable: "+err.Error()+"\n")
		}
		return
	}
	hd := w.Header()
	hd.Set("X-Auth-Token", secret)
	hd.Set("X-Storage-Token", secret)
	hd.Set("X-Storage-Url", h.base(r)+"/v1/AUTH_"+t.ProjectID)
	hd.Set("X-Auth-Token-Expires", strconv.FormatInt(int64(t.Expires.Sub(h.S.Now()).Seconds()), 10))
	w.WriteHeader(200)
}

// authRequest is the body of POST /v3/auth/tokens.
type authRequest struct {
	Auth struct {
		Identity struct {
			Methods  []string `json:"methods"`
			Password struct {
				User struct {
					ID       string     `json:"id"`
					Name     string     `json:"name"`
					Password string     `json:"password"`
					Domain   *domainRef `json:"domain"`
				} `json:"user"`
			} `json:"password"`
		} `json:"identity"`
		Scope *struct {
			Project *struct {
				ID     string     `json:"id"`
				Name   string     `json:"name"`
				Domain *domainRef `json:"domain"`
			} `json:"project"`
		} `json:"scope"`
	} `json:"auth"`
}

type domainRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// defaultDomain: the one domain there is.
func (d *domainRef) ok() bool {
	return d == nil || (d.ID == "" || d.ID == "default") && (d.Name == "" || strings.EqualFold(d.Name, "default"))
}

var domain = map[string]string{"id": "default", "name": "Default"}

func (h *Handler) issue(w http.ResponseWriter, r *http.Request) {
	var req authRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		ksError(w, 400, "Bad Request", "the request body is not JSON of a token request: "+err.Error())
		return
	}
	id := req.Auth.Identity
	hasPassword := false
	for _, m := range id.Methods {
		hasPassword = hasPassword || m == "password"
	}
	if !hasPassword {
		ksError(w, 401, "Unauthorized", "only the password method is supported")
		return
	}
	sc := req.Auth.Scope
	if sc == nil || sc.Project == nil {
		ksError(w, 400, "Bad Request", "a token must be scoped to a project (auth.scope.project)")
		return
	}
	u := id.Password.User
	if !u.Domain.ok() || !sc.Project.Domain.ok() {
		ksError(w, 401, "Unauthorized", "the only domain is Default")
		return
	}
	ctx := r.Context()
	project := sc.Project.Name
	if project == "" && sc.Project.ID != "" {
		project = h.projectByID(ctx, sc.Project.ID)
	}
	name := u.Name
	if p, n, ok := strings.Cut(name, ":"); ok && p == project {
		// A TempAuth user name (PROJECT:USER, as ST_USER has it) in its
		// own project: the swift CLI sends ST_USER when both are set.
		name = n
	}
	if name == "" && u.ID != "" {
		name = h.userByID(ctx, project, u.ID)
	}
	t, secret, err := h.S.Authenticate(ctx, project, name, u.Password, "password")
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			ksError(w, 401, "Unauthorized", "The request you have made requires authentication.")
		} else {
			ksError(w, 503, "Service Unavailable", err.Error())
		}
		return
	}
	body, err := h.tokenBody(ctx, t)
	if err != nil {
		ksError(w, 503, "Service Unavailable", err.Error())
		return
	}
	w.Header().Set("X-Subject-Token", secret)
	writeJSON(w, 201, body)
}

func (h *Handler) projectByID(ctx context.Context, id string) string {
	ps, _ := h.S.Projects(ctx)
	for _, p := range ps {
		if p.ID == id {
			return p.Name
		}
	}
	return ""
}

func (h *Handler) userByID(ctx context.Context, project, id string) string {
	us, _ := h.S.Users(ctx)
	for _, u := range us {
		if u.ID == id && u.Project == project {
			return u.Name
		}
	}
	return ""
}

// tokenBody is Keystone's token document, with the catalog: one
// object-store service whose endpoints are every registered gateway's,
// public and internal, each in its region.
func (h *Handler) tokenBody(ctx context.Context, t Token) (map[string]any, error) {
	eps, err := h.S.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	var endpoints []map[string]string
	for _, e := range eps {
		for _, iface := range []struct{ name, url string }{{"public", e.Public}, {"internal", e.Internal}} {
			endpoints = append(endpoints, map[string]string{
				"id": e.ID + "-" + iface.name, "interface": iface.name, "region": e.Region, "region_id": e.Region,
				"url": strings.TrimSuffix(iface.url, "/") + "/v1/AUTH_" + t.ProjectID,
			})
		}
	}
	if endpoints == nil {
		endpoints = []map[string]string{}
	}
	const ts = "2006-01-02T15:04:05.000000Z"
	return map[string]any{"token": map[string]any{
		"methods":    t.Methods,
		"user":       map[string]any{"id": t.UserID, "name": t.User, "domain": domain, "password_expires_at": nil},
		"project":    map[string]any{"id": t.ProjectID, "name": t.Project, "domain": domain},
		"roles":      []map[string]string{{"id": "member", "name": "member"}},
		"catalog":    []map[string]any{{"type": "object-store", "name": "swift", "id": "object-store", "endpoints": endpoints}},
		"issued_at":  t.Issued.UTC().Format(ts),
		"expires_at": t.Expires.UTC().Format(ts),
		"audit_ids":  []string{t.AuditID},
	}}, nil
}

// validate answers GET/HEAD /v3/auth/tokens: X-Auth-Token must be valid,
// and X-Subject-Token is the token asked about.
func (h *Handler) validate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if _, err := h.S.Verify(ctx, r.Header.Get("X-Auth-Token")); err != nil {
		authFail(w, err)
		return
	}
	subject := r.Header.Get("X-Subject-Token")
	t, err := h.S.Verify(ctx, subject)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			ksError(w, 404, "Not Found", "Could not find token.")
		} else {
			authFail(w, err)
		}
		return
	}
	body, err := h.tokenBody(ctx, t)
	if err != nil {
		authFail(w, err)
		return
	}
	w.Header().Set("X-Subject-Token", subject)
	writeJSON(w, 200, body)
}

func (h *Handler) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if _, err := h.S.Verify(ctx, r.Header.Get("X-Auth-Token")); err != nil {
		authFail(w, err)
		return
	}
	if err := h.S.Revoke(ctx, r.Header.Get("X-Subject-Token")); err != nil {
		if errors.Is(err, ErrUnauthorized) {
			ksError(w, 404, "Not Found", "Could not find token.")
		} else {
			authFail(w, err)
		}
		return
	}
	w.WriteHeader(204)
}

func authFail(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrUnauthorized) {
		ksError(w, 401, "Unauthorized", "The request you have made requires authentication.")
		return
	}
	ksError(w, 503, "Service Unavailable", err.Error())
}

func ksError(w http.ResponseWriter, code int, title, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "title": title, "message": msg}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

func plain(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, msg)
}
