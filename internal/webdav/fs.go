package webdav

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/tree"
	"github.com/quilt-grid/quilt/internal/tree/openfile"
	xwebdav "golang.org/x/net/webdav"
)

// NS is the XML namespace of Quilt's own properties: mode (octal
// permissions) and mtime (seconds since 1970 with nine decimals), which
// PROPFIND shows and PROPPATCH sets (chmod, touch).
const NS = "urn:quilt:"

// metaProps is the user metadata key that holds a file's dead properties
// (JSON), beside the tree's mode and mtime.
const metaProps = "davprops"

// ObjectInfo returns the ETag (without quotes) and Content-Type of the
// object at key, for getetag and getcontenttype; an error or "" leaves
// them to x/net/webdav's defaults.
type ObjectInfo func(ctx context.Context, key string) (etag, contentType string, err error)

// fileSystem is x/net/webdav's FileSystem over one bucket's tree. Files
// open for writing are spooled (internal/tree/openfile), one table per
// request, and committed as one new version when closed.
type fileSystem struct {
	t     *tree.Tree
	spool string
	obj   ObjectInfo

	body *bodyReader // a PUT's body

	user  string            // the logged-in user, for oc:owner-id
	hdr   http.Header       // the response's header, for OC-FileId and the like
	want  map[xml.Name]bool // the properties a PROPFIND names (ocProps)
	get   bool              // a GET: OC-Checksum is set from the file's SHA-1
	mtime time.Time         // a PUT's X-OC-Mtime (zero: none)
	// sum is the hash of a PUT's OC-Checksum over the body, which must
	// give sumWant (nil: no OC-Checksum).
	sum     hash.Hash
	sumWant string
	usage   func(ctx context.Context) (used, quota int64, err error)

	mu   sync.Mutex
	last error // the request's last error, for the X-Quilt-Error header
}

// fail records err as the request's last error and returns it mapped to
// the os package's errors.
func (f *fileSystem) fail(op, name string, err error) error {
	if err == nil {
		return nil
	}
	f.mu.Lock()
	f.last = err
	f.mu.Unlock()
	return osErr(op, name, err)
}

// ErrorCode names the tree's error err in a word, as the X-Quilt-Error
// header gives it ("" for another error).
func ErrorCode(err error) string {
	switch {
	case errors.Is(err, tree.ErrNotEmpty):
		return "not-empty"
	case errors.Is(err, tree.ErrIsDir):
		return "is-dir"
	case errors.Is(err, tree.ErrNotDir):
		return "not-dir"
	case errors.Is(err, fs.ErrNotExist):
		return "not-exist"
	case errors.Is(err, fs.ErrExist):
		return "exist"
	case errors.Is(err, fs.ErrInvalid):
		return "invalid"
	case errors.Is(err, gateway.ErrQuota):
		return "quota"
	case errors.Is(err, ErrChecksum):
		return "checksum"
	}
	return ""
}

var _ xwebdav.FileSystem = (*fileSystem)(nil)

// osErr maps the tree's errors to the os package's, which x/net/webdav
// tests with os.IsNotExist and os.IsExist (no unwrapping past one
// PathError).
func osErr(op, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return &os.PathError{Op: op, Path: name, Err: os.ErrNotExist}
	case errors.Is(err, fs.ErrExist):
		return &os.PathError{Op: op, Path: name, Err: os.ErrExist}
	}
	return err
}

func (f *fileSystem) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	i, err := f.t.Stat(ctx, name)
	if err != nil {
		return nil, f.fail("stat", name, err)
	}
	return &fileInfo{Info: i, fs: f}, nil
}

func (f *fileSystem) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	if perm.Perm() == 0o777 {
		perm = 0 // MKCOL's: the tree's default
	}
	id := strconv.FormatUint(newFileID(), 10)
	return f.fail("mkdir", name, f.t.MkdirMeta(ctx, name, perm.Perm(), map[string]string{metaFileID: id}))
}

