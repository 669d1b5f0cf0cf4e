package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/report"
)

// nbd-fio: fio's own NBD client (its nbd engine, libnbd) on a Quilt volume
// and on nbdkit's file plugin (nbdtarget.go), no file system between:
// sequential 1 MiB writes over the measured area (which also fill it, so
// that reads read stored data, not a volume's never-written zeros), 1 MiB
// sequential reads, 4 KiB random writes and 4 KiB random reads.

// nbdFioJob is one fio job of nbd-fio.
type nbdFioJob struct {
	Name  string // "seq write", …
	RW    string // fio's rw
	Block int64
}

// nbdFioJobs are run in this order on each system.
var nbdFioJobs = []nbdFioJob{
	{"seq write", "write", 1 << 20},
	{"seq read", "read", 1 << 20},
	{"rand write", "randwrite", 4 << 10},
	{"rand read", "randread", 4 << 10},
}

// nbdFioArgs is fio's command line for job j on uri over size bytes,
// bounded by runtime, iodepth requests in flight on one connection. A
// write job ends with a FLUSH (end_fsync), inside the time fio counts,
// so that its figure is of data made durable, not of data in a write-back
// journal.
func nbdFioArgs(j nbdFioJob, uri string, size int64, runtime time.Duration, iodepth int) ([]string, error) {
	if size < j.Block || size%j.Block != 0 || runtime < time.Second || iodepth < 1 {
		return nil, fmt.Errorf("lab: nbd-fio %s: size %d (a multiple of %d), runtime %s, iodepth %d", j.Name, size, j.Block, runtime, iodepth)
	}
	a := []string{
		"--name=" + j.RW,
		"--ioengine=nbd",
		"--uri=" + uri,
		"--rw=" + j.RW,
		"--bs=" + strconv.FormatInt(j.Block, 10),
		"--size=" + strconv.FormatInt(size, 10),
		"--iodepth=" + strconv.Itoa(iodepth),
		"--randseed=1",
		"--runtime=" + strconv.Itoa(int(runtime/time.Second)),
		"--output-format=json",
	}
	if j.RW == "write" || j.RW == "randwrite" {
		a = append(a, "--end_fsync=1")
	}
	return a, nil
}

// runNbdFio runs one job and returns its figures.
func runNbdFio(ctx context.Context, j nbdFioJob, uri string, size int64, rt time.Duration, iodepth int) (fioResult, error) {
	args, err := nbdFioArgs(j, uri, size, rt, iodepth)
	if err != nil {
		return fioResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, rt+fioGrace)
	defer cancel()
	cmd := exec.CommandContext(ctx, "fio", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fioResult{}, fmt.Errorf("%w: %s on %s: %v (%v)", errFio, j.Name, uri, ctx.Err(), runErr)
	}
	read := j.RW == "read" || j.RW == "randread"
	res, err := parseFio(stdout.Bytes(), read)
	if err != nil {
		return fioResult{}, fmt.Errorf("%s on %s: %w: %s", j.Name, uri, err, clip(stderr.Bytes()))
	}
	if runErr != nil {
		return fioResult{}, fmt.Errorf("%w: %s on %s: %v: %s", errFio, j.Name, uri, runErr, clip(stderr.Bytes()))
	}
	return res, nil
}

// runNbdFioExp runs nbd-fio's jobs on a Quilt volume and on nbdkit file.
func runNbdFioExp(ctx context.Context, env *Env) error {
	if _, err := exec.LookPath("fio"); err != nil {
		return fmt.Errorf("lab: nbd-fio needs fio: %w", err)
	}
	if _, err := exec.LookPath("nbdkit"); err != nil {
		return fmt.Errorf("lab: nbd-fio needs nbdkit: %w", err)
	}
	size, rt, iodepth := int64(1<<30), 60*time.Second, 8
	if env.Quick {
		size, rt = 128<<20, 20*time.Second
	}
	work, err := env.workDir("nbd-fio")
	if err != nil {
		return err
	}
	load0 := loadAverage()
	q, err := startQuiltNBD(ctx, env, filepath.Join(work, "quilt"), size)
	if err != nil {
		return err
	}
	defer q.Close()
	k, err := startNbdkit(ctx, work, size, false)
	if err != nil {
		return err
	}
	defer k.Close()
	sc := env.Scenario
	tab := &report.Table{
		Title:   fmt.Sprintf("fio's nbd engine on a Quilt volume and on nbdkit file, scenario %s", sc.Name),
		Columns: []string{"job", "block", "system", "MB/s", "IOPS", "bytes moved", "fio runtime s", "storage CPU s"},
	}
	for _, j := range nbdFioJobs {
		for _, t := range []*nbdTarget{q, k} {
			cpu0 := t.CPU()
			r, err := runNbdFio(ctx, j, t.URI, size, rt, iodepth)
			if err != nil {
				return err
			}
			cpu := t.CPU() - cpu0
			iops := 0.0
			if r.Runtime > 0 {
				iops = float64(r.Bytes/j.Block) / r.Runtime.Seconds()
			}
			tab.Add(j.Name, report.SizeLabel(j.Block), t.Name, r.MBs(), iops, r.Bytes, r.Runtime.Seconds(), cpu.Seconds())
			env.logf("%-10s %-11s %9.2f MB/s %9.0f IOPS (%d bytes in %s), storage CPU %.1f s; load %s", j.Name, t.Name, r.MBs(), iops, r.Bytes, r.Runtime, cpu.Seconds(), loadAverage())
		}
	}
	tab.Notes = []string{
		fmt.Sprintf("Scenario %s: %s. Quilt: a %s volume (4 MiB extents, 3-of-10, happiness %d) served over NBD from this process at the scenario's client host; nodes do not fsync (the lab's default).",
			sc.Name, sc.Description, report.SizeLabel(size), min(7, len(sc.Role("storage")))),
		fmt.Sprintf("nbdkit file: nbdkit %s's file plugin on a sparse file of the local disk (ext4), a FLUSH its fdatasync, over a Unix socket.", nbdkitVersion()),
		fmt.Sprintf("fio's nbd engine (libnbd), one connection, iodepth %d, over the first %s of each device, each job bounded to %s (fio's runtime: a job that has not covered the area by then reports what it moved). Jobs in order: sequential 1 MiB writes (which fill the area), sequential 1 MiB reads, random 4 KiB writes, random 4 KiB reads; writes end with a FLUSH inside fio's time (end_fsync=1).",
			iodepth, report.SizeLabel(size), rt),
		"Storage CPU s: CPU time (user and system) of the storage side during the job: this process for Quilt (ten nodes, the gateway, the NBD server), the nbdkit process for nbdkit. MB/s = 10^6 bytes per second.",
		fmt.Sprintf("Load average (1, 5, 15 min) at the start %s, at the end %s, on a machine of %d cores shared with other work.", load0, loadAverage(), runtime.NumCPU()),
	}
	_, _, err = report.Write(env.Out, "nbd-fio", tab)
	return err
}
