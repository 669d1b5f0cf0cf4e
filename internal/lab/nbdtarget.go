package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/nbd"
	"github.com/quilt-grid/quilt/internal/volume"
)

// The block-volume experiments (dbench, nbd-fio) run the same workload on
// two NBD servers: a Quilt volume served from this process, at the
// scenario's client host (its gateway and volume server there, the grid's
// nodes behind the scenario's links), and nbdkit's file plugin on a file
// of the local disk, standing in for the seed paper's AoE and iSCSI
// targets. Clients reach both over the local machine (TCP to 127.0.0.1,
// a Unix socket), never through the emulated links: the links are
// between the volume's server and the grid, where Quilt's storage
// traffic goes.

// nbdTarget is a block device served over NBD.
type nbdTarget struct {
	Name string // "Quilt", "nbdkit file"
	URI  string // for libnbd's tools: nbd://HOST:PORT/EXPORT or nbd+unix:///?socket=PATH
	// CPU is the CPU time the storage side has used so far, user and
	// system: this process for Quilt (the nodes, the gateway and the NBD
	// server), the nbdkit process for nbdkit.
	CPU func() time.Duration
	// Flushes, if set, counts the FLUSHes (and FUA writes) the server has
	// completed so far and the time they took together.
	Flushes func() (int64, time.Duration)
	Close   func() error
}

// volumeExport is the name of the volume the Quilt target serves.
const volumeExport = "lab"

// recordCatalog keeps volume maps as records of a set of the gateway's
// registry, as cmd/quilt's registryCatalog does (without its registry
// pull: this process is the only writer).
type recordCatalog struct {
	gw  *gateway.Gateway
	set string
}

func (c recordCatalog) Get(ctx context.Context, name string) ([]byte, error) {
	return c.gw.Record(ctx, c.set, name)
}

func (c recordCatalog) Put(ctx context.Context, name string, body []byte) error {
	return c.gw.PutRecord(ctx, c.set, name, body)
}

func (c recordCatalog) Delete(ctx context.Context, name string) error {
	return c.gw.DeleteRecord(ctx, c.set, name)
}

func (c recordCatalog) List(ctx context.Context) (map[string][]byte, error) {
	return c.gw.Records(ctx, c.set)
}

var _ volume.Catalog = recordCatalog{}

// sharedVolume serves one volume to several NBD connections at once, as
// quilt volume serve does: they share the volume's handle and journal. It
// counts the flushes and their time in st.
type sharedVolume struct {
	*volume.Volume
	st *flushStats
}

// flushStats counts flushes and the time they took.
type flushStats struct {
	n, ns atomic.Int64
}

func (s *flushStats) add(start time.Time) {
	s.n.Add(1)
	s.ns.Add(int64(time.Since(start)))
}

// MultiConn says the volume may be served to several connections.
func (sharedVolume) MultiConn() bool { return true }

// Flush flushes the volume, counted.
func (v sharedVolume) Flush(ctx context.Context) error {
	defer v.st.add(time.Now())
	return v.Volume.Flush(ctx)
}

// WriteAt writes, a FUA write counted as a flush.
func (v sharedVolume) WriteAt(ctx context.Context, p []byte, off int64, fua bool) error {
	if fua {
		defer v.st.add(time.Now())
	}
	return v.Volume.WriteAt(ctx, p, off, fua)
}

