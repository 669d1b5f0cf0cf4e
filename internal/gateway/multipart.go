package gateway

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Multipart uploads, as S3's: parts are stored as they come (each a grid
// object, or inline if tiny) and recorded in the registry under
// /uploads/ID; completing writes one object entry that lists the parts,
// so nothing is copied. Until then the parts show in no listing.
//
// An upload belongs to one bucket instance — the bucket's namespace ID,
// not its name: a bucket deleted and made again under the same name (by
// any key) does not see, list or complete the old bucket's uploads.

// Errors of multipart uploads.
var (
	ErrNoUpload = errors.New("gateway: no such upload")
	ErrBadPart  = errors.New("gateway: invalid part")
	// ErrPartTooSmall means a part other than the last of a completion
	// is smaller than the minimum part size.
	ErrPartTooSmall = errors.New("gateway: part too small")
	// ErrUploadsOpen means a bucket cannot be deleted while multipart
	// uploads into it are in progress.
	ErrUploadsOpen = errors.New("gateway: bucket has multipart uploads in progress")
	// ErrChecksum means a checksum given for an object is not its own.
	ErrChecksum = errors.New("gateway: checksum does not match")
	// ErrChecksumType means a checksum was given of an algorithm (or
	// type) the object has no checksum of.
	ErrChecksumType = errors.New("gateway: checksum algorithm does not match the upload's")
)

// MaxParts is S3's limit on the parts of one upload.
const MaxParts = 10000

// Part is one part of an object.
type Part struct {
	Number int       `json:"n"`
	Size   int64     `json:"size"`
	ETag   string    `json:"etag"` // hex MD5 of the part
	Cap    string    `json:"cap,omitempty"`
	Inline []byte    `json:"inline,omitempty"`
	Time   time.Time `json:"time"`
	// Checksums are the part's x-amz-checksum values, by algorithm.
	Checksums map[string]string `json:"sums,omitempty"`
	// Salt, for a part of an upload encrypted with a customer key, is
	// the part's own (customerkey.go).
	Salt []byte `json:"salt,omitempty"`
}

// Upload is a multipart upload in progress.
type Upload struct {
	ID     string `json:"id"`
	Bucket string `json:"bucket"`
	// BucketID is the namespace ID of the bucket the upload was started
	// in; records written before it existed have none, and belong to the
	// bucket of their name only if it was made before they were.
	BucketID  string     `json:"bucket_id,omitempty"`
	Key       string     `json:"key"`
	Options   PutOptions `json:"opt"`
	Initiated time.Time  `json:"initiated"`
	// Encryption, for an upload started with a customer key, checks the
	// key every part must be sent with; the object gets it.
	Encryption *CustomerEncryption `json:"ssec,omitempty"`
}

func uploadDir(id string) string { return "/uploads/" + id }

// ensureUploads makes the registry's /uploads directory once.
func (g *Gateway) ensureUploads(ctx context.Context) error {
	if _, err := g.db.Stat(g.registry.ns, "/uploads"); err == nil {
		return nil
	}
	return g.write(ctx, &g.registry, "/uploads", func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	})
}

