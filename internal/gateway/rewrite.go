package gateway

import (
	"context"
	"time"
)

// Rewrite writes object dstKey of dstBucket as a copy by reference of
// srcKey of srcBucket — the same bytes (grid object, parts or inline
// bytes), not read nor stored again — with its info changed by edit
// (metadata, content type, headers; edit must not change the bytes'
// size, ETag or location). Source and destination may be the same
// object: that changes its metadata only. The new version is stamped
// now; it does not take the source's object lock.
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
	info.Lock = nil // a new version: the bucket's default retention, not the source's lock (objectlock.go)
	if edit != nil {
		edit(&info)
	}
	info.Size, info.ETag, info.Cap, info.Parts = size, etag, capStr, parts
	info.Modified = time.Now().UTC()
	unlock := g.lockCommit(b)
	defer unlock()
	if err := g.checkQuota(b, size, g.sizeAt(b, p)); err != nil {
		return ObjectInfo{}, err
	}
	entry, old, err := g.writeObject(ctx, b, p, Condition{}, &info, inline)
	if err == nil {
		g.retire(b, old) // the copy's own object stays referenced, so is kept
	}
	info.Key, info.Version = dstKey, entry
	return info, err
}
