package lab

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/quilt-grid/quilt/internal/gateway"
)

// door is one way parallel-transfers moves files to and from a store,
// as the paper's scripts used ownCloud (WebDAV) or StoRM (GridFTP). Each
// is safe for concurrent use by many workers. Another door — `quilt cp`
// run as a process, say — needs only these two methods.
type door interface {
	// upload stores p's bytes as the file name, which is new.
	upload(ctx context.Context, name string, p payload) error
	// download reads the file name, which holds p's bytes, and checks
	// every byte and the length against p: a difference is an error.
	download(ctx context.Context, name string, p payload) error
}

// payload is the content of one test file: size bytes, each 8-byte word
// a hash of key and the word's index, so a file can be made and checked
// at any offset without keeping it anywhere, and a block from another
// file or another offset does not pass for the right one.
type payload struct {
	key  uint64
	size int64
}

// word is the 8 bytes at index i of a payload with key k (splitmix64).
func word(k, i uint64) uint64 {
	z := k + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fill writes p's bytes from off into b (b must lie within p).
func (p payload) fill(b []byte, off int64) {
	for len(b) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], word(p.key, uint64(off)/8))
		n := copy(b, w[off%8:])
		b, off = b[n:], off+int64(n)
	}
}

// ReadAt makes p an io.ReaderAt, so parts of it can be sent in parallel.
func (p payload) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("lab: payload: negative offset")
	}
	if off >= p.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.size-off))
	p.fill(b[:n], off)
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// section is n bytes of p from off, as a reader (seekable, as the AWS
// SDK wants a body to be for its checksums).
func (p payload) section(off, n int64) *io.SectionReader { return io.NewSectionReader(p, off, n) }

// verifier is an io.Writer that checks what is written to it against a
// payload from an offset on. Its Write fails at the first wrong byte.
type verifier struct {
	p        payload
	off, end int64 // the next offset, and the end of the range checked
	want     []byte
}

// newVerifier checks bytes off … off+n of p.
func newVerifier(p payload, off, n int64) *verifier {
	return &verifier{p: p, off: off, end: off + n}
}

func (v *verifier) Write(b []byte) (int, error) {
	if int64(len(b)) > v.end-v.off {
		return 0, fmt.Errorf("lab: longer than the %d bytes expected", v.end-v.off)
	}
	if cap(v.want) < len(b) {
		v.want = make([]byte, len(b))
	}
	want := v.want[:len(b)]
	v.p.fill(want, v.off)
	if !bytes.Equal(b, want) {
		i := 0
		for b[i] == want[i] {
			i++
		}
		return i, fmt.Errorf("lab: wrong byte at offset %d", v.off+int64(i))
	}
	v.off += int64(len(b))
	return len(b), nil
}

// done reports whether the whole range was written.
func (v *verifier) done() error {
	if v.off != v.end {
		return fmt.Errorf("lab: short: %d bytes missing", v.end-v.off)
	}
	return nil
}

// objectDoor moves files through the gateway's object API in this
// process: no protocol, the floor under the other doors.
type objectDoor struct {
	gw     *gateway.Gateway
	bucket string
}

func (d objectDoor) upload(ctx context.Context, name string, p payload) error {
	_, err := d.gw.Put(ctx, d.bucket, name, p.section(0, p.size), p.size, gateway.PutOptions{})
	return err
}

func (d objectDoor) download(ctx context.Context, name string, p payload) error {
	v := newVerifier(p, 0, p.size)
	if _, err := d.gw.Get(ctx, d.bucket, name, v, 0, -1); err != nil {
		return err
	}
	return v.done()
}

// webdavDoor moves files with WebDAV's PUT and GET, one request per
// file, as a WebDAV client without chunking does, with HTTP Basic auth.
// It drives Quilt's WebDAV server and rclone's alike.
type webdavDoor struct {
	base       string // the collection's URL, ending in "/"
	user, pass string
	hc         *http.Client
}

func (d webdavDoor) request(ctx context.Context, method, name string, body io.Reader, n int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.base+url.PathEscape(name), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = n
	}
	req.SetBasicAuth(d.user, d.pass)
	return d.hc.Do(req)
}

func (d webdavDoor) upload(ctx context.Context, name string, p payload) error {
	resp, err := d.request(ctx, http.MethodPut, name, p.section(0, p.size), p.size)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return statusError("PUT", resp)
	}
	return nil
}

