package bulk

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// want is what a downloaded file is checked against.
type want struct {
	md5  bool   // sum is an MD5 (a single-part ETag), not a SHA-256
	sum  string // hex; "" if the object has no checksum
	from string // where the sum came from, for -v
}

var hexSum = regexp.MustCompile(`^[0-9a-f]{64}$`)
var hexMD5 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// expected reads the checksum of an object from its HEAD.
func expected(h *s3.HeadObjectOutput) want {
	if s := strings.ToLower(h.Metadata[MetaSHA256]); hexSum.MatchString(s) {
		return want{sum: s, from: "x-amz-meta-sha256"}
	}
	if cs := aws.ToString(h.ChecksumSHA256); cs != "" && h.ChecksumType != types.ChecksumTypeComposite && !strings.Contains(cs, "-") {
		if raw, err := base64.StdEncoding.DecodeString(cs); err == nil && len(raw) == 32 {
			return want{sum: hex.EncodeToString(raw), from: "x-amz-checksum-sha256"}
		}
	}
	if e := strings.Trim(aws.ToString(h.ETag), `"`); hexMD5.MatchString(e) {
		return want{md5: true, sum: e, from: "the ETag (MD5)"}
	}
	return want{}
}

// download copies one object to its local path.
func (c *Copier) download(ctx context.Context, t Transfer) error {
	h, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &t.Bucket, Key: &t.Key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return c.remoteErr(err, t.Bucket, t.Key)
	}
	size, etag := aws.ToInt64(h.ContentLength), aws.ToString(h.ETag)
	w := expected(h)
	if st, err := os.Stat(t.Local); err == nil && st.Mode().IsRegular() && st.Size() == size && w.sum != "" {
		sum, err := hashFile(ctx, t.Local, w.md5)
		if err != nil {
			return err
		}
		if sum == w.sum {
			c.cfg.Verbose("%s: skipped, same size and checksum as s3://%s/%s", t.Local, t.Bucket, t.Key)
			c.cfg.Already(size)
			c.count(func(s *Stats) { s.Skipped++ })
			return nil
		}
	} else if err == nil && st.IsDir() {
		return fmt.Errorf("bulk: %s is a directory", t.Local)
	}
	if c.cfg.DryRun {
		c.cfg.Verbose("would copy %s (%d bytes)", t, size)
		c.count(func(s *Stats) { s.DryRun++ })
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(t.Local), 0o755); err != nil {
		return err
	}
	partial, ckPath := t.Local+PartialSuffix, downloadCheckpointPath(t.Local)
	ck, f, err := c.openPartial(t, partial, ckPath, size, etag)
	if err != nil {
		return err
	}
	// f stays open, and so locked, until the file is in place or gone.
	defer f.Close()
	removeAll := func() {
		os.Remove(partial)
		os.Remove(ckPath)
	}
	if err := c.fetchRanges(ctx, t, f, ck, ckPath); err != nil {
		if errors.Is(err, ErrChanged) {
			removeAll()
		}
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if w.sum == "" {
		c.cfg.Verbose("%s: s3://%s/%s has no SHA-256 or MD5: checked its size (%d) and that its ETag %s stayed the same", t.Local, t.Bucket, t.Key, size, etag)
	} else {
		sum, err := hashFile(ctx, partial, w.md5)
		if err != nil {
			return err
		}
		if sum != w.sum {
			removeAll()
			return fmt.Errorf("%w: s3://%s/%s read back as %s, but %s says %s; nothing was written to %s", ErrChecksum, t.Bucket, t.Key, sum, w.from, w.sum, t.Local)
		}
		c.cfg.Verbose("%s: verified against %s", t.Local, w.from)
	}
	if mt, ok := parseMtime(h.Metadata[metaMtime]); ok {
		os.Chtimes(partial, mt, mt)
	}
	if err := os.Rename(partial, t.Local); err != nil {
		return err
	}
	syncDir(filepath.Dir(t.Local))
	os.Remove(ckPath)
	c.count(func(s *Stats) { s.Files++ })
	return nil
}

