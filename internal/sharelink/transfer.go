package sharelink

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
)

// zipFolder sends the folder info of t as a zip archive, written as the
// files are read: a failure half-way cuts the connection, so the client
// sees a broken download rather than a short archive.
func (h *Handler) zipFolder(w http.ResponseWriter, r *http.Request, t *tree.Tree, info tree.Info) {
	w.Header().Set("Content-Type", "application/zip")
	if r.Method == http.MethodHead {
		return
	}
	zw := zip.NewWriter(w)
	err := addDir(r.Context(), zw, t, info.Path, "", h.hidden)
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		h.cfg.Logger.Warn("sharelink: zip cut short", "path", info.Path, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// stored are the extensions of files already compressed, which a zip
// stores as they are.
var stored = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".webp": true, ".heic": true,
	".mp4": true, ".mkv": true, ".mov": true, ".webm": true, ".mp3": true, ".ogg": true, ".opus": true, ".flac": true,
	".zip": true, ".gz": true, ".tgz": true, ".bz2": true, ".xz": true, ".zst": true, ".7z": true, ".rar": true,
	".pdf": true, ".docx": true, ".xlsx": true, ".pptx": true, ".odt": true, ".ods": true, ".epub": true}

// addDir adds the files and folders under dir to zw, their names under
// prefix. Symbolic links, and the paths hide reports, are left out.
func addDir(ctx context.Context, zw *zip.Writer, t *tree.Tree, dir, prefix string, hide func(string) bool) error {
	list, err := t.ReadDirAll(ctx, dir)
	if err != nil {
		return err
	}
	for _, e := range list {
		if e.Mode&fs.ModeSymlink != 0 || hide(e.Path) {
			continue
		}
		name := prefix + e.Name()
		if e.IsDir() {
			if _, err := zw.CreateHeader(&zip.FileHeader{Name: name + "/", Modified: e.ModTime, Method: zip.Store}); err != nil {
				return err
			}
			if err := addDir(ctx, zw, t, e.Path, name+"/", hide); err != nil {
				return err
			}
			continue
		}
		method := zip.Deflate
		if stored[strings.ToLower(path.Ext(name))] {
			method = zip.Store
		}
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: name, Modified: e.ModTime, Method: method})
		if err != nil {
			return err
		}
		rc, _, err := t.Open(ctx, e.Path, 0, -1)
		if err != nil {
			return err
		}
		_, err = io.Copy(fw, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// maxUploadParts bounds the files of one upload request.
const maxUploadParts = 1000

// errTooLarge is a file over Config.MaxUpload.
var errTooLarge = errors.New("sharelink: file over the size limit")

// limitReader fails with errTooLarge past left bytes.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, errTooLarge
	}
	return n, err
}

