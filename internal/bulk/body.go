package bulk

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
)

// body is a part of a local file sent as a request body: read through
// the limiter, counted once towards progress however often the SDK
// rewinds it to retry, and seekable so that it can.
type body struct {
	ctx  context.Context
	sr   *io.SectionReader
	c    *Copier
	pos  int64
	high int64 // bytes counted so far
}

func (c *Copier) newBody(ctx context.Context, f *os.File, off, n int64) *body {
	return &body{ctx: ctx, sr: io.NewSectionReader(f, off, n), c: c}
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.sr.Read(b.c.cfg.Limiter.chunk(p))
	if n > 0 && b.c.cfg.Limiter != nil {
		if werr := b.c.cfg.Limiter.wait(b.ctx, n); werr != nil {
			return 0, werr
		}
	}
	b.pos += int64(n)
	if b.pos > b.high {
		b.c.cfg.Progress(b.pos - b.high)
		b.high = b.pos
	}
	return n, err
}

func (b *body) Seek(off int64, whence int) (int64, error) {
	pos, err := b.sr.Seek(off, whence)
	if err == nil {
		b.pos = pos
	}
	return pos, err
}

// hashFile returns the hex SHA-256 (or MD5, if md5 is set) of the file
// at path.
func hashFile(ctx context.Context, path string, useMD5 bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	if useMD5 {
		h = md5.New()
	}
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", fmt.Errorf("bulk: hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashParts returns the hex SHA-256 of the file at path and the base64
// SHA-256 of each of its partSize parts, in one sequential read.
func hashParts(ctx context.Context, path string, partSize int64) (string, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	whole := sha256.New()
	var parts []string
	for {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(whole, h), io.LimitReader(ctxReader{ctx, f}, partSize))
		if err != nil {
			return "", nil, fmt.Errorf("bulk: hashing %s: %w", path, err)
		}
		if n == 0 {
			break
		}
		parts = append(parts, base64.StdEncoding.EncodeToString(h.Sum(nil)))
		if n < partSize {
			break
		}
	}
	return hex.EncodeToString(whole.Sum(nil)), parts, nil
}

// ctxReader stops reading once ctx ends, so hashing a large file does
// not outlive an interruption.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
