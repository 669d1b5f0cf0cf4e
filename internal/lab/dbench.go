package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/report"
)

// The AoE/OpenNebula paper's experiment (seed 004, §V, Table III and Fig.
// 8): dbench with a growing number of clients on a file system on a
// network block device, its throughput and the storage server's CPU time.
// Here the file system is ext4 on a Quilt volume (nbdfuse and a loop
// device: the kernel has no NBD client), beside ext4 on nbdkit's file
// plugin (nbdtarget.go says how both are served).

// dbenchClients are the client counts of the full variant: the issue's
// 1–32 and the paper's 6, 12, 48, 128 and 256.
var dbenchClients = []int{1, 2, 4, 6, 8, 12, 16, 32, 48, 128, 256}

// dbenchQuickClients are the quick variant's.
var dbenchQuickClients = []int{1, 2, 4, 8, 16, 32}

// dbenchResult is what one dbench run reports.
type dbenchResult struct {
	MBs        float64 // throughput, MB/s as dbench computes it
	Clients    int
	MaxLatency time.Duration
}

// parseDbench reads dbench's final line ("Throughput 202.844 MB/sec  2
// clients  2 procs  max_latency=54.787 ms"); output without it, or whose
// client count is not want, is an error.
func parseDbench(out []byte, want int) (dbenchResult, error) {
	var r dbenchResult
	found := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[0] != "Throughput" || f[2] != "MB/sec" {
			continue
		}
		mbs, err := strconv.ParseFloat(f[1], 64)
		if err != nil || mbs < 0 {
			return r, fmt.Errorf("lab: dbench throughput %q", f[1])
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return r, fmt.Errorf("lab: dbench client count %q", f[3])
		}
		r = dbenchResult{MBs: mbs, Clients: n}
		for _, w := range f[4:] {
			if v, ok := strings.CutPrefix(w, "max_latency="); ok {
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return r, fmt.Errorf("lab: dbench max_latency %q", v)
				}
				r.MaxLatency = time.Duration(ms * float64(time.Millisecond))
			}
		}
		found = true
	}
	if !found {
		return r, fmt.Errorf("lab: no Throughput line in dbench's output: %q", clip(tail(out, 600)))
	}
	if r.Clients != want {
		return r, fmt.Errorf("lab: dbench ran %d clients, want %d", r.Clients, want)
	}
	return r, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// runDbench runs dbench with n clients for secs seconds in dir (its
// default load file, the NetBench client.txt), bounded by ctx and a
// generous timeout (dbench's warm-up and clean-up come on top of secs).
func runDbench(ctx context.Context, dir string, n, secs int) (dbenchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*3*time.Second+10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dbench", "-D", dir, "-t", strconv.Itoa(secs), strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return dbenchResult{}, fmt.Errorf("lab: dbench %d clients: %w: %s %s", n, err, clip(tail(stdout.Bytes(), 300)), clip(stderr.Bytes()))
	}
	return parseDbench(stdout.Bytes(), n)
}

// dbenchRow is one run: a system, a client count, what dbench and the CPU
// counters said.
type dbenchRow struct {
	System     string
	Clients    int
	MBs        float64
	MaxLatency time.Duration
	ServerCPU  time.Duration // the storage side's (nbdTarget.CPU)
	FuseCPU    time.Duration // nbdfuse's
	Flushes    int64         // FLUSHes completed, if the server counts them
	FlushTime  time.Duration // their time together
}

