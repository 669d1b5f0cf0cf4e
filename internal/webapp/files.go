package webapp

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quilt-grid/quilt/internal/tree"
)

// Limits of the pages.
const (
	previewText   = 64 << 10 // bytes of a text file shown
	searchResults = 500      // names a search shows at most
	searchScan    = 20000    // entries a search looks at at most
)

// crumb is one element of a folder's breadcrumbs.
type crumb struct{ Name, URL string }

// entry is one row of a folder.
type entry struct {
	tree.Info
	URL   string // the folder's page, or the file's
	Drive string // its drive path, "/a/b"
}

// folderData is what the folder page shows.
type folderData struct {
	Path    string // drive path, "/a"
	Name    string
	Crumbs  []crumb
	Entries []entry
	Zip     string
	Chunk   int64
	Search  string
}

// fileData is what a file's page shows.
type fileData struct {
	Info        tree.Info
	Path        string
	Crumbs      []crumb
	Download    string
	Image       string // the inline image's URL, if an image
	Text        string // the first previewText bytes, if text
	TextCut     bool
	NoPreview   bool
	ContentType string
}

func (q *request) crumbs(p string) []crumb {
	cs := []crumb{{Name: "My drive", URL: folderURL(q.s.acct.Name, "")}}
	if p == "" {
		return cs
	}
	es := strings.Split(p, "/")
	for i := range es {
		cs = append(cs, crumb{Name: es[i], URL: folderURL(q.s.acct.Name, strings.Join(es[:i+1], "/"))})
	}
	return cs
}

// entryOf is a row for i.
func (q *request) entryOf(i tree.Info) entry {
	e := entry{Info: i, Drive: "/" + i.Path}
	if i.IsDir() {
		e.URL = folderURL(q.s.acct.Name, i.Path)
	} else {
		e.URL = "/files/" + url.PathEscape(q.s.acct.Name) + "/" + escapePath(i.Path)
	}
	return e
}

// listDir reads folder p without the trash, folders first.
func listDir(ctx context.Context, t *tree.Tree, p string) ([]tree.Info, error) {
	is, err := t.ReadDirAll(ctx, p)
	if err != nil {
		return nil, err
	}
	out := is[:0]
	for _, i := range is {
		if p == "" && i.Path == trashDir {
			continue
		}
		out = append(out, i)
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].IsDir() != out[b].IsDir() {
			return out[a].IsDir()
		}
		return strings.ToLower(out[a].Name()) < strings.ToLower(out[b].Name())
	})
	return out, nil
}

// browse shows folder p, or file p's page.
func (q *request) browse(p string) {
	if q.r.Method != http.MethodGet && q.r.Method != http.MethodHead {
		q.fail(http.StatusMethodNotAllowed, "Only GET here.")
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	info, err := t.Stat(ctx, p)
	if err != nil {
		q.treeError("open /"+p, err)
		return
	}
	if !info.IsDir() {
		q.filePage(t, info)
		return
	}
	if !strings.HasSuffix(q.r.URL.Path, "/") {
		http.Redirect(q.w, q.r, folderURL(q.s.acct.Name, p), http.StatusSeeOther)
		return
	}
	is, err := listDir(ctx, t, p)
	if err != nil {
		q.treeError("list /"+p, err)
		return
	}
	d := folderData{Path: "/" + p, Name: info.Name(), Crumbs: q.crumbs(p), Chunk: q.h.cfg.ChunkSize,
		Zip: "/zip/" + url.PathEscape(q.s.acct.Name) + "/" + escapePath(p)}
	if p == "" {
		d.Name = "My drive"
	}
	for _, i := range is {
		d.Entries = append(d.Entries, q.entryOf(i))
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "folder", d.Name, d)
}

// imageTypes are the types shown inline; SVG is served with a sandbox.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
	"image/avif": true, "image/bmp": true, "image/svg+xml": true, "image/x-icon": true, "image/vnd.microsoft.icon": true}

func contentType(name string) string {
	ct := mime.TypeByExtension(strings.ToLower(path.Ext(name)))
	if ct == "" {
		return "application/octet-stream"
	}
	ct, _, _ = strings.Cut(ct, ";")
	return ct
}

// filePage shows a file: its details, actions and preview.
func (q *request) filePage(t *tree.Tree, info tree.Info) {
	u := url.PathEscape(q.s.acct.Name) + "/" + escapePath(info.Path)
	d := fileData{Info: info, Path: "/" + info.Path, Crumbs: q.crumbs(info.Path), Download: "/download/" + u,
		ContentType: contentType(info.Path)}
	switch {
	case imageTypes[d.ContentType]:
		d.Image = "/preview/" + u
	case info.Size == 0:
		d.Text = ""
	default:
		rc, _, err := t.Open(q.r.Context(), info.Path, 0, previewText)
		if err != nil {
			q.treeError("read /"+info.Path, err)
			return
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			q.treeError("read /"+info.Path, err)
			return
		}
		if isText(b, d.ContentType) {
			// A cut in the middle of a character: drop its bytes.
			for k := 0; k < 3 && len(b) > 0 && !utf8.Valid(b); k++ {
				b = b[:len(b)-1]
			}
			d.Text = strings.ToValidUTF8(string(b), "\uFFFD")
			d.TextCut = info.Size > int64(len(b))
		} else {
			d.NoPreview = true
		}
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "file", info.Name(), d)
}