// RemoveAll removes name and all under it in one batch; nothing there is
// no error.
func (f *fileSystem) RemoveAll(ctx context.Context, name string) error {
	err := f.t.Remove(ctx, name, tree.RemoveOptions{Recursive: true})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return f.fail("remove", name, err)
}

// Rename is the tree's: entries only, no data moves. x/net/webdav has
// removed an existing destination already when Overwrite allows it.
func (f *fileSystem) Rename(ctx context.Context, oldName, newName string) error {
	return f.fail("rename", oldName, f.t.Rename(ctx, oldName, newName, tree.RenameOptions{}))
}

func (f *fileSystem) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (xwebdav.File, error) {
	// O_RDWR alone is PROPPATCH's open, for DeadProps and Patch only: the
	// read-only files below have them.
	if flag&(os.O_WRONLY|os.O_CREATE|os.O_TRUNC) != 0 {
		mode := perm.Perm()
		if mode == 0o666 {
			mode = 0 // PUT's: the tree's default
		}
		tab := openfile.NewTable(f.t, f.spool)
		h, err := tab.Open(ctx, name, openfile.Options{
			Create: flag&os.O_CREATE != 0, Exclusive: flag&os.O_EXCL != 0, Truncate: flag&os.O_TRUNC != 0, Mode: mode})
		if err != nil {
			return nil, f.fail("open", name, err)
		}
		var base tree.Info
		if h.InTree() {
			base, _ = f.t.Stat(ctx, name)
		}
		// A file written again keeps its ID; a new one gets one.
		id := base.Object.Meta[metaFileID]
		if id == "" {
			id = strconv.FormatUint(newFileID(), 10)
		}
		h.SetMeta(map[string]string{metaFileID: id})
		w := &writeFile{fs: f, ctx: ctx, h: h, base: base, id: id}
		if h.Size() == 0 {
			w.sha = sha1.New()
		}
		return w, nil
	}
	i, err := f.t.Stat(ctx, name)
	if err != nil {
		return nil, f.fail("open", name, err)
	}
	fi := &fileInfo{Info: i, fs: f}
	if f.get && !i.IsDir() && f.hdr != nil {
		if v := i.Object.Meta[metaSHA1]; len(v) == 40 {
			f.hdr.Set("OC-Checksum", "SHA1:"+v) // the sync clients check a download with it
		}
	}
	if i.IsDir() {
		return &dirFile{fs: f, ctx: ctx, info: i, fi: fi}, nil
	}
	return &readFile{fs: f, ctx: ctx, info: i, fi: fi}, nil
}

// fileInfo is a tree.Info with the getetag and getcontenttype of its
// object.
type fileInfo struct {
	tree.Info
	fs *fileSystem

	once      sync.Once // the object looked up once, when first asked
	etag, typ string

	sumOnce sync.Once // a directory's summary, made once, when first asked
	sum     summary
	sumErr  error
}

// summary is a directory's, made when first asked.
func (i *fileInfo) summary(ctx context.Context) (summary, error) {
	i.sumOnce.Do(func() { i.sum, i.sumErr = i.fs.summarize(ctx, i.Info) })
	return i.sum, i.sumErr
}

// object returns the object's ETag and Content-Type ("" if unknown).
func (i *fileInfo) object(ctx context.Context) (etag, typ string) {
	i.once.Do(func() {
		if i.fs.obj != nil && !i.IsDir() {
			i.etag, i.typ, _ = i.fs.obj(ctx, i.Path)
		}
	})
	return i.etag, i.typ
}

func (i *fileInfo) Name() string       { return i.Info.Name() }
func (i *fileInfo) Size() int64        { return i.Info.Size }
func (i *fileInfo) Mode() fs.FileMode  { return i.Info.Mode }
func (i *fileInfo) ModTime() time.Time { return i.Info.ModTime }
func (i *fileInfo) IsDir() bool        { return i.Info.IsDir() }
func (i *fileInfo) Sys() any           { return i.Info }

