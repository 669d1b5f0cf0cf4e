package gateway

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"path"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/tree"
)

// A bucket as the file tree's store (tree.Store): what WebDAV, SFTP and
// FUSE share, over the same keys S3 serves. Reads, writes and listings
// are the object API's; a batch (tree.Op) is this file's: every copy
// reuses the source's record — its read capability, inline bytes or
// multipart parts — under the new key, so a rename writes entries, never
// data, and a batch is as few namespace commits as maxBatchBytes allows.
//
// The surface of the gateway used here is small on purpose: the object
// API (Head, List, Lookup, ReadVersion, Put), and for batches bucket,
// keyPath, encodeRecord, commit and the replica's Stat, Heads, Version,
// Clock; for Watch the replica's Root, Wait and Scan.

// maxBatchBytes bounds the records of one commit of a batch (a node takes
// up to 64 MiB in one request).
const maxBatchBytes = 8 << 20

// TreeStore returns bucket as a file tree's store. The bucket must exist
// when the store is used (ErrNoBucket otherwise).
func (g *Gateway) TreeStore(bucket string) tree.Store {
	return &treeStore{g: g, bucket: bucket}
}

// Tree returns the file tree of bucket.
func (g *Gateway) Tree(bucket string) *tree.Tree { return tree.New(g.TreeStore(bucket)) }

type treeStore struct {
	g      *Gateway
	bucket string
}

var _ tree.Store = (*treeStore)(nil)

// treeErr maps the gateway's errors to io/fs's.
func treeErr(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoKey):
		return fmt.Errorf("%w: %q: %w", err, key, fs.ErrNotExist)
	case errors.Is(err, ErrBadKey):
		return fmt.Errorf("%w: %w", err, fs.ErrInvalid)
	case errors.Is(err, ErrKeyRequired):
		return fmt.Errorf("%w: %q: %w", err, key, fs.ErrPermission)
	}
	return err
}

func treeObject(info ObjectInfo) tree.Object {
	return tree.Object{Key: info.Key, Size: info.Size, Modified: info.Modified, Meta: info.Meta}
}

func (s *treeStore) Stat(ctx context.Context, key string) (tree.Object, error) {
	info, err := s.g.Head(ctx, s.bucket, key)
	if err != nil {
		return tree.Object{}, treeErr(key, err)
	}
	return treeObject(info), nil
}

func (s *treeStore) List(ctx context.Context, prefix, delimiter, after string, limit int) (tree.Listing, error) {
	l, err := s.g.List(ctx, s.bucket, prefix, delimiter, after, limit)
	if err != nil {
		return tree.Listing{}, err
	}
	out := tree.Listing{Prefixes: l.Prefixes, More: l.Truncated}
	for _, o := range l.Objects {
		out.Objects = append(out.Objects, treeObject(o))
	}
	return out, nil
}

// Open streams a range of the version of key found now, even if key is
// overwritten while it is read.
func (s *treeStore) Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	info, inline, err := s.g.Lookup(ctx, s.bucket, key)
	if err == nil {
		// An object encrypted with a customer key (S3's SSE-C) reads
		// only through S3, with the key.
		err = CheckCustomerKey(info.Encryption, nil)
	}
	if err != nil {
		return nil, treeErr(key, err)
	}
	if length < 0 || off+length > info.Size {
		length = info.Size - off
	}
	if off < 0 || length < 0 {
		return nil, fmt.Errorf("gateway: range %d+%d outside %d bytes: %w", off, length, info.Size, fs.ErrInvalid)
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.g.ReadVersion(ctx, info, inline, pw, off, length))
	}()
	return &cancelReader{PipeReader: pr, cancel: cancel}, nil
}

// cancelReader stops the read behind it when closed.
type cancelReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (c *cancelReader) Close() error {
	c.cancel()
	return c.PipeReader.Close()
}

