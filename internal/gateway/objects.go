package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// ObjectInfo describes an object.
type ObjectInfo struct {
	Key         string            `json:"-"`
	Size        int64             `json:"size"`
	ETag        string            `json:"etag"` // hex MD5 of the content (S3's, for a single PUT), no quotes
	ContentType string            `json:"type,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"` // user metadata, keys lower-case
	Headers     map[string]string `json:"hdr,omitempty"`  // other standard headers kept (Cache-Control, ...)
	Modified    time.Time         `json:"mtime"`
	Cap         string            `json:"cap,omitempty"` // read capability of the grid object; empty: inline
	// Parts, for an object completed from a multipart upload: its bytes
	// are the parts' in order (Cap is empty).
	Parts []Part `json:"parts,omitempty"`
	// Checksums are the object's x-amz-checksum values, by algorithm
	// (crc32, crc32c, crc64nvme, sha1, sha256): base64, "-N" appended to
	// a multipart object's COMPOSITE one.
	Checksums map[string]string `json:"sums,omitempty"`
	// ChecksumType is COMPOSITE or FULL_OBJECT ("" when there is none).
	ChecksumType string `json:"sumtype,omitempty"`
	// Tags are the object's tags (S3's object tagging), key to value.
	Tags map[string]string `json:"tags,omitempty"`
	// ACL is the object's access control list, the front end's document
	// as given (S3's: owner and grants); none: private to the bucket's keys.
	ACL json.RawMessage `json:"acl,omitempty"`
	// Encryption, for an object encrypted with a customer key (S3's
	// SSE-C), is what checks the key (customerkey.go); its bytes (and
	// its parts') are then ciphertext under that key.
	Encryption *CustomerEncryption `json:"ssec,omitempty"`
	// VersionID is the version's ID on a versioned bucket ("": the null
	// version); DeleteMarker says the version is a delete marker
	// (versions.go).
	VersionID    string `json:"vid,omitempty"`
	DeleteMarker bool   `json:"dm,omitempty"`
	// Lock is the version's object lock (objectlock.go): retention and
	// legal hold; nil for none.
	Lock    *Lock    `json:"lock,omitempty"`
	Version dag.Hash `json:"-"` // the namespace entry
}

// PutOptions are what a PUT says of an object besides its bytes.
type PutOptions struct {
	ContentType string
	Meta        map[string]string
	Headers     map[string]string
	// ETag, if set, replaces the MD5 of the content (multipart uploads).
	ETag string
	// WantMD5, if set, is the MD5 the content must have (Content-MD5):
	// on a mismatch nothing is written and ErrBadDigest returned.
	WantMD5 []byte `json:"-"`
	// Checksums, if set, is called once the body has been read whole
	// (and checked) and returns the checksums to keep with the object.
	Checksums func() map[string]string `json:"-"`
	// ChecksumAlgorithm and ChecksumType, on a multipart upload, are
	// the algorithm of its parts' checksums and the kind of the object's
	// (COMPOSITE or FULL_OBJECT).
	ChecksumAlgorithm string `json:"sumalg,omitempty"`
	ChecksumType      string `json:"sumtype,omitempty"`
	// If is the write's condition (If-None-Match, If-Match): checked
	// before the bytes are stored and again, under the key's lock, with
	// the commit.
	If Condition `json:"-"`
	// Tags are the object's tags (kept with a multipart upload until it
	// completes).
	Tags map[string]string `json:"tags,omitempty"`
	// ACL is the object's access control list (ObjectInfo.ACL).
	ACL json.RawMessage `json:"acl,omitempty"`
	// CustomerKey, if set, encrypts the object with a key of the
	// client's (S3's SSE-C; customerkey.go), never stored: reading it
	// then needs the key. ETag is then the MD5 of the ciphertext, and
	// WantMD5 is checked against the bytes as given.
	CustomerKey *CustomerKey `json:"-"`
	// Lock is the new version's object lock (retention, legal hold); a
	// bucket's default retention applies when it gives no mode. A bucket
	// without object lock refuses one (ErrNoLockConfig).
	Lock *Lock `json:"lock,omitempty"`
}