// ETag is the object's own ETag, looked up when asked (for a PUT, after
// the commit), so a file changed through S3 gets a new one too. A
// directory's is a hash of everything under it (summarize).
func (i *fileInfo) ETag(ctx context.Context) (string, error) {
	if i.IsDir() {
		s, err := i.summary(ctx)
		if err != nil {
			return "", xwebdav.ErrNotImplemented
		}
		return s.etag, nil
	}
	e, _ := i.object(ctx)
	if e == "" {
		return "", xwebdav.ErrNotImplemented
	}
	return `"` + e + `"`, nil
}

// ContentType is the object's Content-Type, else the extension's, else
// application/octet-stream: never "not implemented", which would make
// x/net/webdav read the start of every file a PROPFIND lists to sniff it.
func (i *fileInfo) ContentType(ctx context.Context) (string, error) {
	if i.IsDir() {
		return "", xwebdav.ErrNotImplemented // not asked for collections
	}
	if _, ct := i.object(ctx); ct != "" {
		return ct, nil
	}
	if ct := mime.TypeByExtension(path.Ext(i.Path)); ct != "" {
		return ct, nil
	}
	return "application/octet-stream", nil
}

// readFile is a file open for reading: a stream of the tree's object
// from the offset of the last Seek, opened at the first Read, so a ranged
// GET reads from its start only.
type readFile struct {
	fs   *fileSystem
	ctx  context.Context
	info tree.Info
	fi   *fileInfo
	pos  int64
	rc   io.ReadCloser
}

func (r *readFile) Read(p []byte) (int, error) {
	if r.pos >= r.info.Size {
		return 0, io.EOF
	}
	if r.rc == nil {
		rc, _, err := r.fs.t.Open(r.ctx, r.info.Path, r.pos, -1)
		if err != nil {
			return 0, err
		}
		r.rc = rc
	}
	n, err := r.rc.Read(p)
	r.pos += int64(n)
	if errors.Is(err, io.EOF) && r.pos < r.info.Size {
		err = io.ErrUnexpectedEOF // the object changed under us
	}
	return n, err
}

func (r *readFile) Seek(off int64, whence int) (int64, error) {
	p, err := seek(r.pos, r.info.Size, off, whence)
	if err != nil {
		return r.pos, err
	}
	if p != r.pos && r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	r.pos = p
	return p, nil
}

func seek(pos, size, off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		off += pos
	case io.SeekEnd:
		off += size
	}
	if off < 0 {
		return pos, errors.New("webdav: seek before the start")
	}
	return off, nil
}

func (r *readFile) Close() error {
	if r.rc != nil {
		r.rc.Close()
		r.rc = nil
	}
	return nil
}

func (r *readFile) Readdir(int) ([]fs.FileInfo, error) {
	return nil, &os.PathError{Op: "readdir", Path: r.info.Path, Err: tree.ErrNotDir}
}
func (r *readFile) Stat() (fs.FileInfo, error) { return r.fi, nil }
func (r *readFile) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: r.info.Path, Err: os.ErrPermission}
}
func (r *readFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return r.fs.withComputed(r.ctx, r.fi, deadProps(r.info)), nil
}
func (r *readFile) Patch(ps []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return r.fs.patch(r.ctx, r.info, ps)
}

// dirFile is a directory open for reading.
type dirFile struct {
	fs      *fileSystem
	ctx     context.Context
	info    tree.Info
	fi      *fileInfo
	entries []fs.FileInfo
	read    bool
}

func (d *dirFile) Read([]byte) (int, error) {
	return 0, &os.PathError{Op: "read", Path: d.info.Path, Err: tree.ErrIsDir}
}
func (d *dirFile) Seek(int64, int) (int64, error) { return 0, nil }
func (d *dirFile) Close() error                   { return nil }
func (d *dirFile) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: d.info.Path, Err: tree.ErrIsDir}
}
func (d *dirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }

