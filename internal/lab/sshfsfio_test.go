package lab

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParseFio reads fio 3.33's own JSON output: a write job, the
// verify_only replay that reads it back, and a replay whose data did not
// verify (fio printed a line of text before the JSON).
func TestParseFio(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w, err := parseFio(read("fio-write.json"), false)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fioResult{Bytes: 262144, BW: 262144000, Runtime: time.Millisecond}); w != want {
		t.Errorf("write: got %+v, want %+v", w, want)
	}
	if w.MBs() != 262.144 {
		t.Errorf("write: %g MB/s, want 262.144", w.MBs())
	}
	r, err := parseFio(read("fio-read.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (fioResult{Bytes: 262144, BW: 262144000, Runtime: time.Millisecond}); r != want {
		t.Errorf("read: got %+v, want %+v", r, want)
	}
	if _, err := parseFio(read("fio-verify-failed.json"), true); !errors.Is(err, errFio) || !strings.Contains(err.Error(), "error 84") {
		t.Errorf("failed verify: got %v, want errFio with error 84", err)
	}
	for name, out := range map[string]string{
		"empty":    "",
		"text":     "fio: pid=1, err=5/file:filesetup.c:1, func=open, error=Input/output error\n",
		"no jobs":  `{"jobs": []}`,
		"two jobs": `{"jobs": [{"jobname":"a","read":{},"write":{}},{"jobname":"b","read":{},"write":{}}]}`,
		"cut off":  `{"jobs": [{"jobname":"a",`,
		"no read":  `{"jobs": [{"jobname":"a","write":{"io_bytes":1}}]}`,
		"negative": `{"jobs": [{"jobname":"a","read":{"io_bytes":-1,"bw_bytes":1,"runtime":1}}]}`,
	} {
		if _, err := parseFio([]byte(out), true); !errors.Is(err, errFio) {
			t.Errorf("%s: got %v, want errFio", name, err)
		}
	}
}