// isText reports whether the first bytes of a file look like text.
func isText(b []byte, ct string) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if strings.HasPrefix(ct, "text/") || strings.HasSuffix(ct, "+xml") || strings.HasSuffix(ct, "json") ||
		ct == "application/xml" || ct == "application/javascript" || ct == "application/x-sh" {
		return true
	}
	return strings.HasPrefix(http.DetectContentType(b), "text/plain")
}

// download streams file p as an attachment.
func (q *request) download(p string) {
	q.serveFile(p, false)
}

// preview streams image p inline, for the file page's <img>.
func (q *request) preview(p string) {
	q.serveFile(p, true)
}

func (q *request) serveFile(p string, inline bool) {
	t, ok := q.tree()
	if !ok {
		return
	}
	ct := contentType(p)
	if inline && !imageTypes[ct] {
		q.fail(http.StatusUnsupportedMediaType, "Only images are shown inline; download the file instead.")
		return
	}
	ctx := q.r.Context()
	info, err := t.Stat(ctx, p)
	if err != nil {
		q.treeError("download /"+p, err)
		return
	}
	if info.IsDir() {
		q.treeError("download /"+p, tree.ErrIsDir)
		return
	}
	off, n, partial, ok := byteRange(q.r.Header.Get("Range"), info.Size)
	if !ok {
		q.w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
		q.fail(http.StatusRequestedRangeNotSatisfiable, "That range is not in the file.")
		return
	}
	rc, info, err := t.Open(ctx, p, off, n)
	if err != nil {
		q.treeError("download /"+p, err)
		return
	}
	defer rc.Close()
	if n > info.Size-off { // the file changed since the Stat
		n = info.Size - off
	}
	hdr := q.w.Header()
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("Content-Length", strconv.FormatInt(n, 10))
	hdr.Set("Cache-Control", "private, no-cache")
	if inline {
		hdr.Set("Content-Type", ct)
		hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	} else {
		hdr.Set("Content-Type", "application/octet-stream")
		hdr.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": info.Name()}))
	}
	if !info.ModTime.IsZero() {
		hdr.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	}
	if partial {
		hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, info.Size))
		q.w.WriteHeader(http.StatusPartialContent)
	}
	if q.r.Method == http.MethodHead {
		return
	}
	if _, err := io.CopyN(q.w, rc, n); err != nil {
		q.h.cfg.Logger.Debug("webapp: download cut short", "user", q.s.acct.Name, "path", p, "err", err)
	}
}

// byteRange reads a Range header of one range ("bytes=A-B", "bytes=A-",
// "bytes=-N") of a file of size bytes: the offset and length to send,
// whether it is a part (206), and false if it cannot be satisfied (416).
// No header, another unit or several ranges: the whole file.
func byteRange(h string, size int64) (off, n int64, partial, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, size, false, true
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, size, false, true
	}
	if a == "" {
		last, err := strconv.ParseInt(b, 10, 64)
		if err != nil || last <= 0 {
			return 0, 0, false, false
		}
		last = min(last, size)
		return size - last, last, true, size > 0
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || start >= size {
		return 0, 0, false, false
	}
	end := size - 1
	if b != "" {
		e, err := strconv.ParseInt(b, 10, 64)
		if err != nil || e < start {
			return 0, 0, false, false
		}
		end = min(e, size-1)
	}
	return start, end - start + 1, true, true
}

// zip streams folder p and everything under it as a zip file (stored
// files, not compressed: most big files are compressed already, and the
// stream starts at once).
func (q *request) zip(p string) {
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	info, err := t.Stat(ctx, p)
	if err != nil {
		q.treeError("zip /"+p, err)
		return
	}
	if !info.IsDir() {
		q.fail(http.StatusBadRequest, "Only a folder is downloaded as a zip; download a file as it is.")
		return
	}
	name := info.Name()
	if p == "" {
		name = q.s.acct.Name
	}
	q.w.Header().Set("Content-Type", "application/zip")
	q.w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + ".zip"}))
	q.w.Header().Set("Cache-Control", "no-store")
	zw := zip.NewWriter(q.w)
	if err := zipDir(ctx, t, zw, p, name+"/"); err != nil {
		// The header is gone: the zip is cut short, and its missing
		// central directory tells the client it is broken.
		q.h.cfg.Logger.Warn("webapp: zip cut short", "user", q.s.acct.Name, "path", p, "err", err)
		return
	}
	zw.Close()
}

