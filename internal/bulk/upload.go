package bulk

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// Metadata keys the copier writes (x-amz-meta-*): the whole file's
// SHA-256, and the tree's mode and mtime (docs/tree.md), so the file
// shows its own time through WebDAV, SFTP and mounts.
const (
	MetaSHA256 = "sha256" // hex
	metaMode   = "mode"   // decimal st_mode, s3fs's form
	metaMtime  = "mtime"  // seconds since 1970 with nine decimals, rclone's form
)

// partSizeFor is the part size of a file: the configured one, larger if
// the file would otherwise need more than 10,000 parts (in whole MiB).
func partSizeFor(size, configured int64) int64 {
	ps := configured
	if need := (size + maxParts - 1) / maxParts; need > ps {
		ps = (need + 1<<20 - 1) / (1 << 20) * (1 << 20)
	}
	return ps
}

// upload copies one local file to its key.
func (c *Copier) upload(ctx context.Context, t Transfer) error {
	src, err := filepath.Abs(t.Local)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	size := st.Size()
	ckPath := ""
	if c.cfg.StateDir != "" {
		ckPath = uploadCheckpointPath(c.cfg.StateDir, src, t.Bucket, t.Key)
	}
	partSize := partSizeFor(size, c.cfg.PartSize)
	if ckPath != "" && !c.cfg.DryRun {
		if err := os.MkdirAll(c.cfg.StateDir, 0o700); err != nil {
			return fmt.Errorf("bulk: checkpoint directory: %w", err)
		}
		lock, err := lockFile(ckPath+".lock", t.String())
		if err != nil {
			return err
		}
		defer func() {
			os.Remove(lock.Name()) // removed while held, so none is left behind
			lock.Close()
		}()
		ck, err := loadUploadCheckpoint(ckPath)
		if err != nil {
			c.cfg.Verbose("%s: %v; starting over", t.Local, err)
			os.Remove(ckPath)
		}
		if ck != nil {
			if ck.Size == size && ck.MtimeNS == st.ModTime().UnixNano() && ck.Bucket == t.Bucket && ck.Key == t.Key {
				ok, err := c.confirmParts(ctx, ck)
				if err != nil {
					return err
				}
				if ok {
					c.count(func(s *Stats) { s.Resumed++ })
					c.cfg.Verbose("%s: resuming upload %s: %d of %d parts already sent", t.Local, ck.UploadID, len(ck.Parts), numParts(ck.Size, ck.PartSize))
					return c.multipart(ctx, t, src, st, ck, ckPath)
				}
			} else {
				c.cfg.Verbose("%s: changed since the interrupted upload %s; starting over", t.Local, ck.UploadID)
				c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &ck.Bucket, Key: &ck.Key, UploadId: &ck.UploadID})
			}
			os.Remove(ckPath)
		}
	}

	if size > partSize {
		c.cfg.Verbose("%s: computing its SHA-256 (%d bytes)", t.Local, size)
	}
	sum, partSums, err := hashParts(ctx, src, partSize)
	if err != nil {
		return err
	}
	if same, err := c.sameRemote(ctx, t, size, sum); err != nil {
		return err
	} else if same {
		c.cfg.Verbose("%s: skipped, s3://%s/%s has the same size and SHA-256", t.Local, t.Bucket, t.Key)
		c.cfg.Already(size)
		c.count(func(s *Stats) { s.Skipped++ })
		return nil
	}
	if c.cfg.DryRun {
		c.cfg.Verbose("would copy %s (%d bytes)", t, size)
		c.count(func(s *Stats) { s.DryRun++ })
		return nil
	}
	if size <= partSize || ckPath == "" {
		return c.putSmall(ctx, t, src, st, sum)
	}
	meta := metadata(st, sum)
	out, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &t.Bucket, Key: &t.Key, Metadata: meta, ContentType: contentType(t.Key),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return c.remoteErr(err, t.Bucket, t.Key)
	}
	ck := &uploadCheckpoint{Version: checkpointVersion, Source: src, Size: size, MtimeNS: st.ModTime().UnixNano(),
		Bucket: t.Bucket, Key: t.Key, UploadID: aws.ToString(out.UploadId), PartSize: partSize, SHA256: sum, PartSums: partSums}
	if err := saveCheckpoint(ckPath, ck); err != nil {
		return err
	}
	c.cfg.Verbose("%s: multipart upload %s, %d parts of %d bytes, checkpoint %s", t.Local, ck.UploadID, numParts(size, partSize), partSize, ckPath)
	return c.multipart(ctx, t, src, st, ck, ckPath)
}

