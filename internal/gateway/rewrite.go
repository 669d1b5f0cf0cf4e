package gateway

import (
	"context"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Rewrite writes object dstKey of dstBucket as a copy by reference of
// srcKey of srcBucket — the same bytes (grid object, parts or inline
// bytes), not read nor stored again — with its info changed by edit
// (metadata, content type, headers; edit must not change the bytes'
// size, ETag or location). Source and destination may be the same
// object: that changes its metadata only. The new version is stamped
// now.
func (g *Gateway) Rewrite(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string, edit func(*ObjectInfo)) (ObjectInfo, error) {
	info, inline, err := g.lookup(ctx, srcBucket, srcKey)
	if err != nil {
		return ObjectInfo{}, err
	}
	b, err := g.bucket(ctx, dstBucket)
	if err != nil {
		return ObjectInfo{}, err
	}
	p, err := keyPath(dstKey)
	if err != nil {
		return ObjectInfo{}, err
	}
	size, etag, capStr, parts := info.Size, info.ETag, info.Cap, info.Parts
	if edit != nil {
		edit(&info)
	}
	info.Size, info.ETag, info.Cap, info.Parts = size, etag, capStr, parts
	info.Modified = time.Now().UTC()
	rec := encodeRecord(info, inline)
	unlock := g.lockCommit(b)
	defer unlock()
	if err := g.checkQuota(b, size, g.sizeAt(b, p)); err != nil {
		return ObjectInfo{}, err
	}
	var entry dag.Hash
	err = g.write(ctx, b, p, func(w *dag.Writer, a dag.Hash, heads []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		e, blocks := w.FileInline(a, heads, n, rec, dag.MaxSealed)
		entry = e.Hash()
		return e, blocks
	})
	info.Key, info.Version = dstKey, entry
	return info, err
}
