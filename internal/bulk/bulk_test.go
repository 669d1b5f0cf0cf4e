package bulk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/quilt-grid/quilt/internal/bulk"
	"github.com/quilt-grid/quilt/internal/tree"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTree maps each regular file under dir to its bytes.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		m[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A tree of files (nested, empty, small, one of several parts) goes up
// with -r and comes down with -r byte for byte; the multipart object
// carries the whole file's SHA-256 and a COMPOSITE SHA-256 checksum the
// gateway checked; copying again moves nothing.
func TestRecursiveRoundTrip(t *testing.T) {
	f := newFixture(t)
	src := filepath.Join(t.TempDir(), "album")
	big := randomBytes(12<<20 + 12345)
	files := map[string][]byte{
		"a.txt":              []byte("hello"),
		"empty":              nil,
		"sub/b.bin":          randomBytes(70000),
		"sub/deeper/c d.jpg": randomBytes(4096),
		"sub/deeper/big.bin": big,
		"other/ünïcode name": []byte("names in UTF-8"),
	}
	for name, b := range files {
		writeFile(t, filepath.Join(src, filepath.FromSlash(name)), b)
	}
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize})
	st, err := f.cp(t, c, src, "s3://data/backup/", true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != len(files) || st.Skipped != 0 || st.Failed != 0 {
		t.Fatalf("upload stats %+v", st)
	}
	if got := f.count("UploadPart"); got != 3 {
		t.Errorf("%d UploadPart requests for a 12 MiB file in 5 MiB parts, want 3", got)
	}
	if got := f.count("PutObject"); got != len(files)-1 {
		t.Errorf("%d PutObject requests, want %d", got, len(files)-1)
	}
	// The plan listed the destination: no file asked whether it is there
	// (only the bucket was).
	if got := f.count("HEAD"); got != 1 {
		t.Errorf("%d HEAD requests for an upload into an empty prefix, want 1 (the bucket)", got)
	}
	ctx := context.Background()
	h, err := f.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("backup/sub/deeper/big.bin"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(big)
	if h.Metadata["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 metadata %q, want %x", h.Metadata["sha256"], sum)
	}
	if cs := aws.ToString(h.ChecksumSHA256); !strings.HasSuffix(cs, "-3") || h.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("checksum %q type %q, want a COMPOSITE SHA-256 of 3 parts", cs, h.ChecksumType)
	}
	if h.Metadata["mtime"] == "" || h.Metadata["mode"] != "33188" {
		t.Errorf("tree metadata %v", h.Metadata)
	}

	dst := filepath.Join(t.TempDir(), "restored")
	st, err = f.cp(t, c, "s3://data/backup", dst, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != len(files) {
		t.Fatalf("download stats %+v", st)
	}
	got := readTree(t, dst)
	if len(got) != len(files) {
		t.Fatalf("downloaded %d files, want %d: %v", len(got), len(files), got)
	}
	for name, b := range files {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s differs after the round trip (%d bytes, want %d)", name, len(got[name]), len(b))
		}
	}
	sst, _ := os.Stat(filepath.Join(src, "sub/b.bin"))
	dstat, _ := os.Stat(filepath.Join(dst, "sub/b.bin"))
	if !sst.ModTime().Equal(dstat.ModTime()) {
		t.Errorf("mtime %v, want the source's %v", dstat.ModTime(), sst.ModTime())
	}

	// Again, both ways: everything is already there.
	f.reset()
	if st, err := f.cp(t, c, src, "s3://data/backup/", true); err != nil || st.Skipped != len(files) || st.Files != 0 {
		t.Fatalf("second upload: %+v %v", st, err)
	}
	if st, err := f.cp(t, c, "s3://data/backup/", dst, true); err != nil || st.Skipped != len(files) || st.Files != 0 {
		t.Fatalf("second download: %+v %v", st, err)
	}
	if n := f.count("PutObject") + f.count("UploadPart") + f.count("GetObject"); n != 0 {
		t.Errorf("%d object transfers for copies with nothing to do", n)
	}

	// One changed file is sent again, alone.
	files["a.txt"] = []byte("hello again")
	writeFile(t, filepath.Join(src, "a.txt"), files["a.txt"])
	if st, err := f.cp(t, c, src, "s3://data/backup/", true); err != nil || st.Files != 1 || st.Skipped != len(files)-1 {
		t.Fatalf("upload of one changed file: %+v %v", st, err)
	}
}