// startQuiltNBD starts a grid under env's scenario with a gateway at its
// client host, makes an empty volume of size bytes (3-of-10 extents,
// happiness 7 or the number of nodes, as quilt volume serve), and serves
// it over NBD on 127.0.0.1.
func startQuiltNBD(ctx context.Context, env *Env, work string, size int64) (*nbdTarget, error) {
	sc := env.Scenario
	clients := append(sc.Role("client"), sc.Role("gateway")...)
	if len(clients) == 0 {
		return nil, fmt.Errorf("lab: scenario %s has no client or gateway node for the volume's server", sc.Name)
	}
	at := clients[0].Name
	cl, gw, err := startWithGateway(ctx, env, sc, work, at, nil)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*nbdTarget, error) {
		gw.Close()
		cl.Close()
		return nil, err
	}
	_, oc, err := cl.Client(at)
	if err != nil {
		return fail(err)
	}
	m, err := volume.New(volume.Config{Catalog: recordCatalog{gw, "volumes"}, Objects: oc, Params: codec.DefaultParams(),
		Happy: min(7, len(cl.Nodes)), StateDir: filepath.Join(work, "journals")})
	if err != nil {
		return fail(err)
	}
	if err := m.Create(ctx, volumeExport, size); err != nil {
		return fail(err)
	}
	st := &flushStats{}
	srv := nbd.New(nbd.Config{
		Exports: func(context.Context, nbd.Peer) ([]string, error) { return []string{volumeExport}, nil },
		Open: func(ctx context.Context, name string, _ nbd.Peer) (nbd.Device, error) {
			v, err := m.Open(ctx, name)
			if err != nil {
				return nil, err
			}
			return sharedVolume{v, st}, nil
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	go srv.Serve(ln)
	return &nbdTarget{
		Name: "Quilt",
		URI:  "nbd://" + ln.Addr().String() + "/" + volumeExport,
		CPU:  cpuTime,
		Flushes: func() (int64, time.Duration) {
			return st.n.Load(), time.Duration(st.ns.Load())
		},
		Close: func() error {
			return errors.Join(srv.Close(), gw.Close(), cl.Close())
		},
	}, nil
}

// startNbdkit serves a sparse file of size bytes under work with nbdkit's
// file plugin on a Unix socket. A FLUSH is the plugin's fdatasync of the
// file, unless noFlush: then its fua filter drops FLUSH and FUA
// (fuamode=discard), as the lab's Quilt nodes do not fsync, and the
// figures are those of the page cache.
func startNbdkit(ctx context.Context, work string, size int64, noFlush bool) (*nbdTarget, error) {
	name, file := "nbdkit file", "nbdkit-disk.img"
	args := []string{"--foreground", "--unix", "SOCK", "file", "file=DISK"}
	if noFlush {
		name, file = "nbdkit file, no flush", "nbdkit-noflush.img"
		args = []string{"--foreground", "--unix", "SOCK", "--filter=fua", "file", "file=DISK", "fuamode=discard"}
	}
	disk := filepath.Join(work, file)
	f, err := os.Create(disk)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return nil, err
	}
	// A socket's path must be short (108 bytes): not under work.
	sdir, err := os.MkdirTemp("", "lab-nbdkit-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(sdir, "sock")
	for i, a := range args {
		args[i] = strings.NewReplacer("SOCK", sock, "DISK", disk).Replace(a)
	}
	cmd := exec.Command("nbdkit", args...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(sdir)
		return nil, fmt.Errorf("lab: nbdkit: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			err = <-exited
		}
		os.RemoveAll(sdir)
		if err != nil && !strings.Contains(err.Error(), "terminated") {
			return fmt.Errorf("lab: nbdkit: %w: %s", err, stderr.b)
		}
		return nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-exited:
			os.RemoveAll(sdir)
			return nil, fmt.Errorf("lab: nbdkit exited: %v: %s", err, stderr.b)
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("lab: nbdkit did not make its socket in 30s: %s", stderr.b)
		}
	}
	pid := cmd.Process.Pid
	return &nbdTarget{
		Name:  name,
		URI:   "nbd+unix:///?socket=" + sock,
		CPU:   func() time.Duration { d, _ := procCPU(pid); return d },
		Close: stop,
	}, nil
}

// clockTick is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times (100 on every Linux architecture Go supports).
const clockTick = 100

// procCPU returns the CPU time, user and system, that process pid has
// used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name (field 2, in parentheses) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func parseProcStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("lab: /proc stat %q: no command name", clip([]byte(s)))
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("lab: /proc stat %q: %d fields after the name", clip([]byte(s)), len(f))
	}
	var ticks int64
	for _, k := range f[11:13] {
		n, err := strconv.ParseInt(k, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("lab: /proc stat: CPU time %q", k)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// ext4Mount is an ext4 file system on an NBD export, made the way the
// kernel without an NBD client allows: nbdfuse shows the export as a
// file, a loop device goes over the file, and ext4 on the loop device.
type ext4Mount struct {
	Dir     string // where the file system is mounted
	fuseDir string
	loop    string
	nbdfuse *exec.Cmd
	exited  chan error
}

// NbdfuseCPU is the CPU time nbdfuse has used so far.
func (m *ext4Mount) NbdfuseCPU() time.Duration {
	d, _ := procCPU(m.nbdfuse.Process.Pid)
	return d
}

// mountExt4 runs nbdfuse on uri at work/fuse, a loop device over its
// file, mkfs.ext4 on it, and mounts it at work/fs. It needs root.
func mountExt4(ctx context.Context, work, uri string) (*ext4Mount, error) {
	m := &ext4Mount{Dir: filepath.Join(work, "fs"), fuseDir: filepath.Join(work, "fuse"), exited: make(chan error, 1)}
	for _, d := range []string{m.Dir, m.fuseDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	pidFile := filepath.Join(work, "nbdfuse.pid")
	os.Remove(pidFile)
	m.nbdfuse = exec.Command("nbdfuse", "-P", pidFile, m.fuseDir, uri)
	var stderr limitedBuffer
	m.nbdfuse.Stderr = &stderr
	if err := m.nbdfuse.Start(); err != nil {
		return nil, fmt.Errorf("lab: nbdfuse: %w", err)
	}
	go func() { m.exited <- m.nbdfuse.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 {
			break
		}
		select {
		case err := <-m.exited:
			m.exited <- err
			return nil, fmt.Errorf("lab: nbdfuse %s exited: %v: %s", uri, err, stderr.b)
		case <-ctx.Done():
			m.Unmount()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.Unmount()
			return nil, fmt.Errorf("lab: nbdfuse %s did not start in 60s: %s", uri, stderr.b)
		}
	}
	out, err := run(ctx, "losetup", "-f", "--show", filepath.Join(m.fuseDir, "nbd"))
	if err != nil {
		m.Unmount()
		return nil, err
	}
	m.loop = strings.TrimSpace(out)
	if _, err := run(ctx, "mkfs.ext4", "-q", "-F", m.loop); err != nil {
		m.Unmount()
		return nil, err
	}
	if _, err := run(ctx, "mount", m.loop, m.Dir); err != nil {
		m.Unmount()
		return nil, err
	}
	return m, nil
}

// Unmount undoes mountExt4 as far as it got: unmounts the file system,
// detaches the loop device, unmounts nbdfuse and waits for it to exit.
func (m *ext4Mount) Unmount() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	if out, _ := exec.Command("findmnt", "-n", m.Dir).Output(); len(out) > 0 {
		if _, err := run(ctx, "umount", m.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if m.loop != "" {
		if _, err := run(ctx, "losetup", "-d", m.loop); err != nil {
			errs = append(errs, err)
		}
		m.loop = ""
	}
	if m.nbdfuse != nil {
		exec.Command("fusermount3", "-u", m.fuseDir).Run()
		select {
		case <-m.exited:
		case <-time.After(30 * time.Second):
			m.nbdfuse.Process.Kill()
			<-m.exited
			exec.Command("fusermount3", "-u", "-z", m.fuseDir).Run()
			errs = append(errs, fmt.Errorf("lab: nbdfuse did not exit after its unmount"))
		}
		m.nbdfuse = nil
	}
	return errors.Join(errs...)
}

// run runs a program and returns its standard output; a failure is an
// error with its standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("lab: %s %s: %w: %s", name, strings.Join(args, " "), err, stderr.b)
	}
	return string(out), nil
}