// ErrBadDigest means the content's MD5 is not the one announced.
var ErrBadDigest = errors.New("gateway: content MD5 does not match")

// ErrIncomplete means the body was shorter or longer than announced.
var ErrIncomplete = errors.New("gateway: body length differs from the one announced")

const recordVersion = 1

// encodeRecord is an object's entry content: version, the JSON of its
// info, then inline bytes if any.
func encodeRecord(info ObjectInfo, inline []byte) []byte {
	js, _ := json.Marshal(info)
	b := binary.AppendUvarint([]byte{recordVersion}, uint64(len(js)))
	return append(append(b, js...), inline...)
}

func decodeRecord(b []byte) (ObjectInfo, []byte, error) {
	var info ObjectInfo
	if len(b) < 2 || b[0] != recordVersion {
		return info, nil, errors.New("gateway: not an object record")
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) {
		return info, nil, errors.New("gateway: damaged object record")
	}
	js := b[1+w : 1+w+int(n)]
	if err := json.Unmarshal(js, &info); err != nil {
		return info, nil, err
	}
	return info, b[1+w+int(n):], nil
}

// ErrKeyTooLong is an ErrBadKey: a key longer than S3's 1024 bytes.
var ErrKeyTooLong = fmt.Errorf("%w: longer than %d bytes", ErrBadKey, dag.MaxKey)

func keyPath(key string) (string, error) {
	if len(key) > dag.MaxKey {
		return "", ErrKeyTooLong
	}
	if err := dag.CheckKey(key); err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	if strings.HasPrefix(key, versionSpace) {
		return "", fmt.Errorf("%w: keys starting with U+10FFFF are reserved (versions.go)", ErrBadKey)
	}
	return "/" + key, nil
}

// Put stores an object: read from r (size bytes, or -1 if unknown),
// hashed with MD5 as it streams; up to Config.Inline bytes go inline in
// the entry, more to the grid as an erasure-coded object. The new version
// is visible here as soon as Put returns.
func (g *Gateway) Put(ctx context.Context, bucketName, key string, r io.Reader, size int64, opt PutOptions) (ObjectInfo, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return ObjectInfo{}, err
	}
	p, err := keyPath(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	// A write whose condition fails already is refused before its bytes
	// are stored; the check that counts is the one with the commit.
	if err := g.check(b, p, opt.If); err != nil {
		return ObjectInfo{}, err
	}
	if g.versioningOf(b) != "" {
		if err := checkVersionedKey(key); err != nil {
			return ObjectInfo{}, err
		}
	}
	if err := g.checkLock(b, opt.Lock); err != nil {
		return ObjectInfo{}, err
	}
	info := ObjectInfo{ContentType: opt.ContentType, Meta: opt.Meta, Headers: opt.Headers, Tags: opt.Tags, ACL: opt.ACL, Modified: time.Now().UTC(), Lock: opt.Lock}
	// A bucket with a quota (quota.go): a body known to be too big is
	// refused unread, one of unknown length is read up to the room left.
	var qr *quotaReader
	if room, err := g.room(b, p); err != nil {
		return ObjectInfo{}, err
	} else if room >= 0 {
		if size > room {
			return ObjectInfo{}, fmt.Errorf("%w: bucket %q has room for %d more bytes, not %d", ErrQuota, b.name, room, size)
		}
		qr = &quotaReader{r: r, left: room, err: fmt.Errorf("%w: bucket %q has room for %d more bytes", ErrQuota, b.name, room)}
		r = qr
	}
	var enc *customerWrite
	if opt.CustomerKey != nil {
		info.Encryption = newCustomerEncryption(*opt.CustomerKey)
		enc = newCustomerWrite(*opt.CustomerKey, info.Encryption.Salt, r, opt.WantMD5)
		r, opt.WantMD5 = enc, nil
	}
	st, err := g.store(ctx, r, size, opt.WantMD5)
	if err == nil && enc != nil {
		err = enc.check()
	}
	if err != nil {
		if qr != nil && qr.exceeded {
			return ObjectInfo{}, qr.err
		}
		return ObjectInfo{}, err
	}
	info.Cap, info.Size = st.cap, st.size
	inline, sum := st.inline, st.md5
	info.ETag = hex.EncodeToString(sum)
	if opt.ETag != "" {
		info.ETag = opt.ETag
	}
	if opt.Checksums != nil {
		if info.Checksums = opt.Checksums(); len(info.Checksums) > 0 {
			info.ChecksumType = FullObject
		}
	}
	// The record (and an inline object's bytes) goes in one entry when it
	// fits, not an entry and a chain of blocks: under a stream of small
	// PUTs gossip carries few records a second and anti-entropy brings
	// the rest, so small blocks bought no speed, and each is another
	// record to store and index at every replica (a 4 KiB object: one
	// record instead of six, 27 bbolt pages written instead of ~60).
	unlock := g.lockCommit(b)
	if err := g.checkQuota(b, info.Size, g.sizeAt(b, p)); err != nil {
		unlock()
		if st.cap != "" {
			g.retire(b, []string{st.cap})
		}
		return ObjectInfo{}, err
	}
	entry, old, err := g.writeObject(ctx, b, p, opt.If, &info, inline)
	unlock()
	if err == nil {
		g.retire(b, old) // the overwritten version's grid objects (leases.go)
	}
	info.Key, info.Version = key, entry
	return info, err
}