// Readdir lists the directory, every page of it.
func (d *dirFile) Readdir(count int) ([]fs.FileInfo, error) {
	if !d.read {
		es, err := d.fs.t.ReadDirAll(d.ctx, d.info.Path)
		if err != nil {
			return nil, d.fs.fail("readdir", d.info.Path, err)
		}
		for _, e := range es {
			d.entries = append(d.entries, &fileInfo{Info: e, fs: d.fs})
		}
		d.read = true
	}
	if count <= 0 {
		out := d.entries
		d.entries = nil
		return out, nil
	}
	if len(d.entries) == 0 {
		return nil, io.EOF
	}
	n := min(count, len(d.entries))
	out := d.entries[:n]
	d.entries = d.entries[n:]
	return out, nil
}
func (d *dirFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return d.fs.withComputed(d.ctx, d.fi, deadProps(d.info)), nil
}

// withComputed adds to a PROPFIND's dead properties the computed ones of
// ownCloud and Nextcloud that it names (ocProps); other requests (a COPY
// copying the dead properties) get the dead ones alone.
func (f *fileSystem) withComputed(ctx context.Context, fi *fileInfo, m map[xml.Name]xwebdav.Property) map[xml.Name]xwebdav.Property {
	if f.want == nil {
		return m
	}
	maps.Copy(m, f.ocProps(ctx, fi))
	return m
}
func (d *dirFile) Patch(ps []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return d.fs.patch(d.ctx, d.info, ps)
}

// writeFile is a file open for writing (PUT, the target of a COPY): its
// writes go to the spool, and Close commits it.
type writeFile struct {
	fs    *fileSystem
	ctx   context.Context
	h     *openfile.Handle
	base  tree.Info
	pos   int64
	props []xwebdav.Proppatch // set before the commit (COPY), applied after it
	from  *tree.Info          // the file this one is a copy of, by reference
	id    string              // the file ID
	// sha is the SHA-1 of the bytes written from the start in one
	// stream (a PUT's), hashed bytes long; nil if written otherwise.
	sha    hash.Hash
	hashed int64
}

// ReadFrom is io.Copy's way in: from a file of the same tree read from
// its start into a file not written yet (x/net/webdav's COPY), the copy
// is made by reference at Close, as a rename makes it (no byte is read
// or written); from anything else, the bytes are written.
func (w *writeFile) ReadFrom(r io.Reader) (int64, error) {
	if src, ok := r.(*readFile); ok && src.fs.t == w.fs.t && src.pos == 0 && src.rc == nil && w.pos == 0 && w.h.Size() == 0 {
		w.from = &src.info
		w.pos = src.info.Size
		return src.info.Size, nil
	}
	return io.Copy(struct{ io.Writer }{w}, r)
}

func (w *writeFile) Write(p []byte) (int, error) {
	if w.from != nil {
		return 0, errors.New("webdav: write after a copy by reference")
	}
	n, err := w.h.WriteAt(p, w.pos)
	if w.pos == w.hashed && w.sha != nil {
		w.sha.Write(p[:n])
		if w.fs.sum != nil {
			w.fs.sum.Write(p[:n])
		}
		w.hashed += int64(n)
	} else {
		w.sha = nil // not written in one stream from the start
	}
	w.pos += int64(n)
	return n, err
}

func (w *writeFile) Read(p []byte) (int, error) {
	n, err := w.h.ReadAtContext(w.ctx, p, w.pos)
	w.pos += int64(n)
	return n, err
}

func (w *writeFile) Seek(off int64, whence int) (int64, error) {
	p, err := seek(w.pos, w.h.Size(), off, whence)
	w.pos = p
	return p, err
}

func (w *writeFile) Readdir(int) ([]fs.FileInfo, error) {
	return nil, &os.PathError{Op: "readdir", Path: w.h.Name(), Err: tree.ErrNotDir}
}

func (w *writeFile) Stat() (fs.FileInfo, error) {
	return &fileInfo{Info: w.h.Info(w.base), fs: w.fs}, nil
}

