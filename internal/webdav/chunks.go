package webdav

import (
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/adler32"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
	xwebdav "golang.org/x/net/webdav"
)

// DefaultUploadExpiry is how long a chunked upload may go without a new
// chunk before it is dropped.
const DefaultUploadExpiry = 24 * time.Hour

// The chunked uploads of ownCloud's "chunking NG" and Nextcloud's
// versions 1 and 2 (docs/files.md): MKCOL UploadsPrefix+USER/ID makes an
// upload; PUT .../ID/NAME stores a chunk, NAME a number (ownCloud: 0, 1,
// ...; Nextcloud 2: 1, 2, ...) or a byte range START-END (Nextcloud 1);
// PROPFIND lists the chunks (a client resuming); DELETE drops a chunk or
// the upload; MOVE .../ID/.file to a path of the user's tree commits the
// chunks, in order, as one new version of that file. The chunks live in
// the spool directory, outside the tree: nothing is visible before the
// MOVE. An upload that gets no chunk for Config.UploadExpiry is dropped.

var (
	uploadIDRe  = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)
	chunkNameRe = regexp.MustCompile(`^([0-9]{1,20})(?:-([0-9]{1,20}))?$`)
)

// uploadsDir is where user's uploads are spooled.
func (s *Server) uploadsDir(user string) string {
	base := s.cfg.SpoolDir
	if base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "quilt-uploads", hex.EncodeToString([]byte(user)))
}