// stored is bytes put away by store.
type stored struct {
	inline []byte // the bytes, if they fit inline
	cap    string // else the grid object's read capability
	size   int64
	md5    []byte
}

// store reads r (size bytes, or -1 if unknown), hashing it with MD5 as it
// streams: up to Config.Inline bytes are kept to go inline, more go to the
// grid as an erasure-coded object. A body of another length than size,
// or (with want set) another MD5, is refused.
func (g *Gateway) store(ctx context.Context, r io.Reader, size int64, want []byte) (stored, error) {
	var st stored
	h, done := g.md5.get()
	defer done()
	head, err := io.ReadAll(io.LimitReader(io.TeeReader(r, h), int64(g.cfg.Inline)+1))
	if err != nil {
		return st, err
	}
	if len(head) <= g.cfg.Inline {
		st.inline, st.size = head, int64(len(head))
	} else {
		counter := &countingReader{r: io.MultiReader(bytes.NewReader(head), io.TeeReader(r, h))}
		rc, err := g.putObject(ctx, counter, size)
		if err != nil {
			return st, err
		}
		st.cap, st.size = rc.String(), counter.n
	}
	if size >= 0 && st.size != size {
		return st, fmt.Errorf("%w: %d bytes, %d announced", ErrIncomplete, st.size, size)
	}
	st.md5 = h.Sum(nil)
	if want != nil && !bytes.Equal(want, st.md5) {
		return st, ErrBadDigest
	}
	if st.cap != "" {
		g.leases.register(st.cap) // for repair, in the background (leases.go)
	}
	return st, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// putObject stores bytes as a grid object, 3-of-10 spread over as many
// distinct nodes as the grid has, up to 7.
func (g *Gateway) putObject(ctx context.Context, r io.Reader, size int64) (codec.ReadCap, error) {
	ms, err := g.cfg.Nodes.Members(ctx, 10*time.Second)
	if err != nil {
		return codec.ReadCap{}, fmt.Errorf("%w: %v", ErrNoGrid, err)
	}
	alive := 0
	for _, m := range ms {
		if m.State == member.Alive {
			alive++
		}
	}
	p := codec.DefaultParams()
	if g.cfg.SegmentSize > 0 {
		p.SegmentSize = g.cfg.SegmentSize
	}
	if g.cfg.Upload != nil {
		return g.cfg.Upload(ctx, r, size, p, max(1, min(alive, 7, p.N)))
	}
	rc, _, err := g.cfg.Objects.Put(ctx, r, size, p, max(1, min(alive, 7, p.N)))
	return rc, err
}

// Head returns an object's info.
func (g *Gateway) Head(ctx context.Context, bucketName, key string) (ObjectInfo, error) {
	info, _, err := g.lookup(ctx, bucketName, key)
	return info, err
}

func (g *Gateway) lookup(ctx context.Context, bucketName, key string) (ObjectInfo, []byte, error) {
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	p, err := keyPath(key)
	if err != nil {
		return ObjectInfo{}, nil, ErrNoKey
	}
	st, err := g.stat(ctx, b, p)
	if errors.Is(err, namespace.ErrNotFound) {
		return ObjectInfo{}, nil, ErrNoKey
	}
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	if st.Type != dag.File {
		return ObjectInfo{}, nil, ErrNoKey
	}
	raw, _, err := g.db.Content(b.ns, st.Data)
	if err != nil {
		return ObjectInfo{}, nil, err
	}
	info, inline, err := decodeRecord(raw)
	info.Key, info.Version = key, st.Data
	return info, inline, err
}

// stat returns what the replica holds at path p of b; a path it does not
// hold is looked for again after pulling the bucket from the grid, so
// that a key written through another gateway sharing the registry (behind
// one load balancer, say) is read and deleted at once here, not after the
// next background sync.
func (g *Gateway) stat(ctx context.Context, b *bucket, p string) (namespace.Info, error) {
	st, err := g.db.Stat(b.ns, p)
	if errors.Is(err, namespace.ErrNotFound) && g.sync(ctx, b) == nil {
		st, err = g.db.Stat(b.ns, p)
	}
	return st, err
}

// Lookup returns an object's info and inline bytes, for ReadVersion.
func (g *Gateway) Lookup(ctx context.Context, bucketName, key string) (ObjectInfo, []byte, error) {
	return g.lookup(ctx, bucketName, key)
}

// ReadVersion writes length bytes from off of the version Lookup found,
// even if the key has been overwritten since. An object encrypted with
// a customer key is ErrKeyRequired: ReadVersionKey reads it.
func (g *Gateway) ReadVersion(ctx context.Context, info ObjectInfo, inline []byte, w io.Writer, off, length int64) error {
	return g.ReadVersionKey(ctx, info, inline, nil, w, off, length)
}

// ReadVersionKey is ReadVersion with the customer key k (nil: none) the
// object was encrypted with (CheckCustomerKey's errors if it is not the
// object's), decrypting as it streams.
func (g *Gateway) ReadVersionKey(ctx context.Context, info ObjectInfo, inline []byte, k *CustomerKey, w io.Writer, off, length int64) error {
	if err := CheckCustomerKey(info.Encryption, k); err != nil {
		return err
	}
	if len(info.Parts) > 0 {
		return g.getParts(ctx, info.Parts, k, w, off, length)
	}
	if k != nil {
		w = decryptWriter(*k, info.Encryption.Salt, off, w)
	}
	return g.getBytes(ctx, info.Cap, inline, w, off, length)
}

// Get writes length bytes of an object from off (length < 0: to the end)
// to w, streaming from the grid.
func (g *Gateway) Get(ctx context.Context, bucketName, key string, w io.Writer, off, length int64) (ObjectInfo, error) {
	info, inline, err := g.lookup(ctx, bucketName, key)
	if err != nil {
		return info, err
	}
	if length < 0 || off+length > info.Size {
		length = info.Size - off
	}
	if off < 0 || length < 0 || (off >= info.Size && info.Size > 0) {
		return info, fmt.Errorf("gateway: range %d+%d outside %d bytes", off, length, info.Size)
	}
	return info, g.ReadVersion(ctx, info, inline, w, off, length)
}

// getBytes writes length bytes from off of inline bytes or a grid object.
func (g *Gateway) getBytes(ctx context.Context, capStr string, inline []byte, w io.Writer, off, length int64) error {
	if length == 0 {
		return nil
	}
	if capStr == "" {
		if off+length > int64(len(inline)) {
			return fmt.Errorf("gateway: inline bytes shorter than recorded")
		}
		_, err := w.Write(inline[off : off+length])
		return err
	}
	rc, err := codec.ParseReadCap(capStr)
	if err != nil {
		return err
	}
	_, err = g.cfg.Objects.Get(ctx, rc, w, off, length)
	return err
}

// Delete removes an object (no error if it is not there, as S3); on a
// versioned bucket it writes a delete marker (DeleteObject).
func (g *Gateway) Delete(ctx context.Context, bucketName, key string) error {
	_, err := g.DeleteObject(ctx, bucketName, key)
	return err
}

// DeleteVersion removes an object only while its current version is
// version (ObjectInfo.Version, as a listing gave it): ErrPrecondition if
// it was written again since, nil if it is gone already; on a versioned
// bucket it writes a delete marker, as DeleteObject. What removes
// objects by what it listed (lifecycle expiry) uses it, so as never to
// remove a newer write.
func (g *Gateway) DeleteVersion(ctx context.Context, bucketName, key string, version dag.Hash) error {
	_, err := g.deleteObjectIf(ctx, bucketName, key, &version)
	return err
}

// Listing is one page of a bucket's keys.
type Listing struct {
	Objects   []ObjectInfo
	Prefixes  []string // common prefixes, when a delimiter was given
	Truncated bool
	Next      string // start after this key (or prefix) for the next page
}

// List returns up to max keys (and common prefixes) of a bucket that
// start with prefix and sort after after, in byte order; with a
// delimiter, keys that contain it after the prefix are rolled up into one
// common prefix each. Lists first pull what other gateways wrote.
func (g *Gateway) List(ctx context.Context, bucketName, prefix, delimiter, after string, maxKeys int) (Listing, error) {
	var out Listing
	b, err := g.bucket(ctx, bucketName)
	if err != nil {
		return out, err
	}
	g.sync(ctx, b)
	if maxKeys <= 0 {
		return out, nil
	}
	from := max(after, prefix)
	lastPrefix := ""
	// A page that ended on a common prefix resumes after every key under
	// it: 0xFF sorts after any UTF-8 byte.
	if delimiter != "" && strings.HasPrefix(after, prefix) && strings.HasSuffix(after, delimiter) &&
		strings.Contains(after[len(prefix):], delimiter) {
		lastPrefix = after
		from = after + "\xff"
	}
	type found struct {
		key  string
		data dag.Hash
	}
	var files []found
	err = g.db.Scan(b.ns, "/", from, func(it namespace.Info) bool {
		k := it.Name
		if strings.HasPrefix(k, versionSpace) {
			return false // the hidden names of versions (versions.go): no more keys
		}
		if k <= after {
			return true
		}
		if !strings.HasPrefix(k, prefix) {
			return k < prefix // before the prefix: go on; past it: stop
		}
		if delimiter != "" {
			if i := strings.Index(k[len(prefix):], delimiter); i >= 0 {
				cp := k[:len(prefix)+i+len(delimiter)]
				if cp == lastPrefix {
					return true
				}
				if len(files)+len(out.Prefixes) >= maxKeys {
					out.Truncated = true
					return false
				}
				out.Prefixes = append(out.Prefixes, cp)
				lastPrefix, out.Next = cp, cp
				return true
			}
		}
		if it.Type != dag.File {
			return true
		}
		if len(files)+len(out.Prefixes) >= maxKeys {
			out.Truncated = true
			return false
		}
		files = append(files, found{k, it.Data})
		out.Next = k
		return true
	})
	// Records are read after the scan: a second read transaction inside
	// the first can deadlock bbolt behind a writer.
	for _, f := range files {
		raw, _, err := g.db.Content(b.ns, f.data)
		if err != nil {
			continue
		}
		info, _, err := decodeRecord(raw)
		if err != nil {
			continue
		}
		info.Key, info.Version = f.key, f.data
		out.Objects = append(out.Objects, info)
	}
	// Keys and prefixes interleave in byte order; Next is the last of
	// either, which Scan order already gives.
	if !out.Truncated {
		out.Next = ""
	}
	return out, err
}
