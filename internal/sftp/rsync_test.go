package sftp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/tree"
	"golang.org/x/crypto/ssh/knownhosts"
)

// rsyncClient runs OpenSSH's ssh and the system's rsync against a
// fixture's server as one user.
type rsyncClient struct {
	f    *fixture
	user string
	ssh  string // the -e command
}

// newRsyncClient makes bucket and a user chrooted to it, with a key and
// a known_hosts file for OpenSSH. It fails, not skips, without rsync,
// ssh or bwrap.
func newRsyncClient(t *testing.T, f *fixture, user, bucket string) *rsyncClient {
	t.Helper()
	for _, p := range []string{"rsync", "ssh", "bwrap", "diff"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is needed (apt install rsync openssh-client bubblewrap): %v", p, err)
		}
	}
	if err := f.gw.CreateBucket(context.Background(), bucket, ""); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "id")
	k, err := sftp.LoadOrCreateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(f.users)
	if err := os.WriteFile(f.users, []byte(string(old)+sftp.KeyLine(user, bucket, k.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hk, err := sftp.LoadOrCreateKey(filepath.Join(f.dir, "sftp-host-key"))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(f.addr)
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(f.addr)}, hk.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = host
	e := "ssh -F /dev/null -p " + port + " -o UserKnownHostsFile=" + kh + " -o IdentityFile=" + keyPath +
		" -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o BatchMode=yes"
	return &rsyncClient{f: f, user: user, ssh: e}
}

// remote is user@host:p.
func (c *rsyncClient) remote(p string) string {
	host, _, _ := net.SplitHostPort(c.f.addr)
	return c.user + "@" + host + ":" + p
}

// rsync runs rsync -e ssh with args and returns its output and exit code.
func (c *rsyncClient) rsync(t *testing.T, args ...string) (out string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rsync", append([]string{"-e", c.ssh}, args...)...)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("rsync %v: %v", args, err)
	}
	return string(b), code
}

// mustRsync runs rsync and fails the test unless it exits 0.
func (c *rsyncClient) mustRsync(t *testing.T, args ...string) string {
	t.Helper()
	out, code := c.rsync(t, args...)
	if code != 0 {
		t.Fatalf("rsync %v: exit %d:\n%s", args, code, out)
	}
	return out
}

// transfers are the lines of rsync -i output that send or delete.
func transfers(out string) []string {
	var ts []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "<") || strings.HasPrefix(l, ">") || strings.HasPrefix(l, "c") || strings.HasPrefix(l, "*deleting") {
			ts = append(ts, l)
		}
	}
	return ts
}

