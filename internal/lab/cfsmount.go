package lab

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/cfs"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/tree"
)

// The BaseFS paper's file operations experiment (section 5.2, Figs.
// 20–21): copy /etc recursively into the mounted filesystem, round after
// round, then read everything twice; the same beside on a local
// directory. The programs are the ordinary ones (cp, tar), run as
// processes of their own against a mount served by this process; none is
// stored on the mount.

// etcSource is the tree copied: /etc as this user can read it.
const etcSource = "/etc"

// etcQuickEvery is the quick variant's sample of /etc: every third file
// and link (and every directory), so the mix stays /etc's.
const etcQuickEvery = 3

// etcStats counts what a copy of /etc holds.
type etcStats struct{ files, links, dirs, bytes int64 }

// copyEtc copies what it can read of src into dst (directories, and every
// every-th file and symbolic link of a sorted walk; unreadable files and
// special files are skipped).
func copyEtc(src, dst string, every int) (etcStats, error) {
	var st etcStats
	var seen int
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && p != src {
				return fs.SkipDir // an unreadable directory
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if !d.IsDir() {
			seen++
			if every > 1 && seen%every != 1 {
				return nil
			}
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, 0o755); err != nil {
				return err
			}
			st.dirs++
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			st.links++
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil // unreadable: skipped
			}
			if err := os.WriteFile(to, b, info.Mode().Perm()|0o600); err != nil {
				return err
			}
			st.files++
			st.bytes += int64(len(b))
		}
		return nil
	})
	return st, err
}

// timed runs a program (not one stored on the mount) and returns how long
// it took; its standard output is read and counted, so tar cannot skip
// reading files as it does when its output is /dev/null.
func timed(ctx context.Context, name string, args ...string) (time.Duration, int64, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	n, _ := io.Copy(io.Discard, out)
	err = cmd.Wait()
	d := time.Since(start)
	if err != nil {
		return d, n, fmt.Errorf("lab: %s %v: %w: %s", name, args, err, stderr.b)
	}
	return d, n, nil
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// etcRound is one round's times on one filesystem, and the CPU time this
// process (the mount's server and the nodes) spent during the write.
type etcRound struct{ write, read1, read2, writeCPU time.Duration }

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// etcRoundOn copies src into dir/etc (over the previous round's copy) and
// reads it all twice with tar.
func etcRoundOn(ctx context.Context, src, dir string) (etcRound, error) {
	var r etcRound
	dst := filepath.Join(dir, "etc")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return r, err
	}
	var err error
	cpu := cpuTime()
	if r.write, _, err = timed(ctx, "cp", "-r", src+"/.", dst+"/"); err != nil {
		return r, err
	}
	r.writeCPU = cpuTime() - cpu
	if r.read1, _, err = timed(ctx, "tar", "-C", dst, "-cf", "-", "."); err != nil {
		return r, err
	}
	if r.read2, _, err = timed(ctx, "tar", "-C", dst, "-cf", "-", "."); err != nil {
		return r, err
	}
	return r, nil
}