// TestFioJobs: the four jobs on a file, their fio command lines, and
// the checks on a job's parameters.
func TestFioJobs(t *testing.T) {
	js := sshfsFioJobs("/m/f", 1<<20, 7, time.Minute)
	if len(js) != 4 {
		t.Fatalf("%d jobs, want 4", len(js))
	}
	flag := func(a []string, name string) string {
		for _, x := range a {
			if v, ok := strings.CutPrefix(x, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	want := []struct {
		op          fioOp
		rw, verify  string
		sameSeedAs  int
		differsFrom int
	}{
		{opWrite, "write", "do_verify", 0, 2},
		{opRead, "write", "verify_only", 0, 2},
		{opRandWrite, "randwrite", "do_verify", 2, 0},
		{opRandRead, "randwrite", "verify_only", 2, 0},
	}
	var args [][]string
	for i, j := range js {
		a, err := j.args()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, a)
		w := want[i]
		if j.Op != w.op || flag(a, "rw") != w.rw || flag(a, w.verify) == "" || flag(a, "verify") != "crc32c" {
			t.Errorf("job %d: %v %q", i, j.Op, a)
		}
		if flag(a, "bs") != "131072" || flag(a, "size") != "1048576" || flag(a, "filename") != "/m/f" ||
			flag(a, "runtime") != "60" || flag(a, "output-format") != "json" || flag(a, "fallocate") != "none" {
			t.Errorf("job %d: %q", i, a)
		}
	}
	for i, w := range want {
		if flag(args[i], "randseed") != flag(args[w.sameSeedAs], "randseed") || flag(args[i], "randseed") == flag(args[w.differsFrom], "randseed") {
			t.Errorf("job %d: seed %s; want that of job %d, not that of job %d", i, flag(args[i], "randseed"), w.sameSeedAs, w.differsFrom)
		}
	}
	// Other files get other seeds, so no two hold the same bytes.
	other := sshfsFioJobs("/m/g", 1<<20, 8, time.Minute)
	for i := range js {
		for k := range other {
			if js[i].Seed == other[k].Seed {
				t.Errorf("job %d of one file and job %d of the next share seed %d", i, k, js[i].Seed)
			}
		}
	}
	// A file smaller than 128 KiB is one block, as IOzone's record.
	if small := sshfsFioJobs("/m/s", 64<<10, 1, time.Minute); small[0].Block != 64<<10 {
		t.Errorf("64 KiB file: block %d, want 65536", small[0].Block)
	}
	for name, j := range map[string]fioJob{
		"size not a multiple": {Op: opWrite, File: "/f", Size: 3 << 16, Block: 1 << 17, Runtime: time.Minute},
		"size below block":    {Op: opWrite, File: "/f", Size: 1 << 16, Block: 1 << 17, Runtime: time.Minute},
		"no file":             {Op: opWrite, Size: 1 << 17, Block: 1 << 17, Runtime: time.Minute},
		"no runtime":          {Op: opWrite, File: "/f", Size: 1 << 17, Block: 1 << 17},
		"unknown op":          {Op: fioOp(9), File: "/f", Size: 1 << 17, Block: 1 << 17, Runtime: time.Minute},
	} {
		if _, err := j.args(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSizes: the full sweep is the paper's 64 KiB … 128 MiB doubling;
// the quick one is a few small sizes.
func TestSSHFSFioSizes(t *testing.T) {
	full := sshfsFioSizes(false)
	if len(full) != 12 || full[0] != 64<<10 || full[11] != 128<<20 {
		t.Errorf("full sizes %v", full)
	}
	quick := sshfsFioSizes(true)
	if len(quick) == 0 || len(quick) > 4 || slices.Max(quick) > 4<<20 {
		t.Errorf("quick sizes %v", quick)
	}
}

// TestSSHFSArgs: sshfs gets the paper's options that sshfs 3 takes, in
// the foreground, with strict host key checking, and never big_writes.
func TestSSHFSArgs(t *testing.T) {
	tg := sshTarget{Addr: "127.0.0.1:2222", User: "lab", KeyFile: "/k/key", KnownHosts: "/k/known_hosts"}
	a, err := sshfsArgs(tg, "/mnt/x")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(a, " ")
	for _, want := range []string{"-f ", "-p 2222", "-o cache=no,direct_io,sshfs_sync", "StrictHostKeyChecking=yes",
		"IdentityFile=/k/key", "UserKnownHostsFile=/k/known_hosts", "lab@127.0.0.1:/ /mnt/x"} {
		if !strings.Contains(line, want) {
			t.Errorf("sshfs %s: no %q", line, want)
		}
	}
	if strings.Contains(line, "big_writes") {
		t.Errorf("sshfs %s: big_writes, which sshfs 3 refuses", line)
	}
	for _, bad := range []sshTarget{
		{Addr: "127.0.0.1", User: "lab", KeyFile: "/k", KnownHosts: "/h"},
		{Addr: "127.0.0.1:22", User: "lab", KeyFile: "/k,x", KnownHosts: "/h"},
		{Addr: "127.0.0.1:22", User: "", KeyFile: "/k", KnownHosts: "/h"},
	} {
		if _, err := sshfsArgs(bad, "/mnt/x"); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestSSHFSFioRegistered: the experiment is listed, on qmpsu by default,
// and takes --tahoe.
func TestSSHFSFioRegistered(t *testing.T) {
	i := slices.IndexFunc(Experiments(), func(e Experiment) bool { return e.Name == "sshfs-fio" })
	if i < 0 {
		t.Fatal("sshfs-fio is not an experiment")
	}
	if e := Experiments()[i]; e.Scenario != "qmpsu" || e.Run == nil {
		t.Errorf("sshfs-fio: %+v", e)
	}
	if !MeasuresTahoe("sshfs-fio") || !MeasuresTahoe("write-read") || MeasuresTahoe("convergence") {
		t.Error("MeasuresTahoe is wrong")
	}
}

// TestFileRunLocal runs fileRun's four real fio jobs on a plain local
// directory standing in for a mount (stored is the file's size and
// modification time), then corrupts the file and sees the read fail.
func TestFileRunLocal(t *testing.T) {
	if _, err := exec.LookPath("fio"); err != nil {
		t.Fatal("fio is not installed (apt-get install fio): ", err)
	}
	dir := t.TempDir()
	sys := sftpSystem{name: "local", stored: func(ctx context.Context, name string) (string, int64, error) {
		fi, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return "", 0, nil
		}
		if err != nil {
			return "", 0, err
		}
		return fi.ModTime().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(fi.Size(), 10), fi.Size(), nil
	}}
	ctx := context.Background()
	const size = 512 << 10
	rs, err := fileRun(ctx, &Env{}, sys, dir, "f", size, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	for i, r := range rs {
		if r.err != nil || r.fio.Bytes != size || r.mbs <= 0 {
			t.Errorf("%v: %+v", fioOps[i], r)
		}
	}
	// A file cut short (its last block gone) fails the read.
	j := sshfsFioJobs(filepath.Join(dir, "f"), size, 1, 30*time.Second)[opRead]
	if err := os.Truncate(filepath.Join(dir, "f"), size-(128<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := runFio(ctx, j); err == nil {
		t.Error("reading a file cut short: no error")
	}
	if err := os.Truncate(filepath.Join(dir, "f"), size); err != nil { // the last block now zeros
		t.Fatal(err)
	}
	if _, err := runFio(ctx, j); !isVerifyError(err) {
		t.Errorf("reading a file whose last block is zeros: got %v, want a verify error", err)
	}
	// A corrupted block fails the read that matches the last write.
	f, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("corrupt"), 200<<10)
	f.Close()
	j = sshfsFioJobs(filepath.Join(dir, "f"), size, 1, 30*time.Second)[opRandRead]
	j.Size = size - (128 << 10) // the blocks before the zeros
	if _, err := runFio(ctx, j); !isVerifyError(err) {
		t.Errorf("reading a corrupted file: got %v, want a verify error", err)
	}
	// A write whose file never appears as stored is a failure after
	// the wait, not a result.
	never := sftpSystem{name: "never", stored: func(context.Context, string) (string, int64, error) { return "", 0, nil }}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, _, err := waitStored(cctx, never, "g", "", size, time.Now(), time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for a file never stored: got %v", err)
	}
	if _, _, err := waitStored(ctx, never, "g", "", size, time.Now(), 100*time.Millisecond); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past the limit for a file never stored: got %v, want the lab's error", err)
	}
	for _, c := range []struct{ elapsed, want time.Duration }{
		{0, storedPollMin}, {time.Second, storedPollMin}, {5 * time.Second, 100 * time.Millisecond}, {time.Hour, storedPollMax},
	} {
		if got := storedPoll(c.elapsed); got != c.want {
			t.Errorf("storedPoll(%s) = %s, want %s", c.elapsed, got, c.want)
		}
	}
}

// isVerifyError reports whether err is fio's verify failure (EILSEQ, 84).
func isVerifyError(err error) bool {
	return errors.Is(err, errFio) && strings.Contains(err.Error(), "error 84")
}
