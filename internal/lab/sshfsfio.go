package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/lab/tahoe"
	"github.com/quilt-grid/quilt/internal/sftp"
	"golang.org/x/crypto/ssh"
)

// sshfsFioSizes are the file sizes of sshfs-fio: the paper's IOzone
// sweep, 64 KiB to 128 MiB doubling (quick: three small ones).
func sshfsFioSizes(quick bool) []int64 {
	if quick {
		return []int64{64 << 10, 256 << 10, 1 << 20}
	}
	return writeReadSizes(false)
}

// sftpSystem is a storage system served over SFTP at the client host,
// as sshfs mounts it.
type sftpSystem struct {
	name   string
	target sshTarget
	// stored returns a tag of the version of the file name (at the
	// served root) that the system has stored, and its size; "" if it
	// has none.
	stored func(ctx context.Context, name string) (version string, size int64, err error)
	// idle, if set, reports whether the system is doing nothing: stored
	// is asked only then (for a Tahoe-LAFS client node, whose stored
	// reads the directory from the grid, through the links being
	// measured), and a write counts as stored from then.
	idle func(ctx context.Context) (bool, error)
}

// sshfsFioJobs returns the four jobs sshfs-fio runs on one file, in
// order: write it, read it back, rewrite every block at random offsets,
// read them back at the same offsets. Each read replays the write before
// it (same seed) and checks every block's checksum and offset. Blocks are 128 KiB, or the
// whole file if it is smaller (as IOzone's records are). Seeds are distinct per file
// (base), so no two files hold the same bytes: Tahoe-LAFS's convergent
// encryption would find a repeated file in the grid and not send it.
func sshfsFioJobs(file string, size int64, base uint64, runtime time.Duration) []fioJob {
	var js []fioJob
	for _, op := range fioOps {
		seed := 2*base + 1
		if op == opRandWrite || op == opRandRead {
			seed++
		}
		js = append(js, fioJob{Op: op, File: file, Size: size, Block: min(recordSize, size), Seed: seed, Runtime: runtime})
	}
	return js
}

// needTools checks that the programs sshfs-fio runs are installed.
func needTools() error {
	var missing []string
	for _, p := range []string{"fio", "sshfs", "fusermount3"} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("lab: sshfs-fio needs %s (apt-get install fio sshfs fuse3; bench/lab-deps.sh does it)", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("lab: sshfs-fio needs /dev/fuse to mount: %w", err)
	}
	return nil
}