func writeFile(t *testing.T, p string, b []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// readTree reads file p of bucket's tree through the gateway (another
// door than the one that wrote it).
func readTree(t *testing.T, f *fixture, bucket, p string) ([]byte, error) {
	t.Helper()
	rc, _, err := f.gw.Tree(bucket).Open(context.Background(), p, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func diffR(t *testing.T, a, b string) {
	t.Helper()
	out, err := exec.Command("diff", "-r", a, b).CombinedOutput()
	if err != nil {
		t.Fatalf("diff -r %s %s: %v\n%s", a, b, err, out)
	}
}

// TestRsyncRoundTrip uploads a tree with rsync -a --checksum over ssh,
// downloads it into another directory and compares them with diff -r;
// then a second upload sends nothing, a changed file (same size and
// time: only --checksum sees it) is the only one sent, and --delete
// removes from the bucket.
func TestRsyncRoundTrip(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	src := filepath.Join(t.TempDir(), "src")
	big := make([]byte, 3<<20)
	rand.Read(big)
	writeFile(t, filepath.Join(src, "top.txt"), []byte("top\n"), 0o644)
	writeFile(t, filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	writeFile(t, filepath.Join(src, "a", "hello.txt"), []byte("hello, world\n"), 0o644)
	writeFile(t, filepath.Join(src, "a", "b", "empty"), nil, 0o600)
	writeFile(t, filepath.Join(src, "a", "b", "c", "big.bin"), big, 0o644)
	if err := os.MkdirAll(filepath.Join(src, "a", "void"), 0o750); err != nil {
		t.Fatal(err)
	}
	// Times in the past: rsync leaves the time of a directory it makes
	// within the second of the source's (a local copy too).
	past := time.Date(2021, 3, 4, 5, 6, 7, 891011121, time.UTC)
	for _, p := range []string{"a/void", "run.sh", "a/b/empty"} {
		if err := os.Chtimes(filepath.Join(src, p), past, past); err != nil {
			t.Fatal(err)
		}
	}

	c.mustRsync(t, "-a", "--checksum", src+"/", c.remote("/up/"))
	got, err := readTree(t, f, "alpha", "up/a/b/c/big.bin")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("big.bin in the tree: %d bytes, err %v; want the 3 MiB sent", len(got), err)
	}
	i, err := f.gw.Tree("alpha").Stat(context.Background(), "up/run.sh")
	if err != nil || i.Mode.Perm() != 0o755 {
		t.Fatalf("run.sh in the tree: %+v, %v; want mode 0755", i, err)
	}
	if i, err := f.gw.Tree("alpha").Stat(context.Background(), "up/a/void"); err != nil || !i.IsDir() || i.Mode.Perm() != 0o750 {
		t.Fatalf("empty directory in the tree: %+v, %v", i, err)
	}

	dst := filepath.Join(t.TempDir(), "dst")
	c.mustRsync(t, "-a", "--checksum", c.remote("/up/"), dst+"/")
	diffR(t, src, dst)
	for _, p := range []string{"run.sh", "a/b/empty", "a/void"} {
		a, _ := os.Stat(filepath.Join(src, p))
		b, err := os.Stat(filepath.Join(dst, p))
		if err != nil || a.Mode() != b.Mode() || !a.ModTime().Equal(b.ModTime()) {
			t.Errorf("%s: downloaded %v, want mode %v and time %v as sent", p, b, a.Mode(), a.ModTime())
		} else if uid := b.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Getuid()) {
			t.Errorf("%s: downloaded with owner %d, want the server's user %d", p, uid, os.Getuid())
		}
	}

	out := c.mustRsync(t, "-a", "--checksum", "-i", src+"/", c.remote("/up/"))
	if ts := transfers(out); len(ts) > 0 {
		t.Errorf("second upload sent %q, want nothing", ts)
	}
	out = c.mustRsync(t, "-a", "--checksum", "-i", c.remote("/up/"), dst+"/")
	if ts := transfers(out); len(ts) > 0 {
		t.Errorf("second download sent %q, want nothing", ts)
	}

	// Same size, same time: only the checksums differ.
	hello := filepath.Join(src, "a", "hello.txt")
	st, _ := os.Stat(hello)
	writeFile(t, hello, []byte("HELLO, WORLD\n"), 0o644)
	os.Chtimes(hello, st.ModTime(), st.ModTime())
	out = c.mustRsync(t, "-a", "--checksum", "-i", src+"/", c.remote("/up/"))
	if ts := transfers(out); len(ts) != 1 || !strings.HasSuffix(ts[0], " a/hello.txt") {
		t.Errorf("after changing a/hello.txt, sent %q, want it only", ts)
	}
	if got, err := readTree(t, f, "alpha", "up/a/hello.txt"); err != nil || string(got) != "HELLO, WORLD\n" {
		t.Errorf("a/hello.txt in the tree: %q, %v", got, err)
	}

	os.Remove(filepath.Join(src, "a", "b", "empty"))
	os.Remove(filepath.Join(src, "a", "void"))
	out = c.mustRsync(t, "-a", "--checksum", "--delete", "-i", src+"/", c.remote("/up/"))
	if !strings.Contains(out, "*deleting   a/b/empty") || !strings.Contains(out, "*deleting   a/void/") {
		t.Errorf("--delete: %q", out)
	}
	for _, p := range []string{"up/a/b/empty", "up/a/void"} {
		if _, err := f.gw.Tree("alpha").Stat(context.Background(), p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after --delete: %v, want not found", p, err)
		}
	}
	dst2 := filepath.Join(t.TempDir(), "dst2")
	c.mustRsync(t, "-a", "--checksum", c.remote("/up/"), dst2+"/")
	diffR(t, src, dst2)

	// Remote paths with blanks, quotes and shell characters, as rsync
	// escapes them on the command line.
	odd := "/odd dir/it's \"$x\" & (ü)/"
	c.mustRsync(t, "-a", "--mkpath", src+"/a/", c.remote(odd))
	if got, err := readTree(t, f, "alpha", odd[1:]+"hello.txt"); err != nil || string(got) != "HELLO, WORLD\n" {
		t.Errorf("upload to %q: %q, %v", odd, got, err)
	}
	// --remove-source-files removes what was sent from the bucket.
	moved := t.TempDir()
	c.mustRsync(t, "-a", "--remove-source-files", c.remote("/up/top.txt"), moved+"/")
	if b, err := os.ReadFile(filepath.Join(moved, "top.txt")); err != nil || string(b) != "top\n" {
		t.Errorf("download with --remove-source-files: %q, %v", b, err)
	}
	if _, err := f.gw.Tree("alpha").Stat(context.Background(), "up/top.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("up/top.txt after --remove-source-files: %v, want not found", err)
	}
	if _, err := f.gw.Tree("alpha").Stat(context.Background(), "up/run.sh"); err != nil {
		t.Errorf("up/run.sh beside it: %v", err)
	}

	// Wildcards in a download's paths expand on the bucket.
	globbed := t.TempDir()
	c.mustRsync(t, "-a", c.remote("/up/*.sh"), c.remote("/up/a/*.txt"), globbed+"/")
	if ents, _ := os.ReadDir(globbed); len(ents) != 2 || ents[0].Name() != "hello.txt" || ents[1].Name() != "run.sh" {
		t.Errorf("download of /up/*.sh and /up/a/*.txt: %v, want hello.txt and run.sh", ents)
	}
	dst3 := filepath.Join(t.TempDir(), "dst3")
	c.mustRsync(t, "-a", c.remote(odd), dst3+"/")
	diffR(t, filepath.Join(src, "a"), dst3)

	// -s (--secluded-args): the paths come on the channel, and wildcards
	// in them expand on the bucket.
	c.mustRsync(t, "-a", "-s", "--checksum", src+"/a/", c.remote("/secluded dir/"))
	dst4 := filepath.Join(t.TempDir(), "dst4")
	c.mustRsync(t, "-a", "-s", "--checksum", c.remote("/secluded dir/"), dst4+"/")
	diffR(t, filepath.Join(src, "a"), dst4)
	globbed4 := t.TempDir()
	c.mustRsync(t, "-a", "-s", c.remote("/secluded dir/*.txt"), globbed4+"/")
	if ents, _ := os.ReadDir(globbed4); len(ents) != 1 || ents[0].Name() != "hello.txt" {
		t.Errorf("download with -s of /secluded dir/*.txt: %v, want hello.txt", ents)
	}
}

// TestRsyncChroot: paths with "..", absolute paths and symbolic links
// stay in the user's bucket: the server's files and another user's
// bucket are not reached, for reading or writing.
func TestRsyncChroot(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	newRsyncClient(t, f, "bob", "beta")
	if _, err := f.gw.Tree("beta").Create(context.Background(), "secret.txt", strings.NewReader("bob's\n"), tree.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A file of the server's, named by its absolute path.
	outside := filepath.Join(t.TempDir(), "outside.txt")
	writeFile(t, outside, []byte("server's own\n"), 0o644)

	dl := t.TempDir()
	for _, p := range []string{"/etc/passwd", "../../../../../etc/passwd", outside, "/../beta/secret.txt",
		"../beta/secret.txt", f.users, "~/../../etc/passwd"} {
		out, code := c.rsync(t, "-a", c.remote(p), dl+"/")
		if code == 0 {
			t.Errorf("download of %s: exit 0, want an error:\n%s", p, out)
		}
	}
	if ents, _ := os.ReadDir(dl); len(ents) > 0 {
		t.Errorf("downloads of files outside the bucket made %v", ents)
	}

	// Uploads to absolute paths and through ".." land in the bucket.
	src := filepath.Join(t.TempDir(), "outside.txt")
	writeFile(t, src, []byte("alice's\n"), 0o644)
	c.mustRsync(t, "-a", "--mkpath", src, c.remote(filepath.Dir(outside)+"/"))
	c.mustRsync(t, "-a", "--mkpath", src, c.remote("../../../"+outside))
	if b, _ := os.ReadFile(outside); string(b) != "server's own\n" {
		t.Errorf("the server's file was overwritten: %q", b)
	}
	if got, err := readTree(t, f, "alpha", outside[1:]); err != nil || string(got) != "alice's\n" {
		t.Errorf("upload to %s: in the bucket %q, %v", outside, got, err)
	}
	c.mustRsync(t, "-a", "--mkpath", src, c.remote("/../beta/secret.txt"))
	if got, _ := readTree(t, f, "beta", "secret.txt"); string(got) != "bob's\n" {
		t.Errorf("bob's bucket changed: %q", got)
	}
	if got, err := readTree(t, f, "alpha", "beta/secret.txt"); err != nil || string(got) != "alice's\n" {
		t.Errorf("upload to /../beta/secret.txt: in alice's bucket %q, %v", got, err)
	}

	// A symbolic link is not kept (the tree has none), and a file sent
	// through it in a later run stays in the staging copy.
	links := filepath.Join(t.TempDir(), "links")
	writeFile(t, filepath.Join(links, "plain"), []byte("x"), 0o644)
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(links, "out")); err != nil {
		t.Fatal(err)
	}
	out, code := c.rsync(t, "-a", links+"/", c.remote("/links/"))
	if code != 23 || !strings.Contains(out, "not kept: /links/out") {
		t.Errorf("upload of a symbolic link: exit %d, want 23 and a message:\n%s", code, out)
	}
	if _, err := f.gw.Tree("alpha").Stat(context.Background(), "links/out"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("links/out in the tree: %v, want not found", err)
	}
	if got, err := readTree(t, f, "alpha", "links/plain"); err != nil || string(got) != "x" {
		t.Errorf("links/plain beside the link: %q, %v", got, err)
	}
	// A later run cannot use the link: it was never kept (and
	// --keep-dirlinks on the receiver would follow it).
	over := filepath.Join(t.TempDir(), "over")
	writeFile(t, filepath.Join(over, "out", filepath.Base(outside)), []byte("through a link\n"), 0o644)
	c.rsync(t, "-a", "--keep-dirlinks", over+"/", c.remote("/links/"))
	if b, _ := os.ReadFile(outside); string(b) != "server's own\n" {
		t.Errorf("the server's file was overwritten through a link: %q", b)
	}
}

// TestRsyncRefused: commands other than rsync's server, and rsync
// options that need a shell or a daemon, get a message and exit 1.
func TestRsyncRefused(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	ssh := strings.Fields(c.ssh)
	host, _, _ := net.SplitHostPort(f.addr)
	for _, tc := range []struct{ cmd, msg string }{
		{"ls /", "only the sftp subsystem and rsync"},
		{"cat /etc/passwd", "only the sftp subsystem and rsync"},
		{"rsync --version", "only the sftp subsystem and rsync"},
		{"rsync --server --daemon .", "no rsync daemon"},
		{"rsync --server -s . /x", "-s with paths"},
		{"rsync --server --sender -logDtpre.iLsfxCIvu . /x && ls", "no shell"},
		{"rsync --server --sender -logDtpre.iLsfxCIvu . $HOME", "no shell"},
		{"rsync --server --sender -vlogDtpre.iLsfxCIvu . /x; rm -rf /", "no shell"},
		{"", "only the sftp subsystem and rsync"}, // a shell
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append(ssh[1:], "-T", "alice@"+host)
		if tc.cmd != "" {
			args = append(args, tc.cmd)
		}
		cmd := exec.CommandContext(ctx, ssh[0], args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("ssh %q: %v, want exit status 1", tc.cmd, err)
		}
		if !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("ssh %q: stderr %q, want %q", tc.cmd, stderr.String(), tc.msg)
		}
	}
}

// TestRsyncInterrupted: an upload cut off in its middle, with --partial
// (which keeps a partial file in place on a local disk), commits
// nothing: the tree keeps the old version.
func TestRsyncInterrupted(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	src := t.TempDir()
	old := bytes.Repeat([]byte("old "), 1<<18) // 1 MiB
	writeFile(t, filepath.Join(src, "big.bin"), old, 0o644)
	c.mustRsync(t, "-a", filepath.Join(src, "big.bin"), c.remote("/big.bin"))

	for len(f.logs) > 0 {
		<-f.logs
	}
	newer := make([]byte, 3<<20)
	rand.Read(newer)
	writeFile(t, filepath.Join(src, "big.bin"), newer, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rsync", "-e", c.ssh, "-a", "--partial", "--bwlimit=256",
		filepath.Join(src, "big.bin"), c.remote("/big.bin"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // about 512 KiB sent
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	f.awaitLog(t, "sftp: rsync")
	got, err := readTree(t, f, "alpha", "big.bin")
	if err != nil || !bytes.Equal(got, old) {
		t.Fatalf("after an interrupted upload the tree has %d bytes (err %v), want the old version's %d", len(got), err, len(old))
	}
	// Run again, it completes.
	c.mustRsync(t, "-a", "--partial", filepath.Join(src, "big.bin"), c.remote("/big.bin"))
	if got, err := readTree(t, f, "alpha", "big.bin"); err != nil || !bytes.Equal(got, newer) {
		t.Fatalf("after the second upload: %d bytes, %v", len(got), err)
	}
}

// TestRsyncSizesOnly: an upload that compares only sizes and times (no
// --checksum) stages the destination's files without reading their
// bytes from the grid, and still builds each file it sends right (a
// delta against zeros); one with --inplace reads them.
func TestRsyncSizesOnly(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	src := t.TempDir()
	big := make([]byte, 3<<20)
	rand.Read(big)
	writeFile(t, filepath.Join(src, "big.bin"), big, 0o644)
	writeFile(t, filepath.Join(src, "d", "small"), []byte("small\n"), 0o644)
	writeFile(t, filepath.Join(src, "d", "same-size"), []byte("0123456789"), 0o644)
	c.mustRsync(t, "-a", src+"/", c.remote("/s/"))

	want := func(p string, b []byte) {
		t.Helper()
		if got, err := readTree(t, f, "alpha", "s/"+p); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s in the tree: %d bytes %q…, %v; want %d bytes", p, len(got), got[:min(len(got), 16)], err, len(b))
		}
	}
	opens := f.opens.Load()
	out := c.mustRsync(t, "-a", "-i", src+"/", c.remote("/s/"))
	if ts := transfers(out); len(ts) > 0 {
		t.Errorf("second upload sent %q, want nothing", ts)
	}
	// Changes: a block in the middle of the big file, another size, the
	// same size at another time, a mode, a time alone.
	copy(big[1<<20:], "changed in the middle")
	writeFile(t, filepath.Join(src, "big.bin"), big, 0o644)
	// rsync's quick check compares whole seconds: another second.
	earlier := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "big.bin"), earlier, earlier)
	writeFile(t, filepath.Join(src, "d", "small"), []byte("smaller, no: larger\n"), 0o600)
	writeFile(t, filepath.Join(src, "d", "same-size"), []byte("9876543210"), 0o644)
	os.Chtimes(filepath.Join(src, "d", "same-size"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	out = c.mustRsync(t, "-a", "-i", src+"/", c.remote("/s/"))
	if ts := transfers(out); len(ts) != 3 {
		t.Errorf("upload of 3 changed files sent %q", ts)
	}
	if n := f.opens.Load() - opens; n != 0 {
		t.Errorf("uploads without --checksum read %d objects from the grid, want none", n)
	}
	want("big.bin", big)
	want("d/small", []byte("smaller, no: larger\n"))
	want("d/same-size", []byte("9876543210"))
	if i, err := f.gw.Tree("alpha").Stat(context.Background(), "s/d/small"); err != nil || i.Mode.Perm() != 0o600 {
		t.Errorf("d/small: %+v, %v; want mode 0600", i, err)
	}
	// A mode alone: the bytes stay.
	os.Chmod(filepath.Join(src, "big.bin"), 0o640)
	c.mustRsync(t, "-a", src+"/", c.remote("/s/"))
	want("big.bin", big)
	if i, err := f.gw.Tree("alpha").Stat(context.Background(), "s/big.bin"); err != nil || i.Mode.Perm() != 0o640 {
		t.Errorf("big.bin: %+v, %v; want mode 0640", i, err)
	}
	// A time alone: rsync sends the file again (a delta against zeros).
	later := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "big.bin"), later, later)
	c.mustRsync(t, "-a", src+"/", c.remote("/s/"))
	want("big.bin", big)
	if i, err := f.gw.Tree("alpha").Stat(context.Background(), "s/big.bin"); err != nil || !i.ModTime.Equal(later) {
		t.Errorf("big.bin: %+v, %v; want time %v", i, err, later)
	}
	if n := f.opens.Load() - opens; n != 0 {
		t.Errorf("uploads without --checksum read %d objects from the grid, want none", n)
	}

	// A file without u+w in the tree keeps its mode when rsync, without
	// -p, sets only its time.
	if _, err := f.gw.Tree("alpha").Create(context.Background(), "s/ro", strings.NewReader("same"), tree.CreateOptions{Mode: 0o444}); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	writeFile(t, ro, []byte("same"), 0o644)
	os.Chtimes(ro, later, later)
	c.mustRsync(t, "-t", "--size-only", ro, c.remote("/s/ro"))
	if i, err := f.gw.Tree("alpha").Stat(context.Background(), "s/ro"); err != nil || i.Mode.Perm() != 0o444 || !i.ModTime.Equal(later) {
		t.Errorf("s/ro after rsync -t: %+v, %v; want mode 0444 and time %v", i, err, later)
	}
	os.Remove(ro)
	if err := f.gw.Tree("alpha").Remove(context.Background(), "s/ro", tree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}

	// --inplace rewrites blocks of the old file: its bytes are staged.
	copy(big[2<<20:], "in place")
	writeFile(t, filepath.Join(src, "big.bin"), big, 0o644)
	c.mustRsync(t, "-a", "--inplace", "--no-whole-file", src+"/", c.remote("/s/"))
	want("big.bin", big)
	if f.opens.Load() == opens {
		t.Errorf("an --inplace upload read nothing from the grid")
	}
	dst := t.TempDir()
	c.mustRsync(t, "-a", c.remote("/s/"), dst+"/")
	diffR(t, src, dst)
}

