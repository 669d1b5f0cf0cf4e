package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// readEnv reads the exports of an env file quilt up wrote.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestCLIUserAccounts, with real processes: 'quilt up' makes the admin
// account quilt (webdav.env logs in) and prints where accounts are
// managed; 'quilt user add' against it makes a user who logs in over
// WebDAV, PUTs a file and reads it back with the S3 key the command
// printed; the quota refuses a bigger file (507); a password read from
// standard input or asked for twice on a terminal works (two that differ
// do not); a changed password ends the old one, a removed
// user logs in no more and their key is refused; bad input is refused
// with a clear error.
func TestCLIUserAccounts(t *testing.T) {
	bin := buildQuilt(t)
	base := t.TempDir()
	envv := append(os.Environ(), "QUILT_HOME="+filepath.Join(base, "home"), "QUILT_GRID=")
	dir := filepath.Join(base, "grid")
	gwDir := filepath.Join(dir, "gateway")
	up := exec.Command(bin, "up", "--port", "0", "--nodes", "3", "--no-fsync", "--dir", dir, "--nbd", "off", "--swift", "off")
	up.Env = envv
	logf, _ := os.Create(dir + ".log")
	up.Stdout, up.Stderr = logf, logf
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		up.Process.Kill()
		up.Wait()
	})
	waitFile(t, filepath.Join(gwDir, "webdav.env"), 2*time.Minute)
	for deadline := time.Now().Add(time.Minute); ; {
		b, _ := os.ReadFile(dir + ".log")
		if bytes.Contains(b, []byte("stop with Ctrl-C")) {
			if !bytes.Contains(b, []byte("Accounts: quilt user add NAME")) {
				t.Fatalf("the banner does not say where accounts are managed:\n%s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quilt up did not finish starting:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	dav := readEnv(t, filepath.Join(gwDir, "webdav.env"))
	s3env := readEnv(t, filepath.Join(gwDir, "s3.env"))
	if dav["QUILT_WEBDAV_USER"] != "quilt" || dav["QUILT_WEBDAV_PASSWORD"] == "" || dav["QUILT_WEBDAV_URL"] == "" {
		t.Fatalf("webdav.env: %v", dav)
	}
	quilt := func(stdin string, args ...string) (string, string, error) {
		cmd := exec.Command(bin, append(args, "--dir", gwDir)...)
		cmd.Env = envv
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	req := func(method, user, pw, path string, body []byte) int {
		t.Helper()
		r, err := http.NewRequest(method, dav["QUILT_WEBDAV_URL"]+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.SetBasicAuth(user, pw)
		if method == "PROPFIND" {
			r.Header.Set("Depth", "0")
		}
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// waitCode waits for a request to answer want: the running gateway
	// sees a change 'quilt user' made within a second or so.
	waitCode := func(what string, want int, method, user, pw, path string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; {
			code := req(method, user, pw, path, nil)
			if code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d, want %d", what, code, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if code := req("PROPFIND", "quilt", dav["QUILT_WEBDAV_PASSWORD"], "quilt/", nil); code != 207 {
		t.Fatalf("the admin of webdav.env: %d", code)
	}

	out, errOut, err := quilt("", "user", "add", "erin", "--password", "erin's password", "--quota", "1MiB", "--group", "staff")
	if err != nil {
		t.Fatalf("user add: %v\n%s", err, errOut)
	}
	f := strings.Fields(out)
	if len(f) != 2 || !strings.HasPrefix(f[0], "QK") || !strings.Contains(errOut, "home-erin") || !strings.Contains(errOut, "WebDAV: "+dav["QUILT_WEBDAV_URL"]+"erin/") {
		t.Fatalf("user add printed %q, %q", out, errOut)
	}
	keyID, secret := f[0], f[1]
	waitCode("erin's first login", 207, "PROPFIND", "erin", "erin's password", "erin/")
	data := bytes.Repeat([]byte("erin's notes\n"), 10000) // 130 kB: a grid object
	if code := req("PUT", "erin", "erin's password", "erin/notes.txt", data); code != 201 {
		t.Fatalf("PUT: %d", code)
	}
	c := s3.New(s3.Options{BaseEndpoint: aws.String(s3env["AWS_ENDPOINT_URL"]), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(keyID, secret, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obj, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("home-erin"), Key: aws.String("notes.txt")})
	if err != nil {
		t.Fatalf("S3 GET with erin's key: %v", err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("S3 read %d bytes, want the %d PUT over WebDAV", len(got), len(data))
	}
	if code := req("PUT", "erin", "erin's password", "erin/big.bin", make([]byte, 1<<20)); code != http.StatusInsufficientStorage {
		t.Fatalf("PUT over the quota: %d", code)
	}
	if code := req("GET", "quilt", dav["QUILT_WEBDAV_PASSWORD"], "erin/notes.txt", nil); code != 403 {
		t.Fatalf("the admin on erin's path: %d", code)
	}
	if out, _, err := quilt("", "user", "list"); err != nil || !strings.Contains(out, "erin") || !strings.Contains(out, "home-erin") || !strings.Contains(out, "staff") {
		t.Fatalf("user list: %v\n%s", err, out)
	}

	// A password from standard input; bad input.
	if _, errOut, err := quilt("frank's password\n", "user", "add", "frank"); err != nil {
		t.Fatalf("user add with the password on stdin: %v\n%s", err, errOut)
	}
	waitCode("frank's login", 207, "PROPFIND", "frank", "frank's password", "frank/")
	// The prompt on a terminal (script(1) gives the command a pty): the
	// password twice, without echo; two that differ are refused.
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("script(1) is needed for the terminal prompt (util-linux)")
	}
	onTTY := func(input string, args ...string) (string, error) {
		line := bin + " " + strings.Join(args, " ") + " --dir " + gwDir
		cmd := exec.Command("script", "-qec", line, "/dev/null")
		cmd.Env = envv
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := onTTY("gus's password\ngus's passw0rd\n", "user", "add", "gus"); err == nil || !strings.Contains(out, "the two passwords differ") {
		t.Fatalf("two passwords that differ: %v\n%s", err, out)
	}
	if out, err := onTTY("gus's password\ngus's password\n", "user", "add", "gus"); err != nil || !strings.Contains(out, "new password of gus: ") || !strings.Contains(out, "again: ") {
		t.Fatalf("the prompt: %v\n%s", err, out)
	}
	waitCode("gus's login", 207, "PROPFIND", "gus", "gus's password", "gus/")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"user", "add", "Frank", "--password", "long enough"}, "invalid user or group name"},
		{[]string{"user", "add", "frank", "--password", "long enough"}, "user exists"},
		{[]string{"user", "add", "gina", "--password", "short"}, "at least 8"},
		{[]string{"user", "add", "gina", "--password", "long enough", "--quota", "lots"}, "bad size"},
		{[]string{"user", "passwd", "nobody", "--password", "long enough"}, "no such user"},
		{[]string{"user", "rm", "nobody"}, "no such user"},
	} {
		if _, errOut, err := quilt("", c.args...); err == nil || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %v, stderr %q, want %q", c.args, err, errOut, c.want)
		}
	}

	// A changed password ends the old one (verified and cached before).
	if _, errOut, err := quilt("", "user", "passwd", "erin", "--password", "erin's new password"); err != nil {
		t.Fatalf("user passwd: %v\n%s", err, errOut)
	}
	waitCode("the old password", 401, "PROPFIND", "erin", "erin's password", "erin/")
	waitCode("the new password", 207, "PROPFIND", "erin", "erin's new password", "erin/")

	// App passwords.
	out, errOut, err = quilt("", "user", "app-password", "add", "erin", "phone")
	if err != nil {
		t.Fatalf("app-password add: %v\n%s", err, errOut)
	}
	app := strings.TrimSpace(out)
	waitCode("an app password", 207, "PROPFIND", "erin", app, "erin/")
	out, _, err = quilt("", "user", "app-password", "list", "erin")
	if err != nil || !strings.Contains(out, "phone") {
		t.Fatalf("app-password list: %v\n%s", err, out)
	}
	id := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])[0]
	if _, errOut, err := quilt("", "user", "app-password", "rm", "erin", id); err != nil {
		t.Fatalf("app-password rm: %v\n%s", err, errOut)
	}
	waitCode("a revoked app password", 401, "PROPFIND", "erin", app, "erin/")

	// Removal: the login and the key end; the home is kept.
	if _, errOut, err := quilt("", "user", "rm", "erin"); err != nil || !strings.Contains(errOut, "kept") {
		t.Fatalf("user rm: %v\n%s", err, errOut)
	}
	waitCode("a removed user", 401, "PROPFIND", "erin", "erin's new password", "erin/")
	for deadline := time.Now().Add(time.Minute); ; {
		_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("home-erin"), Key: aws.String("notes.txt")})
		var ae smithy.APIError
		if errors.As(err, &ae) && (ae.ErrorCode() == "InvalidAccessKeyId" || ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "Forbidden") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a removed user's S3 key: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	admin := s3.New(s3.Options{BaseEndpoint: aws.String(s3env["AWS_ENDPOINT_URL"]), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s3env["AWS_ACCESS_KEY_ID"], s3env["AWS_SECRET_ACCESS_KEY"], "")})
	if _, err := admin.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("home-erin"), Key: aws.String("notes.txt")}); err != nil {
		t.Fatalf("the home of a removed user is not kept: %v", err)
	}
}