// runSSHFSFio: the Tahoe-LAFS paper's write/read test through sshfs
// (§5, Figs. 14–16), with fio standing in for IOzone. For each client
// of the scenario, Quilt's SFTP server runs at the client host over a
// gateway there, whose connections to the grid take the client's links
// (the paper's client ran Tahoe's client node and SFTP front end);
// sshfs mounts it with the paper's options and fio writes, reads,
// randomly rewrites and randomly reads files of each size in 128 KiB
// blocks. With env.Tahoe, Tahoe-LAFS's own SFTP front end, in its
// client node behind the same links, is mounted and measured the same
// way.
func runSSHFSFio(ctx context.Context, env *Env) error {
	if err := needTools(); err != nil {
		return err
	}
	sc := env.Scenario
	clients := sc.Role("client")
	if len(clients) == 0 {
		return fmt.Errorf("lab: sshfs-fio needs a client in scenario %s", sc.Name)
	}
	work, err := env.workDir("sshfs-fio")
	if err != nil {
		return err
	}
	env.logf("starting %d Quilt nodes", len(sc.Role("storage")))
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: filepath.Join(work, "quilt"), Seed: env.Seed, Namespaces: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	keyFile := filepath.Join(work, "sshfs-key")
	userKey, err := clientKey(keyFile)
	if err != nil {
		return err
	}
	const user = "lab"

	var tg *tahoeBeside
	var tahoeSFTP *tahoe.SFTP
	var tahoeFailed string // why Tahoe-LAFS was not measured, if it was not
	if env.Tahoe != "" {
		tg, err = startTahoeBeside(ctx, env, cl, work)
		if err != nil {
			return fmt.Errorf("lab: tahoe: %w", err)
		}
		defer tg.Close()
		tahoeSFTP, err = tg.EnableSFTP(ctx, user, userKey)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			// Quilt's side is still a result.
			tahoeFailed = fmt.Sprintf("Tahoe-LAFS was not measured: its SFTP front end did not start: %v", err)
			env.logf("%s", tahoeFailed)
		}
	}

	// A job's bound is also how long a write may take to be stored: a
	// 128 MiB file takes 50 min through the worst qmpsu client's
	// 1.2 Mbit/s uplink (3⅓ × 128 MiB of shares).
	repeats, runtime := 3, 90*time.Minute
	if env.Quick {
		repeats, runtime = 1, 3*time.Minute
	}
	tab := &report.Table{
		Title: fmt.Sprintf("sshfs-fio on %s: fio through sshfs (-o %s), %d KiB blocks, 3-of-10", sc.Name, strings.Join(sshfsPaperOptions, ","), recordSize>>10),
		Columns: []string{"system", "client", "size", "bytes", "operation", "runs",
			"MB/s (median)", "q1", "q3", "fio MB/s (median)", "failed"}}
	type key struct {
		op          fioOp
		sys, client string
	}
	series := map[key][2][]float64{} // sizes, medians
	var order []key
	seed := uint64(env.Seed) << 20
	for _, c := range clients {
		systems, closeQuilt, err := quiltSFTPAt(ctx, env, cl, work, c.Name, user, userKey)
		if err != nil {
			return err
		}
		if tahoeSFTP != nil {
			tg.At(c.Name)
			kh := filepath.Join(work, "tahoe-known_hosts")
			if err := writeKnownHosts(kh, tahoeSFTP.Addr, tahoeSFTP.HostKey); err != nil {
				closeQuilt()
				return err
			}
			systems = append(systems, sftpSystem{
				name:   tg.systemName(env),
				target: sshTarget{Addr: tahoeSFTP.Addr, User: user, KeyFile: keyFile, KnownHosts: kh},
				stored: func(ctx context.Context, name string) (string, int64, error) {
					fi, err := tg.Stat(ctx, tahoeSFTP.Root, name)
					if errors.Is(err, tahoe.ErrNotFound) {
						return "", 0, nil
					}
					return fi.ReadCap, fi.Size, err
				},
				idle: func(ctx context.Context) (bool, error) {
					n, err := tg.Active(ctx)
					return n == 0, err
				},
			})
		}
		for si := range systems {
			s := &systems[si]
			s.target.KeyFile = keyFile
			mnt := filepath.Join(work, "mnt", strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(s.name)+"-"+c.Name)
			m, err := mountSSHFS(ctx, s.target, mnt, mnt+".sshfs.log")
			if err != nil {
				closeQuilt()
				return fmt.Errorf("lab: %s: %w", s.name, err)
			}
			env.logf("%s at client %s: sshfs %s mounted on %s", s.name, c.Name, s.target.Addr, mnt)
			// One small file first, unmeasured: the session is open and
			// the connections to the nodes are made, as on a mount that
			// has been in use.
			seed++
			if _, err := fileRun(ctx, env, *s, mnt, fmt.Sprintf("warm-%s", c.Name), 64<<10, seed, time.Minute+runtime/10); err != nil {
				env.logf("%-10s client %-6s warm-up FAILED: %v", s.name, c.Name, err)
			}
			for _, size := range sshfsFioSizes(env.Quick) {
				var mbs, fioMBs [4][]float64
				var failed [4][]string
				for rep := range repeats {
					seed++
					name := fmt.Sprintf("f-%s-%s-%d", c.Name, strings.ReplaceAll(report.SizeLabel(size), " ", ""), rep)
					rs, err := fileRun(ctx, env, *s, mnt, name, size, seed, runtime)
					if ctx.Err() != nil {
						m.unmount()
						closeQuilt()
						return ctx.Err()
					}
					for i, r := range rs {
						if r.err != nil {
							failed[i] = append(failed[i], r.err.Error())
							continue
						}
						mbs[i] = append(mbs[i], r.mbs)
						fioMBs[i] = append(fioMBs[i], r.fio.MBs())
					}
					if err != nil {
						for i := len(rs); i < len(fioOps); i++ {
							failed[i] = append(failed[i], "not run: "+err.Error())
						}
					}
				}
				for i, op := range fioOps {
					if len(mbs[i]) == 0 {
						tab.Add(s.name, c.Name, report.SizeLabel(size), size, op.String(), repeats, nil, nil, nil, nil, failureNote(failed[i]))
						env.logf("%-10s client %-6s %9s %-12s FAILED: %s", s.name, c.Name, report.SizeLabel(size), op, failureNote(failed[i]))
						continue
					}
					q1, med, q3 := report.Quartiles(mbs[i])
					_, fmed, _ := report.Quartiles(fioMBs[i])
					tab.Add(s.name, c.Name, report.SizeLabel(size), size, op.String(), repeats, med, q1, q3, fmed, failureNote(failed[i]))
					env.logf("%-10s client %-6s %9s %-12s %8.3f MB/s (fio %8.3f)", s.name, c.Name, report.SizeLabel(size), op, med, fmed)
					k := key{op, s.name, c.Name}
					if _, ok := series[k]; !ok {
						order = append(order, k)
					}
					v := series[k]
					v[0], v[1] = append(v[0], float64(size)), append(v[1], med)
					series[k] = v
				}
			}
			if err := m.unmount(); err != nil {
				env.logf("%s: %v", s.name, err)
			}
		}
		closeQuilt()
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Scenario %s: %s.", sc.Name, sc.Description),
		fmt.Sprintf("sshfs %s mounted with -o %s; the paper's big_writes is refused by sshfs 3 (FUSE 3 always allows big writes).", sshfsVersion(), strings.Join(sshfsPaperOptions, ",")),
		"For each file: fio writes it sequentially, reads it back, rewrites every block at random offsets, reads those back; both reads check every block's checksum and offset (fio verify=crc32c). "+
			"MB/s of a write is the file's size over the time from fio's start until the system has stored the new version (SFTP commits at close); fio MB/s is fio's own figure, which ends before the close, as IOzone's does without -c. MB/s of a read is fio's.",
		"MB/s = 10^6 bytes per second of file data.")
	if tahoeFailed != "" {
		tab.Notes = append(tab.Notes, tahoeFailed+".")
	}
	if _, _, err := report.Write(env.Out, "sshfs-fio", tab); err != nil {
		return err
	}
	for _, op := range fioOps {
		p := &report.Plot{Title: fmt.Sprintf("%s through sshfs on %s (%d KiB blocks)", capitalize(op.String()), sc.Name, recordSize>>10),
			XLabel: "file size", YLabel: "MB/s", LogX: true, XTicks: sizeTicks(sshfsFioSizes(env.Quick))}
		for _, k := range order {
			if k.op == op {
				v := series[k]
				p.Series = append(p.Series, report.Series{Name: k.sys + ", client " + k.client, X: v[0], Y: v[1]})
			}
		}
		if len(p.Series) == 0 {
			continue
		}
		if err := p.Save(filepath.Join(env.Out, "sshfs-fio-"+strings.ReplaceAll(op.String(), " ", "-")+".png")); err != nil {
			return err
		}
	}
	return nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// quiltSFTPAt opens a gateway at the scenario client called at (its