// dbenchReport makes the experiment's table (a row per run, then the
// total CPU per system) and its two plots: MB/s by client count for each
// system, and Quilt's MB/s as a percentage of nbdkit file's (the paper's
// Fig. 8 shows AoE's as a percentage of iSCSI's). Rows come in run order;
// the systems are Quilt, nbdkit file and any others.
func dbenchReport(scenario string, rows []dbenchRow, notes []string) (*report.Table, []*report.Plot) {
	tab := &report.Table{
		Title:   fmt.Sprintf("dbench on ext4 on an NBD volume, scenario %s", scenario),
		Columns: []string{"clients", "system", "MB/s", "max latency ms", "storage CPU s", "nbdfuse CPU s", "Quilt / nbdkit", "flushes", "mean flush ms"},
		Notes:   notes,
	}
	by := map[string]map[int]dbenchRow{}
	var systems []string
	var counts []int
	for _, r := range rows {
		if by[r.System] == nil {
			by[r.System] = map[int]dbenchRow{}
			systems = append(systems, r.System)
		}
		if !slices.Contains(counts, r.Clients) {
			counts = append(counts, r.Clients)
		}
		by[r.System][r.Clients] = r
	}
	tput := &report.Plot{Title: "dbench throughput on " + scenario, XLabel: "clients", YLabel: "MB/s", LogX: true}
	rel := &report.Plot{Title: "Quilt's dbench throughput as a percentage of nbdkit file's on " + scenario, XLabel: "clients", YLabel: "%", LogX: true}
	var relS report.Series
	relS.Name = "Quilt / nbdkit file"
	cpu := map[string]time.Duration{}
	for _, s := range systems {
		var ser report.Series
		ser.Name = s
		for _, n := range counts {
			r, ok := by[s][n]
			if !ok {
				continue
			}
			var ratio any
			q, qok := by["Quilt"][n]
			k, kok := by["nbdkit file"][n]
			if s == "Quilt" && qok && kok && k.MBs > 0 {
				ratio = fmt.Sprintf("%.3g%%", 100*q.MBs/k.MBs)
				relS.X = append(relS.X, float64(n))
				relS.Y = append(relS.Y, 100*q.MBs/k.MBs)
			}
			var flushes, flushMs any
			if r.Flushes > 0 {
				flushes, flushMs = r.Flushes, float64(r.FlushTime)/float64(r.Flushes)/float64(time.Millisecond)
			}
			tab.Add(n, s, r.MBs, float64(r.MaxLatency)/float64(time.Millisecond), r.ServerCPU.Seconds(), r.FuseCPU.Seconds(), ratio, flushes, flushMs)
			cpu[s] += r.ServerCPU
			ser.X = append(ser.X, float64(n))
			ser.Y = append(ser.Y, r.MBs)
		}
		tput.Series = append(tput.Series, ser)
	}
	for _, s := range systems {
		tab.Add("all", s+" (total)", nil, nil, cpu[s].Seconds(), nil, nil, nil, nil)
	}
	plots := []*report.Plot{tput}
	if len(relS.X) > 0 {
		rel.Series = []report.Series{relS}
		plots = append(plots, rel)
	}
	return tab, plots
}

