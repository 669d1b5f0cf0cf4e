package sftp_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/tree/posixtest"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The sshfs tests mount the fixture's server with the real sshfs, a
// process of its own that the test starts and ends by its PID; the test
// process serves SFTP and uses the mount with plain system calls. Each
// mount has a watchdog that unmounts it lazily and ends sshfs if a test
// hangs, so a stuck mount fails the test instead of hanging.

// sshfsOptions are the Tahoe-LAFS paper's mount options that sshfs 3
// takes: no caching of directories and attributes by sshfs (cache=no),
// direct I/O (every read and write goes to the server, not the page
// cache), synchronous writes (sshfs_sync). The paper's big_writes is an
// option of FUSE 2 that sshfs 3 refuses ("unknown option"); FUSE 3 always
// writes in pieces up to max_write.
const sshfsOptions = "cache=no,direct_io,sshfs_sync"

// needSSHFS fails (never skips) the test when sshfs cannot mount here.
func needSSHFS(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("sshfs tests need /dev/fuse: %v (load the fuse module, or give the container --device /dev/fuse)", err)
	}
	for _, p := range []struct{ bin, pkg string }{{"sshfs", "sshfs"}, {"ssh", "openssh-client"}, {"fusermount3", "fuse3"}} {
		if _, err := exec.LookPath(p.bin); err != nil {
			t.Fatalf("sshfs tests need %s (apt-get install %s): %v", p.bin, p.pkg, err)
		}
	}
}

