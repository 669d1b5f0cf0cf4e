package sharelink

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Modes of a link.
const (
	ModeRead   = "read"   // download the file, or list and download the folder
	ModeUpload = "upload" // upload into the folder, nothing else
)

// tokenBytes is the randomness of a token: 144 bits, 24 characters of
// URL-safe base64.
const tokenBytes = 18

// maxJSON bounds an API request's body.
const maxJSON = 64 << 10

// maxPassword bounds a link's password.
const maxPassword = 1024

// createRequest is the body of POST /api/shares.
type createRequest struct {
	Path     string `json:"path"`
	Mode     string `json:"mode"`
	Password string `json:"password"`
	Expires  string `json:"expires"` // RFC 3339, or "" for never
}

// Link is a share link as the API shows it to its owner.
type Link struct {
	Token       string `json:"token"`
	URL         string `json:"url"`
	Path        string `json:"path"` // "/a/b.txt"; "/" is the whole bucket
	Mode        string `json:"mode"`
	Expires     string `json:"expires"` // RFC 3339, "" for never
	HasPassword bool   `json:"has_password"`
	Created     string `json:"created"` // RFC 3339
	Expired     bool   `json:"expired"` // it answers 404 now
}

func (h *Handler) linkJSON(r *http.Request, l gateway.ShareLink) Link {
	out := Link{Token: l.Token, URL: h.linkURL(r, l.Token), Path: "/" + l.Path, Mode: l.Mode,
		HasPassword: l.PasswordHash != "", Created: l.Created.UTC().Format(time.RFC3339), Expired: expired(l, h.cfg.Now())}
	if !l.Expires.IsZero() {
		out.Expires = l.Expires.UTC().Format(time.RFC3339)
	}
	return out
}

// apiError answers with a JSON {"error": msg}.
func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// serveAPI serves /api/shares[/TOKEN[/qr.svg]] (rest is what follows
// /api/shares).
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request, rest []string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("X-Requested-With") != "quilt" {
		apiError(w, http.StatusForbidden, "a request that changes something needs the header X-Requested-With: quilt")
		return
	}
	user, bucket, ok := h.cfg.User(r)
	if !ok {
		apiError(w, http.StatusUnauthorized, "log in first")
		return
	}
	switch {
	case len(rest) >= 1 && rest[0] == "grants":
		h.serveGrants(w, r, user, bucket, rest[1:])
	case len(rest) >= 1 && rest[0] == "with-me":
		h.serveWithMe(w, r, user, rest[1:])
	case len(rest) == 0 && r.Method == http.MethodPost:
		h.create(w, r, user, bucket)
	case len(rest) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		h.list(w, r, user)
	case len(rest) == 0:
		w.Header().Set("Allow", "GET, POST")
		apiError(w, http.StatusMethodNotAllowed, "GET or POST")
	case len(rest) == 1 && r.Method == http.MethodDelete:
		h.revoke(w, r, user, rest[0])
	case len(rest) == 1 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		if l, ok := h.own(w, r, user, rest[0]); ok {
			writeJSON(w, http.StatusOK, h.linkJSON(r, l))
		}
	case len(rest) == 1:
		w.Header().Set("Allow", "GET, DELETE")
		apiError(w, http.StatusMethodNotAllowed, "GET or DELETE")
	case len(rest) == 2 && rest[1] == "qr.svg" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		if l, ok := h.own(w, r, user, rest[0]); ok {
			h.serveQR(w, r, l)
		}
	default:
		apiError(w, http.StatusNotFound, "no such API path")
	}
}

// own returns link token if user made it; otherwise it answers 404, the
// same for another user's link as for none.
func (h *Handler) own(w http.ResponseWriter, r *http.Request, user, token string) (gateway.ShareLink, bool) {
	if gateway.CheckShareToken(token) == nil {
		l, err := h.cfg.Links.Share(r.Context(), token)
		switch {
		case err == nil && l.Owner == user:
			return l, true
		case err != nil && !errors.Is(err, gateway.ErrNoShare):
			h.cfg.Logger.Error("sharelink: reading a link", "err", err)
			apiError(w, http.StatusServiceUnavailable, "the links are not reachable now")
			return l, false
		}
	}
	apiError(w, http.StatusNotFound, "no such link of yours")
	return gateway.ShareLink{}, false
}

// decodeJSON reads exactly one JSON object of the known fields from r.
func decodeJSON(r *http.Request, v any) error {
	d := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxJSON))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// create makes a link: POST /api/shares.