// A single file copied to a "directory" keeps its name, both ways; a
// drive: path names the drive's bucket.
func TestSingleFileNames(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "notes.txt")
	writeFile(t, p, []byte("some notes"))
	c := f.copier(t, bulk.Config{})
	if _, err := f.cp(t, c, p, "s3://data/docs/", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp(t, c, p, "drive:/elsewhere/renamed.txt", false); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := f.cp(t, c, "s3://data/docs/notes.txt", out, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp(t, c, "drive:elsewhere/renamed.txt", filepath.Join(out, "x", "y.txt"), false); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{filepath.Join(out, "notes.txt"), filepath.Join(out, "x", "y.txt")} {
		if b, err := os.ReadFile(q); err != nil || string(b) != "some notes" {
			t.Errorf("%s: %q %v", q, b, err)
		}
	}
}

// Objects whose recorded SHA-256 is not their bytes' (written through
// S3 directly) fail to download with ErrChecksum and leave nothing at
// the destination, one range or many.
func TestCorruptDownloadDetected(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	wrong := sha256.Sum256([]byte("something else"))
	for _, size := range []int{1000, 11 << 20} {
		key := "bad-" + string(rune('a'+size%26))
		if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(key),
			Body: bytes.NewReader(randomBytes(size)), Metadata: map[string]string{"sha256": hex.EncodeToString(wrong[:])}}); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "out.bin")
		c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize})
		_, err := f.cp(t, c, "s3://data/"+key, dst, false)
		if !errors.Is(err, bulk.ErrChecksum) {
			t.Fatalf("size %d: download of a corrupt object: %v, want ErrChecksum", size, err)
		}
		entries, _ := os.ReadDir(filepath.Dir(dst))
		if len(entries) != 0 {
			t.Errorf("size %d: left %v behind", size, entries)
		}
	}
	// An object with no SHA-256 and a single-part ETag is checked by MD5;
	// one of parts with no metadata by size and ETag alone (and works).
	if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("plain"), Body: bytes.NewReader([]byte("plain bytes"))}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "plain")
	if _, err := f.cp(t, f.copier(t, bulk.Config{}), "s3://data/plain", dst, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "plain bytes" {
		t.Fatalf("plain: %q", b)
	}
	// A multipart object another client made, no metadata, no checksum:
	// checked by size and ETag, and -v says so.
	mp, err := f.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("theirs")})
	if err != nil {
		t.Fatal(err)
	}
	theirs := randomBytes(2 * bulk.MinPartSize)
	var parts []types.CompletedPart
	for i := range 2 {
		up, err := f.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("data"), Key: aws.String("theirs"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(theirs[i*bulk.MinPartSize : (i+1)*bulk.MinPartSize])})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	if _, err := f.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("data"), Key: aws.String("theirs"),
		UploadId: mp.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
	var said []string
	c, err := bulk.New(f.client(t), bulk.Config{PartSize: bulk.MinPartSize, Verbose: func(format string, a ...any) { said = append(said, fmt.Sprintf(format, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	dst = filepath.Join(t.TempDir(), "theirs")
	if _, err := f.cp(t, c, "s3://data/theirs", dst, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, theirs) {
		t.Fatal("theirs: differs")
	}
	if !strings.Contains(strings.Join(said, "\n"), "has no SHA-256 or MD5: checked its size") {
		t.Errorf("-v did not say the object had no checksum: %q", said)
	}
}

// Sources that are not there, buckets that are not there, keys that are
// not valid, directories without -r: each a clear error, nothing made.
func TestCopyErrors(t *testing.T) {
	f := newFixture(t)
	c := f.copier(t, bulk.Config{})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sub", "f"), []byte("x"))
	cases := []struct {
		name, src, dst string
		recursive      bool
		want           error
		msg            string
	}{
		{"missing local file", filepath.Join(dir, "nope"), "s3://data/x", false, fs.ErrNotExist, "nope"},
		{"missing bucket up", filepath.Join(dir, "sub", "f"), "s3://nobucket/x", false, bulk.ErrNoBucket, "nobucket"},
		{"missing bucket down", "s3://nobucket/x", dir, false, bulk.ErrNoBucket, "nobucket"},
		{"missing object", "s3://data/missing", dir, false, bulk.ErrNotFound, "s3://data/missing"},
		{"empty prefix", "s3://data/none/", dir, true, bulk.ErrNotFound, "none/"},
		{"directory without -r", filepath.Join(dir, "sub"), "s3://data/", false, nil, "-r"},
		{"prefix without -r", "s3://data/sub/", dir, false, bulk.ErrSyntax, "-r"},
		{"two local", dir, dir, false, bulk.ErrSyntax, "remote"},
		{"two remote", "s3://data/a", "s3://data/b", false, bulk.ErrSyntax, "CopyObject"},
	}
	for _, tc := range cases {
		_, err := f.cp(t, c, tc.src, tc.dst, tc.recursive)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
	bad, err := bulk.New(mustClient(t, bulk.Endpoint{URL: f.url, KeyID: f.key, Secret: "wrong"}), bulk.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp(t, bad, filepath.Join(dir, "sub", "f"), "s3://data/x", false); !errors.Is(err, bulk.ErrAccess) {
		t.Errorf("wrong secret: %v, want ErrAccess", err)
	}
	// Nothing listens on a port just closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	gone, err := bulk.New(mustClient(t, bulk.Endpoint{URL: closed, KeyID: f.key, Secret: f.secret}), bulk.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp(t, gone, filepath.Join(dir, "sub", "f"), "s3://data/x", false); !errors.Is(err, bulk.ErrUnreachable) || !strings.Contains(err.Error(), closed) {
		t.Errorf("no gateway: %v, want ErrUnreachable naming %s", err, closed)
	}
	if _, err := bulk.NewClient(bulk.Endpoint{URL: f.url}); !errors.Is(err, bulk.ErrNoCredentials) {
		t.Errorf("no keys: %v", err)
	}
	if _, err := bulk.New(f.client(t), bulk.Config{PartSize: 1 << 20}); err == nil {
		t.Error("a 1 MiB part size was accepted")
	}
	if n := f.count("PutObject") + f.count("UploadPart"); n != 0 {
		t.Errorf("%d writes for copies that all failed", n)
	}
}

func mustClient(t *testing.T, e bulk.Endpoint) *s3.Client {
	c, err := bulk.NewClient(e)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every byte of an upload and of a download passes the limiter once:
// what it counts is the file's size (not a timing).
func TestBandwidthLimitCountsEveryByte(t *testing.T) {
	f := newFixture(t)
	lim := bulk.NewLimiter(1<<30, nil)
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize, Limiter: lim})
	data := randomBytes(11<<20 + 7)
	p := filepath.Join(t.TempDir(), "f.bin")
	writeFile(t, p, data)
	if _, err := f.cp(t, c, p, "s3://data/f.bin", false); err != nil {
		t.Fatal(err)
	}
	if got := lim.Consumed(); got != int64(len(data)) {
		t.Fatalf("upload: the limiter passed %d bytes, want %d", got, len(data))
	}
	out := filepath.Join(t.TempDir(), "f.bin")
	if _, err := f.cp(t, c, "s3://data/f.bin", out, false); err != nil {
		t.Fatal(err)
	}
	if got := lim.Consumed(); got != 2*int64(len(data)) {
		t.Fatalf("download: the limiter passed %d bytes in all, want %d", got, 2*len(data))
	}
}

// A dry run plans, says, and moves nothing.
func TestDryRun(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), []byte("a"))
	writeFile(t, filepath.Join(dir, "b"), []byte("b"))
	var mu sync.Mutex
	var done []string
	c := f.copier(t, bulk.Config{DryRun: true, Done: func(tr bulk.Transfer, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		done = append(done, tr.Key)
		if err != nil {
			t.Errorf("%s: %v", tr, err)
		}
	}})
	st, err := f.cp(t, c, dir, "s3://data/", true)
	if err != nil || st.DryRun != 2 || st.Files != 0 {
		t.Fatalf("dry run: %+v %v", st, err)
	}
	if sort.Strings(done); len(done) != 2 || done[0] != "a" || done[1] != "b" {
		t.Errorf("Done told of %v", done)
	}
	if n := f.count("PutObject"); n != 0 {
		t.Fatalf("a dry run sent %d objects", n)
	}
}

// An upload interrupted (its context cancelled once a part is in the
// checkpoint) and then run again after the source changed starts over:
// the old upload is aborted, the new file sent whole, no checkpoint is
// left, and no upload stays open at the gateway.
func TestResumeAfterSourceChangedStartsOver(t *testing.T) {
	f := newFixture(t)
	state := t.TempDir()
	p := filepath.Join(t.TempDir(), "f.bin")
	writeFile(t, p, randomBytes(3*bulk.MinPartSize))
	interruptAfterFirstPart(t, f, p, state)
	changed := randomBytes(3 * bulk.MinPartSize)
	writeFile(t, p, changed)
	os.Chtimes(p, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	f.reset()
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize, StateDir: state})
	st, err := f.cp(t, c, p, "s3://data/f.bin", false)
	if err != nil || st.Resumed != 0 || st.Files != 1 {
		t.Fatalf("run after the change: %+v %v", st, err)
	}
	if n, m := f.count("CreateMultipartUpload"), f.count("UploadPart"); n != 1 || m != 3 {
		t.Errorf("%d uploads started and %d parts sent after the change, want 1 and 3", n, m)
	}
	if ms, _ := filepath.Glob(filepath.Join(state, "*")); len(ms) != 0 {
		t.Errorf("checkpoints left: %v", ms)
	}
	ups, err := f.s3.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String("data")})
	if err != nil || len(ups.Uploads) != 0 {
		t.Errorf("uploads still open: %v %v", ups, err)
	}
	out := filepath.Join(t.TempDir(), "f.bin")
	if _, err := f.cp(t, c, "s3://data/f.bin", out, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); !bytes.Equal(b, changed) {
		t.Fatal("the object is not the changed file")
	}
}

