package sharelink

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
)

//go:embed assets
var assets embed.FS

var pages = template.Must(template.ParseFS(assets, "assets/pages.html"))

// pageCSP is the Content-Security-Policy of the HTML pages: the
// stylesheet and script the binary serves, nothing from elsewhere.
const pageCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// page is what the templates of assets/pages.html show.
type page struct {
	Title       string
	Base        string // /s/TOKEN
	Name        string
	Size        string
	Modified    string
	DownloadURL string
	ZipURL      string
	Crumbs      []crumb
	Entries     []entry
	MaxUpload   string
	Uploaded    []uploaded
	Error       string
	Back        string
}

type crumb struct{ Name, URL string }

type entry struct {
	Name     string
	IsDir    bool
	Size     string
	Modified string
	URL      string
}

type uploaded struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// SizeText is the uploaded file's size for a page.
func (u uploaded) SizeText() string { return humanSize(u.Size) }

// render writes template name with status code.
func (h *Handler) render(w http.ResponseWriter, code int, name string, p page) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", pageCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := pages.ExecuteTemplate(w, name, p); err != nil {
		h.cfg.Logger.Error("sharelink: page", "page", name, "err", err)
	}
}

// notFound is the one answer for an unknown, malformed, expired or
// revoked token.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.render(w, http.StatusNotFound, "notfound", page{Title: "Link not found"})
}

func (h *Handler) fail(w http.ResponseWriter, code int, title, msg, back string) {
	h.render(w, code, "error", page{Title: title, Error: msg, Back: back})
}

// servePublic serves /s/... (rest is what follows /s/).
func (h *Handler) servePublic(w http.ResponseWriter, r *http.Request, rest []string) {
	if len(rest) == 0 {
		h.notFound(w, r)
		return
	}
	if rest[0] == "_" {
		h.serveAsset(w, r, rest[1:])
		return
	}
	// An address that tried many tokens that do not work is told to
	// wait, whatever token it asks for next: a token this gateway does
	// not hold costs a pull of the registry from the grid.
	missKey := "m\x00" + clientAddr(r)
	if wait := h.limiter.blocked(missKey, limitMisses); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		h.fail(w, http.StatusTooManyRequests, "Too many requests", "Too many links that do not work were tried from your address. Wait a minute.", "")
		return
	}
	l, found, err := h.live(r.Context(), rest[0])
	if err != nil {
		h.cfg.Logger.Error("sharelink: reading a link", "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Not available now", "The storage grid does not answer. Try again in a minute.", "")
		return
	}
	if !found {
		h.limiter.fail(missKey)
		h.notFound(w, r)
		return
	}
	base := PublicPrefix + l.Token
	action, sub := "", []string(nil)
	if len(rest) > 1 {
		action, sub = rest[1], rest[2:]
	}
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if action == "unlock" && len(sub) == 0 && r.Method == http.MethodPost {
		h.unlock(w, r, l)
		return
	}
	if !h.unlocked(r, l) {
		h.render(w, http.StatusForbidden, "password", page{Title: "Password", Base: base})
		return
	}
	switch {
	case action == "" && get && l.Mode == ModeUpload:
		if _, _, ok := h.target(w, r, l, nil); !ok {
			return
		}
		name := path.Base("/" + l.Path)
		if l.Path == "" {
			name = l.Bucket
		}
		h.render(w, http.StatusOK, "upload", page{Title: "Send files", Base: base, Name: name, MaxUpload: humanSize(h.cfg.MaxUpload)})
	case action == "upload" && len(sub) == 0 && r.Method == http.MethodPost:
		if l.Mode != ModeUpload {
			h.fail(w, http.StatusForbidden, "Not an upload link", "This link lets you download, not upload.", base)
			return
		}
		h.upload(w, r, l)
	case l.Mode == ModeUpload && (action == "" || action == "view" || action == "download"):
		h.fail(w, http.StatusForbidden, "Upload only", "This link lets you upload files, not see or download them.", base)
	case action == "" && get:
		h.view(w, r, l, nil)
	case action == "view" && get:
		h.view(w, r, l, sub)
	case action == "download" && get:
		h.download(w, r, l, sub)
	case action == "" || action == "view" || action == "download" || action == "upload" || action == "unlock":
		w.Header().Set("Allow", "GET, HEAD, POST")
		h.fail(w, http.StatusMethodNotAllowed, "Not allowed", "That method is not allowed here.", base)
	default:
		h.fail(w, http.StatusNotFound, "Not found", "There is no such page of this link.", base)
	}
}