// TestRsyncStaleStaging: a new server removes the staging directories a
// crashed one left in its spool, and nothing else there.
func TestRsyncStaleStaging(t *testing.T) {
	spool := t.TempDir()
	stale := filepath.Join(spool, "quilt-rsync-123", "d")
	writeFile(t, filepath.Join(stale, "f"), []byte("x"), 0o444)
	if err := os.Chmod(stale, 0o555); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(spool, "other"), []byte("kept"), 0o644)
	hk, err := sftp.LoadOrCreateKey(filepath.Join(t.TempDir(), "hk"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := sftp.New(sftp.Config{HostKey: hk, SpoolDir: spool,
		Users: func() (sftp.Users, error) { return sftp.Users{}, nil },
		Tree:  func(context.Context, string) (*tree.Tree, error) { return nil, errors.New("none") }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := os.Stat(filepath.Join(spool, "quilt-rsync-123")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale staging directory: %v, want removed", err)
	}
	if b, err := os.ReadFile(filepath.Join(spool, "other")); err != nil || string(b) != "kept" {
		t.Errorf("other file in the spool: %q, %v", b, err)
	}
}

// TestRsyncSandbox: options a client adds to the server's command line
// (-M) that name the server's files reach nothing outside the staging
// directory: rsync runs in a sandbox that holds only it and /usr.
func TestRsyncSandbox(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), []byte("data\n"), 0o644)
	outside := t.TempDir()
	for _, m := range []string{"--log-file=" + outside + "/log", "--temp-dir=" + outside, "--backup-dir=" + outside, "--partial-dir=" + outside} {
		out, code := c.rsync(t, "-a", "-b", "-M"+m, src+"/", c.remote("/sb/"))
		t.Logf("-M%s: exit %d\n%s", m, code, out)
		if ents, _ := os.ReadDir(outside); len(ents) > 0 {
			t.Fatalf("-M%s wrote %v in a directory of the server", m, ents)
		}
	}
	if passwd, err := os.ReadFile("/etc/passwd"); err == nil && len(passwd) > 0 {
		first, _, _ := strings.Cut(string(passwd), "\n")
		for _, m := range []string{"--files-from=/etc/passwd", "--exclude-from=/etc/passwd", "--include-from=/etc/passwd"} {
			out, _ := c.rsync(t, "-a", "-M"+m, c.remote("/sb/"), t.TempDir()+"/")
			if strings.Contains(out, first) {
				t.Errorf("-M%s: the server's /etc/passwd shows:\n%s", m, out)
			}
		}
	}
	out, _ := c.rsync(t, "-a", "-M--log-file=/data/../../../etc/x", "-M--files-from=/data/../../proc/self/environ", c.remote("/sb/"), t.TempDir()+"/")
	if strings.Contains(out, "PATH=") || strings.Contains(out, "HOME=") {
		t.Errorf("the server's environment shows:\n%s", out)
	}
}

// TestRsyncNoSandbox: without bwrap on the server, rsync is refused with
// a message that says so, and nothing runs.
func TestRsyncNoSandbox(t *testing.T) {
	f := newFixture(t)
	c := newRsyncClient(t, f, "alice", "alpha")
	bin := t.TempDir()
	for _, p := range []string{"rsync", "ssh"} {
		full, err := exec.LookPath(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(full, filepath.Join(bin, p)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "f"), []byte("x"), 0o644)
	out, code := c.rsync(t, "-a", src+"/", c.remote("/nb/"))
	if code == 0 || !strings.Contains(out, "bwrap (bubblewrap) is not installed on the server") {
		t.Errorf("rsync without bwrap on the server: exit %d:\n%s", code, out)
	}
	if _, err := f.gw.Tree("alpha").Stat(context.Background(), "nb"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("nb in the tree: %v, want not found", err)
	}
}
