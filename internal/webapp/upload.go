package webapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// An upload is a file sent in chunks that a page can resume after an
// interruption or a reload:
//
//	POST   /api/uploads            {"path":"/a/b","size":N,"mtime":MS} -> 201 {"id","offset":0,"chunk"}
//	GET    /api/uploads/ID         -> {"id","path","size","offset"}
//	PUT    /api/uploads/ID?offset=N   the bytes from N (N must be the offset received so far)
//	POST   /api/uploads/ID/finish  -> {"path","size"}: the file, as one new version
//	DELETE /api/uploads/ID
//
// The bytes go to SpoolDir/uploads/ID.part, the upload's record to
// ID.json; the offset received is the part's size, so a chunk cut short
// keeps what arrived. The finish streams the part into the tree (one
// Create: readers see the old version or the whole new one, never a
// part). An upload with no chunk for Config.UploadTTL is removed.

// upload is one upload in progress.
type upload struct {
	ID     string    `json:"id"`
	User   string    `json:"user"`
	Bucket string    `json:"bucket"`
	Path   string    `json:"path"` // tree form
	Size   int64     `json:"size"`
	Mtime  time.Time `json:"mtime"` // the file's modification time; zero: the finish's

	mu     sync.Mutex // one request at a time writes or finishes
	active time.Time  // the last chunk (or the creation)
	gone   bool
}

// uploads are the uploads in progress, by ID.
type uploads struct {
	dir string
	now func() time.Time
	ttl time.Duration

	mu sync.Mutex
	m  map[string]*upload
}