// serveUploads serves rest (after UploadsPrefix+USER) of a chunked
// upload's request; dst is the Destination's path in the user's tree.
func (s *Server) serveUploads(w http.ResponseWriter, r *http.Request, user string, b *bucketState, fsys *fileSystem, rest, dst string) {
	s.sweepUploads(false)
	id, chunk, _ := strings.Cut(strings.Trim(rest, "/"), "/")
	if strings.Contains(chunk, "/") {
		http.Error(w, "quilt: an upload holds chunks, not directories", http.StatusNotFound)
		return
	}
	if id != "" && !uploadIDRe.MatchString(id) {
		http.Error(w, "quilt: an upload ID is letters, digits, '.', '_' and '-' (up to 128)", http.StatusBadRequest)
		return
	}
	dir := ""
	if id != "" {
		dir = filepath.Join(s.uploadsDir(user), id)
	}
	exists := func() bool {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			http.Error(w, "quilt: no upload "+id+" (never made, committed, or expired)", http.StatusNotFound)
			return false
		}
		return true
	}
	switch {
	case r.Method == "MKCOL" && id != "" && chunk == "":
		if r.ContentLength > 0 {
			http.Error(w, "quilt: MKCOL with a body", http.StatusUnsupportedMediaType)
			return
		}
		if err := os.MkdirAll(s.uploadsDir(user), 0o700); err != nil {
			http.Error(w, "quilt: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err := os.Mkdir(dir, 0o700); errors.Is(err, fs.ErrExist) {
			http.Error(w, "quilt: upload "+id+" exists", http.StatusMethodNotAllowed)
			return
		} else if err != nil {
			http.Error(w, "quilt: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
	case r.Method == http.MethodPut && chunk != "":
		if !exists() {
			return
		}
		if !chunkNameRe.MatchString(chunk) {
			http.Error(w, "quilt: a chunk's name is its number or its byte range START-END", http.StatusBadRequest)
			return
		}
		if err := putChunk(dir, chunk, r); err != nil {
			http.Error(w, "quilt: chunk "+chunk+": "+err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		os.Chtimes(dir, now, now)
		w.WriteHeader(http.StatusCreated)
	case r.Method == "PROPFIND" && (id == "" || chunk == ""):
		if id != "" && !exists() {
			return
		}
		s.propfindUploads(w, r, user, id)
	case r.Method == http.MethodDelete && id != "":
		if !exists() {
			return
		}
		if chunk == "" {
			os.RemoveAll(dir)
		} else if err := os.Remove(filepath.Join(dir, chunk)); err != nil || !chunkNameRe.MatchString(chunk) {
			http.Error(w, "quilt: no chunk "+chunk, http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == "MOVE" && id != "" && chunk == ".file":
		if !exists() {
			return
		}
		if r.Header.Get("Destination") == "" {
			http.Error(w, "quilt: MOVE without a Destination", http.StatusBadRequest)
			return
		}
		s.commitUpload(w, r, b, fsys, dir, strings.Trim(dst, "/"))
	default:
		w.Header().Set("Allow", "MKCOL, PUT, PROPFIND, DELETE, MOVE")
		http.Error(w, "quilt: a chunked upload takes MKCOL ID, PUT ID/CHUNK, PROPFIND, DELETE and MOVE ID/.file", http.StatusMethodNotAllowed)
	}
}

// putChunk stores a request's body as chunk name of the upload in dir:
// written aside, then renamed, so a chunk that broke off is not there.
func putChunk(dir, name string, r *http.Request) error {
	f, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, r.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the body broke off: %w", err)
	}
	if r.ContentLength >= 0 && n != r.ContentLength {
		return fmt.Errorf("%d bytes of a Content-Length of %d", n, r.ContentLength)
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// chunkFile is one chunk of an upload.
type chunkFile struct {
	name   string
	num    uint64 // the number, or the range's start
	end    uint64 // the range's end (inclusive), if ranged
	ranged bool
	size   int64
	path   string
}

// chunks lists the chunks of the upload in dir, in order, and checks that
// they leave no gap: numbers follow each other (from 0 or 1) or are each
// chunk's offset, ranges start where the last one ended and hold as many
// bytes as they say.
func chunks(dir string) ([]chunkFile, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var cs []chunkFile
	for _, de := range des {
		m := chunkNameRe.FindStringSubmatch(de.Name())
		if m == nil || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			return nil, err
		}
		c := chunkFile{name: de.Name(), size: fi.Size(), path: filepath.Join(dir, de.Name())}
		c.num, _ = strconv.ParseUint(m[1], 10, 64)
		if m[2] != "" {
			c.ranged = true
			c.end, _ = strconv.ParseUint(m[2], 10, 64)
		}
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].num < cs[j].num })
	// Numbered chunks follow each other from 0 or 1 (Nextcloud, rclone),
	// or each is named by its offset (ownCloud's client).
	seq, offs := true, true
	var off uint64
	for i, c := range cs {
		if c.ranged != cs[0].ranged {
			return nil, errors.New("chunks named both by number and by range")
		}
		if c.ranged && (c.num != off || c.end+1 != c.num+uint64(c.size)) {
			return nil, fmt.Errorf("chunk gap: %s is not bytes %d-%d of %d bytes", c.name, off, off+uint64(c.size)-1, c.size)
		}
		if i == 0 && c.num > 1 || i > 0 && c.num != cs[i-1].num+1 {
			seq = false
		}
		if c.num != off {
			offs = false
		}
		off += uint64(c.size)
	}
	if len(cs) > 0 && !cs[0].ranged && !seq && !offs {
		return nil, fmt.Errorf("chunk gap: chunks %s are neither numbered 0, 1, 2, ... (or 1, 2, ...) nor named by their offsets", chunkNames(cs))
	}
	return cs, nil
}

// checksum parses an OC-Checksum header ("MD5:hex", "SHA1:hex",
// "ADLER32:hex") into its hash and the hex sum; "" gives nil.
func checksum(v string) (hash.Hash, string, error) {
	if v == "" {
		return nil, "", nil
	}
	typ, sum, ok := strings.Cut(v, ":")
	sum = strings.ToLower(strings.TrimSpace(sum))
	if !ok || sum == "" {
		return nil, "", errors.New("OC-Checksum is TYPE:HEX")
	}
	switch strings.ToUpper(typ) {
	case "MD5":
		return md5.New(), sum, nil
	case "SHA1":
		return sha1.New(), sum, nil
	case "ADLER32":
		return adler32.New(), sum, nil
	}
	return nil, "", fmt.Errorf("OC-Checksum type %s: MD5, SHA1 or ADLER32", typ)
}

// commitUpload checks the upload in dir (no gap, OC-Total-Length,
// OC-Checksum, the destination's ETag in an If header) and writes its
// chunks as one new version of dst.
func (s *Server) commitUpload(w http.ResponseWriter, r *http.Request, b *bucketState, fsys *fileSystem, dir, dst string) {
	ctx := r.Context()
	if dst == "" {
		http.Error(w, "quilt: the root is no file", http.StatusForbidden)
		return
	}
	s.upMu.Lock()
	busy := s.assembling[dir]
	s.assembling[dir] = true
	s.upMu.Unlock()
	if busy {
		http.Error(w, "quilt: this upload is being committed", http.StatusLocked)
		return
	}
	defer func() {
		s.upMu.Lock()
		delete(s.assembling, dir)
		s.upMu.Unlock()
	}()
	bad := func(code int, msg string) { http.Error(w, "quilt: "+msg, code) }
	cs, err := chunks(dir)
	if err != nil {
		bad(http.StatusBadRequest, err.Error())
		return
	}
	var total int64
	for _, c := range cs {
		total += c.size
	}
	if v := r.Header.Get("OC-Total-Length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			bad(http.StatusBadRequest, "OC-Total-Length is not a length")
			return
		}
		if n != total {
			bad(http.StatusBadRequest, fmt.Sprintf("the chunks hold %d bytes, OC-Total-Length says %d", total, n))
			return
		}
	}
	var mtime time.Time
	if v := r.Header.Get("X-OC-Mtime"); v != "" {
		t, ok := parseMtime(v)
		if !ok {
			bad(http.StatusBadRequest, "X-OC-Mtime is not seconds since 1970")
			return
		}
		mtime, fsys.mtime = t, t
	}
	h, want, err := checksum(r.Header.Get("OC-Checksum"))
	if err != nil {
		bad(http.StatusBadRequest, err.Error())
		return
	}
	// One pass over the spooled chunks: the SHA-1 kept with the file, and
	// the client's checksum checked before anything is written.
	sha := sha1.New()
	hw := io.Writer(sha)
	if h != nil {
		hw = io.MultiWriter(sha, h)
	}
	for _, c := range cs {
		f, err := os.Open(c.path)
		if err != nil {
			bad(http.StatusInternalServerError, err.Error())
			return
		}
		_, err = io.Copy(hw, f)
		f.Close()
		if err != nil {
			bad(http.StatusInternalServerError, err.Error())
			return
		}
	}
	if h != nil {
		if got := hex.EncodeToString(h.Sum(nil)); !sumEqual(got, want) {
			bad(http.StatusBadRequest, "the chunks' checksum is "+got+", OC-Checksum says "+want)
			return
		}
	}
	// As x/net/webdav does for a request without lock tokens: a
	// temporary lock, which fails if another holds one.
	now := time.Now()
	tok, err := b.locks.Create(now, xwebdav.LockDetails{Root: "/" + dst, Duration: -1, ZeroDepth: true})
	if err != nil {
		bad(http.StatusLocked, "the destination is locked")
		return
	}
	defer b.locks.Unlock(now, tok)
	old, err := b.t.Stat(ctx, dst)
	existed := err == nil
	if existed && old.IsDir() {
		w.Header().Set("X-Quilt-Error", "is-dir")
		bad(http.StatusConflict, "the destination is a directory")
		return
	}
	if tags := ifTags.FindAllStringSubmatch(r.Header.Get("If"), -1); len(tags) > 0 {
		cur := ""
		if existed {
			cur, _ = (&fileInfo{Info: old, fs: fsys}).ETag(ctx)
		}
		for _, t := range tags {
			if t[1] != cur {
				bad(http.StatusPreconditionFailed, "the destination's ETag is not "+t[1])
				return
			}
		}
	}
	id := old.Object.Meta[metaFileID]
	if id == "" {
		id = strconv.FormatUint(newFileID(), 10)
	}
	var rs []io.Reader
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, c := range cs {
		f, err := os.Open(c.path)
		if err != nil {
			bad(http.StatusInternalServerError, err.Error())
			return
		}
		files = append(files, f)
		rs = append(rs, f)
	}
	_, err = b.t.Create(ctx, dst, io.MultiReader(rs...), tree.CreateOptions{ModTime: mtime, Size: total,
		Meta: map[string]string{metaFileID: id, metaSHA1: hex.EncodeToString(sha.Sum(nil))}})
	if err != nil {
		if c := ErrorCode(err); c != "" {
			w.Header().Set("X-Quilt-Error", c)
		}
		code := http.StatusInternalServerError
		switch ErrorCode(err) {
		case "not-exist", "not-dir":
			code = http.StatusConflict
		case "is-dir":
			code = http.StatusConflict
		}
		if total == 0 && code == http.StatusInternalServerError {
			code = http.StatusBadRequest
		}
		bad(code, "committing the upload: "+err.Error())
		return
	}
	os.RemoveAll(dir)
	fsys.ocHeaders(ctx, dst)
	if existed {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// ifTags are the entity tags of an If header ("<url> (["etag"])").
var ifTags = regexp.MustCompile(`\[\s*(?:W/)?("[^"]*")\s*\]`)

// propfindUploads lists the user's uploads (id "") or one upload's
// chunks with their sizes, Depth 0 or 1.
func (s *Server) propfindUploads(w http.ResponseWriter, r *http.Request, user, id string) {
	base := UploadsPrefix + user + "/"
	dir := s.uploadsDir(user)
	if id != "" {
		base += id + "/"
		dir = filepath.Join(dir, id)
	}
	type entry struct {
		href string
		size int64
		coll bool
		mod  time.Time
	}
	es := []entry{{href: base, coll: true}}
	if fi, err := os.Stat(dir); err == nil {
		es[0].mod = fi.ModTime()
	}
	if r.Header.Get("Depth") != "0" {
		des, _ := os.ReadDir(dir)
		for _, de := range des {
			if strings.HasPrefix(de.Name(), ".") {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue
			}
			es = append(es, entry{href: base + de.Name(), size: fi.Size(), coll: de.IsDir(), mod: fi.ModTime()})
		}
	}
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<d:multistatus xmlns:d="DAV:">`)
	for _, e := range es {
		sb.WriteString("<d:response><d:href>" + xmlText(e.href) + "</d:href><d:propstat><d:prop>")
		if e.coll {
			sb.WriteString("<d:resourcetype><d:collection/></d:resourcetype>")
		} else {
			sb.WriteString("<d:resourcetype/><d:getcontentlength>" + strconv.FormatInt(e.size, 10) + "</d:getcontentlength>")
		}
		if !e.mod.IsZero() {
			sb.WriteString("<d:getlastmodified>" + e.mod.UTC().Format(http.TimeFormat) + "</d:getlastmodified>")
		}
		sb.WriteString("</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")
	}
	sb.WriteString("</d:multistatus>\n")
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.WriteHeader(http.StatusMultiStatus)
	io.WriteString(w, sb.String())
}

// sweepUploads drops the uploads (of every user) that got no chunk for
// UploadExpiry: at most once a minute (or a quarter of UploadExpiry)
// unless forced.
func (s *Server) sweepUploads(force bool) {
	s.upMu.Lock()
	now := time.Now()
	if !force && now.Sub(s.swept) < min(time.Minute, s.cfg.UploadExpiry/4) {
		s.upMu.Unlock()
		return
	}
	s.swept = now
	s.upMu.Unlock()
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(s.uploadsDir("x")), "*", "*"))
	for _, p := range dirs {
		fi, err := os.Stat(p)
		if err != nil || !fi.IsDir() || now.Sub(fi.ModTime()) < s.cfg.UploadExpiry {
			continue
		}
		s.upMu.Lock()
		busy := s.assembling[p]
		s.upMu.Unlock()
		if !busy {
			os.RemoveAll(p)
			s.cfg.Logger.Info("webdav: dropped an expired chunked upload", "upload", p)
		}
	}
}

// chunkNames lists chunks' names for an error, the first few.
func chunkNames(cs []chunkFile) string {
	var ns []string
	for i, c := range cs {
		if i == 8 {
			ns = append(ns, "...")
			break
		}
		ns = append(ns, c.name)
	}
	return strings.Join(ns, ", ")
}

// sumEqual compares a checksum with a client's: ownCloud's client
// writes an ADLER32 sum without leading zeros.
func sumEqual(got, want string) bool {
	return strings.TrimLeft(got, "0") == strings.TrimLeft(want, "0")
}