// TestWebDAVFirstAdminAndOldUsersFile: on a gateway an older version
// left (a webdav-password and a webdav-users file), the first start
// makes the admin account with that password; the file's other users
// still log in with their bcrypt passwords, and see their bucket; a name
// that is an account logs in with the account's password only, even if
// the file has a line for it; a damaged file is refused at the start.
func TestWebDAVFirstAdminAndOldUsersFile(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	ctx := context.Background()
	dir := t.TempDir()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if err := gw.CreateBucket(ctx, "photos", ""); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, webdavPassword)
	if err := os.WriteFile(pwFile, []byte("the old default password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l1, _ := sftp.PasswordLine("olga", "photos", "olga's password")
	l2, _ := sftp.PasswordLine("quilt", "files", "the file's quilt password")
	users := filepath.Join(dir, webdavUsersFile)
	if err := os.WriteFile(users, []byte(l1+"\n"+l2+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := firstAdmin(ctx, gw, pwFile); err != nil {
		t.Fatal(err)
	}
	if u, err := gw.User(ctx, "quilt"); err != nil || !u.Admin || u.Home != "files" {
		t.Fatalf("the first admin: %v %+v", err, u)
	}
	if err := firstAdmin(ctx, gw, pwFile); err != nil { // a second start: nothing to do
		t.Fatal(err)
	}
	auth, err := accountsAuth(gw, users)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, pw, bucket string }{
		{"quilt", "the old default password", "files"},
		{"quilt", "the file's quilt password", ""},
		{"olga", "olga's password", "photos"},
		{"olga", "olga's password", "photos"}, // remembered
		{"olga", "wrong password", ""},
		{"nobody", "olga's password", ""},
	} {
		b, err := auth(ctx, c.user, c.pw)
		if c.bucket == "" && !errors.Is(err, gateway.ErrDenied) || c.bucket != "" && (err != nil || b != c.bucket) {
			t.Errorf("%s/%q: %q %v, want %q", c.user, c.pw, b, err, c.bucket)
		}
	}
	if _, _, err := gw.CreateUser(ctx, gateway.NewUser{Name: "olga", Password: "olga's new password"}); err != nil {
		t.Fatal(err)
	}
	if _, err := auth(ctx, "olga", "olga's password"); !errors.Is(err, gateway.ErrDenied) {
		t.Fatalf("the file's password of a name now an account: %v", err)
	}
	if b, err := auth(ctx, "olga", "olga's new password"); err != nil || b != "home-olga" {
		t.Fatalf("olga's account: %q %v", b, err)
	}
	if err := os.WriteFile(users, []byte("olga photos password not-a-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := accountsAuth(gw, users); err == nil {
		t.Fatal("a damaged users file was taken")
	}
}
