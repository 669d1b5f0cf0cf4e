package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// --body-stall and --s3-body-timeout that are not positive are refused
// with an error naming the flag, before anything starts.
func TestIdleFlagsRejected(t *testing.T) {
	bin := buildQuilt(t)
	env := append(os.Environ(), "QUILT_HOME="+t.TempDir(), "QUILT_GRID=")
	cases := [][]string{
		{"node", "--data", filepath.Join(t.TempDir(), "n"), "--body-stall", "0"},
		{"gateway", "--dir", filepath.Join(t.TempDir(), "g"), "--s3-body-timeout", "-1s"},
		{"up", "--dir", filepath.Join(t.TempDir(), "u"), "--s3-body-timeout", "0"},
	}
	for _, args := range cases {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		flag := args[3]
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), flag) || !strings.Contains(string(out), "positive") {
			t.Errorf("quilt %v: exit %d, output:\n%s\nwant exit 1 mentioning %s and positive", args, code, out, flag)
		}
	}
}

// storeBytes is the bytes of the share files and of the uploads in
// flight (DIR/store/tmp) of every node of g.
func (g *testGrid) storeBytes(n int) (shares, tmp int64) {
	for i := range n {
		for _, sub := range []string{"shares", "tmp"} {
			filepath.WalkDir(filepath.Join(g.nodeDir(i), "store", sub), func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.HasSuffix(p, ".leases") {
					return nil
				}
				if info, err := d.Info(); err == nil {
					if sub == "tmp" {
						tmp += info.Size()
					} else {
						shares += info.Size()
					}
				}
				return nil
			})
		}
	}
	return shares, tmp
}

// With real processes: four nodes started with --body-stall 2s and a
// gateway with --s3-body-timeout 2s. A PUT announcing 50 MB that sends
// 1 MiB and then stalls ends (400 RequestTimeout or a closed connection)
// within 20 s, not the default 60 s; the nodes' share bytes come back to
// where they were and nothing is left in flight; a normal PUT afterwards
// succeeds and reads back.
func TestIdleStalledPutReleased(t *testing.T) {
	const nodes = 4
	g := startTestGridArgs(t, nodes, "--body-stall", "2s")
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0",
		extra: []string{"--s3-body-timeout", "2s"}}
	t.Cleanup(gw.kill)
	gw.start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := gw.client()
	bucket := aws.String("idle")
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	body := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	first := body(1 << 20)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String("first"), Body: bytes.NewReader(first)}); err != nil {
		t.Fatal(err)
	}
	// "first" was acknowledged at happiness: its last shares may land
	// after PutObject returns, and must not count as the stalled PUT's.
	before := g.settledShareBytes(t, nodes)

	// The stalled PUT: 1 MiB of 50 MB, then nothing.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	go func() { pw.Write(body(1 << 20)) }()
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPut, gw.endpoint+"/idle/stalled", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 50_000_000
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	creds := aws.Credentials{AccessKeyID: gw.key, SecretAccessKey: gw.secret}
	if err := v4.NewSigner().SignHTTP(rctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		done <- result{resp, err}
	}()
	var resp *http.Response
	select {
	case r := <-done:
		resp, err = r.resp, r.err
	case <-time.After(20 * time.Second):
		t.Fatal("the stalled PUT still runs after 20 s")
	}
	switch {
	case rctx.Err() != nil:
		t.Fatalf("the stalled PUT still runs after 20 s (err %v)", err)
	case err != nil:
		t.Logf("the stalled PUT ended with a closed connection: %v", err)
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "RequestTimeout") {
			t.Fatalf("the stalled PUT: %s\n%s\nwant 400 RequestTimeout", resp.Status, b)
		}
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		shares, tmp := g.storeBytes(nodes)
		if shares == before && tmp == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stalled PUT the nodes hold %d bytes of shares (%d before) and %d in flight", shares, before, tmp)
		}
		time.Sleep(100 * time.Millisecond)
	}

	after := body(3<<20 + 7)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String("after"), Body: bytes.NewReader(after)}); err != nil {
		t.Fatalf("PUT after the stall: %v", err)
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("after")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, after) {
		t.Fatalf("GET after: %d bytes, err %v; want the %d PUT", len(got), err, len(after))
	}
}