// Close commits the file, then the dead properties set on it; after a
// PUT whose body broke off, it drops the file instead.
func (w *writeFile) Close() error {
	if w.fs.body != nil {
		if err := w.fs.body.failed(); err != nil {
			w.h.Abort()
			return w.fs.fail("close", w.h.Name(), fmt.Errorf("webdav: the body broke off, nothing written: %w", err))
		}
	}
	if w.from != nil {
		w.h.Abort()
		meta := maps.Clone(w.from.Object.Meta)
		if meta == nil {
			meta = map[string]string{}
		}
		if _, ok := meta[tree.MetaMtime]; !ok {
			meta[tree.MetaMtime] = formatMtime(w.from.ModTime)
		}
		meta[metaFileID] = strconv.FormatUint(newFileID(), 10) // a copy is a new file
		op := tree.Op{Key: w.h.Name(), From: w.from.Path, Meta: meta}
		if err := w.fs.t.Store().Apply(w.ctx, []tree.Op{op}); err != nil {
			return w.fs.fail("close", w.h.Name(), err)
		}
	} else {
		if !w.fs.mtime.IsZero() {
			w.h.Chtimes(w.ctx, w.fs.mtime) // X-OC-Mtime
		}
		if w.sha != nil && w.hashed == w.h.Size() {
			if w.fs.sum != nil {
				if got := hex.EncodeToString(w.fs.sum.Sum(nil)); !sumEqual(got, w.fs.sumWant) {
					w.h.Abort()
					return w.fs.fail("close", w.h.Name(), fmt.Errorf("%w: the body's is %s, OC-Checksum says %s", ErrChecksum, got, w.fs.sumWant))
				}
			}
			w.h.SetMeta(map[string]string{metaFileID: w.id, metaSHA1: hex.EncodeToString(w.sha.Sum(nil))})
		}
		if err := w.h.CloseContext(w.ctx); err != nil {
			return w.fs.fail("close", w.h.Name(), err)
		}
		w.fs.ocHeaders(w.ctx, w.h.Name())
	}
	if len(w.props) == 0 {
		return nil
	}
	i, err := w.fs.t.Stat(w.ctx, w.h.Name())
	if err != nil {
		return osErr("close", w.h.Name(), err)
	}
	_, err = w.fs.patch(w.ctx, i, w.props)
	return err
}

func (w *writeFile) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return deadProps(w.h.Info(w.base)), nil
}

func (w *writeFile) Patch(ps []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	w.props = append(w.props, ps...)
	var st xwebdav.Propstat
	st.Status = http.StatusOK
	for _, p := range ps {
		for _, pr := range p.Props {
			st.Props = append(st.Props, xwebdav.Property{XMLName: pr.XMLName})
		}
	}
	return []xwebdav.Propstat{st}, nil
}

// storedProp is a dead property as the object's metadata keeps it.
type storedProp struct {
	Space string `json:"s,omitempty"`
	Local string `json:"l"`
	Lang  string `json:"g,omitempty"`
	XML   string `json:"x,omitempty"`
}

var (
	propMode  = xml.Name{Space: NS, Local: "mode"}
	propMtime = xml.Name{Space: NS, Local: "mtime"}
)

// deadProps are i's stored properties and Quilt's mode and mtime (none
// for the root; no mtime for an implied directory).
func deadProps(i tree.Info) map[xml.Name]xwebdav.Property {
	m := map[xml.Name]xwebdav.Property{}
	if i.Path == "" {
		return m
	}
	m[propMode] = xwebdav.Property{XMLName: propMode, InnerXML: []byte(fmt.Sprintf("%04o", i.Mode.Perm()))}
	if !i.ModTime.IsZero() {
		m[propMtime] = xwebdav.Property{XMLName: propMtime, InnerXML: []byte(formatMtime(i.ModTime))}
	}
	var ps []storedProp
	if v := i.Object.Meta[metaProps]; v != "" && json.Unmarshal([]byte(v), &ps) == nil {
		for _, p := range ps {
			n := xml.Name{Space: p.Space, Local: p.Local}
			m[n] = xwebdav.Property{XMLName: n, Lang: p.Lang, InnerXML: []byte(p.XML)}
		}
	}
	return m
}

func formatMtime(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }

