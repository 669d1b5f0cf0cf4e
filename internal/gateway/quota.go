package gateway

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Quotas: a user's Quota bounds the bytes of their home bucket, and the
// gateway enforces it where it stores objects — Put, PutPart,
// CompleteUpload, Rewrite and the file tree's batches — so S3, Swift,
// WebDAV, SFTP and FUSE all obey it. A write that would take the bucket
// past its quota is refused with ErrQuota before anything is committed;
// a write of unknown length stops being read once it passes the quota.
// A write that shrinks the bucket (a delete, an overwrite with fewer
// bytes) is never refused, so a user over quota can always clean up.
// Usage counts every object's size once (a copy by reference counts
// again: it is another object), not the erasure-coded bytes on the
// nodes. Writes through one gateway are checked one at a time per
// bucket; two gateways writing to the same bucket at the same moment
// may together pass the quota by what they write then.

// ErrQuota means a write would take a bucket past its owner's quota. It
// unwraps to syscall.EDQUOT, which a FUSE mount hands the kernel ("Disk
// quota exceeded").
var ErrQuota error = quotaError{}

type quotaError struct{}

func (quotaError) Error() string { return "gateway: quota exceeded" }
func (quotaError) Unwrap() error { return syscall.EDQUOT }

// quotaState is the gateway's view of quotas and bucket usage.
type quotaState struct {
	mu     sync.Mutex
	built  bool
	root   namespace.Digest // the registry's when quotas was built
	quotas map[string]int64 // bucket name: bytes
	usage  map[dag.NSID]*usage
}

// usage is what a bucket's objects add up to, as of a root of its
// replica; sizes are kept by key and entry so a new root costs a scan of
// the view and a read of the records that changed only.
type usage struct {
	mu     sync.Mutex // also held from a write's final check to its commit
	valid  bool
	root   namespace.Digest
	total  int64
	sizes  map[string]sizedKey
	commit sync.Mutex
}

type sizedKey struct {
	data dag.Hash
	size int64
}

// QuotaOf returns the quota of a bucket: the smallest non-zero Quota of
// the users whose home it is, or 0 for none.
func (g *Gateway) QuotaOf(bucket string) int64 {
	q := &g.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	root := g.db.Root(g.registry.ns)
	if !q.built || root != q.root {
		q.quotas = map[string]int64{}
		recs, _ := g.userRecords()
		for _, r := range recs {
			if r.Quota > 0 && (q.quotas[r.Home] == 0 || r.Quota < q.quotas[r.Home]) {
				q.quotas[r.Home] = r.Quota
			}
		}
		q.built, q.root = true, root
	}
	return q.quotas[bucket]
}

// Usage returns the bytes a bucket's objects hold (their sizes, summed),
// after pulling the bucket from the grid.
func (g *Gateway) Usage(ctx context.Context, bucket string) (int64, error) {
	b, err := g.bucket(ctx, bucket)
	if err != nil {
		return 0, err
	}
	g.sync(ctx, b)
	return g.usageOf(b)
}

func (g *Gateway) usageFor(b *bucket) *usage {
	q := &g.quota
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.usage == nil {
		q.usage = map[dag.NSID]*usage{}
	}
	u := q.usage[b.ns]
	if u == nil {
		u = &usage{sizes: map[string]sizedKey{}}
		q.usage[b.ns] = u
	}
	return u
}

// usageOf sums the sizes of b's objects as the replica has them.
func (g *Gateway) usageOf(b *bucket) (int64, error) {
	u := g.usageFor(b)
	u.mu.Lock()
	defer u.mu.Unlock()
	root := g.db.Root(b.ns)
	if u.valid && root == u.root {
		return u.total, nil
	}
	now := map[string]dag.Hash{}
	err := g.db.Scan(b.ns, "/", "", func(it namespace.Info) bool {
		if it.Type == dag.File {
			now[it.Name] = it.Data
		}
		return true
	})
	if err != nil {
		return 0, err
	}
	// Records are read after the scan (a read transaction inside
	// another can deadlock bbolt behind a writer).
	sizes := make(map[string]sizedKey, len(now))
	var total int64
	for k, h := range now {
		s, ok := u.sizes[k]
		if !ok || s.data != h {
			raw, _, err := g.db.Content(b.ns, h)
			if err != nil {
				return 0, err
			}
			info, _, err := decodeRecord(raw)
			if err != nil {
				continue // not an object
			}
			s = sizedKey{data: h, size: info.Size}
		}
		sizes[k] = s
		total += s.size
	}
	u.valid, u.root, u.sizes, u.total = true, root, sizes, total
	return total, nil
}

// quotaErr is ErrQuota with the numbers.
func quotaErr(bucket string, used, quota, more int64) error {
	return fmt.Errorf("%w: bucket %q holds %d of its %d bytes; %d more do not fit", ErrQuota, bucket, used, quota, more)
}

// checkQuota refuses a write to b that adds add bytes and drops drop
// bytes (the version it replaces, the keys it deletes) if it would take
// b past its quota.
func (g *Gateway) checkQuota(b *bucket, add, drop int64) error {
	if add <= drop {
		return nil
	}
	q := g.QuotaOf(b.name)
	if q <= 0 {
		return nil
	}
	used, err := g.usageOf(b)
	if err != nil {
		return err
	}
	if used-drop+add > q {
		return quotaErr(b.name, used, q, add-drop)
	}
	return nil
}

// room returns how many bytes a write to key path p of b may store (the
// quota, less what the bucket holds, plus the version it replaces; at
// least that version's size, so a bucket over quota may still shrink),
// or -1 for no limit.
func (g *Gateway) room(b *bucket, p string) (int64, error) {
	q := g.QuotaOf(b.name)
	if q <= 0 {
		return -1, nil
	}
	used, err := g.usageOf(b)
	if err != nil {
		return 0, err
	}
	old := g.sizeAt(b, p)
	return max(old, q-used+old), nil // never less than the version replaced
}

// sizeAt is the size of the object at path p of b (0 if none).
func (g *Gateway) sizeAt(b *bucket, p string) int64 {
	if p == "" {
		return 0
	}
	info, _, found, err := g.current(b, p)
	if err != nil || !found {
		return 0
	}
	return info.Size
}

// lockCommit holds the final quota check and the commit of a write to a
// bucket with a quota one at a time (on this gateway); it returns the
// unlock, which does nothing for a bucket without one.
func (g *Gateway) lockCommit(b *bucket) func() {
	if g.QuotaOf(b.name) <= 0 {
		return func() {}
	}
	u := g.usageFor(b)
	u.commit.Lock()
	return u.commit.Unlock
}

// quotaReader reads at most limit bytes of r and fails with ErrQuota
// past them, so that a body of unknown length is not stored whole only
// to be refused.
type quotaReader struct {
	r        io.Reader
	left     int64
	exceeded bool
	err      error
}

func (q *quotaReader) Read(p []byte) (int, error) {
	if q.left < 0 {
		q.exceeded = true
		return 0, q.err
	}
	if int64(len(p)) > q.left+1 {
		p = p[:q.left+1]
	}
	n, err := q.r.Read(p)
	q.left -= int64(n)
	if q.left < 0 {
		q.exceeded = true
		return n, q.err
	}
	return n, err
}