func numParts(size, partSize int64) int { return int((size + partSize - 1) / partSize) }

// metadata is the user metadata of an uploaded file.
func metadata(st fs.FileInfo, sum string) map[string]string {
	mt := st.ModTime()
	return map[string]string{
		MetaSHA256: sum,
		metaMode:   strconv.FormatUint(uint64(0o100000|st.Mode().Perm()), 10),
		metaMtime:  fmt.Sprintf("%d.%09d", mt.Unix(), mt.Nanosecond()),
	}
}

func contentType(key string) *string {
	if t := mime.TypeByExtension(path.Ext(key)); t != "" {
		return &t
	}
	return nil
}

// sameRemote says whether the destination already holds a file of this
// size and SHA-256.
func (c *Copier) sameRemote(ctx context.Context, t Transfer, size int64, sum string) (bool, error) {
	if t.absent {
		return false, nil
	}
	h, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &t.Bucket, Key: &t.Key})
	if err != nil {
		if errors.Is(c.remoteErr(err, t.Bucket, t.Key), ErrNotFound) {
			return false, nil
		}
		return false, c.remoteErr(err, t.Bucket, t.Key)
	}
	return aws.ToInt64(h.ContentLength) == size && h.Metadata[MetaSHA256] == sum, nil
}

// putSmall sends a file of at most one part in one PutObject, with its
// SHA-256 as x-amz-checksum-sha256 (the gateway checks it) and as
// metadata.
func (c *Copier) putSmall(ctx context.Context, t Transfer, src string, st fs.FileInfo, sum string) error {
	raw, _ := hex.DecodeString(sum)
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	release, err := c.slot(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, err = c.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &t.Bucket, Key: &t.Key, Body: c.newBody(ctx, f, 0, st.Size()), ContentLength: aws.Int64(st.Size()),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(raw)), Metadata: metadata(st, sum), ContentType: contentType(t.Key),
	})
	if err != nil {
		return c.remoteErr(err, t.Bucket, t.Key)
	}
	if err := unchanged(src, st); err != nil {
		return err
	}
	c.count(func(s *Stats) { s.Files++; s.Parts++; s.Bytes += st.Size() })
	return nil
}

// unchanged fails if the file at src no longer has st's size and time.
func unchanged(src string, st fs.FileInfo) error {
	now, err := os.Stat(src)
	if err != nil {
		return err
	}
	if now.Size() != st.Size() || !now.ModTime().Equal(st.ModTime()) {
		return fmt.Errorf("%w: %s (copy it again)", ErrChanged, src)
	}
	return nil
}

// confirmParts checks a checkpoint's upload against the gateway: it
// keeps the parts the gateway lists with the same ETag, and says false
// if the upload is gone (aborted, completed, or another gateway's).
func (c *Copier) confirmParts(ctx context.Context, ck *uploadCheckpoint) (bool, error) {
	listed := map[int32]string{}
	p := s3.NewListPartsPaginator(c.s3, &s3.ListPartsInput{Bucket: &ck.Bucket, Key: &ck.Key, UploadId: &ck.UploadID})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
				c.cfg.Verbose("%s: upload %s is gone from the gateway; starting over", ck.Source, ck.UploadID)
				return false, nil
			}
			return false, c.remoteErr(err, ck.Bucket, ck.Key)
		}
		for _, pt := range page.Parts {
			listed[aws.ToInt32(pt.PartNumber)] = aws.ToString(pt.ETag)
		}
	}
	kept := ck.Parts[:0]
	for _, pt := range ck.Parts {
		if listed[pt.Number] == pt.ETag {
			kept = append(kept, pt)
		} else {
			c.cfg.Verbose("%s: part %d is not at the gateway as recorded; sending it again", ck.Source, pt.Number)
		}
	}
	ck.Parts = kept
	return true, nil
}