// upload takes the files of a multipart form (field "file", any number)
// into the folder of an upload link. A name already there gets a suffix
// (" (1)", " (2)", ...) rather than replacing the file. It answers JSON
// ({"files": [{name, size}]}, or with "error") to a client that accepts
// it, else a page.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request, l gateway.ShareLink) {
	base := PublicPrefix + l.Token
	asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	var done []uploaded
	answer := func(code int, msg string) {
		if asJSON {
			body := map[string]any{"files": done}
			if msg != "" {
				body["error"] = msg
			}
			if done == nil {
				body["files"] = []uploaded{}
			}
			writeJSON(w, code, body)
			return
		}
		h.render(w, code, "uploaded", page{Title: "Uploaded", Base: base, Uploaded: done, Error: msg})
	}
	t, info, ok := h.target(w, r, l, nil)
	if !ok {
		return
	}
	if !info.IsDir() {
		answer(http.StatusConflict, "The shared folder is not a folder any more.")
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		answer(http.StatusBadRequest, "Send the files as multipart/form-data, in the field \"file\".")
		return
	}
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			answer(http.StatusBadRequest, "The upload broke off: "+err.Error())
			return
		}
		if n >= maxUploadParts {
			answer(http.StatusRequestEntityTooLarge, fmt.Sprintf("At most %d files at once.", maxUploadParts))
			return
		}
		if part.FormName() != "file" || part.FileName() == "" {
			part.Close()
			continue
		}
		name, ok := uploadName(part.FileName())
		if ok && h.hidden(path.Join(info.Path, name)) {
			answer(http.StatusBadRequest, fmt.Sprintf("%q is a name the drive keeps for itself.", name))
			return
		}
		if !ok {
			answer(http.StatusBadRequest, fmt.Sprintf("%q is not a usable file name.", part.FileName()))
			return
		}
		final, release, err := h.reserve(r.Context(), t, l.Bucket, info.Path, name)
		if err != nil {
			h.cfg.Logger.Error("sharelink: upload name", "bucket", l.Bucket, "name", name, "err", err)
			answer(http.StatusServiceUnavailable, "No name could be found for "+name+".")
			return
		}
		lr := &limitReader{r: part, left: h.cfg.MaxUpload}
		fi, err := t.Create(r.Context(), path.Join(info.Path, final), lr, tree.CreateOptions{Exclusive: true})
		release()
		switch {
		case errors.Is(err, errTooLarge):
			answer(http.StatusRequestEntityTooLarge, fmt.Sprintf("%s is larger than %s, the limit of this link.", name, humanSize(h.cfg.MaxUpload)))
			return
		case errors.Is(err, fs.ErrExist):
			answer(http.StatusConflict, name+" appeared at the same moment from elsewhere; send it again.")
			return
		case errors.Is(err, gateway.ErrQuota):
			answer(http.StatusInsufficientStorage, name+" does not fit: the drive it goes to is full.")
			return
		case err != nil:
			h.cfg.Logger.Error("sharelink: upload", "bucket", l.Bucket, "name", final, "err", err)
			answer(http.StatusServiceUnavailable, name+" could not be stored: "+err.Error())
			return
		}
		h.cfg.Logger.Info("sharelink: uploaded", "bucket", l.Bucket, "path", fi.Path, "size", fi.Size)
		done = append(done, uploaded{Name: final, Size: fi.Size})
	}
	if len(done) == 0 {
		answer(http.StatusBadRequest, "Choose one or more files to send.")
		return
	}
	answer(http.StatusCreated, "")
}

// uploadName is the file name an upload may take: the last element of
// what the browser sent (some send a path), without control characters,
// slashes or backslashes, not "." or "..", at most 255 bytes of UTF-8.
func uploadName(s string) (string, bool) {
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) || len(s) > 255 || !goodName(s) {
		return "", false
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return "", false
		}
	}
	return s, true
}

// withSuffix is name with " (i)" before its extension (i > 0).
func withSuffix(name string, i int) string {
	if i == 0 {
		return name
	}
	ext := path.Ext(name)
	if ext == name {
		ext = ""
	}
	return strings.TrimSuffix(name, ext) + " (" + strconv.Itoa(i) + ")" + ext
}

// reserve picks the first of name, "name (1)", ... that neither exists
// in dir nor is being uploaded through this handler, and holds it until
// release is called. (Another gateway writing the same name at the same
// moment is caught by the exclusive create.)
func (h *Handler) reserve(ctx context.Context, t *tree.Tree, bucket, dir, name string) (string, func(), error) {
	for i := 0; i < 1000; i++ {
		cand := withSuffix(name, i)
		if len(cand) > 255 {
			break
		}
		p := path.Join(dir, cand)
		key := bucket + "\x00" + p
		h.mu.Lock()
		busy := h.writing[key]
		if !busy {
			h.writing[key] = true
		}
		h.mu.Unlock()
		if busy {
			continue
		}
		release := func() {
			h.mu.Lock()
			delete(h.writing, key)
			h.mu.Unlock()
		}
		_, err := t.Stat(ctx, p)
		if errors.Is(err, fs.ErrNotExist) {
			return cand, release, nil
		}
		release()
		if err != nil {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("sharelink: no free name for %q", name)
}
