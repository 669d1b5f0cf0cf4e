package bulk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Defaults and limits of a Config.
const (
	// DefaultPartSize is the part of a multipart upload and the range of
	// a parallel download: 16 MiB is a few seconds on a link of tens of
	// Mbit/s, so an interruption loses little, and 16 MiB parts reach
	// 160 GiB within S3's 10,000 parts (larger files get larger parts).
	DefaultPartSize = 16 << 20
	// MinPartSize is the smallest part S3 accepts (but the last).
	MinPartSize = 5 << 20
	// DefaultParallel is how many parts (or small files) are in flight at
	// once: a few streams fill a community network's link, more only
	// share it and lose more on an interruption.
	DefaultParallel = 4
	// DefaultFiles is how many files are open at once.
	DefaultFiles = 4
	maxParts     = 10000
)

// Sentinel errors of a copy, matched with errors.Is.
var (
	// ErrNoBucket is a bucket the gateway does not have.
	ErrNoBucket = errors.New("bulk: no such bucket")
	// ErrNotFound is a source that does not exist: a missing object or an
	// empty prefix (a missing local file is fs.ErrNotExist).
	ErrNotFound = errors.New("bulk: no such object")
	// ErrAccess is the gateway refusing the credentials or the bucket.
	ErrAccess = errors.New("bulk: access denied")
	// ErrChecksum is data whose SHA-256 (or MD5) is not the one recorded
	// for it. Nothing is left at the destination.
	ErrChecksum = errors.New("bulk: checksum mismatch")
	// ErrUnreachable is a gateway that does not answer: nothing listens
	// at the endpoint, or the network is down.
	ErrUnreachable = errors.New("bulk: cannot reach the gateway")
	// ErrChanged is a source that changed while it was being copied.
	ErrChanged = errors.New("bulk: source changed during the copy")
)

// Config says how a Copier copies. The zero value of each field is its
// default.
type Config struct {
	PartSize int64    // bytes; default DefaultPartSize, at least MinPartSize
	Parallel int      // parts or small files in flight in total; default DefaultParallel
	Files    int      // files in flight; default DefaultFiles
	Limiter  *Limiter // total bandwidth limit across every stream; nil: none
	// StateDir holds the checkpoints and locks of uploads in progress;
	// without it every file is sent in one PutObject, not resumable.
	StateDir string
	DryRun   bool // say what would be copied, copy nothing
	// Progress is told of bytes sent or received as they pass; nil:
	// nobody.
	Progress func(n int64)
	// Already is told of bytes that need not move: files found identical
	// at the destination, parts and ranges an earlier run sent; nil:
	// nobody.
	Already func(n int64)
	// Done is told of each file when its copy ends (copied, found
	// identical, failed or interrupted), with how long it took; nil:
	// nobody. It may be called from several goroutines at once.
	Done func(t Transfer, took time.Duration, err error)
	// Verbose is told, in a line, of each decision: resumed, skipped,
	// verified how; nil: nobody.
	Verbose func(format string, args ...any)
}

// Copier copies files between local paths and a gateway's buckets.
type Copier struct {
	s3    *s3.Client
	cfg   Config
	slots chan struct{}
	mu    sync.Mutex // guards stats
	stats Stats
}

// Stats counts what a Run did.
type Stats struct {
	Files   int   // copied
	Skipped int   // already identical at the destination
	Resumed int   // continued from a checkpoint
	Parts   int64 // parts or ranges transferred (whole small files count one)
	Bytes   int64 // bytes of file data sent or received
	Failed  int
	DryRun  int // would be copied
}