// serveAsset serves the embedded stylesheet and script.
func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, rest []string) {
	if len(rest) != 1 || (rest[0] != "share.css" && rest[0] != "share.js") {
		h.notFound(w, r)
		return
	}
	b, err := assets.ReadFile("assets/" + rest[0])
	if err != nil {
		h.notFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(rest[0]))+"; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(b)
}

// unlock checks a password posted to /s/TOKEN/unlock: right, it sets the
// link's cookie and sends the browser back to the link; wrong, it
// counts against the limits of the address and of the link.
func (h *Handler) unlock(w http.ResponseWriter, r *http.Request, l gateway.ShareLink) {
	base := PublicPrefix + l.Token
	if l.PasswordHash == "" {
		http.Redirect(w, r, base, http.StatusSeeOther)
		return
	}
	addrKey, linkKey := "a\x00"+clientAddr(r)+"\x00"+l.Token, "l\x00"+l.Token
	wait := max(h.limiter.blocked(addrKey, limitPerAddr), h.limiter.blocked(linkKey, limitPerLink))
	if wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		h.render(w, http.StatusTooManyRequests, "password", page{Title: "Password", Base: base,
			Error: "Too many wrong passwords. Wait a minute and try again."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	pw := r.PostFormValue("password")
	select {
	case h.verifies <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	ok, err := checkPassword(l.PasswordHash, pw)
	<-h.verifies
	if err != nil {
		h.cfg.Logger.Error("sharelink: link password", "token", l.Token[:6], "err", err)
	}
	if !ok {
		h.limiter.fail(addrKey)
		h.limiter.fail(linkKey)
		h.cfg.Logger.Warn("sharelink: wrong password", "from", clientAddr(r))
		h.render(w, http.StatusForbidden, "password", page{Title: "Password", Base: base, Error: "Wrong password."})
		return
	}
	h.setCookie(w, r, l)
	http.Redirect(w, r, base, http.StatusSeeOther)
}

// target is a path of a read link: the tree and the clean path of sub
// under the link's path, after checking it is there and not a link.
func (h *Handler) target(w http.ResponseWriter, r *http.Request, l gateway.ShareLink, sub []string) (*tree.Tree, tree.Info, bool) {
	base := PublicPrefix + l.Token
	t, err := h.tree(r.Context(), l.Bucket)
	if err != nil {
		h.cfg.Logger.Error("sharelink: bucket", "bucket", l.Bucket, "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Not available now", "The shared files are not reachable now. Try again in a minute.", "")
		return nil, tree.Info{}, false
	}
	p := path.Join(append([]string{l.Path}, sub...)...)
	info, err := t.Stat(r.Context(), p)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrInvalid) || err == nil && info.Mode&fs.ModeSymlink != 0 || h.hidden(p) || h.hidden(l.Path):
		if len(sub) == 0 {
			h.notFound(w, r) // the shared thing itself is gone
		} else {
			h.fail(w, http.StatusNotFound, "Not found", "There is no such file in this folder.", base)
		}
		return nil, info, false
	case err != nil:
		h.cfg.Logger.Error("sharelink: stat", "bucket", l.Bucket, "path", p, "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Not available now", "The shared files are not reachable now. Try again in a minute.", "")
		return nil, info, false
	}
	return t, info, true
}

// subURL is base/action/ followed by the escaped elements of sub.
func subURL(base, action string, sub []string) string {
	var b strings.Builder
	b.WriteString(base + "/" + action)
	for _, s := range sub {
		b.WriteString("/" + url.PathEscape(s))
	}
	return b.String()
}

// linkRoot stats the link's own path: a sub-path of a link to a file is
// refused, whatever the bucket holds.
func (h *Handler) linkRoot(w http.ResponseWriter, r *http.Request, l gateway.ShareLink, sub []string) bool {
	if len(sub) == 0 {
		return true
	}
	_, root, ok := h.target(w, r, l, nil)
	if !ok {
		return false
	}
	if !root.IsDir() {
		h.fail(w, http.StatusNotFound, "Not found", "There is no such file here.", PublicPrefix+l.Token)
		return false
	}
	return true
}

// view shows the page of a read link: a file's, or a folder's listing.
func (h *Handler) view(w http.ResponseWriter, r *http.Request, l gateway.ShareLink, sub []string) {
	if !h.linkRoot(w, r, l, sub) {
		return
	}
	t, info, ok := h.target(w, r, l, sub)
	if !ok {
		return
	}
	base := PublicPrefix + l.Token
	name := info.Name()
	if info.Path == "" {
		name = l.Bucket
	}
	if !info.IsDir() {
		h.render(w, http.StatusOK, "file", page{Title: name, Base: base, Name: name, Size: humanSize(info.Size),
			Modified: when(info.ModTime), DownloadURL: subURL(base, "download", sub)})
		return
	}
	list, err := t.ReadDirAll(r.Context(), info.Path)
	if err != nil {
		h.cfg.Logger.Error("sharelink: listing", "bucket", l.Bucket, "path", info.Path, "err", err)
		h.fail(w, http.StatusServiceUnavailable, "Not available now", "The folder could not be listed. Try again in a minute.", "")
		return
	}
	root := path.Base("/" + l.Path)
	if l.Path == "" {
		root = l.Bucket
	}
	crumbs := []crumb{{Name: root, URL: base}}
	for i, s := range sub {
		crumbs = append(crumbs, crumb{Name: s, URL: subURL(base, "view", sub[:i+1])})
	}
	crumbs[len(crumbs)-1].URL = ""
	p := page{Title: name, Base: base, Name: name, Crumbs: crumbs, ZipURL: subURL(base, "download", sub)}
	for _, e := range list {
		if e.Mode&fs.ModeSymlink != 0 || h.hidden(e.Path) {
			continue
		}
		child := append(append([]string(nil), sub...), e.Name())
		en := entry{Name: e.Name(), IsDir: e.IsDir(), Size: humanSize(e.Size), Modified: when(e.ModTime)}
		if e.IsDir() {
			en.URL = subURL(base, "view", child)
		} else {
			en.URL = subURL(base, "download", child)
		}
		p.Entries = append(p.Entries, en)
	}
	h.render(w, http.StatusOK, "folder", p)
}

// download sends a file of a read link as an attachment (ranges
// honoured), or a folder as a zip archive made as it is sent.
func (h *Handler) download(w http.ResponseWriter, r *http.Request, l gateway.ShareLink, sub []string) {
	if !h.linkRoot(w, r, l, sub) {
		return
	}
	t, info, ok := h.target(w, r, l, sub)
	if !ok {
		return
	}
	name := info.Name()
	if info.Path == "" {
		name = l.Bucket
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "private, no-cache")
	if info.IsDir() {
		hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + ".zip"}))
		h.zipFolder(w, r, t, info)
		return
	}
	sendFile(w, r, t, info)
}