// addKeyUser makes bucket and a user chrooted to it with a new key, and
// returns the key's file (OpenSSH form, mode 0600), for ssh's IdentityFile.
func (f *fixture) addKeyUser(t *testing.T, name, bucket string) string {
	t.Helper()
	if err := f.gw.CreateBucket(context.Background(), bucket, ""); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	k, err := sftp.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(f.users)
	if err := os.WriteFile(f.users, append(old, sftp.KeyLine(name, bucket, k.PublicKey())+"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyFile
}

// sshfsMount mounts user's bucket with sshfs (in the foreground, as a
// child of the test) on a temporary directory until the test ends, with
// options opts besides the ones that log in. After limit, the watchdog
// unmounts it lazily, ends sshfs, and fails the test.
func (f *fixture) sshfsMount(t *testing.T, user, keyFile, opts string, limit time.Duration) string {
	t.Helper()
	needSSHFS(t)
	hk, err := sftp.LoadOrCreateKey(filepath.Join(f.dir, "sftp-host-key"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	kh := filepath.Join(tmp, "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(f.addr)}, hk.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(tmp, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(f.addr, ":")
	var stderr bytes.Buffer
	cmd := exec.Command("sshfs", user+"@"+host+":/", mnt, "-f", "-p", port, "-F", "/dev/null",
		"-o", "BatchMode=yes,IdentitiesOnly=yes,StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile="+kh+",IdentityFile="+keyFile,
		"-o", opts)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	unmount := func(lazy bool) {
		args := []string{"-u", mnt}
		if lazy {
			args = []string{"-u", "-z", mnt}
		}
		if out, err := exec.Command("fusermount3", args...).CombinedOutput(); err != nil && isMount(mnt) {
			t.Logf("fusermount3 %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Wait for the mount, or for sshfs to give up.
	deadline := time.After(20 * time.Second)
	for !isMount(mnt) {
		select {
		case err := <-exited:
			t.Fatalf("sshfs exited before mounting: %v: %s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			<-exited
			unmount(true)
			t.Fatalf("sshfs did not mount in 20 s: %s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop := make(chan struct{})
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		select {
		case <-stop:
		case <-time.After(limit):
			t.Errorf("the test still runs after %v: unmounting %s lazily and ending sshfs", limit, mnt)
			unmount(true)
			cmd.Process.Kill()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-watchdog
		unmount(false)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("sshfs still runs 10 s after unmounting %s: ending it", mnt)
			cmd.Process.Kill()
			unmount(true)
			<-exited
		}
		if isMount(mnt) {
			unmount(true)
		}
	})
	return mnt
}

// isMount reports whether dir is a FUSE mount.
func isMount(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == 0x65735546
}

// sshfsDifferences is where an sshfs mount of the server differs from a
// local directory in posixtest's table, and why (docs/mounts.md).
var sshfsDifferences = posixtest.Differences{
	"RenameDirOverNonEmptyDir": {Err: syscall.EPERM,
		Why: "SFTP v3 has no status for a directory not empty: the server answers SSH_FX_FAILURE with the message, and sshfs maps that to EPERM"},
	"RenameNoReplaceNew": {Err: syscall.EINVAL,
		Why: "sshfs refuses every rename flag (SFTP has no such rename); onto an existing name the kernel answers EEXIST itself"},
	"RenameExchange": {Err: syscall.EINVAL, Why: "sshfs refuses every rename flag (SFTP has no such rename)"},
	"ReadAfterUnlink": {Err: io.EOF,
		Why: "the server reads by name, one stream while reads go forward: a read far away opens another, which finds no file (SSH_FX_NO_SUCH_FILE), and sshfs returns a read of 0 bytes"},
	"ReadAfterReplace": {Err: io.EOF,
		Why: "the server reads by name: a read far away opens a stream of the replacing version, which is shorter, and sshfs returns a read of 0 bytes"},
	"UnlinkOpenFileAttrs": {Err: syscall.ENOENT,
		Why: "pkg/sftp's request server turns fsetstat and fstat of a handle into setstat and stat of the path it was opened with, which is gone"},
	"FtruncateAfterRename": {Err: syscall.ENOENT,
		Why: "pkg/sftp's request server turns fsetstat of a handle into setstat of the path it was opened with, which the rename took away"},
	"MkdirMode": {Err: posixtest.ErrDiffers,
		Why: "pkg/sftp's request server drops the attributes of a mkdir: a new directory is 0755 until a chmod"},
	"UtimensNanoseconds": {Err: posixtest.ErrDiffers,
		Why: "SFTP v3 carries times in whole seconds, and sshfs sends no mtime@quilt-grid.org"},
	"Symlink":  {Err: syscall.ENOTSUP, Why: "the tree has no symbolic links: the server answers SSH_FX_OP_UNSUPPORTED"},
	"HardLink": {Err: syscall.ENOTSUP, Why: "the tree has no hard links: the server answers hardlink@openssh.com with SSH_FX_OP_UNSUPPORTED"},
	"Fifo":     {Err: syscall.EPERM, Why: "sshfs makes nothing but regular files (mknod of a FIFO, device or socket is EPERM)"},
}

// TestSFTPSshfsPOSIX runs posixtest's table of POSIX behaviours through
// the real sshfs, mounted with the Tahoe-LAFS paper's options on the
// server of a gateway bucket on a five-node test grid: the mount does as
// a local directory does, except in the cases sshfsDifferences names.
func TestSFTPSshfsPOSIX(t *testing.T) {
	needSSHFS(t)
	f := newFixture(t)
	key := f.addKeyUser(t, "u", "posix")
	mnt := f.sshfsMount(t, "u", key, sshfsOptions, 3*time.Minute)
	posixtest.Run(t, mnt, sshfsDifferences)
}

// TestSFTPSshfsOptions: the installed sshfs refuses the Tahoe-LAFS
// paper's big_writes (a FUSE 2 option; FUSE 3 always writes big), which
// is why sshfsOptions leaves it out, and takes the rest. If an sshfs
// takes big_writes again, this fails, and sshfsOptions should have it.
func TestSFTPSshfsOptions(t *testing.T) {
	needSSHFS(t)
	mnt := t.TempDir()
	// Port 1 on 127.0.0.1: nothing listens, so an sshfs that takes the
	// options fails later, on connecting, with another message.
	try := func(opts string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sshfs", "nobody@127.0.0.1:/", mnt, "-p", "1", "-F", "/dev/null",
			"-o", "BatchMode=yes,ConnectTimeout=5", "-o", opts).CombinedOutput()
		if err == nil {
			t.Fatalf("sshfs -o %s mounted a server that does not exist", opts)
		}
		return string(out)
	}
	if out := try("big_writes"); !strings.Contains(out, "unknown option") {
		t.Errorf("sshfs -o big_writes: %q, want an unknown option", out)
	}
	if out := try(sshfsOptions); strings.Contains(out, "unknown option") {
		t.Errorf("sshfs -o %s: %q", sshfsOptions, out)
	}
	if isMount(mnt) {
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
		t.Fatal("sshfs mounted")
	}
}