// New returns a Copier that talks to the gateway through client.
func New(client *s3.Client, cfg Config) (*Copier, error) {
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < MinPartSize {
		return nil, fmt.Errorf("bulk: part size %d below S3's minimum of %d bytes (5 MiB)", cfg.PartSize, MinPartSize)
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Files == 0 {
		cfg.Files = DefaultFiles
	}
	if cfg.Parallel < 1 || cfg.Files < 1 {
		return nil, fmt.Errorf("bulk: --parallel %d and --files %d must be at least 1", cfg.Parallel, cfg.Files)
	}
	if cfg.Progress == nil {
		cfg.Progress = func(int64) {}
	}
	if cfg.Already == nil {
		cfg.Already = func(int64) {}
	}
	if cfg.Verbose == nil {
		cfg.Verbose = func(string, ...any) {}
	}
	return &Copier{s3: client, cfg: cfg, slots: make(chan struct{}, cfg.Parallel)}, nil
}

// Transfer is one file to copy: up from Local to Bucket/Key, or down.
type Transfer struct {
	Upload bool
	Local  string
	Bucket string
	Key    string
	Size   int64 // the source's size as planned
	// absent says the plan's listing of the destination had no such key,
	// so an upload need not ask (a HEAD of a missing key may make the
	// gateway pull the bucket from a node before it answers 404).
	absent bool
}

func (t Transfer) String() string {
	if t.Upload {
		return t.Local + " -> s3://" + t.Bucket + "/" + t.Key
	}
	return "s3://" + t.Bucket + "/" + t.Key + " -> " + t.Local
}

// Plan lists the files a copy from src to dst moves. One side must be
// local and the other remote. A local directory or a remote prefix needs
// recursive; its files go under dst with their paths relative to src (as
// awscli's cp --recursive). A single file copied to a directory (a local
// one that exists or ends in "/", or a key ending in "/") keeps its name.
func (c *Copier) Plan(ctx context.Context, src, dst Location, recursive bool) ([]Transfer, error) {
	switch {
	case src.Remote() && dst.Remote():
		return nil, fmt.Errorf("%w: both %s and %s are remote: copy between buckets with S3's CopyObject (aws s3 cp)", ErrSyntax, src, dst)
	case !src.Remote() && !dst.Remote():
		return nil, fmt.Errorf("%w: neither %s nor %s is remote (s3://BUCKET/KEY or drive:PATH)", ErrSyntax, src, dst)
	case !src.Remote():
		return c.planUpload(ctx, src.Local, dst, recursive)
	}
	return c.planDownload(ctx, src, dst.Local, recursive)
}

func (c *Copier) planUpload(ctx context.Context, local string, dst Location, recursive bool) ([]Transfer, error) {
	st, err := os.Stat(local)
	if err != nil {
		return nil, fmt.Errorf("bulk: source: %w", err)
	}
	if err := c.checkBucket(ctx, dst.Bucket); err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("bulk: source %s is not a regular file", local)
		}
		key := dst.Key
		if dst.Dir() {
			key += filepath.Base(local)
		}
		return []Transfer{{Upload: true, Local: local, Bucket: dst.Bucket, Key: key, Size: st.Size()}}, nil
	}
	if !recursive {
		return nil, fmt.Errorf("bulk: source %s is a directory (copy it with -r)", local)
	}
	prefix := dst.Key
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	have, err := c.listSizes(ctx, dst.Bucket, prefix)
	if err != nil {
		return nil, err
	}
	var ts []Transfer
	err = filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			c.cfg.Verbose("skip %s: not a regular file", p)
			return nil
		}
		if strings.HasSuffix(p, PartialSuffix) || strings.HasSuffix(p, PartialSuffix+".json") {
			c.cfg.Verbose("skip %s: an unfinished download", p)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(local, p)
		if err != nil {
			return err
		}
		key := prefix + filepath.ToSlash(rel)
		_, present := have[key]
		ts = append(ts, Transfer{Upload: true, Local: p, Bucket: dst.Bucket, Key: key, Size: info.Size(), absent: !present})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bulk: source: %w", err)
	}
	return ts, nil
}