func (s *treeStore) Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (tree.Object, error) {
	ct := mime.TypeByExtension(path.Ext(key))
	if ct == "" {
		ct = "application/octet-stream"
	}
	info, err := s.g.Put(ctx, s.bucket, key, r, size, PutOptions{ContentType: ct, Meta: maps.Clone(meta)})
	if err != nil {
		return tree.Object{}, treeErr(key, err)
	}
	return treeObject(info), nil
}

// emptyETag is the MD5 of no bytes.
var emptyETag = func() string { s := md5.Sum(nil); return hex.EncodeToString(s[:]) }()

// Apply writes a batch of copies by reference, empty objects and deletes:
// every source is read first (a missing one fails the batch with nothing
// written), then the entries are made and committed in as few commits as
// maxBatchBytes allows, copies and empty objects before deletes.
func (s *treeStore) Apply(ctx context.Context, ops []tree.Op) error {
	g := s.g
	b, err := g.bucket(ctx, s.bucket)
	if err != nil {
		return err
	}
	type source struct {
		info   ObjectInfo
		inline []byte
	}
	srcs := map[string]source{}
	for _, op := range ops {
		if _, err := keyPath(op.Key); err != nil {
			return treeErr(op.Key, err)
		}
		if op.From == "" || op.Delete {
			continue
		}
		if _, ok := srcs[op.From]; ok {
			continue
		}
		info, inline, err := g.lookup(ctx, s.bucket, op.From)
		if err != nil {
			return treeErr(op.From, err)
		}
		srcs[op.From] = source{info, inline}
	}
	if g.QuotaOf(b.name) > 0 {
		// The batch's copies add their sources' sizes; every key it
		// writes or deletes drops its current version (quota.go).
		var add, drop int64
		keys := map[string]bool{}
		for _, op := range ops {
			if !keys[op.Key] {
				p, _ := keyPath(op.Key)
				drop += g.sizeAt(b, p)
				keys[op.Key] = true
			}
			if !op.Delete && op.From != "" {
				add += srcs[op.From].info.Size
			}
		}
		unlock := g.lockCommit(b)
		defer unlock()
		if err := g.checkQuota(b, add, drop); err != nil {
			return err
		}
	}
	if g.versioningOf(b) != "" {
		return s.applyVersioned(ctx, b, ops, func(from string) (ObjectInfo, []byte) {
			return srcs[from].info, srcs[from].inline
		})
	}
	root, err := g.db.Stat(b.ns, "/")
	if err != nil {
		return fmt.Errorf("gateway: root of %q: %w", b.name, err)
	}
	now := time.Now().UTC()
	var unref []string // the grid objects of the keys deleted or replaced
	// entry makes the entry of one op (nil for a delete of a key that is
	// not there).
	entry := func(op tree.Op) ([][]byte, error) {
		p, _ := keyPath(op.Key)
		heads, err := g.db.Heads(b.ns, p)
		if err != nil {
			return nil, err
		}
		for _, h := range heads {
			if v, err := g.db.Version(b.ns, h); err == nil {
				g.db.Clock().Observe(v.Entry.Time)
			}
		}
		name := p[1:]
		unref = append(unref, g.capsAt(b, p)...) // deleted or replaced (leases.go)
		var e *dag.Entry
		var blocks []*dag.Block
		switch {
		case op.Delete:
			if _, err := g.db.Stat(b.ns, p); errors.Is(err, namespace.ErrNotFound) {
				return nil, nil
			}
			e = b.w.Entry(dag.Delete, root.Data, heads, name, nil)
		case op.From != "":
			src := srcs[op.From]
			info := src.info
			info.Key, info.Version, info.Modified = "", dag.Hash{}, now
			if op.Meta != nil {
				info.Meta = maps.Clone(op.Meta)
			}
			e, blocks = b.w.FileInline(root.Data, heads, name, encodeRecord(info, src.inline), dag.MaxSealed)
		default:
			info := ObjectInfo{ETag: emptyETag, Meta: maps.Clone(op.Meta), Modified: now, ContentType: "application/x-directory"}
			e, blocks = b.w.FileInline(root.Data, heads, name, encodeRecord(info, nil), dag.MaxSealed)
		}
		recs := [][]byte{e.Encode()}
		for _, bl := range blocks {
			recs = append(recs, bl.Encode())
		}
		return recs, nil
	}
	var recs [][]byte
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		err := g.commit(ctx, b, recs)
		recs, size = nil, 0
		return err
	}
	for _, deletes := range []bool{false, true} {
		for _, op := range ops {
			if op.Delete != deletes {
				continue
			}
			rs, err := entry(op)
			if err != nil {
				return err
			}
			n := 0
			for _, r := range rs {
				n += len(r)
			}
			if size+n > maxBatchBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			recs, size = append(recs, rs...), size+n
		}
	}
	if err := flush(); err != nil {
		return err
	}
	g.retire(b, unref) // a copy made in the same batch keeps its object
	return nil
}

