package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/quilt-grid/quilt/internal/bulk"
	"github.com/quilt-grid/quilt/internal/gateway"
	s3api "github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// cpGateway is an in-process grid and gateway whose S3 handler counts
// object transfers and can hold back every one after the first few
// (the gate), so a test can SIGKILL a `quilt cp` process with a known
// number of parts done.
type cpGateway struct {
	gw               *gateway.Gateway
	url, key, secret string
	client           *s3.Client

	mu      sync.Mutex
	parts   int   // UploadPart requests
	gets    int   // GetObject requests with a Range
	creates int   // CreateMultipartUpload requests
	bytes   int64 // UploadPart body bytes
	pass    int   // transfers let through before the gate closes; < 0: no gate
	gate    chan struct{}
}

func newCpGateway(t *testing.T) *cpGateway {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	k, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	cg := &cpGateway{gw: gw, key: k.ID, secret: k.Secret, pass: -1, gate: make(chan struct{})}
	h := s3api.New(gw, s3api.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		transfer := false
		cg.mu.Lock()
		switch {
		case r.Method == http.MethodPut && q.Has("uploadId"):
			cg.parts++
			cg.bytes += r.ContentLength
			transfer = true
		case r.Method == http.MethodGet && r.Header.Get("Range") != "":
			cg.gets++
			transfer = true
		case r.Method == http.MethodPost && q.Has("uploads"):
			cg.creates++
		}
		hold := transfer && cg.pass == 0
		if transfer && cg.pass > 0 {
			cg.pass--
		}
		gate := cg.gate
		cg.mu.Unlock()
		if hold {
			<-gate
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { cg.open(); srv.Close() })
	cg.url = srv.URL
	cg.client, err = bulk.NewClient(bulk.Endpoint{URL: cg.url, KeyID: cg.key, Secret: cg.secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cg.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")}); err != nil {
		t.Fatal(err)
	}
	return cg
}

// holdAfter lets n more transfers through, then holds the others until
// open.
func (cg *cpGateway) holdAfter(n int) {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	cg.pass, cg.gate = n, make(chan struct{})
}

// open lets held transfers go (they find their client gone) and
// removes the gate; it resets the counters.
func (cg *cpGateway) open() {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	select {
	case <-cg.gate:
	default:
		close(cg.gate)
	}
	cg.pass, cg.parts, cg.gets, cg.creates, cg.bytes = -1, 0, 0, 0, 0
}

// cpCommand is `quilt cp ARGS` against the gateway, with its own cache
// directory (where upload checkpoints go) and no AWS_* of the caller.
func (cg *cpGateway) cpCommand(bin, cache string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"cp", "--endpoint", cg.url, "--access-key", cg.key, "--secret-key", cg.secret}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "QUILT_HOME="+filepath.Join(cache, "home"), "AWS_ENDPOINT_URL=")
	return cmd
}

// killWhen runs cmd until cond holds (checked every 20 ms, within two
// minutes), then SIGKILLs it.
func killWhen(t *testing.T, cmd *exec.Cmd, cond func() bool) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("quilt cp ended (%v) before it could be killed: %s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the condition never held: %s", out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// readJSON reads a checkpoint file, false while it is missing or being
// replaced.
func readJSON(p string, v any) bool {
	b, err := os.ReadFile(p)
	return err == nil && json.Unmarshal(b, v) == nil
}

// A 64 MiB upload in 8 MiB parts, SIGKILLed once its checkpoint holds
// three parts, then run again: the second run sends only the five
// missing parts (counted at the gateway, in requests and bytes), starts
// no new upload, and the object is the file. Then the same object
// downloaded, killed after three ranges, resumed: five ranges fetched,
// identical bytes, nothing left behind.
func TestCpResumesAfterKill(t *testing.T) {
	bin := buildQuilt(t)
	cg := newCpGateway(t)
	base := t.TempDir()
	cache := filepath.Join(base, "cache")
	data := make([]byte, 64<<20)
	rand.Read(data)
	src := filepath.Join(base, "big.bin")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const part = 8 << 20
	args := []string{"--part-size", "8MiB", "--parallel", "2", "-v"}

	// Upload, killed.
	cg.holdAfter(3)
	stateDir := filepath.Join(cache, "quilt", "cp")
	killWhen(t, cg.cpCommand(bin, cache, append(args, src, "s3://data/big.bin")...), func() bool {
		ms, _ := filepath.Glob(filepath.Join(stateDir, "up-*.json"))
		var ck struct{ Parts []json.RawMessage }
		return len(ms) == 1 && readJSON(ms[0], &ck) && len(ck.Parts) >= 3
	})
	cg.open()
	if _, err := cg.client.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("data"), Key: aws.String("big.bin")}); err == nil {
		t.Fatal("the killed upload completed")
	}
	out, err := cg.cpCommand(bin, cache, append(args, src, "s3://data/big.bin")...).CombinedOutput()
	if err != nil {
		t.Fatalf("resumed upload: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "resuming upload") || !strings.Contains(string(out), "1 resumed") {
		t.Errorf("the second run did not say it resumed:\n%s", out)
	}
	cg.mu.Lock()
	parts, sent, creates := cg.parts, cg.bytes, cg.creates
	cg.mu.Unlock()
	if parts != 5 || sent != 5*part || creates != 0 {
		t.Errorf("the resumed upload sent %d parts, %d bytes, and started %d uploads; want 5 parts, %d bytes, none", parts, sent, creates, 5*part)
	}
	if ms, _ := filepath.Glob(filepath.Join(stateDir, "*")); len(ms) != 0 {
		t.Errorf("checkpoints left after the upload: %v", ms)
	}
	got, err := cg.client.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String("big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	io.Copy(h, got.Body)
	got.Body.Close()
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("the object is not the file")
	}

	// Download, killed.
	dst := filepath.Join(base, "down", "big.bin")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	cg.holdAfter(3)
	killWhen(t, cg.cpCommand(bin, cache, append(args, "s3://data/big.bin", dst)...), func() bool {
		var ck struct{ Done []int }
		return readJSON(dst+bulk.PartialSuffix+".json", &ck) && len(ck.Done) >= 3
	})
	cg.open()
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("the killed download is at its destination")
	}
	out, err = cg.cpCommand(bin, cache, append(args, "s3://data/big.bin", dst)...).CombinedOutput()
	if err != nil {
		t.Fatalf("resumed download: %v\n%s", err, out)
	}
	cg.mu.Lock()
	gets := cg.gets
	cg.mu.Unlock()
	if gets != 5 {
		t.Errorf("the resumed download fetched %d ranges, want 5:\n%s", gets, out)
	}
	if b, err := os.ReadFile(dst); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("downloaded file differs (%d bytes, %v)", len(b), err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(dst)); len(ents) != 1 {
		t.Errorf("left beside the download: %v", ents)
	}
}

