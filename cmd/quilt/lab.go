package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/quilt-grid/quilt/internal/lab"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
	"github.com/quilt-grid/quilt/internal/lab/tahoe"
)

func runLab(ctx context.Context, args []string) error {
	fs := newFlagSet("lab", `Usage: quilt lab run EXPERIMENT [--scenario S] [--quick] [--out DIR]
       quilt lab merge write-read [--scenario S] [--out DIR] DIR...
       quilt lab list
       quilt lab scenario NAME|FILE

Runs one of the papers' experiments on a grid started in this process
under an emulated network, and writes CSV, Markdown and PNG results to
--out. 'quilt lab list' shows the experiments and scenarios; 'quilt lab
scenario NAME' prints a scenario in the file format --scenario reads.
'quilt lab merge write-read' pools the results of several write-read
runs (the long variants' cases run side by side, each with --runs 1)
into one table: the median and quartiles of a case's runs.`)
	sc := fs.String("scenario", "", "network: a built-in name (qmpsu, azure, kreonet, lan) or a scenario file; default: the experiment's")
	quick := fs.Bool("quick", false, "the small variant: a few minutes on two cores")
	segSize := fs.String("segment-size", "", "write-read: segment size of Quilt's files (default 1MiB)")
	runs := fs.Int("runs", 0, "write-read: runs of each case (default 3, --quick 1)")
	sizes := fs.String("sizes", "", "write-read: comma-separated file sizes (such as 4MiB,32MiB) instead of the variant's")
	clients := fs.String("clients", "", "write-read: comma-separated clients of the scenario to run from (default: every client)")
	trace := fs.Bool("trace", false, "write-read: log what each holder sent to each of Quilt's reads of more than one segment")
	waitAll := fs.Bool("wait-all", false, "write-read: Quilt's writes wait for every share instead of returning at happiness (the behaviour before early acknowledgement, for comparison)")
	helper := fs.String("helper", "", "write-read: run an upload helper on this storage node (its name, or best-node: the one with the fastest uplink) and send the writes of client --helper-for through it")
	helperFor := fs.String("helper-for", "worst", "write-read with --helper: the client whose writes go through the helper")
	out := fs.String("out", "", "results directory (default lab-results/EXPERIMENT)")
	work := fs.String("work", "", "scratch directory for node data (default: a temporary one, removed after)")
	withTahoe := fs.Bool("tahoe", false, "write-read, sshfs-fio: also measure Tahoe-LAFS (installed from PyPI into a venv) behind the same links")
	foolscap := fs.Bool("tahoe-foolscap", false, "write-read, sshfs-fio: run that Tahoe-LAFS on Foolscap (as in the paper) instead of its HTTPS storage protocol")
	venv := fs.String("tahoe-venv", "", "venv holding tahoe-lafs (default ~/.cache/quilt-bench/tahoe-venv; made if missing)")
	swiftVenv := fs.String("swift-venv", "", "swift-bench: venv holding OpenStack Swift and swift-bench (default ~/.cache/quilt-bench/swift-venv-VERSIONS; made if missing)")
	scale := fs.Float64("scale", 0, "parallel-transfers: multiply the paper's 100 kB … 1 GB sizes (default 1, --quick 0.01)")
	doors := fs.String("doors", "", "parallel-transfers: comma-separated doors of webdav, s3, object and rclone (default webdav,s3,rclone)")
	seed := fs.Int64("seed", 1, "random seed of the emulated network and the workloads")
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	switch fs.Arg(0) {
	case "list":
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "EXPERIMENT\tSCENARIO\tWHAT")
		for _, e := range lab.Experiments() {
			fmt.Fprintf(w, "%s\t%s\t%s\n", e.Name, e.Scenario, e.Title)
		}
		fmt.Fprintln(w, "\nSCENARIO\tNODES\tWHAT")
		for _, n := range scenario.Names() {
			s, err := scenario.Builtin(n)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\t%d\t%s\n", n, len(s.Nodes), s.Description)
		}
		return w.Flush()
	case "scenario":
		if fs.NArg() != 2 {
			fs.Usage()
			return errUsage
		}
		s, err := scenario.Load(fs.Arg(1))
		if err != nil {
			return err
		}
		return s.Format(os.Stdout)
	case "merge":
		if fs.NArg() < 3 || fs.Arg(1) != "write-read" {
			fs.Usage()
			return errUsage
		}
		s, err := scenario.Load(cmp.Or(*sc, "qmpsu"))
		if err != nil {
			return err
		}
		dir := cmp.Or(*out, filepath.Join("lab-results", "write-read"))
		if err := lab.MergeWriteRead(dir, s, fs.Args()[2:]); err != nil {
			return err
		}
		fmt.Printf("results in %s\n", dir)
		return nil
	case "run":
		if fs.NArg() != 2 {
			fs.Usage()
			return errUsage
		}
	default:
		fs.Usage()
		return errUsage
	}
	name := fs.Arg(1)
	seg := int64(0)
	if *segSize != "" {
		var err error
		if seg, err = parseSize(*segSize); err != nil || seg <= 0 || seg > 1<<30 {
			return fmt.Errorf("--segment-size %q: want a size such as 256KiB", *segSize)
		}
	}
	env := &lab.Env{Quick: *quick, Log: os.Stderr, Seed: *seed, Scale: *scale, Out: *out, Work: *work, SwiftVenv: *swiftVenv, WaitAll: *waitAll, SegmentSize: int(seg),
		Helper: *helper, HelperFor: *helperFor}
	env.Trace = *trace
	if *runs < 0 {
		return fmt.Errorf("--runs %d: want a count of runs, or 0 for the variant's", *runs)
	}
	env.Runs = *runs
	if *clients != "" {
		env.Clients = strings.Split(*clients, ",")
	}
	if *sizes != "" {
		for _, v := range strings.Split(*sizes, ",") {
			n, err := parseSize(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("--sizes: %q is not a size such as 4MiB", v)
			}
			env.Sizes = append(env.Sizes, n)
		}
	}
	if *doors != "" {
		env.Doors = strings.Split(*doors, ",")
	}
	if *sc != "" {
		s, err := scenario.Load(*sc)
		if err != nil {
			return err
		}
		env.Scenario = s
	}
	if env.Out == "" {
		env.Out = filepath.Join("lab-results", name)
	}
	if env.Work == "" {
		d, err := os.MkdirTemp("", "quilt-lab-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		env.Work = d
	}
	if *withTahoe {
		if !lab.MeasuresTahoe(name) {
			return fmt.Errorf("--tahoe applies to write-read and sshfs-fio only")
		}
		fmt.Fprintln(os.Stderr, "quilt lab: making sure Tahoe-LAFS", tahoe.Version, "is installed (pip, the first time a few minutes)")
		bin, err := tahoe.EnsureVenv(ctx, *venv)
		if err != nil {
			return fmt.Errorf("installing Tahoe-LAFS: %w", err)
		}
		env.Tahoe, env.TahoeFoolscap = bin, *foolscap
	}
	if err := lab.Run(ctx, name, env); err != nil {
		return err
	}
	var files []string
	entries, _ := os.ReadDir(env.Out)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	fmt.Printf("results in %s: %s\n", env.Out, strings.Join(files, " "))
	return nil
}