var uploadID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// openUploads loads the uploads left in dir by an earlier process.
func openUploads(dir string, now func() time.Time, ttl time.Duration) (*uploads, error) {
	us := &uploads{dir: dir, now: now, ttl: ttl, m: map[string]*upload{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !uploadID.MatchString(id) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		u := &upload{}
		if err != nil || json.Unmarshal(b, u) != nil || u.ID != id {
			continue
		}
		fi, err := os.Stat(us.part(id))
		if err != nil {
			os.Remove(filepath.Join(dir, de.Name()))
			continue
		}
		u.active = fi.ModTime()
		us.m[id] = u
	}
	return us, nil
}

func (us *uploads) part(id string) string   { return filepath.Join(us.dir, id+".part") }
func (us *uploads) record(id string) string { return filepath.Join(us.dir, id+".json") }

func (us *uploads) create(u *upload) error {
	u.ID = randomID(16)
	b, _ := json.Marshal(u)
	f, err := os.OpenFile(us.part(u.ID), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	if err := os.WriteFile(us.record(u.ID), b, 0o600); err != nil {
		os.Remove(us.part(u.ID))
		return err
	}
	u.active = us.now()
	us.mu.Lock()
	us.m[u.ID] = u
	us.mu.Unlock()
	return nil
}

// get returns upload id of user a, or nil: another user's is as missing.
func (us *uploads) get(id string, a Account) *upload {
	if !uploadID.MatchString(id) {
		return nil
	}
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.m[id]
	if u == nil || u.User != a.Name || u.Bucket != a.Bucket {
		return nil
	}
	return u
}

// drop removes upload u's files. Call with u.mu held.
func (us *uploads) drop(u *upload) {
	u.gone = true
	us.mu.Lock()
	delete(us.m, u.ID)
	us.mu.Unlock()
	os.Remove(us.part(u.ID))
	os.Remove(us.record(u.ID))
}

// received is how many bytes of u have arrived.
func (us *uploads) received(u *upload) (int64, error) {
	fi, err := os.Stat(us.part(u.ID))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// sweep removes the uploads idle for longer than the TTL.
func (us *uploads) sweep(log *slog.Logger) {
	cut := us.now().Add(-us.ttl)
	us.mu.Lock()
	var old []*upload
	for _, u := range us.m {
		old = append(old, u)
	}
	us.mu.Unlock()
	for _, u := range old {
		if !u.mu.TryLock() {
			continue // a chunk is arriving
		}
		if u.active.Before(cut) && !u.gone {
			log.Info("webapp: abandoned upload removed", "user", u.User, "path", "/"+u.Path, "id", u.ID)
			us.drop(u)
		}
		u.mu.Unlock()
	}
}

// uploadInfo is an upload as the API shows it.
func uploadInfo(u *upload, off int64) map[string]any {
	return map[string]any{"id": u.ID, "path": "/" + u.Path, "size": u.Size, "offset": off}
}

// uploadAPI serves /api/uploads and /api/uploads/ID[/finish].
func (q *request) uploadAPI(rest string) {
	if rest == "" {
		if q.r.Method != http.MethodPost {
			q.w.Header().Set("Allow", "POST")
			q.fail(http.StatusMethodNotAllowed, "POST a new upload.")
			return
		}
		q.createUpload()
		return
	}
	id, action, _ := strings.Cut(rest, "/")
	u := q.h.uploads.get(id, q.s.acct)
	if u == nil {
		q.fail(http.StatusNotFound, "There is no such upload (it may have finished, or been removed after a long pause): start it again.")
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.gone {
		q.fail(http.StatusNotFound, "There is no such upload: start it again.")
		return
	}
	off, err := q.h.uploads.received(u)
	if err != nil {
		q.fail(http.StatusInternalServerError, "The upload's spool is gone: start it again.")
		return
	}
	switch {
	case action == "" && (q.r.Method == http.MethodGet || q.r.Method == http.MethodHead):
		writeJSON(q.w, http.StatusOK, uploadInfo(u, off))
	case action == "" && q.r.Method == http.MethodPut:
		q.putChunk(u, off)
	case action == "" && q.r.Method == http.MethodDelete:
		q.h.uploads.drop(u)
		q.w.WriteHeader(http.StatusNoContent)
	case action == "finish" && q.r.Method == http.MethodPost:
		q.finishUpload(u, off)
	default:
		q.fail(http.StatusMethodNotAllowed, "Not a method of an upload.")
	}
}

func (q *request) createUpload() {
	var req struct {
		Path  string `json:"path"`
		Size  int64  `json:"size"`
		Mtime int64  `json:"mtime"` // milliseconds since 1970, as File.lastModified
	}
	if err := json.NewDecoder(io.LimitReader(q.r.Body, 64<<10)).Decode(&req); err != nil {
		q.fail(http.StatusBadRequest, "The upload's JSON is not readable: "+err.Error())
		return
	}
	p, err := drivePath(req.Path)
	if err != nil || p == "" {
		q.fail(http.StatusBadRequest, fmt.Sprintf("The path %q is not a file path of your drive: it must start with / and have no empty, . or .. parts.", req.Path))
		return
	}
	if req.Size < 0 {
		q.fail(http.StatusBadRequest, "The size of an upload cannot be negative.")
		return
	}
	if q.h.cfg.Usage != nil {
		used, quota, err := q.h.cfg.Usage(q.r.Context(), q.s.acct)
		if err == nil && quota > 0 && used+req.Size > quota {
			q.fail(http.StatusInsufficientStorage, fmt.Sprintf("This file (%s) does not fit in your quota: %s of %s used.", humanSize(req.Size), humanSize(used), humanSize(quota)))
			return
		}
	}
	u := &upload{User: q.s.acct.Name, Bucket: q.s.acct.Bucket, Path: p, Size: req.Size}
	if req.Mtime > 0 {
		u.Mtime = time.UnixMilli(req.Mtime).UTC()
	}
	if err := q.h.uploads.create(u); err != nil {
		q.h.cfg.Logger.Error("webapp: upload spool", "err", err)
		q.fail(http.StatusInternalServerError, "The server cannot keep the upload.")
		return
	}
	writeJSON(q.w, http.StatusCreated, map[string]any{"id": u.ID, "path": "/" + p, "size": u.Size, "offset": 0, "chunk": q.h.cfg.ChunkSize})
}

// putChunk appends the request's body at offset, which must be off, the
// bytes received so far: an earlier offset is a chunk sent twice, a later
// one a missing chunk; both are 409 with the offset to go on from.
func (q *request) putChunk(u *upload, off int64) {
	at, err := strconv.ParseInt(q.r.URL.Query().Get("offset"), 10, 64)
	if err != nil {
		q.fail(http.StatusBadRequest, "A chunk needs ?offset=N.")
		return
	}
	if at != off {
		writeJSON(q.w, http.StatusConflict, map[string]any{"error": fmt.Sprintf("This upload has %d bytes: send from offset %d, not %d.", off, off, at), "offset": off})
		return
	}
	max := min(q.h.cfg.ChunkSize, u.Size-off)
	if q.r.ContentLength > max {
		q.fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("A chunk at %d may have %d bytes at most.", off, max))
		return
	}
	f, err := os.OpenFile(q.h.uploads.part(u.ID), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		q.fail(http.StatusInternalServerError, "The upload's spool is gone: start it again.")
		return
	}
	n, err := io.Copy(f, io.LimitReader(q.r.Body, max+1))
	if n > max {
		f.Truncate(off + max)
		f.Close()
		q.fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("A chunk at %d may have %d bytes at most.", off, max))
		return
	}
	cerr := f.Close()
	u.active = q.h.cfg.Now()
	if err == nil {
		err = cerr
	}
	if err != nil {
		// What arrived stays: the page asks for the offset and goes on.
		q.h.cfg.Logger.Debug("webapp: chunk cut short", "user", u.User, "id", u.ID, "err", err)
		q.fail(http.StatusBadRequest, fmt.Sprintf("The chunk was cut short after %d bytes: ask for the offset and go on.", n))
		return
	}
	writeJSON(q.w, http.StatusOK, uploadInfo(u, off+n))
}

// finishUpload commits a complete upload as one new version of its file,
// making the folders above it if needed.
func (q *request) finishUpload(u *upload, off int64) {
	if off != u.Size {
		writeJSON(q.w, http.StatusConflict, map[string]any{"error": fmt.Sprintf("The upload is not complete: %d of %d bytes arrived.", off, u.Size), "offset": off})
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	if par := parentOf(u.Path); par != "" {
		if err := t.MkdirAll(ctx, par, 0); err != nil {
			q.treeError("make the folder /"+par, err)
			return
		}
	}
	f, err := os.Open(q.h.uploads.part(u.ID))
	if err != nil {
		q.fail(http.StatusInternalServerError, "The upload's spool is gone: start it again.")
		return
	}
	defer f.Close()
	info, err := t.Create(ctx, u.Path, f, tree.CreateOptions{ModTime: u.Mtime, Size: u.Size})
	if err != nil {
		if errors.Is(err, tree.ErrIsDir) || errors.Is(err, tree.ErrNotDir) {
			q.h.uploads.drop(u)
		}
		q.treeError("save /"+u.Path, err)
		return
	}
	q.h.uploads.drop(u)
	writeJSON(q.w, http.StatusOK, map[string]any{"path": "/" + info.Path, "size": info.Size})
}

// folderAPI is POST /api/folders {"path":"/a/b"}: the folder and those
// above it (a dropped folder that holds no file). One that exists is
// fine.
func (q *request) folderAPI() {
	if q.r.Method != http.MethodPost {
		q.w.Header().Set("Allow", "POST")
		q.fail(http.StatusMethodNotAllowed, "POST a folder.")
		return
	}
	var req struct {
		Path string `json:"path"`
	}
	if err := json.NewDecoder(io.LimitReader(q.r.Body, 64<<10)).Decode(&req); err != nil {
		q.fail(http.StatusBadRequest, "The folder's JSON is not readable: "+err.Error())
		return
	}
	p, err := drivePath(req.Path)
	if err != nil || p == "" {
		q.fail(http.StatusBadRequest, fmt.Sprintf("The path %q is not a folder path of your drive: it must start with / and have no empty, . or .. parts.", req.Path))
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	if err := t.MkdirAll(q.r.Context(), p, 0); err != nil {
		q.treeError("make the folder /"+p, err)
		return
	}
	writeJSON(q.w, http.StatusCreated, map[string]any{"path": "/" + p})
}