// The command's failures: exit 2 for bad arguments, 1 with a clear
// message for a missing source, a missing bucket, no credentials; -h
// documents the syntax.
func TestCpCommandErrors(t *testing.T) {
	bin := buildQuilt(t)
	cg := newCpGateway(t)
	cache := t.TempDir()
	f := filepath.Join(cache, "f")
	os.WriteFile(f, []byte("x"), 0o644)
	cases := []struct {
		name string
		cmd  *exec.Cmd
		code int
		msg  string
	}{
		{"one argument", cg.cpCommand(bin, cache, f), 2, "Usage: quilt cp"},
		{"bad part size", cg.cpCommand(bin, cache, "--part-size", "1MiB", f, "s3://data/f"), 1, "minimum"},
		{"bad bwlimit", cg.cpCommand(bin, cache, "--bwlimit", "fast", f, "s3://data/f"), 1, "--bwlimit"},
		{"missing source", cg.cpCommand(bin, cache, filepath.Join(cache, "nope"), "s3://data/f"), 1, "no such file"},
		{"missing bucket", cg.cpCommand(bin, cache, f, "s3://nobucket/f"), 1, "no such bucket: nobucket"},
		{"missing object", cg.cpCommand(bin, cache, "s3://data/nope", cache), 1, "no such object: s3://data/nope"},
		{"bad url", cg.cpCommand(bin, cache, f, "ftp://host/f"), 1, "only s3:// URLs"},
	}
	noCreds := exec.Command(bin, "cp", f, "s3://data/f")
	noCreds.Env = append(os.Environ(), "QUILT_HOME="+filepath.Join(cache, "empty"), "AWS_ENDPOINT_URL=")
	cases = append(cases, struct {
		name string
		cmd  *exec.Cmd
		code int
		msg  string
	}{"no credentials", noCreds, 1, "quilt up"})
	for _, c := range cases {
		out, err := c.cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), c.msg) {
			t.Errorf("%s: %v, want exit %d saying %q:\n%s", c.name, err, c.code, c.msg, out)
		}
	}
	out, err := exec.Command(bin, "cp", "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "drive:PATH") || !strings.Contains(string(out), "-bwlimit") {
		t.Errorf("cp -h: %v\n%s", err, out)
	}
	// And a working copy through the binary, exit 0.
	if out, err := cg.cpCommand(bin, cache, f, "drive:f", "--drive", "data").CombinedOutput(); err != nil || !strings.Contains(string(out), "1 copied") {
		t.Errorf("cp to drive: %v\n%s", err, out)
	}
}