func (c *Copier) planDownload(ctx context.Context, src Location, local string, recursive bool) ([]Transfer, error) {
	if err := c.checkBucket(ctx, src.Bucket); err != nil {
		return nil, err
	}
	if !recursive {
		if src.Dir() {
			return nil, fmt.Errorf("%w: %s names a prefix, not an object (copy it with -r)", ErrSyntax, src)
		}
		h, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &src.Bucket, Key: &src.Key})
		if err != nil {
			return nil, c.remoteErr(err, src.Bucket, src.Key)
		}
		if st, err := os.Stat(local); (err == nil && st.IsDir()) || strings.HasSuffix(local, "/") || strings.HasSuffix(local, string(filepath.Separator)) {
			local = filepath.Join(local, path.Base(src.Key))
		}
		return []Transfer{{Local: local, Bucket: src.Bucket, Key: src.Key, Size: aws.ToInt64(h.ContentLength)}}, nil
	}
	prefix := src.Key
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var ts []Transfer
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: &src.Bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, c.remoteErr(err, src.Bucket, prefix)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			rel := strings.TrimPrefix(key, prefix)
			if rel == "" || strings.HasSuffix(rel, "/") {
				continue // a directory marker
			}
			if err := checkKey(rel); err != nil || strings.Contains(rel, "\\") {
				return nil, fmt.Errorf("bulk: s3://%s/%s cannot be a local path (%v): copy it by name", src.Bucket, key, err)
			}
			ts = append(ts, Transfer{Local: filepath.Join(local, filepath.FromSlash(rel)), Bucket: src.Bucket, Key: key, Size: aws.ToInt64(o.Size)})
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: nothing under s3://%s/%s", ErrNotFound, src.Bucket, prefix)
	}
	return ts, nil
}

// listSizes lists the keys under prefix with their sizes.
func (c *Copier) listSizes(ctx context.Context, bucket, prefix string) (map[string]int64, error) {
	m := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, c.remoteErr(err, bucket, prefix)
		}
		for _, o := range page.Contents {
			m[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return m, nil
}

// checkBucket makes sure the bucket exists and the key may use it.
func (c *Copier) checkBucket(ctx context.Context, bucket string) error {
	// Two attempts only: the first request tells a missing gateway
	// quickly; those of the copy itself are retried more.
	if _, err := c.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}, func(o *s3.Options) { o.RetryMaxAttempts = 2 }); err != nil {
		return c.remoteErr(err, bucket, "")
	}
	return nil
}

// remoteErr turns an S3 error into one of the package's sentinels where
// it is one, naming what it was about.
func (c *Copier) remoteErr(err error, bucket, key string) error {
	what := "s3://" + bucket + "/" + key
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var oe *net.OpError
	switch {
	case status == 0 && errors.As(err, &oe) && oe.Op == "dial":
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, aws.ToString(c.s3.Options().BaseEndpoint), oe)
	case code == "NoSuchBucket" || (key == "" && status == http.StatusNotFound):
		return fmt.Errorf("%w: %s", ErrNoBucket, bucket)
	case code == "NoSuchKey" || status == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || status == http.StatusForbidden:
		return fmt.Errorf("%w: %s (%s)", ErrAccess, what, firstLine(err))
	}
	return fmt.Errorf("bulk: %s: %w", what, err)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Run copies the planned files, Config.Files at a time, and returns what
// it did. A file that fails does not stop the others; the error joins
// every failure. A cancelled ctx stops the copy, leaving checkpoints for
// the next run.
func (c *Copier) Run(ctx context.Context, ts []Transfer) (Stats, error) {
	c.stats = Stats{}
	var (
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(c.cfg.Files, len(ts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ts) || ctx.Err() != nil {
					return
				}
				t := ts[i]
				start := time.Now()
				var err error
				if t.Upload {
					err = c.upload(ctx, t)
				} else {
					err = c.download(ctx, t)
				}
				if c.cfg.Done != nil {
					c.cfg.Done(t, time.Since(start), err)
				}
				if err != nil && ctx.Err() != nil {
					return // interrupted, not failed: said once below
				}
				if err != nil {
					c.mu.Lock()
					c.stats.Failed++
					errs = append(errs, fmt.Errorf("%s: %w", t, err))
					c.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return c.stats, errors.Join(errs...)
}

// count adds to the stats under their lock.
func (c *Copier) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// slot takes one of the Parallel transfer slots, or fails when ctx ends.
func (c *Copier) slot(ctx context.Context) (release func(), err error) {
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SetProgress replaces Config.Progress and Config.Already (nil: nobody),
// for a caller that knows the total only after Plan.
func (c *Copier) SetProgress(progress, already func(n int64)) {
	c.cfg.Progress, c.cfg.Already = func(int64) {}, func(int64) {}
	if progress != nil {
		c.cfg.Progress = progress
	}
	if already != nil {
		c.cfg.Already = already
	}
}

// SetDone replaces Config.Done.
func (c *Copier) SetDone(done func(t Transfer, took time.Duration, err error)) { c.cfg.Done = done }