func parseMtime(v string) (time.Time, bool) {
	s, ns, _ := strings.Cut(strings.TrimSpace(v), ".")
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var n int64
	if ns != "" {
		if len(ns) > 9 {
			ns = ns[:9]
		}
		ns += strings.Repeat("0", 9-len(ns))
		if n, err = strconv.ParseInt(ns, 10, 64); err != nil || n < 0 {
			return time.Time{}, false
		}
	}
	return time.Unix(sec, n).UTC(), true
}

// propsMu serialises PROPPATCHes of this process (each is a read, then
// a rewrite of the metadata).
var propsMu sync.Mutex

// patch applies PROPPATCH's changes to i: all of them or none. Mode and
// mtime go to the tree's metadata; other properties are kept as JSON in
// the object's (or directory marker's) metadata, rewritten by reference
// (no byte of the file moves).
func (f *fileSystem) patch(ctx context.Context, i tree.Info, ps []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	propsMu.Lock()
	defer propsMu.Unlock()
	var names []xwebdav.Property
	for _, p := range ps {
		for _, pr := range p.Props {
			names = append(names, xwebdav.Property{XMLName: pr.XMLName})
		}
	}
	fail := func(status int) []xwebdav.Propstat {
		return []xwebdav.Propstat{{Status: status, Props: names}}
	}
	if i.Path == "" {
		return fail(http.StatusForbidden), nil
	}
	if cur, err := f.t.Stat(ctx, i.Path); err == nil {
		i = cur // the latest metadata
	}
	props := deadProps(i)
	delete(props, propMode)
	delete(props, propMtime)
	mode, mtime := i.Mode.Perm(), i.ModTime
	bad, protected := false, false
	for _, p := range ps {
		for _, pr := range p.Props {
			switch {
			case pr.XMLName == propMode && !p.Remove:
				v, err := strconv.ParseUint(strings.TrimSpace(string(pr.InnerXML)), 8, 32)
				if err != nil || v > 0o777 {
					bad = true
				}
				mode = fs.FileMode(v)
			case pr.XMLName == propMtime && !p.Remove:
				t, ok := parseMtime(string(pr.InnerXML))
				if !ok {
					bad = true
				}
				mtime = t
			case pr.XMLName == propMode || pr.XMLName == propMtime:
				bad = true // cannot be removed
			case ocComputed(pr.XMLName):
				protected = true
			case p.Remove:
				delete(props, pr.XMLName)
			default:
				props[pr.XMLName] = pr
			}
		}
	}
	if protected {
		return fail(http.StatusForbidden), nil
	}
	if bad {
		return fail(http.StatusConflict), nil
	}
	var stored []storedProp
	for n, p := range props {
		stored = append(stored, storedProp{Space: n.Space, Local: n.Local, Lang: p.Lang, XML: string(p.InnerXML)})
	}
	meta := maps.Clone(i.Object.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	delete(meta, metaProps)
	if len(stored) > 0 {
		b, err := json.Marshal(stored)
		if err != nil {
			return nil, err
		}
		meta[metaProps] = string(b)
	}
	typ := uint32(0o100000) // S_IFREG
	if i.IsDir() {
		typ = 0o040000 // S_IFDIR
	}
	meta[tree.MetaMode] = strconv.FormatUint(uint64(typ|uint32(mode.Perm())), 10)
	if !mtime.IsZero() {
		meta[tree.MetaMtime] = formatMtime(mtime)
	} else {
		meta[tree.MetaMtime] = formatMtime(time.Now())
	}
	op := tree.Op{Key: i.Path, From: i.Path, Meta: meta}
	switch {
	case i.Implied:
		op = tree.Op{Key: i.Path + "/", Meta: meta}
	case i.IsDir():
		op.Key, op.From = i.Path+"/", i.Path+"/"
	}
	if err := f.t.Store().Apply(ctx, []tree.Op{op}); err != nil {
		return nil, err
	}
	return []xwebdav.Propstat{{Status: http.StatusOK, Props: names}}, nil
}