// openPartial opens the partial file of a download: the one a
// checkpoint describes, if it is of this version of the object and
// whole, else a new one.
func (c *Copier) openPartial(t Transfer, partial, ckPath string, size int64, etag string) (*downloadCheckpoint, *os.File, error) {
	// The partial file is locked while this copy works on it (the lock
	// goes when it is closed or renamed into place and closed).
	f, err := lockFile(partial, t.String())
	if err != nil {
		return nil, nil, err
	}
	ck, err := loadDownloadCheckpoint(ckPath)
	if err != nil {
		c.cfg.Verbose("%s: %v; starting over", t.Local, err)
	}
	if ck != nil && ck.Bucket == t.Bucket && ck.Key == t.Key && ck.ETag == etag && ck.Size == size {
		if st, err := f.Stat(); err == nil && st.Size() == size {
			c.count(func(s *Stats) { s.Resumed++ })
			c.cfg.Verbose("%s: resuming: %d of %d ranges already here", t.Local, len(ck.Done), numParts(size, ck.PartSize))
			return ck, f, nil
		}
	} else if ck != nil {
		c.cfg.Verbose("%s: s3://%s/%s changed since the interrupted download; starting over", t.Local, t.Bucket, t.Key)
	}
	os.Remove(ckPath)
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, nil, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return nil, nil, err
	}
	return &downloadCheckpoint{Version: checkpointVersion, Bucket: t.Bucket, Key: t.Key, ETag: etag, Size: size,
		PartSize: partSizeFor(size, c.cfg.PartSize)}, f, nil
}

// fetchRanges fetches the ranges the checkpoint lacks, Parallel at a
// time in total, each with If-Match on the ETag (so a change of the
// object mid-way is ErrChanged, not a file of two versions), syncing
// the file and recording each range in the checkpoint when it is
// written. A download of one range keeps no checkpoint.
func (c *Copier) fetchRanges(ctx context.Context, t Transfer, f *os.File, ck *downloadCheckpoint, ckPath string) error {
	n := numParts(ck.Size, ck.PartSize)
	done := map[int]bool{}
	for _, i := range ck.Done {
		if !done[i] {
			c.cfg.Already(min(ck.PartSize, ck.Size-int64(i)*ck.PartSize))
		}
		done[i] = true
	}
	var (
		mu   sync.Mutex
		ferr error
		wg   sync.WaitGroup
	)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		if done[i] {
			continue
		}
		release, err := c.slot(rctx)
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			err := c.fetchRange(rctx, t, f, ck, i)
			if err == nil && n > 1 {
				err = f.Sync()
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil && n > 1 {
				ck.Done = append(ck.Done, i)
				err = saveCheckpoint(ckPath, ck)
			}
			if err != nil && ferr == nil {
				ferr = err
				cancel()
			}
		}()
	}
	wg.Wait()
	if ferr == nil {
		ferr = ctx.Err()
	}
	return ferr
}

// rangeAttempts is how many times a range is asked for before its
// download fails: a body cut off mid-way is not retried by the SDK.
const rangeAttempts = 3

// fetchRange writes range i of the object at its offset in f, asking
// again when the answer breaks off.
func (c *Copier) fetchRange(ctx context.Context, t Transfer, f *os.File, ck *downloadCheckpoint, i int) error {
	var err error
	for range rangeAttempts {
		var got int64
		got, err = c.fetchRangeOnce(ctx, t, f, ck, i)
		if err == nil || errors.Is(err, ErrChanged) || ctx.Err() != nil {
			return err
		}
		c.cfg.Progress(-got) // sent again
		c.cfg.Verbose("%s: range %d: %v; asking again", t.Local, i, err)
	}
	return err
}

func (c *Copier) fetchRangeOnce(ctx context.Context, t Transfer, f *os.File, ck *downloadCheckpoint, i int) (int64, error) {
	off := int64(i) * ck.PartSize
	n := min(ck.PartSize, ck.Size-off)
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &t.Bucket, Key: &t.Key, IfMatch: aws.String(ck.ETag),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "PreconditionFailed" {
			return 0, fmt.Errorf("%w: s3://%s/%s is no longer ETag %s (copy it again)", ErrChanged, t.Bucket, t.Key, ck.ETag)
		}
		return 0, c.remoteErr(err, t.Bucket, t.Key)
	}
	defer out.Body.Close()
	r := io.Reader(c.cfg.Limiter.Reader(ctx, out.Body))
	got, err := io.Copy(io.NewOffsetWriter(f, off), progressReader{r, c.cfg.Progress})
	if err != nil {
		return got, fmt.Errorf("bulk: s3://%s/%s bytes %d-%d: %w", t.Bucket, t.Key, off, off+n-1, err)
	}
	if got != n {
		return got, fmt.Errorf("bulk: s3://%s/%s bytes %d-%d: got %d bytes, want %d", t.Bucket, t.Key, off, off+n-1, got, n)
	}
	c.count(func(s *Stats) { s.Parts++; s.Bytes += n })
	return got, nil
}

// progressReader tells progress of every byte read.
type progressReader struct {
	r        io.Reader
	progress func(int64)
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.progress(int64(n))
	return n, err
}

// parseMtime reads the tree's mtime metadata.
func parseMtime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var ns int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		if ns, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return time.Time{}, false
		}
	}
	return time.Unix(secs, ns), true
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