// runDbenchExp mounts ext4 on a Quilt volume and on nbdkit's file plugin
// (with and without flushes), and for each client count runs dbench on
// each, rotating which goes first.
func runDbenchExp(ctx context.Context, env *Env) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab: dbench needs root (losetup, mount)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("lab: dbench needs FUSE: %w", err)
	}
	for _, p := range []string{"dbench", "nbdkit", "nbdfuse", "fusermount3", "losetup", "mkfs.ext4", "mount", "umount", "findmnt"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("lab: dbench needs %s (bench/lab-deps.sh installs it): %w", p, err)
		}
	}
	counts, secs, size := dbenchClients, 60, int64(16<<30)
	if env.Quick {
		counts, secs, size = dbenchQuickClients, 10, 4<<30
	}
	work, err := env.workDir("dbench")
	if err != nil {
		return err
	}
	load0 := loadAverage()
	env.logf("starting Quilt nodes; load average %s", load0)
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
	kn, err := startNbdkit(ctx, work, size, true)
	if err != nil {
		return err
	}
	defer kn.Close()
	targets := []*nbdTarget{q, k, kn}
	mounts := make([]*ext4Mount, len(targets))
	for i, t := range targets {
		m, err := mountExt4(ctx, filepath.Join(work, fmt.Sprintf("mnt%d", i)), t.URI)
		if err != nil {
			return fmt.Errorf("lab: ext4 on %s: %w", t.Name, err)
		}
		defer m.Unmount()
		mounts[i] = m
		env.logf("ext4 on %s (%s) mounted at %s", t.Name, t.URI, m.Dir)
	}
	var rows []dbenchRow
	for ci, n := range counts {
		for j := range targets {
			i := (j + ci) % len(targets)
			t, m := targets[i], mounts[i]
			if _, err := run(ctx, "sync", "-f", m.Dir); err != nil {
				return err
			}
			cpu0, f0 := t.CPU(), m.NbdfuseCPU()
			var fl0 int64
			var ft0 time.Duration
			if t.Flushes != nil {
				fl0, ft0 = t.Flushes()
			}
			r, err := runDbench(ctx, m.Dir, n, secs)
			if err != nil {
				return fmt.Errorf("lab: on %s: %w", t.Name, err)
			}
			row := dbenchRow{System: t.Name, Clients: n, MBs: r.MBs, MaxLatency: r.MaxLatency, ServerCPU: t.CPU() - cpu0, FuseCPU: m.NbdfuseCPU() - f0}
			if t.Flushes != nil {
				fl, ft := t.Flushes()
				row.Flushes, row.FlushTime = fl-fl0, ft-ft0
			}
			rows = append(rows, row)
			env.logf("%-11s %3d clients: %8.2f MB/s, max latency %8.1f ms, storage CPU %6.1f s, nbdfuse CPU %5.1f s, %d flushes; load %s",
				t.Name, n, r.MBs, float64(r.MaxLatency)/1e6, row.ServerCPU.Seconds(), row.FuseCPU.Seconds(), row.Flushes, loadAverage())
		}
	}
	load1 := loadAverage()
	sc := env.Scenario
	notes := []string{
		fmt.Sprintf("Scenario %s: %s. Quilt: a %s volume (4 MiB extents, 3-of-10, happiness %d) served over NBD from this process at the scenario's client host, the grid behind its links; nodes do not fsync (the lab's default).",
			sc.Name, sc.Description, report.SizeLabel(size), min(7, len(sc.Role("storage")))),
		fmt.Sprintf("nbdkit file: nbdkit %s's file plugin on a sparse %s file of the local disk (ext4), a FLUSH its fdatasync; nbdkit file, no flush: the same with FLUSH and FUA dropped (fua filter, fuamode=discard), as the nodes' fsyncs are: the page cache's figures. Over a Unix socket, no emulated link.", nbdkitVersion(), report.SizeLabel(size)),
		"Both: nbdfuse (libnbd) shows the export as a file, a loop device over it, mkfs.ext4 with its defaults, mounted with its defaults; one file system per system for the whole run.",
		fmt.Sprintf("dbench %s with its NetBench load file, -t %d (seconds of measurement after its warm-up), the client counts in turn, the systems taking turns to run first.", "4.0", secs),
		"Storage CPU s: CPU time (user and system) during the run of the storage side: for Quilt this process (ten nodes, the gateway and the NBD server), for nbdkit its process. nbdfuse CPU s: the client side's nbdfuse, the same program for all.",
		"Flushes: the NBD FLUSHes (and FUA writes) Quilt's server completed during the run (ext4's journal commits and dbench's fsyncs reach it through the loop device and nbdfuse), and their mean time; nbdkit does not count its own. Quilt / nbdkit: Quilt's MB/s as a percentage of nbdkit file's (with flushes), as the paper's Fig. 8 gives AoE's of iSCSI's.",
		fmt.Sprintf("Load average (1, 5, 15 min) at the start %s, at the end %s, on a machine of %d cores shared with other work.", load0, load1, runtime.NumCPU()),
	}
	tab, plots := dbenchReport(sc.Name, rows, notes)
	if _, _, err := report.Write(env.Out, "dbench", tab); err != nil {
		return err
	}
	for i, p := range plots {
		name := []string{"dbench-throughput.png", "dbench-relative.png"}[i]
		if err := p.Save(filepath.Join(env.Out, name)); err != nil {
			return err
		}
	}
	return nil
}

// nbdkitVersion is nbdkit's version, as it prints it.
func nbdkitVersion() string {
	out, err := exec.Command("nbdkit", "--version").Output()
	if err != nil {
		return "(unknown version)"
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return strings.TrimSpace(string(out))
	}
	return f[1]
}