// connections take that host's links) with a bucket, and serves it with
// Quilt's SFTP server on 127.0.0.1 to user logging in with key. It
// returns Quilt as an sftpSystem (KeyFile left for the caller) and the
// function that stops the server and closes the gateway.
func quiltSFTPAt(ctx context.Context, env *Env, cl *Cluster, work, at, user string, key ssh.PublicKey) ([]sftpSystem, func(), error) {
	dir := filepath.Join(work, "gateway-"+at)
	nc, oc, err := cl.Client(at)
	if err != nil {
		return nil, nil, err
	}
	gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: nc, Objects: oc, NoSync: true})
	if err != nil {
		return nil, nil, err
	}
	const bucket = "fio"
	if err := gw.CreateBucket(ctx, bucket, ""); err != nil {
		gw.Close()
		return nil, nil, err
	}
	hk, err := sftp.LoadOrCreateKey(filepath.Join(dir, "sftp-host-key"))
	if err != nil {
		gw.Close()
		return nil, nil, err
	}
	users := sftp.Users{user: {Name: user, Bucket: bucket, Keys: []ssh.PublicKey{key}}}
	srv, err := sftp.New(sftp.Config{HostKey: hk, Users: func() (sftp.Users, error) { return users, nil },
		Tree: sftp.GatewayTrees(gw), SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		gw.Close()
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "spool"), 0o700); err != nil {
		gw.Close()
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gw.Close()
		return nil, nil, err
	}
	go srv.Serve(ln)
	closeAll := func() {
		srv.Close()
		gw.Close()
	}
	kh := filepath.Join(dir, "sftp-known_hosts")
	if err := writeKnownHosts(kh, ln.Addr().String(), hk.PublicKey()); err != nil {
		closeAll()
		return nil, nil, err
	}
	t := gw.Tree(bucket)
	s := sftpSystem{
		name:   "quilt",
		target: sshTarget{Addr: ln.Addr().String(), User: user, KnownHosts: kh},
		stored: func(ctx context.Context, name string) (string, int64, error) {
			i, err := t.Stat(ctx, name)
			if errors.Is(err, fs.ErrNotExist) {
				return "", 0, nil
			}
			if err != nil {
				return "", 0, err
			}
			return i.Object.Modified.Format(time.RFC3339Nano) + "/" + strconv.FormatInt(i.Size, 10), i.Size, nil
		},
	}
	env.logf("quilt: gateway and SFTP server at client %s, %s", at, s.target.Addr)
	return []sftpSystem{s}, closeAll, nil
}