// multipart sends the parts the checkpoint lacks, Parallel at a time in
// total, recording each in the checkpoint as the gateway acknowledges
// it, then completes the upload and removes the checkpoint.
func (c *Copier) multipart(ctx context.Context, t Transfer, src string, st fs.FileInfo, ck *uploadCheckpoint, ckPath string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	n := numParts(ck.Size, ck.PartSize)
	done := map[int32]bool{}
	for _, p := range ck.Parts {
		done[p.Number] = true
		c.cfg.Already(min(ck.PartSize, ck.Size-int64(p.Number-1)*ck.PartSize))
	}
	var (
		mu   sync.Mutex // guards ck and the first error
		ferr error
		wg   sync.WaitGroup
	)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := 1; i <= n; i++ {
		num := int32(i)
		if done[num] {
			continue
		}
		release, err := c.slot(pctx)
		if err != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			dp, err := c.sendPart(pctx, t, f, ck, num)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				ck.Parts = append(ck.Parts, dp)
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
	if errors.Is(ferr, ErrChanged) {
		// The parts sent so far are of another version of the file: the
		// next run starts over.
		c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &t.Bucket, Key: &t.Key, UploadId: &ck.UploadID})
		os.Remove(ckPath)
	}
	if ferr != nil {
		return ferr
	}
	if err := unchanged(src, st); err != nil {
		c.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &t.Bucket, Key: &t.Key, UploadId: &ck.UploadID})
		os.Remove(ckPath)
		return err
	}
	sortParts(ck.Parts)
	parts := make([]types.CompletedPart, len(ck.Parts))
	comp := sha256.New()
	for i, p := range ck.Parts {
		parts[i] = types.CompletedPart{PartNumber: aws.Int32(p.Number), ETag: aws.String(p.ETag), ChecksumSHA256: aws.String(p.SHA256)}
		raw, _ := base64.StdEncoding.DecodeString(p.SHA256)
		comp.Write(raw)
	}
	// The whole object's COMPOSITE checksum as computed here: the gateway
	// completes only if its own is the same.
	composite := base64.StdEncoding.EncodeToString(comp.Sum(nil)) + "-" + strconv.Itoa(len(parts))
	_, err = c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &t.Bucket, Key: &t.Key, UploadId: &ck.UploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, ChecksumSHA256: aws.String(composite),
	})
	if err != nil {
		return c.remoteErr(err, t.Bucket, t.Key)
	}
	if err := os.Remove(ckPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	c.count(func(s *Stats) { s.Files++ })
	return nil
}

// sendPart sends part num with the SHA-256 the source's first reading
// gave it.
func (c *Copier) sendPart(ctx context.Context, t Transfer, f *os.File, ck *uploadCheckpoint, num int32) (donePart, error) {
	off := int64(num-1) * ck.PartSize
	n := min(ck.PartSize, ck.Size-off)
	sum := ck.PartSums[num-1]
	out, err := c.s3.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &t.Bucket, Key: &t.Key, UploadId: &ck.UploadID, PartNumber: aws.Int32(num),
		Body: c.newBody(ctx, f, off, n), ContentLength: aws.Int64(n), ChecksumSHA256: aws.String(sum),
	})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "BadDigest" {
			return donePart{}, fmt.Errorf("%w: part %d of %s is not what it was when the copy began (copy it again)", ErrChanged, num, t.Local)
		}
		return donePart{}, c.remoteErr(err, t.Bucket, t.Key)
	}
	c.count(func(s *Stats) { s.Parts++; s.Bytes += n })
	return donePart{Number: num, ETag: aws.ToString(out.ETag), SHA256: sum}, nil
}
