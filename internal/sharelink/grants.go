package sharelink

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
)

// Grants is where shares between users are kept: *gateway.Gateway.
type Grants interface {
	PutGrant(ctx context.Context, g gateway.Grant) error
	// Grant returns the grant of id, or an error wrapping
	// gateway.ErrNoGrant.
	Grant(ctx context.Context, id string) (gateway.Grant, error)
	Grants(ctx context.Context) ([]gateway.Grant, error)
	DeleteGrant(ctx context.Context, id string) error
}

var _ Grants = (*gateway.Gateway)(nil)

// Permissions of a grant.
const (
	PermRead  = "read"  // list and download
	PermWrite = "write" // also upload (replacing), and delete files and empty folders
)

// principal is the form of a grant's With.
var principal = regexp.MustCompile(`^(user|group):[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// GrantInfo is a grant as the API shows it.
type GrantInfo struct {
	ID      string `json:"id"`
	Owner   string `json:"owner"`
	Path    string `json:"path"` // in the owner's bucket: "/a/b"
	Name    string `json:"name"` // the last element of Path (the bucket's name for "/")
	With    string `json:"with"` // "user:NAME" or "group:NAME"
	Mode    string `json:"mode"` // "read" or "write"
	Created string `json:"created"`
	// Dir says whether the shared path is a folder (listed by GET of its
	// files) or a file (sent by it); with-me fills it in.
	Dir bool `json:"dir"`
	// Gone says the shared path is no longer there (with-me only).
	Gone bool `json:"gone,omitempty"`
}

func grantInfo(g gateway.Grant) GrantInfo {
	name := path.Base("/" + g.Path)
	if g.Path == "" {
		name = g.Bucket
	}
	return GrantInfo{ID: g.ID, Owner: g.Owner, Path: "/" + g.Path, Name: name, With: g.With, Mode: g.Perm,
		Created: g.Created.UTC().Format(time.RFC3339)}
}

// grantRequest is the body of POST /api/shares/grants.
type grantRequest struct {
	Path string `json:"path"`
	With string `json:"with"`
	Mode string `json:"mode"`
}

// serveGrants serves /api/shares/grants[/ID]: the grants user made.
func (h *Handler) serveGrants(w http.ResponseWriter, r *http.Request, user, bucket string, rest []string) {
	if h.cfg.Grants == nil {
		apiError(w, http.StatusNotFound, "shares between users are not served here")
		return
	}
	ctx := r.Context()
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var req grantRequest
		if err := decodeJSON(r, &req); err != nil {
			apiError(w, http.StatusBadRequest, "the body must be a JSON object {path, with, mode}: "+err.Error())
			return
		}
		p, ok := cleanPath(req.Path)
		if !ok {
			apiError(w, http.StatusBadRequest, "path: a path with an empty, . or .. element")
			return
		}
		if req.Mode == "" {
			req.Mode = PermRead
		}
		if req.Mode != PermRead && req.Mode != PermWrite {
			apiError(w, http.StatusBadRequest, `mode is "read" or "write"`)
			return
		}
		if !principal.MatchString(req.With) || req.With == "user:"+user {
			apiError(w, http.StatusBadRequest, `with is "user:NAME" or "group:NAME", not yourself`)
			return
		}
		if h.cfg.Principal != nil && !h.cfg.Principal(ctx, req.With) {
			apiError(w, http.StatusBadRequest, "with: no such user or group")
			return
		}
		if !h.shareable(w, r, user, bucket, p) {
			return
		}
		// The same path shared again with the same user or group changes
		// the share there is (its mode), rather than adding a second one.
		gs, ok := h.grants(w, r)
		if !ok {
			return
		}
		code := http.StatusCreated
		var g gateway.Grant
		for _, old := range gs {
			if old.Owner == user && old.Bucket == bucket && old.Path == p && old.With == req.With {
				g, code = old, http.StatusOK
				break
			}
		}
		if code == http.StatusCreated {
			id := make([]byte, tokenBytes)
			rand.Read(id)
			g = gateway.Grant{ID: base64.RawURLEncoding.EncodeToString(id), Owner: user, Bucket: bucket, Path: p,
				With: req.With, Created: h.cfg.Now().UTC().Truncate(time.Second)}
		}
		g.Perm = req.Mode
		if err := h.cfg.Grants.PutGrant(ctx, g); err != nil {
			h.cfg.Logger.Error("sharelink: storing a grant", "user", user, "err", err)
			apiError(w, http.StatusServiceUnavailable, "the share could not be stored: "+err.Error())
			return
		}
		h.cfg.Logger.Info("sharelink: shared", "user", user, "path", p, "with", g.With, "mode", g.Perm)
		writeJSON(w, code, grantInfo(g))
	case len(rest) == 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		gs, ok := h.grants(w, r)
		if !ok {
			return
		}
		out := []GrantInfo{}
		for _, g := range gs {
			if g.Owner == user {
				out = append(out, grantInfo(g))
			}
		}
		writeJSON(w, http.StatusOK, out)
	case len(rest) == 1 && r.Method == http.MethodDelete:
		g, err := h.cfg.Grants.Grant(ctx, rest[0])
		if err != nil && !errors.Is(err, gateway.ErrNoGrant) {
			apiError(w, http.StatusServiceUnavailable, "the shares are not reachable now")
			return
		}
		if err != nil || g.Owner != user {
			apiError(w, http.StatusNotFound, "no such share of yours")
			return
		}
		if err := h.cfg.Grants.DeleteGrant(ctx, g.ID); err != nil && !errors.Is(err, gateway.ErrNoGrant) {
			apiError(w, http.StatusServiceUnavailable, "the share could not be removed: "+err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		apiError(w, http.StatusMethodNotAllowed, "GET or POST /api/shares/grants, DELETE /api/shares/grants/ID")
	}
}

// shareable checks that path p of the user's bucket may be shared: it is
// there and is not a symbolic link. It answers the request if not.
func (h *Handler) shareable(w http.ResponseWriter, r *http.Request, user, bucket, p string) bool {
	t, err := h.tree(r.Context(), bucket)
	if err != nil {
		h.cfg.Logger.Error("sharelink: bucket", "user", user, "bucket", bucket, "err", err)
		apiError(w, http.StatusServiceUnavailable, "your bucket is not available")
		return false
	}
	info, err := t.Stat(r.Context(), p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || h.hidden(p):
		apiError(w, http.StatusNotFound, "path: no such file or folder")
		return false
	case err != nil:
		apiError(w, http.StatusServiceUnavailable, "your bucket is not available")
		return false
	case info.Mode&fs.ModeSymlink != 0:
		apiError(w, http.StatusBadRequest, "path: a symbolic link cannot be shared")
		return false
	}
	return true
}

// grants returns every grant, newest first.
func (h *Handler) grants(w http.ResponseWriter, r *http.Request) ([]gateway.Grant, bool) {
	gs, err := h.cfg.Grants.Grants(r.Context())
	if err != nil {
		h.cfg.Logger.Error("sharelink: listing grants", "err", err)
		apiError(w, http.StatusServiceUnavailable, "the shares are not reachable now")
		return nil, false
	}
	sort.Slice(gs, func(i, j int) bool {
		if !gs[i].Created.Equal(gs[j].Created) {
			return gs[i].Created.After(gs[j].Created)
		}
		return gs[i].ID < gs[j].ID
	})
	return gs, true
}

// mine reports whether grant g is given to user, directly or through
// one of their groups.
func (h *Handler) mine(ctx context.Context, g gateway.Grant, user string) bool {
	if g.With == "user:"+user {
		return true
	}
	if h.cfg.Groups == nil || len(g.With) < 7 || g.With[:6] != "group:" {
		return false
	}
	return slices.Contains(h.cfg.Groups(ctx, user), g.With[6:])
}

// serveWithMe serves /api/shares/with-me: the grants given to user, and
// their files (/api/shares/with-me/ID/files[/SUB]).
func (h *Handler) serveWithMe(w http.ResponseWriter, r *http.Request, user string, rest []string) {
	if h.cfg.Grants == nil {
		apiError(w, http.StatusNotFound, "shares between users are not served here")
		return
	}
	ctx := r.Context()
	if len(rest) == 0 {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			apiError(w, http.StatusMethodNotAllowed, "GET")
			return
		}
		gs, ok := h.grants(w, r)
		if !ok {
			return
		}
		out := []GrantInfo{}
		for _, g := range gs {
			if g.Owner != user && h.mine(ctx, g, user) && (h.cfg.OwnerActive == nil || h.cfg.OwnerActive(ctx, g.Owner)) {
				gi := grantInfo(g)
				gi.Dir, gi.Gone = h.kind(ctx, g)
				out = append(out, gi)
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if len(rest) < 2 || rest[1] != "files" {
		apiError(w, http.StatusNotFound, "no such API path")
		return
	}
	g, err := h.cfg.Grants.Grant(ctx, rest[0])
	if err != nil && !errors.Is(err, gateway.ErrNoGrant) {
		apiError(w, http.StatusServiceUnavailable, "the shares are not reachable now")
		return
	}
	if err != nil || g.Owner == user || !h.mine(ctx, g, user) || (h.cfg.OwnerActive != nil && !h.cfg.OwnerActive(ctx, g.Owner)) {
		apiError(w, http.StatusNotFound, "nothing is shared with you under that ID")
		return
	}
	h.grantFiles(w, r, user, g, rest[2:])
}

// kind says whether grant g's path is a folder, or is gone (not there,
// a symbolic link, or its bucket not reachable).
func (h *Handler) kind(ctx context.Context, g gateway.Grant) (dir, gone bool) {
	t, err := h.tree(ctx, g.Bucket)
	if err != nil {
		return false, true
	}
	info, err := t.Stat(ctx, g.Path)
	if err != nil || info.Mode&fs.ModeSymlink != 0 || h.hidden(g.Path) {
		return false, true
	}
	return info.IsDir(), false
}

// FileInfo is an entry of a shared folder as the API lists it.
type FileInfo struct {
	Name     string `json:"name"`
	Dir      bool   `json:"dir"`
	Size     int64  `json:"size"`
	Modified string `json:"modified,omitempty"` // RFC 3339
}

// grantFiles serves a path sub under grant g: GET lists a folder (JSON)
// or sends a file; with a write grant, PUT writes a file from the body
// and DELETE removes a file or an empty folder.
func (h *Handler) grantFiles(w http.ResponseWriter, r *http.Request, user string, g gateway.Grant, sub []string) {
	ctx := r.Context()
	t, err := h.tree(ctx, g.Bucket)
	if err != nil {
		apiError(w, http.StatusServiceUnavailable, "the shared files are not reachable now")
		return
	}
	root, err := t.Stat(ctx, g.Path)
	p := path.Join(append([]string{g.Path}, sub...)...)
	if err != nil || root.Mode&fs.ModeSymlink != 0 || (len(sub) > 0 && !root.IsDir()) || h.hidden(g.Path) || h.hidden(p) {
		apiError(w, http.StatusNotFound, "no such file in this share")
		return
	}
	write := r.Method == http.MethodPut || r.Method == http.MethodDelete
	if write && g.Perm != PermWrite {
		apiError(w, http.StatusForbidden, "this share is read-only")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		info, err := t.Stat(ctx, p)
		if err != nil || info.Mode&fs.ModeSymlink != 0 {
			apiError(w, http.StatusNotFound, "no such file in this share")
			return
		}
		if !info.IsDir() {
			w.Header().Set("Cache-Control", "private, no-cache")
			sendFile(w, r, t, info)
			return
		}
		list, err := t.ReadDirAll(ctx, p)
		if err != nil {
			apiError(w, http.StatusServiceUnavailable, "the folder could not be listed")
			return
		}
		out := []FileInfo{}
		for _, e := range list {
			if e.Mode&fs.ModeSymlink != 0 || h.hidden(e.Path) {
				continue
			}
			fi := FileInfo{Name: e.Name(), Dir: e.IsDir(), Size: e.Size}
			if !e.ModTime.IsZero() {
				fi.Modified = e.ModTime.UTC().Format(time.RFC3339)
			}
			out = append(out, fi)
		}
		writeJSON(w, http.StatusOK, out)
	case http.MethodPut:
		if len(sub) == 0 && root.IsDir() {
			apiError(w, http.StatusBadRequest, "PUT a file under the shared folder, not the folder")
			return
		}
		if info, err := t.Stat(ctx, p); err == nil && (info.IsDir() || info.Mode&fs.ModeSymlink != 0) {
			apiError(w, http.StatusConflict, "a folder or link is there")
			return
		}
		lr := &limitReader{r: r.Body, left: h.cfg.MaxUpload}
		info, err := t.Create(ctx, p, lr, tree.CreateOptions{Size: r.ContentLength})
		switch {
		case errors.Is(err, errTooLarge):
			apiError(w, http.StatusRequestEntityTooLarge, "over "+humanSize(h.cfg.MaxUpload))
		case errors.Is(err, gateway.ErrQuota):
			apiError(w, http.StatusInsufficientStorage, "the owner's drive is full: "+err.Error())
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, tree.ErrNotDir):
			apiError(w, http.StatusConflict, "the folder to write into is not there")
		case errors.Is(err, tree.ErrIsDir):
			apiError(w, http.StatusConflict, "a folder is there")
		case err != nil:
			h.cfg.Logger.Error("sharelink: writing through a share", "user", user, "path", p, "err", err)
			apiError(w, http.StatusServiceUnavailable, "the file could not be stored: "+err.Error())
		default:
			h.cfg.Logger.Info("sharelink: written through a share", "user", user, "owner", g.Owner, "path", p)
			writeJSON(w, http.StatusCreated, FileInfo{Name: info.Name(), Size: info.Size})
		}
	case http.MethodDelete:
		if len(sub) == 0 {
			apiError(w, http.StatusBadRequest, "the shared file or folder itself stays: its owner removes it")
			return
		}
		if _, err := t.Stat(ctx, p); err != nil {
			apiError(w, http.StatusNotFound, "no such file in this share")
			return
		}
		err := t.Remove(ctx, p, tree.RemoveOptions{})
		switch {
		case errors.Is(err, tree.ErrNotEmpty):
			apiError(w, http.StatusConflict, "the folder is not empty")
		case err != nil:
			apiError(w, http.StatusServiceUnavailable, "could not remove: "+err.Error())
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		apiError(w, http.StatusMethodNotAllowed, "GET, PUT or DELETE")
	}
}