func (h *Handler) create(w http.ResponseWriter, r *http.Request, user, bucket string) {
	var req createRequest
	if err := decodeJSON(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "the body must be a JSON object {path, mode, password, expires}: "+err.Error())
		return
	}
	p, ok := cleanPath(req.Path)
	if !ok {
		apiError(w, http.StatusBadRequest, "path: a path with an empty, . or .. element")
		return
	}
	switch req.Mode {
	case "":
		req.Mode = ModeRead
	case ModeRead, ModeUpload:
	default:
		apiError(w, http.StatusBadRequest, `mode is "read" or "upload"`)
		return
	}
	if len(req.Password) > maxPassword {
		apiError(w, http.StatusBadRequest, "password: over 1024 bytes")
		return
	}
	var exp time.Time
	if req.Expires != "" {
		var err error
		if exp, err = time.Parse(time.RFC3339, req.Expires); err != nil {
			apiError(w, http.StatusBadRequest, "expires: an RFC 3339 time (2030-01-02T15:04:05Z), or empty for never")
			return
		}
		if !exp.After(h.cfg.Now()) {
			apiError(w, http.StatusBadRequest, "expires: that time has passed")
			return
		}
	}
	t, err := h.tree(r.Context(), bucket)
	if err != nil {
		h.cfg.Logger.Error("sharelink: bucket", "user", user, "bucket", bucket, "err", err)
		apiError(w, http.StatusServiceUnavailable, "your bucket is not available")
		return
	}
	info, err := t.Stat(r.Context(), p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || h.hidden(p):
		apiError(w, http.StatusNotFound, "path: no such file or folder")
		return
	case err != nil:
		h.cfg.Logger.Error("sharelink: stat", "user", user, "path", p, "err", err)
		apiError(w, http.StatusServiceUnavailable, "your bucket is not available")
		return
	case info.Mode&fs.ModeSymlink != 0:
		apiError(w, http.StatusBadRequest, "path: a symbolic link cannot be shared")
		return
	case req.Mode == ModeUpload && !info.IsDir():
		apiError(w, http.StatusBadRequest, "path: an upload link needs a folder")
		return
	}
	tok := make([]byte, tokenBytes)
	secret := make([]byte, 32)
	rand.Read(tok)
	rand.Read(secret)
	l := gateway.ShareLink{Token: base64.RawURLEncoding.EncodeToString(tok), Owner: user, Bucket: bucket,
		Path: p, Mode: req.Mode, Expires: exp.UTC(), Created: h.cfg.Now().UTC().Truncate(time.Second)}
	if req.Password != "" {
		l.PasswordHash = hashPassword(req.Password)
		l.Secret = secret
	}
	if err := h.cfg.Links.PutShare(r.Context(), l); err != nil {
		h.cfg.Logger.Error("sharelink: storing a link", "user", user, "err", err)
		apiError(w, http.StatusServiceUnavailable, "the link could not be stored: "+err.Error())
		return
	}
	h.cfg.Logger.Info("sharelink: link made", "user", user, "bucket", bucket, "path", p, "mode", l.Mode)
	writeJSON(w, http.StatusCreated, h.linkJSON(r, l))
}

// list answers GET /api/shares: the user's links, newest first.
func (h *Handler) list(w http.ResponseWriter, r *http.Request, user string) {
	ls, err := h.cfg.Links.Shares(r.Context(), user)
	if err != nil {
		h.cfg.Logger.Error("sharelink: listing links", "user", user, "err", err)
		apiError(w, http.StatusServiceUnavailable, "the links are not reachable now")
		return
	}
	sort.Slice(ls, func(i, j int) bool {
		if !ls[i].Created.Equal(ls[j].Created) {
			return ls[i].Created.After(ls[j].Created)
		}
		return ls[i].Token < ls[j].Token
	})
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		out = append(out, h.linkJSON(r, l))
	}
	writeJSON(w, http.StatusOK, out)
}

// revoke deletes a link of the user: DELETE /api/shares/TOKEN.
func (h *Handler) revoke(w http.ResponseWriter, r *http.Request, user, token string) {
	l, ok := h.own(w, r, user, token)
	if !ok {
		return
	}
	if err := h.cfg.Links.DeleteShare(r.Context(), l.Token); err != nil && !errors.Is(err, gateway.ErrNoShare) {
		h.cfg.Logger.Error("sharelink: revoking", "user", user, "err", err)
		apiError(w, http.StatusServiceUnavailable, "the link could not be revoked: "+err.Error())
		return
	}
	h.cfg.Logger.Info("sharelink: link revoked", "user", user, "path", l.Path)
	w.WriteHeader(http.StatusNoContent)
}

// cleanPath turns an API path ("/a/b", "a/b/", "/") into the tree's form
// ("a/b", "" for the root), refusing empty, "." and ".." elements.
func cleanPath(p string) (string, bool) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", true
	}
	for _, e := range strings.Split(p, "/") {
		if !goodName(e) {
			return "", false
		}
	}
	return p, true
}