// CreateUpload starts a multipart upload of key.
func (g *Gateway) CreateUpload(ctx context.Context, bucketName, key string, opt PutOptions) (Upload, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return Upload{}, err
	}
	if _, err := keyPath(key); err != nil {
		return Upload{}, err
	}
	if err := g.checkLock(b, opt.Lock); err != nil {
		return Upload{}, err
	}
	if err := g.ensureUploads(ctx); err != nil {
		return Upload{}, err
	}
	id := make([]byte, 16)
	rand.Read(id)
	u := Upload{ID: hex.EncodeToString(id), Bucket: bucketName, BucketID: b.ns.String(), Key: key, Options: opt, Initiated: time.Now().UTC()}
	if opt.CustomerKey != nil {
		u.Encryption = newCustomerEncryption(*opt.CustomerKey)
	}
	body, _ := json.Marshal(u)
	dir := uploadDir(u.ID)
	if err := g.write(ctx, &g.registry, dir, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	}); err != nil {
		return Upload{}, err
	}
	return u, g.write(ctx, &g.registry, dir+"/info", func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// belongs reports whether upload u was started in bucket instance b.
func (u Upload) belongs(b *bucket) bool {
	if u.Bucket != b.name {
		return false
	}
	if u.BucketID != "" {
		return u.BucketID == b.ns.String()
	}
	return !b.created.IsZero() && !u.Initiated.Before(b.created)
}

// upload reads an upload's record, checking it belongs to key in the
// bucket now named bucketName, which it returns.
func (g *Gateway) upload(ctx context.Context, bucketName, key, id string) (Upload, *bucket, error) {
	var u Upload
	if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
		return u, nil, ErrNoUpload
	}
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return u, nil, err
	}
	raw, err := g.readFile(&g.registry, uploadDir(id)+"/info")
	if err == nil && raw == nil {
		g.sync(ctx, &g.registry)
		raw, err = g.readFile(&g.registry, uploadDir(id)+"/info")
	}
	if err != nil {
		return u, nil, err
	}
	if raw == nil {
		return u, nil, ErrNoUpload
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		return u, nil, err
	}
	if !u.belongs(b) || u.Key != key {
		return u, nil, ErrNoUpload
	}
	return u, b, nil
}

// Upload returns an upload in progress of key in a bucket.
func (g *Gateway) Upload(ctx context.Context, bucketName, key, id string) (Upload, error) {
	u, _, err := g.upload(ctx, bucketName, key, id)
	return u, err
}

// PutPart stores part number n (1..10000) of an upload. want, if set, is
// the MD5 the part must have; sums, if set, is called once the body has
// been read whole and returns the part's checksums, by algorithm.
func (g *Gateway) PutPart(ctx context.Context, bucketName, key, id string, n int, r io.Reader, size int64, want []byte, sums func() map[string]string) (Part, error) {
	return g.PutPartKey(ctx, bucketName, key, id, n, r, size, want, sums, nil)
}

// PutPartKey is PutPart with the customer key k (nil: none) of an
// upload started with one: it must be the upload's (CheckCustomerKey's
// errors), and the part is encrypted with it under a salt of its own.
func (g *Gateway) PutPartKey(ctx context.Context, bucketName, key, id string, n int, r io.Reader, size int64, want []byte, sums func() map[string]string, k *CustomerKey) (Part, error) {
	if n < 1 || n > MaxParts {
		return Part{}, fmt.Errorf("%w: part number %d outside 1..%d", ErrBadPart, n, MaxParts)
	}
	u, b, err := g.upload(ctx, bucketName, key, id)
	if err != nil {
		return Part{}, err
	}
	if err := CheckCustomerKey(u.Encryption, k); err != nil {
		return Part{}, err
	}
	// A bucket with a quota (quota.go): the upload's other parts and
	// this one must fit, in place of the key's current version.
	var qr *quotaReader
	kp, _ := keyPath(key)
	if room, err := g.room(b, kp); err != nil {
		return Part{}, err
	} else if room >= 0 {
		others, err := g.parts(id)
		if err != nil {
			return Part{}, err
		}
		for _, o := range others {
			if o.Number != n {
				room -= o.Size
			}
		}
		room = max(0, room)
		qr = &quotaReader{r: r, left: room, err: fmt.Errorf("%w: bucket %q has room for %d more bytes of this upload", ErrQuota, b.name, room)}
		if size > room {
			return Part{}, qr.err
		}
		r = qr
	}
	var salt []byte
	var enc *customerWrite
	if k != nil {
		salt = newSalt()
		enc = newCustomerWrite(*k, salt, r, want)
		r, want = enc, nil
	}
	st, err := g.store(ctx, r, size, want)
	if err == nil && enc != nil {
		err = enc.check()
	}
	if err != nil {
		if qr != nil && qr.exceeded {
			return Part{}, qr.err
		}
		return Part{}, err
	}
	p := Part{Number: n, Time: time.Now().UTC(), Size: st.size, Cap: st.cap, Inline: st.inline, ETag: hex.EncodeToString(st.md5), Salt: salt}
	if sums != nil {
		p.Checksums = sums()
	}
	body, _ := json.Marshal(p)
	return p, g.write(ctx, &g.registry, fmt.Sprintf("%s/%05d", uploadDir(id), n), func(w *dag.Writer, a dag.Hash, hs []dag.Hash, name string) (*dag.Entry, []*dag.Block) {
		return w.File(a, hs, name, body)
	})
}