// One tree, several doors: what quilt cp uploads is a file of the
// bucket's tree (WebDAV, SFTP and the mounts see it) with the source's
// size, permissions, time and bytes; what the tree writes downloads with
// quilt cp, checked against its ETag's MD5, with its time.
func TestSameFileThroughTheTree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tr := tree.New(f.gw.TreeStore("data"))
	dir := t.TempDir()
	files := map[string][]byte{"docs/small.txt": []byte("through every door"), "docs/big.bin": randomBytes(11 << 20)}
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		writeFile(t, p, b)
		os.Chmod(p, 0o640)
		os.Chtimes(p, time.Unix(1700000000, 123456789), time.Unix(1700000000, 123456789))
	}
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize})
	if _, err := f.cp(t, c, filepath.Join(dir, "docs"), "drive:docs/", true); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		info, err := tr.Stat(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(b)) || info.Mode.Perm() != 0o640 || !info.ModTime.Equal(time.Unix(1700000000, 123456789)) {
			t.Errorf("%s in the tree: size %d mode %v time %v", name, info.Size, info.Mode, info.ModTime)
		}
		rc, _, err := tr.Open(ctx, name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, b) {
			t.Errorf("%s reads back differently through the tree", name)
		}
	}
	mt := time.Unix(1600000000, 0)
	if _, err := tr.Create(ctx, "from-webdav.txt", strings.NewReader("written by the tree"), tree.CreateOptions{ModTime: mt}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "w.txt")
	if _, err := f.cp(t, c, "drive:from-webdav.txt", out, false); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if b, _ := os.ReadFile(out); err != nil || string(b) != "written by the tree" || !st.ModTime().Equal(mt) {
		t.Fatalf("a tree file through quilt cp: %q %v %v", b, st.ModTime(), err)
	}
}

