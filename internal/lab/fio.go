package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fioOp is one of the four fio jobs sshfs-fio runs on each file, after
// IOzone's write, read, random write and random read.
type fioOp int

const (
	opWrite     fioOp = iota // sequential write of a new file
	opRead                   // sequential read of it, checking every block
	opRandWrite              // random-offset rewrite of every block of it
	opRandRead               // random-offset read of it, checking every block
)

var fioOps = []fioOp{opWrite, opRead, opRandWrite, opRandRead}

func (o fioOp) String() string {
	switch o {
	case opWrite:
		return "write"
	case opRead:
		return "read"
	case opRandWrite:
		return "random write"
	case opRandRead:
		return "random read"
	}
	return fmt.Sprintf("fioOp(%d)", int(o))
}

// writes reports whether o writes the file.
func (o fioOp) writes() bool { return o == opWrite || o == opRandWrite }

// fioJob is one run of fio on one file.
type fioJob struct {
	Op    fioOp
	File  string // path of the file
	Size  int64  // bytes of the file, a multiple of Block
	Block int64  // bytes per read or write (IOzone's record)
	// Seed seeds fio's random offsets and the data it writes. A read
	// replays the write with the same seed (fio's verify_only), so it
	// reads the blocks in the order that write wrote them: give the read
	// the seed of the write it follows.
	Seed uint64
	// Runtime bounds the job (fio's runtime): a job that has not moved
	// Size bytes by then stops, and its result says how many it moved.
	Runtime time.Duration
}

// args returns fio's command line for j, JSON output on stdout. Writes
// put a crc32c and the block's offset in every block (verify=crc32c,
// do_verify=0: not read back by the write itself); reads are fio's
// verify_only replay of the write with the same seed, sequential or
// random as that write was, and check each block's header and checksum:
// a block that comes back corrupted, from another offset, or missing
// (zeros) fails the job. A whole block of an earlier version of the file
// would pass: it carries a valid checksum and the same offset (fio skips
// its sequence-number check in verify_only). No preallocation (fallocate=none: sshfs
// has none), plain read(2)/write(2) (psync), one file.
func (j fioJob) args() ([]string, error) {
	if j.File == "" || j.Block <= 0 || j.Size < j.Block || j.Size%j.Block != 0 {
		return nil, fmt.Errorf("lab: fio job on %q: size %d must be a positive multiple of the block %d", j.File, j.Size, j.Block)
	}
	if j.Runtime < time.Second {
		return nil, fmt.Errorf("lab: fio job on %q: runtime %s: want at least 1s", j.File, j.Runtime)
	}
	rw := "write"
	if j.Op == opRandWrite || j.Op == opRandRead {
		rw = "randwrite"
	}
	a := []string{
		"--name=" + strings.ReplaceAll(j.Op.String(), " ", "-"),
		"--filename=" + j.File,
		"--rw=" + rw,
		"--bs=" + strconv.FormatInt(j.Block, 10),
		"--size=" + strconv.FormatInt(j.Size, 10),
		"--ioengine=psync",
		"--fallocate=none",
		"--randseed=" + strconv.FormatUint(j.Seed, 10),
		"--verify=crc32c",
		"--verify_state_save=0", // no state files in the working directory
		"--runtime=" + strconv.Itoa(int(j.Runtime/time.Second)),
		"--output-format=json",
	}
	switch j.Op {
	case opWrite, opRandWrite:
		a = append(a, "--do_verify=0")
	case opRead, opRandRead:
		a = append(a, "--verify_only=1")
	default:
		return nil, fmt.Errorf("lab: fio job: unknown operation %d", int(j.Op))
	}
	return a, nil
}

// fioResult is what one fio job reports for its direction.
type fioResult struct {
	Bytes   int64         // bytes moved
	BW      float64       // bytes per second, as fio computed it
	Runtime time.Duration // fio's runtime of the job (millisecond resolution)
}

// MBs is the result's throughput in MB/s (10^6 bytes per second).
func (r fioResult) MBs() float64 { return r.BW / 1e6 }

var errFio = errors.New("lab: fio")

// parseFio reads fio's JSON output (--output-format=json) of a single
// job and returns the figures of its reads (read) or its writes. Text
// before the JSON (fio prints some warnings on stdout) is skipped. A
// job that reports an error, or more or fewer than one job, is an error
// wrapping errFio.
func parseFio(out []byte, read bool) (fioResult, error) {
	i := bytes.IndexByte(out, '{')
	if i < 0 {
		return fioResult{}, fmt.Errorf("%w: no JSON in its output: %q", errFio, clip(out))
	}
	var doc struct {
		Jobs []struct {
			Name  string       `json:"jobname"`
			Error int          `json:"error"`
			Read  *fioDirStats `json:"read"`
			Write *fioDirStats `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out[i:], &doc); err != nil {
		return fioResult{}, fmt.Errorf("%w: output: %v", errFio, err)
	}
	if len(doc.Jobs) != 1 {
		return fioResult{}, fmt.Errorf("%w: %d jobs in its output, want 1", errFio, len(doc.Jobs))
	}
	j := doc.Jobs[0]
	if j.Error != 0 {
		return fioResult{}, fmt.Errorf("%w: job %s: error %d (%s)", errFio, j.Name, j.Error, syscall.Errno(j.Error))
	}
	d := j.Write
	if read {
		d = j.Read
	}
	if d == nil {
		return fioResult{}, fmt.Errorf("%w: job %s: no %s figures", errFio, j.Name, map[bool]string{true: "read", false: "write"}[read])
	}
	if d.IOBytes < 0 || d.BWBytes < 0 || d.Runtime < 0 {
		return fioResult{}, fmt.Errorf("%w: job %s: negative figures", errFio, j.Name)
	}
	return fioResult{Bytes: d.IOBytes, BW: float64(d.BWBytes), Runtime: time.Duration(d.Runtime) * time.Millisecond}, nil
}

// fioDirStats are the figures fio reports for one direction of a job.
type fioDirStats struct {
	IOBytes int64 `json:"io_bytes"`
	BWBytes int64 `json:"bw_bytes"`
	Runtime int64 `json:"runtime"` // milliseconds
}

// fioGrace is how long fio may take beyond a job's Runtime (opening and
// closing the file, fio's own start) before it is killed.
const fioGrace = 2 * time.Minute

// runFio runs the job with the fio program, bounded by its Runtime plus
// fioGrace and by ctx (fio and anything it started are killed then), and
// returns its figures. A read whose data does not verify is an error.
func runFio(ctx context.Context, j fioJob) (fioResult, error) {
	args, err := j.args()
	if err != nil {
		return fioResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, j.Runtime+fioGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fioResult{}, fmt.Errorf("%w: %s of %s: %v (%v)", errFio, j.Op, j.File, ctx.Err(), runErr)
	}
	res, err := parseFio(stdout.Bytes(), !j.Op.writes())
	if err != nil {
		return fioResult{}, fmt.Errorf("%s of %s: %w: %s", j.Op, j.File, err, clip(stderr.Bytes()))
	}
	if runErr != nil {
		return fioResult{}, fmt.Errorf("%w: %s of %s: %v: %s", errFio, j.Op, j.File, runErr, clip(stderr.Bytes()))
	}
	return res, nil
}

// clip shortens a program's output for an error message.
func clip(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