// Parts lists the parts stored so far, by number.
func (g *Gateway) Parts(ctx context.Context, bucketName, key, id string) ([]Part, error) {
	if _, _, err := g.upload(ctx, bucketName, key, id); err != nil {
		return nil, err
	}
	return g.parts(id)
}

func (g *Gateway) parts(id string) ([]Part, error) {
	items, err := g.db.List(g.registry.ns, uploadDir(id), "", 0)
	if err != nil {
		return nil, err
	}
	var out []Part
	for _, it := range items {
		if it.Name == "info" {
			continue
		}
		raw, err := g.readFile(&g.registry, it.Path)
		if err != nil || raw == nil {
			continue
		}
		var p Part
		if json.Unmarshal(raw, &p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Uploads lists the uploads in progress in a bucket.
func (g *Gateway) Uploads(ctx context.Context, bucketName string) ([]Upload, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return nil, err
	}
	return g.uploadsOf(b)
}

// uploadsOf lists the uploads in progress in bucket instance b.
func (g *Gateway) uploadsOf(b *bucket) ([]Upload, error) {
	items, err := g.db.List(g.registry.ns, "/uploads", "", 0)
	if errors.Is(err, namespace.ErrNotFound) {
		return nil, nil // no upload ever
	}
	if err != nil {
		return nil, err
	}
	var out []Upload
	for _, it := range items {
		raw, _ := g.readFile(&g.registry, it.Path+"/info")
		var u Upload
		if raw != nil && json.Unmarshal(raw, &u) == nil && u.belongs(b) {
			out = append(out, u)
		}
	}
	return out, nil
}

// PartRef is a part as the client names it when completing.
type PartRef struct {
	Number int
	ETag   string // hex, quotes removed
	// Checksums the client gives for the part, by algorithm: each must
	// be the one the part was uploaded with.
	Checksums map[string]string
}

// CompleteUpload writes the object from the listed parts, in order: every
// part but the last must be at least minPart bytes; the ETag is S3's
// MD5 of the parts' MD5s, "-N". When the upload named a checksum
// algorithm and every part carried that checksum, the object's checksum
// is computed from theirs (COMPOSITE or FULL_OBJECT, as the upload
// said). want, if given, are whole-object checksums the client computed
// (by algorithm): each must be the object's (ErrChecksum, or
// ErrChecksumType if the upload has no checksum of that algorithm), or
// nothing is written.
func (g *Gateway) CompleteUpload(ctx context.Context, bucketName, key, id string, refs []PartRef, minPart int64, want map[string]string) (ObjectInfo, error) {
	return g.CompleteUploadIf(ctx, bucketName, key, id, refs, minPart, want, Condition{})
}

// CompleteUploadIf is CompleteUpload if cond holds (checked and
// committed under the key's lock); else ErrPrecondition (or ErrNoKey for
// If-Match on a missing key), and the upload stays open.
func (g *Gateway) CompleteUploadIf(ctx context.Context, bucketName, key, id string, refs []PartRef, minPart int64, want map[string]string, cond Condition) (ObjectInfo, error) {
	u, b, err := g.upload(ctx, bucketName, key, id)
	if err != nil {
		return ObjectInfo{}, err
	}
	stored, err := g.parts(id)
	if err != nil {
		return ObjectInfo{}, err
	}
	byNum := map[int]Part{}
	for _, p := range stored {
		byNum[p.Number] = p
	}
	if len(refs) == 0 {
		return ObjectInfo{}, fmt.Errorf("%w: no parts given", ErrBadPart)
	}
	info := ObjectInfo{ContentType: u.Options.ContentType, Meta: u.Options.Meta, Headers: u.Options.Headers, Tags: u.Options.Tags,
		ACL: u.Options.ACL, Modified: time.Now().UTC(), Encryption: u.Encryption, Lock: u.Options.Lock}
	sum := md5.New()
	for i, ref := range refs {
		p, ok := byNum[ref.Number]
		if !ok || p.ETag != ref.ETag {
			return ObjectInfo{}, fmt.Errorf("%w: part %d was not uploaded, or its ETag differs", ErrBadPart, ref.Number)
		}
		if i > 0 && ref.Number <= refs[i-1].Number {
			return ObjectInfo{}, fmt.Errorf("%w: parts must be listed in ascending order", ErrBadPart)
		}
		if i < len(refs)-1 && p.Size < minPart {
			return ObjectInfo{}, fmt.Errorf("%w: part %d is smaller than %d bytes and not the last", ErrPartTooSmall, ref.Number, minPart)
		}
		for alg, v := range ref.Checksums {
			if p.Checksums[alg] != v {
				return ObjectInfo{}, fmt.Errorf("%w: part %d's %s checksum is not the one it was uploaded with", ErrBadPart, ref.Number, alg)
			}
		}
		raw, _ := hex.DecodeString(p.ETag)
		sum.Write(raw)
		p.Time = time.Time{}
		info.Parts = append(info.Parts, p)
		info.Size += p.Size
	}
	info.ETag = fmt.Sprintf("%s-%d", hex.EncodeToString(sum.Sum(nil)), len(refs))
	if alg := u.Options.ChecksumAlgorithm; alg != "" {
		typ := u.Options.ChecksumType
		if typ == "" {
			typ = DefaultChecksumType(alg)
		}
		if v := multipartChecksum(alg, typ, info.Parts); v != "" {
			info.Checksums, info.ChecksumType = map[string]string{alg: v}, typ
		}
	}
	for alg, v := range want {
		have, ok := info.Checksums[alg]
		if !ok {
			return ObjectInfo{}, fmt.Errorf("%w: the upload has no %s checksum", ErrChecksumType, alg)
		}
		// A COMPOSITE value may be given with or without its "-N".
		if v != have && v+fmt.Sprintf("-%d", len(info.Parts)) != have {
			return ObjectInfo{}, fmt.Errorf("%w: %s", ErrChecksum, alg)
		}
	}
	p, _ := keyPath(key)
	unlock := g.lockCommit(b)
	if err := g.checkQuota(b, info.Size, g.sizeAt(b, p)); err != nil {
		unlock()
		return ObjectInfo{}, err // the upload stays open: abort it, or free room
	}
	entry, old, err := g.writeObject(ctx, b, p, cond, &info, nil)
	unlock()
	if err != nil {
		return ObjectInfo{}, err
	}
	info.Key, info.Version = key, entry
	if err := g.dropUpload(ctx, id); err != nil {
		return info, err
	}
	// The overwritten version's grid objects, and the parts uploaded
	// but not listed, are referenced no more (leases.go).
	for _, sp := range stored {
		old = append(old, sp.Cap)
	}
	g.retire(b, old)
	return info, nil
}

// AbortUpload forgets an upload and its parts; the parts' leases are
// cancelled (leases.go).
func (g *Gateway) AbortUpload(ctx context.Context, bucketName, key, id string) error {
	_, b, err := g.upload(ctx, bucketName, key, id)
	if err != nil {
		return err
	}
	parts, err := g.parts(id)
	if err != nil {
		return err
	}
	if err := g.dropUpload(ctx, id); err != nil {
		return err
	}
	var caps []string
	for _, p := range parts {
		caps = append(caps, p.Cap)
	}
	g.retire(b, caps)
	return nil
}

func (g *Gateway) dropUpload(ctx context.Context, id string) error {
	return g.write(ctx, &g.registry, uploadDir(id), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// getParts writes length bytes from off of a multipart object, each
// part decrypted with k if it is given.
func (g *Gateway) getParts(ctx context.Context, parts []Part, k *CustomerKey, w io.Writer, off, length int64) error {
	for _, p := range parts {
		if length <= 0 {
			return nil
		}
		if off >= p.Size {
			off -= p.Size
			continue
		}
		n := min(p.Size-off, length)
		pw := w
		if k != nil {
			pw = decryptWriter(*k, p.Salt, off, w)
		}
		if err := g.getBytes(ctx, p.Cap, p.Inline, pw, off, n); err != nil {
			return err
		}
		off, length = 0, length-n
	}
	return nil
}
