// Package lab is layer 6 of Quilt: it runs the papers' experiments on a
// grid started in this process under an emulated network (a scenario of
// package scenario, carried out by package linkemu) and writes what it
// measured as CSV, Markdown tables and PNG plots (package report).
//
// The experiments, each after a figure or table of one of the papers
// Quilt comes from:
//
//	write-read          Tahoe-LAFS on community clouds, Figs. 14–19: sequential
//	                    write and read throughput vs file size, from the best- and
//	                    the worst-connected client; optionally Tahoe-LAFS beside us
//	put-get-del         Swift over KREONET, Figs. 6–11: PUT/GET/DEL operations per
//	                    second vs object size and latency added between gateway
//	                    and storage
//	swift-bench         the same paper's Experiment II (Figs. 9–11) with swift-bench
//	                    itself as the load, against Quilt's Swift API and against
//	                    OpenStack Swift from PyPI behind the same links
//	convergence         BaseFS, Figs. 9–15: time for a configuration write to reach
//	                    all of 30 nodes vs delay, loss, reordering and bandwidth
//	parallel-transfers  ownCloud/StoRM, Tables 3–7 and Figs. 3–4: Np parallel workers
//	                    of random uploads and downloads through WebDAV and S3
//	                    multipart (the paper's ownCloud and StoRM), beside rclone
//	                    serve webdav on a local disk; mean time per size, efficiency
//	cfs-mount           BaseFS, section 5.2, Figs. 20–21: cp -r of /etc into the
//	                    configuration filesystem's FUSE mount, then a first and a
//	                    second read, round after round, beside a local directory
//	sshfs-fio           Tahoe-LAFS on community clouds, §5 and Figs. 14–16: fio (for
//	                    IOzone) through an sshfs mount of Quilt's SFTP server with
//	                    the paper's options; optionally Tahoe-LAFS's own SFTP front end
//	dbench              AoE/OpenNebula, Table III and Fig. 8: dbench with 1 to 256 clients
//	                    on ext4 on a Quilt volume over NBD (nbdfuse, a loop device),
//	                    beside nbdkit's file plugin; MB/s and the storage side's CPU
//	nbd-fio             fio's nbd engine on a Quilt volume and on nbdkit's file plugin:
//	                    4 KiB random and 1 MiB sequential reads and writes
//
// Production code paths run unchanged: the lab only gives nodes an
// emulated memberlist transport, listeners it registers, and dial
// functions that pass through the emulated links.
package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// Env is what an experiment runs with.
type Env struct {
	// Scenario is the network; nil means the experiment's default.
	Scenario *scenario.Scenario
	Quick    bool   // the small variant, minutes on two cores
	Out      string // results: CSV, Markdown and PNG files (created)
	Work     string // scratch space for node data (created; removed by the caller)
	Log      io.Writer
	Seed     int64
	// Tahoe, if set, is the path of a tahoe program: write-read and
	// sshfs-fio then also measure Tahoe-LAFS behind the same links.
	Tahoe string
	// TahoeFoolscap runs that Tahoe-LAFS on Foolscap, as the paper's
	// did, rather than 1.20's HTTPS storage protocol.
	TahoeFoolscap bool
	// SwiftVenv is the venv holding OpenStack Swift and swift-bench for
	// the swift-bench experiment; "" means openstack.DefaultVenv. It is
	// made (pip install) if missing.
	SwiftVenv string
	// WaitAll makes write-read's Quilt writes wait for every share, as
	// before uploads were acknowledged at happiness (the comparison of
	// the two; object.Options.AckAtHappy).
	WaitAll bool
	// SegmentSize is the segment size of write-read's Quilt files; 0:
	// codec.DefaultParams' (1 MiB).
	SegmentSize int
	// Helper, if set, runs an upload helper on a storage node for
	// write-read: the node's name, or "best-node" for the one with the
	// fastest uplink. The writes of client HelperFor go through it.
	Helper string
	// HelperFor is the client whose writes go through Helper; default
	// "worst".
	HelperFor string
	// Sizes, if set, are write-read's file sizes instead of its
	// variant's; Clients, if set, the clients it runs from instead of
	// every client of the scenario.
	Sizes   []int64
	Clients []string
	// Runs, if above 0, is how many times write-read measures each case
	// instead of its variant's (3, --quick 1).
	Runs int
	// Trace makes write-read log, for each of Quilt's reads of more than
	// one segment, what each holder sent and when (object.HolderRead).
	Trace bool
	// Scale multiplies parallel-transfers' file sizes (the paper's go to
	// 1 GB); 0 means 1, or 0.01 with Quick.
	Scale float64
	// Doors are parallel-transfers' ways in: "webdav", "s3", "object"
	// (Quilt's, mixed at random in each case) and "rclone" (rclone serve
	// webdav on a local disk, the reference); nil means webdav, s3 and
	// rclone.
	Doors []string
	// CaseTime, if not 0, is how long each of parallel-transfers' Np
	// cases runs instead of its variant's (20 s quick, 60 s full); the
	// test of the whole experiment shortens it.
	CaseTime time.Duration
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// Experiment is one of the lab's experiments.
type Experiment struct {
	Name     string
	Title    string
	Scenario string // the default scenario
	Run      func(ctx context.Context, env *Env) error
}

var experiments = []Experiment{
	{"write-read", "Sequential write and read throughput vs file size (Tahoe-LAFS paper, Figs. 14–19)", "qmpsu", runWriteRead},
	{"put-get-del", "PUT/GET/DEL operations per second vs object size and added latency (Swift/KREONET paper, Figs. 6–11)", "kreonet", runPutGetDel},
	{"swift-bench", "swift-bench PUT/GET/DEL rates vs object size and added latency, Quilt beside OpenStack Swift (Swift/KREONET paper, Experiment II, Figs. 9–11)", "kreonet", runSwiftBench},
	{"convergence", "Time for a configuration write to reach all of 30 nodes (BaseFS paper, Figs. 9–15)", "lan", runConvergence},
	{"parallel-transfers", "Np parallel workers of random uploads and downloads through WebDAV and S3 multipart, beside rclone serve webdav on a local disk (ownCloud/StoRM paper, Tables 3–7, Figs. 3–4)", "lan", runParallel},
	{"cfs-mount", "cp -r /etc into the cfs FUSE mount, then two reads, beside a local directory (BaseFS paper, Figs. 20–21)", "lan", runCFSMount},
	{"sshfs-fio", "fio write/read/random write/random read through an sshfs mount of the SFTP server (Tahoe-LAFS paper, §5, Figs. 14–16)", "qmpsu", runSSHFSFio},
	{"nbd-fio", "fio's nbd engine on a Quilt volume beside nbdkit file: 4 KiB random and 1 MiB sequential reads and writes", "lan", runNbdFioExp},
	{"dbench", "dbench on ext4 on a Quilt volume over NBD, beside nbdkit file: MB/s and storage CPU vs clients (AoE/OpenNebula paper, Table III, Fig. 8)", "lan", runDbenchExp},
}

// tahoeExperiments are the experiments that can measure Tahoe-LAFS
// beside Quilt (Env.Tahoe).
var tahoeExperiments = []string{"write-read", "sshfs-fio"}

// MeasuresTahoe reports whether the experiment called name measures
// Tahoe-LAFS when Env.Tahoe is set.
func MeasuresTahoe(name string) bool { return slices.Contains(tahoeExperiments, name) }

// Experiments lists the lab's experiments.
func Experiments() []Experiment { return slices.Clone(experiments) }

// Run runs the experiment called name in env, filling in env's defaults.
func Run(ctx context.Context, name string, env *Env) error {
	i := slices.IndexFunc(experiments, func(e Experiment) bool { return e.Name == name })
	if i < 0 {
		var names []string
		for _, e := range experiments {
			names = append(names, e.Name)
		}
		return fmt.Errorf("lab: no experiment %q (there are: %v)", name, names)
	}
	ex := experiments[i]
	if env.Scenario == nil {
		sc, err := scenario.Builtin(ex.Scenario)
		if err != nil {
			return err
		}
		env.Scenario = sc
	}
	for _, d := range []string{env.Out, env.Work} {
		if d == "" {
			return fmt.Errorf("lab: Env needs Out and Work directories")
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	env.logf("%s on scenario %s%s: results in %s", ex.Name, env.Scenario.Name, map[bool]string{true: " (quick)"}[env.Quick], env.Out)
	start := time.Now()
	err := ex.Run(ctx, env)
	env.logf("%s done in %s", ex.Name, time.Since(start).Round(time.Second))
	return err
}

// workDir makes a fresh scratch directory under env.Work.
func (e *Env) workDir(name string) (string, error) {
	d := filepath.Join(e.Work, name)
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	return d, os.MkdirAll(d, 0o755)
}
