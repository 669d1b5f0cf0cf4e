package webdav_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
	"github.com/quilt-grid/quilt/internal/webdav"
)

// TestWebDAVAccounts: the server logs in the gateway's accounts
// (Config.Authenticate): each user's password and app passwords open
// their own home and nobody else's; what a user PUTs over WebDAV is read
// with their S3 key, and what they put over S3 is read over WebDAV; a
// write past the quota is 507 over WebDAV and 403 QuotaExceeded over S3,
// and stores nothing; a changed password, a revoked app password and a
// removed user log in no more, though each was verified (cached) before.
func TestWebDAVAccounts(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 5})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: t.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}),
		NoSync: true, SyncEvery: 200 * time.Millisecond, Inline: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	srv, err := webdav.New(webdav.Config{
		Authenticate: func(ctx context.Context, user, password string) (string, error) {
			u, err := gw.Authenticate(ctx, user, password)
			return u.Home, err
		},
		Tree:     sftp.GatewayTrees(gw),
		Object:   webdav.GatewayObjects(gw),
		SpoolDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	base := "http://" + ln.Addr().String() + webdav.Prefix
	s3srv := httptest.NewServer(s3.New(gw, s3.Options{}))
	t.Cleanup(s3srv.Close)

	_, akey, err := gw.CreateUser(ctx, gateway.NewUser{Name: "alice", Password: "alice's password", Quota: 10000})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "bob", Password: "bob's password"}); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	do := func(method, user, pw, path string, body []byte, hdr ...string) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	const apw = "alice's password"
	hello := []byte(strings.Repeat("hello from WebDAV ", 300)) // 5400 bytes: a grid object
	if code, body, _ := do("MKCOL", "alice", apw, "alice/docs", nil); code != http.StatusCreated {
		t.Fatalf("MKCOL: %d %s", code, body)
	}
	if code, body, _ := do("PUT", "alice", apw, "alice/docs/hello.txt", hello); code != http.StatusCreated {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if code, body, _ := do("GET", "alice", apw, "alice/docs/hello.txt", nil); code != 200 || body != string(hello) {
		t.Fatalf("GET: %d, %d bytes", code, len(body))
	}
	for _, c := range []struct {
		user, pw, path string
		want           int
	}{
		{"alice", "wrong password", "alice/", 401},
		{"nobody", apw, "nobody/", 401},
		{"", "", "alice/", 401},
		{"bob", "bob's password", "alice/docs/hello.txt", 403},
		{"bob", "bob's password", "bob/", 207},
	} {
		if code, body, _ := do("PROPFIND", c.user, c.pw, c.path, nil, "Depth", "0"); code != c.want {
			t.Errorf("%s on %s: %d, want %d (%s)", c.user, c.path, code, c.want, body)
		}
	}

	// The same file through S3, with alice's key; and the other way.
	sc := awss3.New(awss3.Options{BaseEndpoint: aws.String(s3srv.URL), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(akey.ID, akey.Secret, "")})
	out, err := sc.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("home-alice"), Key: aws.String("docs/hello.txt")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, hello) {
		t.Fatalf("S3 read %d bytes, want the %d PUT over WebDAV", len(got), len(hello))
	}
	if _, err := sc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("home-alice"), Key: aws.String("from-s3.txt"), Body: strings.NewReader("via S3")}); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := do("GET", "alice", apw, "alice/from-s3.txt", nil); code != 200 || body != "via S3" {
		t.Fatalf("WebDAV GET of an S3 PUT: %d %q", code, body)
	}
	if _, err := sc.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("home-bob")}); apiCode(err) != "AccessDenied" {
		t.Fatalf("alice's key on bob's home: %v", err)
	}

	// The quota: 10000 bytes, 5406 used.
	if code, body, h := do("PUT", "alice", apw, "alice/big.bin", make([]byte, 5000)); code != http.StatusInsufficientStorage ||
		!strings.Contains(body, "quota") || h.Get("X-Quilt-Error") != "quota" {
		t.Fatalf("PUT over quota: %d %q %v", code, body, h)
	}
	if code, _, _ := do("GET", "alice", apw, "alice/big.bin", nil); code != 404 {
		t.Fatalf("a PUT refused for quota left a file: %d", code)
	}
	if code, body, _ := do("COPY", "alice", apw, "alice/docs/hello.txt", nil, "Destination", base+"alice/copy.txt"); code != http.StatusInsufficientStorage {
		t.Fatalf("COPY over quota: %d %s", code, body)
	}
	if code, body, _ := do("MOVE", "alice", apw, "alice/docs/hello.txt", nil, "Destination", base+"alice/moved.txt"); code != http.StatusCreated {
		t.Fatalf("MOVE at the quota: %d %s", code, body)
	}
	_, err = sc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("home-alice"), Key: aws.String("big.bin"), Body: bytes.NewReader(make([]byte, 5000))})
	var re *awshttp.ResponseError
	if apiCode(err) != "QuotaExceeded" || !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
		t.Fatalf("S3 PUT over quota: %v", err)
	}
	if n, err := gw.Usage(ctx, "home-alice"); err != nil || n != int64(len(hello))+6 {
		t.Fatalf("usage %d %v, want %d", n, err, len(hello)+6)
	}
	if code, _, _ := do("PUT", "bob", "bob's password", "bob/big.bin", make([]byte, 20000)); code != http.StatusCreated {
		t.Fatalf("bob has no quota: PUT %d", code)
	}

	// App passwords, and the end of each login.
	_, secret, err := gw.AddAppPassword(ctx, "alice", "sync client")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.AddAppPassword(ctx, "alice", "other"); err != nil {
		t.Fatal(err)
	}
	u, _ := gw.User(ctx, "alice")
	if code, _, _ := do("PROPFIND", "alice", secret, "alice/", nil, "Depth", "1"); code != 207 {
		t.Fatalf("app password login: %d", code)
	}
	if err := gw.RemoveAppPassword(ctx, "alice", u.AppPasswords[0].ID); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do("PROPFIND", "alice", secret, "alice/", nil, "Depth", "0"); code != 401 {
		t.Fatalf("a revoked app password: %d", code)
	}
	if err := gw.SetPassword(ctx, "alice", "a new password"); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do("PROPFIND", "alice", apw, "alice/", nil, "Depth", "0"); code != 401 {
		t.Fatalf("the old password after a change: %d", code)
	}
	if code, _, _ := do("PROPFIND", "alice", "a new password", "alice/", nil, "Depth", "0"); code != 207 {
		t.Fatalf("the new password: %d", code)
	}
	if err := gw.DeleteUser(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do("PROPFIND", "alice", "a new password", "alice/", nil, "Depth", "0"); code != 401 {
		t.Fatalf("a removed user: %d", code)
	}
	if _, err := sc.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("home-alice")}); err == nil {
		t.Fatal("a removed user's S3 key still works")
	}
}

// apiCode is the S3 error code of an SDK error.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}