// runCFSMount mounts a namespace of the configuration filesystem at the
// scenario's client (quilt mount cfs:, served in this process) and, for
// each round, copies /etc into it and reads it back twice, and does the
// same on a local directory.
func runCFSMount(ctx context.Context, env *Env) error {
	sc := env.Scenario
	clients := append(sc.Role("client"), sc.Role("gateway")...)
	if len(clients) == 0 {
		return fmt.Errorf("lab: cfs-mount needs a client or gateway node in scenario %s", sc.Name)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("lab: cfs-mount needs FUSE: %w", err)
	}
	for _, p := range []string{"cp", "tar", "diff", "fusermount3"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("lab: cfs-mount needs %s: %w", p, err)
		}
	}
	rounds, every := 30, 1
	if env.Quick {
		rounds, every = 3, etcQuickEvery
	}
	work, err := env.workDir("cfs-mount")
	if err != nil {
		return err
	}
	src := filepath.Join(work, "src")
	st, err := copyEtc(etcSource, src, every)
	if err != nil {
		return fmt.Errorf("lab: copying %s: %w", etcSource, err)
	}
	env.logf("source: %d files, %d links, %d directories, %d bytes of %s", st.files, st.links, st.dirs, st.bytes, etcSource)

	env.logf("starting %d Quilt nodes", len(sc.Role("storage")))
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: filepath.Join(work, "quilt"), Seed: env.Seed, Namespaces: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	nc, oc, err := cl.Client(clients[0].Name)
	if err != nil {
		return err
	}
	opt := cfs.Options{Home: cfs.Home(filepath.Join(work, "home")), Nodes: nc, Objects: oc, NoSync: true, GrantWait: -1}
	if _, err := cfs.Bootstrap(ctx, opt, "etc", dag.ConfigRules); err != nil {
		return err
	}
	f, err := cfs.Open(opt, "etc")
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(ctx); err != nil {
		return err
	}
	store, err := cfs.NewStore(f, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() { defer close(followed); f.Follow(fctx, nil) }()
	defer func() { stop(); <-followed }()
	mnt := filepath.Join(work, "mnt")
	local := filepath.Join(work, "local")
	for _, d := range []string{mnt, local, filepath.Join(work, "spool")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	m, err := fuse.Mount(tree.New(store), mnt, fuse.Options{Name: "quilt:cfs:etc", SpoolDir: filepath.Join(work, "spool"), Symlinks: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer func() {
		if err := m.Unmount(); err != nil {
			exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
	}()

	tab := &report.Table{
		Title:   fmt.Sprintf("cfs-mount on %s: cp -r of /etc, then two reads (tar), in seconds", sc.Name),
		Columns: []string{"round", "cfs write", "its CPU", "cfs 1st read", "cfs 2nd read", "local write", "local 1st read", "local 2nd read", "log records"},
	}
	var cfsSum, localSum etcRound
	for round := 1; round <= rounds; round++ {
		c, err := etcRoundOn(ctx, src, mnt)
		if err != nil {
			return fmt.Errorf("lab: round %d on the cfs mount: %w", round, err)
		}
		if round == 1 {
			// What was measured must be a true copy.
			if _, _, err := timed(ctx, "diff", "-r", "--no-dereference", src, filepath.Join(mnt, "etc")); err != nil {
				return fmt.Errorf("lab: the copy on the cfs mount differs: %w", err)
			}
		}
		l, err := etcRoundOn(ctx, src, local)
		if err != nil {
			return fmt.Errorf("lab: round %d on the local directory: %w", round, err)
		}
		entries := f.Records()
		tab.Add(round, c.write.Seconds(), c.writeCPU.Seconds(), c.read1.Seconds(), c.read2.Seconds(), l.write.Seconds(), l.read1.Seconds(), l.read2.Seconds(), entries)
		env.logf("round %2d: cfs write %6.2fs (CPU %5.2fs) read %6.2fs / %6.2fs; local write %6.3fs read %6.3fs / %6.3fs; %d records",
			round, c.write.Seconds(), c.writeCPU.Seconds(), c.read1.Seconds(), c.read2.Seconds(), l.write.Seconds(), l.read1.Seconds(), l.read2.Seconds(), entries)
		cfsSum.write += c.write
		cfsSum.writeCPU += c.writeCPU
		cfsSum.read1 += c.read1
		cfsSum.read2 += c.read2
		localSum.write += l.write
		localSum.read1 += l.read1
		localSum.read2 += l.read2
	}
	n := time.Duration(rounds)
	tab.Add("mean", (cfsSum.write / n).Seconds(), (cfsSum.writeCPU / n).Seconds(), (cfsSum.read1 / n).Seconds(), (cfsSum.read2 / n).Seconds(),
		(localSum.write / n).Seconds(), (localSum.read1 / n).Seconds(), (localSum.read2 / n).Seconds(), nil)
	fsType := "the local disk"
	if out, err := exec.Command("findmnt", "-n", "-o", "FSTYPE", "-T", local).Output(); err == nil && len(trimNL(out)) > 0 {
		fsType = string(trimNL(out))
	}
	tab.Notes = append(tab.Notes,
		fmt.Sprintf("Scenario %s: %s. The mount is at the client host; its replica and the nodes do not fsync (the lab's default).", sc.Name, sc.Description),
		fmt.Sprintf("Source: %s as readable here, %d files, %d symbolic links, %d directories, %d bytes%s.", etcSource, st.files, st.links, st.dirs, st.bytes,
			map[bool]string{true: fmt.Sprintf(" (quick: one file or link in %d, every directory)", every)}[every > 1]),
		fmt.Sprintf("Each round: cp -r of the source over the previous round's copy, then tar -cf - . twice, its output read to the end. Local: a directory on %s, not dropped from the page cache (that needs root and disturbs the machine).", fsType),
		"Its CPU: what this process (the mount's server, its replica and the ten nodes) spent during the cfs write, user and system; cp's own is not counted.",
		"Log records: the namespace's log after the round (entries — a write per file, a link, a directory, a delete of each link replaced — and the blocks of file contents).")
	if _, _, err := report.Write(env.Out, "cfs-mount", tab); err != nil {
		return err
	}
	return nil
}

// trimNL drops trailing newlines.
func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