// opRun is the outcome of one fio job of fileRun.
type opRun struct {
	fio fioResult
	mbs float64 // MB/s: until stored for a write, fio's for a read
	err error
}

// How often fileRun asks a system whether a write is stored: every
// fiftieth of the time the write has taken so far, so the figure is
// within 2% of the truth, but no more often than storedPollMin (asking
// takes the system's time too: a Tahoe-LAFS client node answers with
// the same Python thread that uploads) and no less than storedPollMax.
const (
	storedPollMin = 20 * time.Millisecond
	storedPollMax = 500 * time.Millisecond
)

// storedPoll is the wait before asking again, elapsed into a write.
func storedPoll(elapsed time.Duration) time.Duration {
	return min(max(elapsed/50, storedPollMin), storedPollMax)
}

// fileRun runs the four jobs of sshfsFioJobs on the file name at the
// mount mnt and returns their outcomes, as many as were run: after a
// write that fails, the jobs after it are not run and the error says why.
func fileRun(ctx context.Context, env *Env, s sftpSystem, mnt, name string, size int64, seed uint64, runtime time.Duration) ([]opRun, error) {
	var out []opRun
	prev, _, err := s.stored(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, j := range sshfsFioJobs(filepath.Join(mnt, name), size, seed, runtime) {
		start := time.Now()
		res, err := runFio(ctx, j)
		r := opRun{fio: res, err: err}
		if err == nil && res.Bytes != size {
			r.err = fmt.Errorf("%s moved %d of %d bytes in its %s", j.Op, res.Bytes, size, runtime)
		}
		if r.err == nil && j.Op.writes() {
			var at time.Time
			at, prev, r.err = waitStored(ctx, s, name, prev, size, start, runtime)
			r.mbs = float64(size) / at.Sub(start).Seconds() / 1e6
		} else if r.err == nil {
			r.mbs = res.MBs()
			if res.Runtime == 0 { // under fio's millisecond
				r.mbs = float64(size) / time.Since(start).Seconds() / 1e6
			}
		}
		out = append(out, r)
		if r.err != nil && j.Op.writes() {
			return out, fmt.Errorf("%s failed", j.Op)
		}
	}
	return out, nil
}

// waitStored waits until s has stored a version of name other than prev
// with size bytes, and returns when it saw it and that version. A system
// with idle is asked for the version only when idle, and the time
// returned is when it was seen idle. The write started at start (the
// poll slows as it ages); waiting longer than limit is an error.
func waitStored(ctx context.Context, s sftpSystem, name, prev string, size int64, start time.Time, limit time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(limit)
	var n int64
	for {
		now := time.Now()
		if now.After(deadline) {
			return now, "", fmt.Errorf("lab: %s: %s not stored with %d bytes %s after fio ended (have %d)", s.name, name, size, limit, n)
		}
		idle := true
		if s.idle != nil {
			var err error
			if idle, err = s.idle(ctx); err != nil {
				return now, "", err
			}
		}
		if idle {
			var v string
			var err error
			v, n, err = s.stored(ctx, name)
			if err != nil {
				return now, "", err
			}
			if v != "" && v != prev && n == size {
				return now, v, nil
			}
		}
		select {
		case <-ctx.Done():
			return now, "", ctx.Err()
		case <-time.After(storedPoll(time.Since(start))):
		}
	}
}

// sshfsVersion is the installed sshfs's version, for the results' notes.
func sshfsVersion() string {
	out, _ := exec.Command("sshfs", "--version").CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "SSHFS version "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "(version unknown)"
}