// The endpoint comes from the flags, else the environment (when it names
// an endpoint), else the s3.env of 'quilt up'.
func TestCpEndpoint(t *testing.T) {
	h := t.TempDir()
	t.Setenv("QUILT_HOME", h)
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "envkey")
	var f endpointFlags
	if _, err := f.endpoint(); !errors.Is(err, bulk.ErrNoCredentials) {
		t.Fatalf("no s3.env: %v", err)
	}
	env := filepath.Join(h, "grid", "gateway", "s3.env")
	os.MkdirAll(filepath.Dir(env), 0o700)
	os.WriteFile(env, []byte("export AWS_ENDPOINT_URL=http://127.0.0.1:7780\nexport AWS_ACCESS_KEY_ID=filekey\nexport AWS_SECRET_ACCESS_KEY='filesecret'\nexport AWS_DEFAULT_REGION=us-east-1\n"), 0o600)
	e, err := f.endpoint()
	if err != nil || e.URL != "http://127.0.0.1:7780" || e.KeyID != "filekey" || e.Secret != "filesecret" {
		t.Fatalf("from s3.env: %+v %v (a key of the environment without an endpoint must not mix in)", e, err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "https://gw.example.org")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
	t.Setenv("AWS_CA_BUNDLE", "/ca.pem")
	if e, err := f.endpoint(); err != nil || e.URL != "https://gw.example.org" || e.KeyID != "envkey" || e.CABundle != "/ca.pem" {
		t.Fatalf("from the environment: %+v %v", e, err)
	}
	// The gateway directory 'quilt up' recorded in config.json wins over
	// the default place.
	gwDir := filepath.Join(h, "elsewhere")
	os.MkdirAll(gwDir, 0o700)
	os.WriteFile(filepath.Join(gwDir, "s3.env"), []byte("export AWS_ENDPOINT_URL=http://127.0.0.1:7781\nexport AWS_ACCESS_KEY_ID=k2\nexport AWS_SECRET_ACCESS_KEY=s2\n"), 0o600)
	if err := saveConfig(clientConfig{Grid: "quilt://x@127.0.0.1:1", Gateway: gwDir}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	if e, err := f.endpoint(); err != nil || e.URL != "http://127.0.0.1:7781" || e.KeyID != "k2" {
		t.Fatalf("from config.json's gateway: %+v %v", e, err)
	}
	t.Setenv("AWS_ENDPOINT_URL", "https://gw.example.org")
	f.key, f.url = "flagkey", "http://127.0.0.1:1"
	if e, err := f.endpoint(); err != nil || e.URL != "http://127.0.0.1:1" || e.KeyID != "flagkey" || e.Secret != "envsecret" {
		t.Fatalf("flags over the environment: %+v %v", e, err)
	}
}

// drive: is --drive, else $QUILT_DRIVE, else the one bucket the key
// reaches (an account's key: its home), else "files" among several,
// else an error naming them.
func TestCpDriveBucket(t *testing.T) {
	cg := newCpGateway(t)
	ctx := t.Context()
	t.Setenv("QUILT_DRIVE", "")
	admin := cg.client // reaches every bucket: "data" alone so far
	if b, err := driveBucket(ctx, "", admin); err != nil || b != "data" {
		t.Fatalf("the admin key with one bucket: %q %v", b, err)
	}
	for _, name := range []string{"home-alice", "more"} {
		if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := driveBucket(ctx, "", admin); err == nil || !strings.Contains(err.Error(), "--drive") || !strings.Contains(err.Error(), "home-alice") {
		t.Fatalf("several buckets, none named files: %v", err)
	}
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("files")}); err != nil {
		t.Fatal(err)
	}
	if b, err := driveBucket(ctx, "", admin); err != nil || b != "files" {
		t.Fatalf("several buckets with files: %q %v", b, err)
	}
	// A key that reaches its home alone, as 'quilt user add' makes.
	k, err := cg.gw.CreateKey(ctx, false, map[string]gateway.Perm{"home-alice": gateway.Owner})
	if err != nil {
		t.Fatal(err)
	}
	alice, err := bulk.NewClient(bulk.Endpoint{URL: cg.url, KeyID: k.ID, Secret: k.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := driveBucket(ctx, "", alice); err != nil || b != "home-alice" {
		t.Fatalf("an account's key: %q %v", b, err)
	}
	t.Setenv("QUILT_DRIVE", "more")
	if b, err := driveBucket(ctx, "", alice); err != nil || b != "more" {
		t.Errorf("$QUILT_DRIVE: %q %v", b, err)
	}
	if b, err := driveBucket(ctx, "photos", alice); err != nil || b != "photos" {
		t.Errorf("--drive: %q %v", b, err)
	}
	nobody, err := cg.gw.CreateKey(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("QUILT_DRIVE", "")
	c, _ := bulk.NewClient(bulk.Endpoint{URL: cg.url, KeyID: nobody.ID, Secret: nobody.Secret})
	if _, err := driveBucket(ctx, "", c); err == nil || !strings.Contains(err.Error(), "no bucket") {
		t.Errorf("a key of no bucket: %v", err)
	}
}

func TestProgressETA(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 12*time.Second + 400*time.Millisecond: "12s", 3*time.Minute + 4*time.Second: "3m04s",
		time.Hour + 2*time.Minute + 30*time.Second: "1h02m", 26 * time.Hour: "26h00m",
	} {
		if got := eta(d); got != want {
			t.Errorf("eta(%v) = %q, want %q", d, got, want)
		}
	}
}