func zipDir(ctx context.Context, t *tree.Tree, zw *zip.Writer, p, prefix string) error {
	is, err := listDir(ctx, t, p)
	if err != nil {
		return err
	}
	if _, err := zw.CreateHeader(&zip.FileHeader{Name: prefix, Method: zip.Store, Modified: modTime(t, ctx, p)}); err != nil {
		return err
	}
	for _, i := range is {
		if i.IsDir() {
			if err := zipDir(ctx, t, zw, i.Path, prefix+i.Name()+"/"); err != nil {
				return err
			}
			continue
		}
		fh := &zip.FileHeader{Name: prefix + i.Name(), Method: zip.Store, Modified: i.ModTime}
		fh.SetMode(i.Mode)
		w, err := zw.CreateHeader(fh)
		if err != nil {
			return err
		}
		rc, _, err := t.Open(ctx, i.Path, 0, -1)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func modTime(t *tree.Tree, ctx context.Context, p string) time.Time {
	if i, err := t.Stat(ctx, p); err == nil {
		return i.ModTime
	}
	return time.Time{}
}

// searchData is the search page's.
type searchData struct {
	Query, In string
	Results   []entry
	Cut       bool // stopped at searchResults or searchScan
}

// search finds names containing the query (case-insensitive) under a
// folder, breadth first, looking at searchScan entries at most.
func (q *request) search() {
	in := "/"
	if q.r.FormValue("in") != "" {
		in = q.r.FormValue("in")
	}
	p, err := drivePath(in)
	if err != nil {
		q.fail(http.StatusBadRequest, "The folder to search is not a path of your drive.")
		return
	}
	query := strings.TrimSpace(q.r.FormValue("q"))
	d := searchData{Query: query, In: "/" + p}
	if query == "" {
		q.h.render(q.w, q.r, q.s, http.StatusOK, "search", "Search", d)
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	needle := strings.ToLower(query)
	dirs, seen := []string{p}, 0
	for len(dirs) > 0 && !d.Cut {
		dir := dirs[0]
		dirs = dirs[1:]
		is, err := listDir(ctx, t, dir)
		if err != nil {
			if dir == p {
				q.treeError("search /"+p, err)
				return
			}
			continue
		}
		for _, i := range is {
			seen++
			if strings.Contains(strings.ToLower(i.Name()), needle) {
				d.Results = append(d.Results, q.entryOf(i))
			}
			if i.IsDir() {
				dirs = append(dirs, i.Path)
			}
			if len(d.Results) >= searchResults || seen >= searchScan {
				d.Cut = true
				break
			}
		}
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "search", "Search", d)
}

// renamePage is the form to rename or move p.
func (q *request) renamePage() {
	p, ok := q.param("path")
	if !ok {
		return
	}
	if p == "" {
		q.fail(http.StatusBadRequest, "Your drive itself cannot be renamed.")
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	info, err := t.Stat(q.r.Context(), p)
	if err != nil {
		q.treeError("rename /"+p, err)
		return
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "rename", "Rename or move", q.entryOf(info))
}

// op does a change posted by a form: mkdir, rename, delete.
func (q *request) op(name string) {
	if q.r.Method != http.MethodPost {
		q.w.Header().Set("Allow", "POST")
		q.fail(http.StatusMethodNotAllowed, "Changes are made with the page's buttons (POST).")
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	switch name {
	case "mkdir":
		dir, ok := q.param("dir")
		if !ok {
			return
		}
		n := strings.TrimSpace(q.r.FormValue("name"))
		if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || (dir == "" && n == trashDir) {
			q.fail(http.StatusBadRequest, "A folder name cannot be empty, . or .., or hold a /.")
			return
		}
		p := path.Join(dir, n)
		if err := t.Mkdir(ctx, p, 0); err != nil {
			q.treeError("make the folder /"+p, err)
			return
		}
		q.done(folderURL(q.s.acct.Name, dir), "Made the folder "+n+".")
	case "rename":
		from, ok := q.param("path")
		if !ok {
			return
		}
		to, ok := q.param("to")
		if !ok {
			return
		}
		if from == "" || to == "" {
			q.fail(http.StatusBadRequest, "Your drive itself cannot be renamed or replaced.")
			return
		}
		if from == to {
			q.done(folderURL(q.s.acct.Name, parentOf(to)), "")
			return
		}
		if err := t.Rename(ctx, from, to, tree.RenameOptions{NoReplace: true}); err != nil {
			q.treeError("move /"+from+" to /"+to, err)
			return
		}
		q.done(folderURL(q.s.acct.Name, parentOf(to)), "Moved /"+from+" to /"+to+".")
	case "delete":
		p, ok := q.param("path")
		if !ok {
			return
		}
		if p == "" {
			q.fail(http.StatusBadRequest, "Your drive itself cannot be deleted.")
			return
		}
		if _, err := toTrash(ctx, t, p, q.s.acct.Name, q.h.cfg.Now()); err != nil {
			q.treeError("delete /"+p, err)
			return
		}
		q.done(folderURL(q.s.acct.Name, parentOf(p)), "Moved /"+p+" to the trash.")
	default:
		q.fail(http.StatusNotFound, "There is no such action.")
	}
}

// parentOf is the folder holding tree path p.
func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