func (d webdavDoor) download(ctx context.Context, name string, p payload) error {
	resp, err := d.request(ctx, http.MethodGet, name, nil, 0)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError("GET", resp)
	}
	v := newVerifier(p, 0, p.size)
	if _, err := io.Copy(v, resp.Body); err != nil {
		return err
	}
	return v.done()
}

// statusError describes an unexpected HTTP response.
func statusError(method string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return fmt.Errorf("%s: %s: %s", method, resp.Status, strings.Join(strings.Fields(string(b)), " "))
}

// httpClient is an HTTP client for np workers: enough idle connections
// kept per host that none is opened for each request.
func httpClient(np int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = max(np*4, 16)
	return &http.Client{Transport: t}
}

// Bulk transfer through S3, as GridFTP moves a file: parts of s3Part
// bytes (above S3's 5 MiB minimum), s3Streams of them in flight per file.
const (
	s3Part    = 8 << 20
	s3Streams = 4
)

// s3Door moves files through the gateway's S3 API the way a bulk
// transfer tool does: a file bigger than one part goes up as a multipart
// upload of parts sent in parallel and comes down as ranged GETs in
// parallel; a smaller one is a single PUT or GET. The SDK does not retry:
// a failed request fails the transfer.
type s3Door struct {
	c       *awss3.Client
	bucket  string
	part    int64
	streams int
}

func (d s3Door) upload(ctx context.Context, name string, p payload) error {
	if p.size <= d.part {
		_, err := d.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &d.bucket, Key: &name, Body: p.section(0, p.size), ContentLength: aws.Int64(p.size)})
		return err
	}
	mu, err := d.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &d.bucket, Key: &name})
	if err != nil {
		return err
	}
	nparts := int((p.size + d.part - 1) / d.part)
	parts := make([]s3types.CompletedPart, nparts)
	err = inParallel(ctx, nparts, d.streams, func(ctx context.Context, i int) error {
		off := int64(i) * d.part
		n := min(d.part, p.size-off)
		out, err := d.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &d.bucket, Key: &name, UploadId: mu.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: p.section(off, n), ContentLength: aws.Int64(n)})
		if err != nil {
			return fmt.Errorf("part %d: %w", i+1, err)
		}
		parts[i] = s3types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag}
		return nil
	})
	if err == nil {
		_, err = d.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &d.bucket, Key: &name, UploadId: mu.UploadId,
			MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
	}
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		d.c.AbortMultipartUpload(actx, &awss3.AbortMultipartUploadInput{Bucket: &d.bucket, Key: &name, UploadId: mu.UploadId})
		cancel()
	}
	return err
}

func (d s3Door) download(ctx context.Context, name string, p payload) error {
	if p.size <= d.part {
		out, err := d.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &d.bucket, Key: &name})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		v := newVerifier(p, 0, p.size)
		if _, err := io.Copy(v, out.Body); err != nil {
			return err
		}
		return v.done()
	}
	nparts := int((p.size + d.part - 1) / d.part)
	return inParallel(ctx, nparts, d.streams, func(ctx context.Context, i int) error {
		off := int64(i) * d.part
		n := min(d.part, p.size-off)
		out, err := d.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &d.bucket, Key: &name, Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
		if err != nil {
			return fmt.Errorf("range %d: %w", i+1, err)
		}
		defer out.Body.Close()
		if total, err := rangeTotal(aws.ToString(out.ContentRange)); err != nil || total != p.size {
			return fmt.Errorf("range %d: Content-Range %q, want an object of %d bytes", i+1, aws.ToString(out.ContentRange), p.size)
		}
		v := newVerifier(p, off, n)
		if _, err := io.Copy(v, out.Body); err != nil {
			return fmt.Errorf("range %d: %w", i+1, err)
		}
		return v.done()
	})
}

// rangeTotal is the complete length in a Content-Range header value
// ("bytes 0-99/1000" → 1000).
func rangeTotal(cr string) (int64, error) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok {
		return 0, fmt.Errorf("lab: bad Content-Range %q", cr)
	}
	return strconv.ParseInt(total, 10, 64)
}

// inParallel runs f(ctx, i) for i in [0, n) with at most k at once, and
// returns the first error (in index order); after an error it starts no
// more and cancels those running.
func inParallel(ctx context.Context, n, k int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if errs[i] = f(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// The first error that is not the cancellation it caused in others.
	if i := slices.IndexFunc(errs, func(e error) bool { return e != nil && !errors.Is(e, context.Canceled) }); i >= 0 {
		return errs[i]
	}
	if i := slices.IndexFunc(errs, func(e error) bool { return e != nil }); i >= 0 {
		return errs[i]
	}
	return nil
}