// applyVersioned is Apply on a versioned bucket: each op is its own
// versioned write (versions.go), copies and empty objects first, so that
// the versions a batch replaces or deletes are kept as S3's are.
func (s *treeStore) applyVersioned(ctx context.Context, b *bucket, ops []tree.Op, src func(string) (ObjectInfo, []byte)) error {
	g := s.g
	for _, deletes := range []bool{false, true} {
		for _, op := range ops {
			if op.Delete != deletes {
				continue
			}
			if op.Delete {
				if _, err := g.DeleteObject(ctx, s.bucket, op.Key); err != nil {
					return err
				}
				continue
			}
			p, _ := keyPath(op.Key)
			info, inline := ObjectInfo{ETag: emptyETag, Meta: maps.Clone(op.Meta), ContentType: "application/x-directory"}, []byte(nil)
			if op.From != "" {
				info, inline = src(op.From)
				info.Key, info.Version, info.Lock = "", dag.Hash{}, nil
				if op.Meta != nil {
					info.Meta = maps.Clone(op.Meta)
				}
			}
			info.Modified = time.Now().UTC()
			_, old, err := g.writeObject(ctx, b, p, Condition{}, &info, inline)
			if err != nil {
				return err
			}
			g.retire(b, old)
		}
	}
	return nil
}

// Watch reports the keys whose object changed, by any writer, as the
// gateway's replica of the bucket learns of them: it waits for the
// replica to change, then compares the bucket's keys with what it saw
// before (a scan of the replica's view, at most ten a second).
func (s *treeStore) Watch(ctx context.Context) (<-chan []string, error) {
	g := s.g
	b, err := g.bucket(ctx, s.bucket)
	if err != nil {
		return nil, err
	}
	snapshot := func() (map[string]dag.Hash, error) {
		m := map[string]dag.Hash{}
		err := g.db.Scan(b.ns, "/", "", func(it namespace.Info) bool {
			if strings.HasPrefix(it.Name, versionSpace) {
				return false // versions (versions.go) are not keys
			}
			if it.Type == dag.File {
				m[it.Name] = it.Data
			}
			return true
		})
		return m, err
	}
	root := g.db.Root(b.ns)
	seen, err := snapshot()
	if err != nil {
		return nil, err
	}
	ch := make(chan []string, 16)
	go func() {
		defer close(ch)
		for ctx.Err() == nil {
			next := g.db.Wait(ctx, b.ns, root, 10*time.Second)
			if next == root {
				continue
			}
			root = next
			now, err := snapshot()
			if err != nil {
				return
			}
			var changed []string
			for k, h := range now {
				if seen[k] != h {
					changed = append(changed, k)
				}
			}
			for k := range seen {
				if _, ok := now[k]; !ok {
					changed = append(changed, k)
				}
			}
			seen = now
			if len(changed) > 0 {
				select {
				case ch <- changed:
				case <-ctx.Done():
					return
				}
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
	return ch, nil
}