// sendFile sends file info of t as an attachment named after it, ranges
// honoured.
func sendFile(w http.ResponseWriter, r *http.Request, t *tree.Tree, info tree.Info) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	ct := mime.TypeByExtension(path.Ext(info.Name()))
	if ct == "" {
		ct = "application/octet-stream"
	}
	hd.Set("Content-Type", ct)
	hd.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": info.Name()}))
	rs := &rangeReader{t: t, r: r, path: info.Path, size: info.Size}
	defer rs.Close()
	http.ServeContent(w, r, "", info.ModTime, rs)
}

// rangeReader is a file of the tree as the io.ReadSeeker http.ServeContent
// wants: a seek only moves the offset; the next read opens the file there
// (each range of a multi-range request is one read of the grid).
type rangeReader struct {
	t    *tree.Tree
	r    *http.Request
	path string
	size int64
	off  int64
	rc   io.ReadCloser
}

func (s *rangeReader) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	if s.rc == nil {
		rc, _, err := s.t.Open(s.r.Context(), s.path, s.off, -1)
		if err != nil {
			return 0, err
		}
		s.rc = rc
	}
	n, err := s.rc.Read(p)
	s.off += int64(n)
	return n, err
}

func (s *rangeReader) Seek(off int64, whence int) (int64, error) {
	var to int64
	switch whence {
	case io.SeekStart:
		to = off
	case io.SeekCurrent:
		to = s.off + off
	case io.SeekEnd:
		to = s.size + off
	}
	if to < 0 {
		return s.off, fmt.Errorf("sharelink: seek to %d", to)
	}
	if to != s.off {
		s.Close()
		s.off = to
	}
	return to, nil
}

func (s *rangeReader) Close() error {
	if s.rc == nil {
		return nil
	}
	err := s.rc.Close()
	s.rc = nil
	return err
}

// humanSize writes a byte count for people: 1.5 MB, 512 bytes.
func humanSize(n int64) string {
	if n < 1000 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB", "PB"} {
		f /= 1000
		if f < 1000 || u == "PB" {
			if f < 10 {
				return strconv.FormatFloat(f, 'f', 1, 64) + " " + u
			}
			return strconv.FormatFloat(f, 'f', 0, 64) + " " + u
		}
	}
	return ""
}

// when writes a modification time for people ("" for none).
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