// Over HTTPS, the endpoint's CA given as a PEM bundle (as s3.env's
// AWS_CA_BUNDLE names the gateway's own CA) is trusted, and without it
// the copy fails on the certificate, sending nothing.
func TestHTTPSWithCABundle(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewTLSServer(f.handler)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "f.txt")
	writeFile(t, p, []byte("over TLS"))
	for _, trust := range []bool{false, true} {
		e := bulk.Endpoint{URL: srv.URL, KeyID: f.key, Secret: f.secret}
		if trust {
			e.CABundle = ca
		}
		c, err := bulk.New(mustClient(t, e), bulk.Config{StateDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.cp(t, c, p, "s3://data/tls.txt", false)
		if trust && err != nil {
			t.Fatalf("with the CA: %v", err)
		}
		if !trust && (err == nil || !strings.Contains(err.Error(), "certificate")) {
			t.Fatalf("without the CA: %v, want a certificate error", err)
		}
	}
	if _, err := bulk.NewClient(bulk.Endpoint{URL: srv.URL, KeyID: "k", Secret: "s", CABundle: p}); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("a CA bundle without certificates: %v", err)
	}
}

// Two runs of the same copy at once (say from cron): the second finds
// the first's lock and stops with ErrBusy, touching nothing; once the
// first is done the copy works.
func TestSameCopyTwiceAtOnceRefused(t *testing.T) {
	f := newFixture(t)
	state := t.TempDir()
	c := f.copier(t, bulk.Config{StateDir: state})
	src := filepath.Join(t.TempDir(), "f.txt")
	writeFile(t, src, []byte("one copy at a time"))
	lock := func(p string) *os.File {
		l, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		return l
	}
	// The upload's lock is its checkpoint's name (docs/files.md) + ".lock".
	h := sha256.Sum256([]byte(src + "\x00data\x00f.txt"))
	held := lock(filepath.Join(state, "up-"+hex.EncodeToString(h[:16])+".json.lock"))
	if _, err := f.cp(t, c, src, "s3://data/f.txt", false); !errors.Is(err, bulk.ErrBusy) {
		t.Fatalf("upload while another holds it: %v", err)
	}
	held.Close()
	if f.count("PutObject") != 0 {
		t.Fatal("the refused upload sent the file")
	}
	if _, err := f.cp(t, c, src, "s3://data/f.txt", false); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "f.txt")
	held = lock(dst + bulk.PartialSuffix)
	if _, err := f.cp(t, c, "s3://data/f.txt", dst, false); !errors.Is(err, bulk.ErrBusy) {
		t.Fatalf("download while another holds it: %v", err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("the refused download wrote its destination")
	}
	held.Close()
	if _, err := f.cp(t, c, "s3://data/f.txt", dst, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "one copy at a time" {
		t.Fatalf("download: %q", b)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("left in the state directory: %v", ents)
	}
}

// interruptAfterFirstPart starts an upload of p to s3://data/f.bin in
// 5 MiB parts, one at a time, and cancels it once its checkpoint in
// state records part 1.
func interruptAfterFirstPart(t *testing.T, f *fixture, p, state string) {
	t.Helper()
	// Slow enough (4 MiB/s) that the copy is still going when the
	// checkpoint first shows a part.
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize, Parallel: 1, StateDir: state, Limiter: bulk.NewLimiter(4<<20, nil)})
	src, _ := bulk.Parse(p, "")
	dst, _ := bulk.Parse("s3://data/f.bin", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts, err := c.Plan(ctx, src, dst, false)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ctx.Err() == nil {
			ms, _ := filepath.Glob(filepath.Join(state, "*.json"))
			if len(ms) == 1 {
				if b, err := os.ReadFile(ms[0]); err == nil && strings.Contains(string(b), `"n": 1`) {
					cancel()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if _, err := c.Run(ctx, ts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	if ms, _ := filepath.Glob(filepath.Join(state, "*.json")); len(ms) != 1 {
		t.Fatalf("checkpoints after the interruption: %v", ms)
	}
}

// A source rewritten after an interruption with its size and time put
// back (so the checkpoint looks valid) is caught by the part checksums
// the first run computed: the gateway refuses the first differing part,
// the copy fails with ErrChanged, no object is made, and the next run
// starts over.
func TestResumedPartsCheckedAgainstTheFirstReading(t *testing.T) {
	f := newFixture(t)
	state := t.TempDir()
	p := filepath.Join(t.TempDir(), "f.bin")
	writeFile(t, p, randomBytes(3*bulk.MinPartSize))
	st0, _ := os.Stat(p)
	interruptAfterFirstPart(t, f, p, state)
	writeFile(t, p, randomBytes(3*bulk.MinPartSize))
	os.Chtimes(p, st0.ModTime(), st0.ModTime())
	c := f.copier(t, bulk.Config{PartSize: bulk.MinPartSize, StateDir: state})
	if _, err := f.cp(t, c, p, "s3://data/f.bin", false); !errors.Is(err, bulk.ErrChanged) {
		t.Fatalf("resumed over a forged source: %v, want ErrChanged", err)
	}
	if _, err := f.s3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("f.bin")}); err == nil {
		t.Fatal("an object was made of the two versions")
	}
	// The upload was given up: the next run sends the file as it is now.
	if ms, _ := filepath.Glob(filepath.Join(state, "*.json")); len(ms) != 0 {
		t.Fatalf("checkpoint kept after ErrChanged: %v", ms)
	}
	if st, err := f.cp(t, c, p, "s3://data/f.bin", false); err != nil || st.Resumed != 0 || st.Files != 1 {
		t.Fatalf("the run after: %+v %v", st, err)
	}
}
