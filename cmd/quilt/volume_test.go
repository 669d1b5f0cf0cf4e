package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nbdClient is a minimal NBD client (fixed newstyle, NBD_OPT_GO, simple
// replies) for tests against `quilt volume serve` as a process.
type nbdClient struct {
	c     net.Conn
	size  uint64
	flags uint16 // transmission flags
	seq   uint64
}

// dialNBD connects to addr and opens the export name.
func dialNBD(addr, name string) (*nbdClient, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(40 * time.Second))
	cl := &nbdClient{c: c}
	h := make([]byte, 18)
	if _, err := io.ReadFull(c, h); err != nil {
		c.Close()
		return nil, err
	}
	if binary.BigEndian.Uint64(h) != 0x4e42444d41474943 {
		c.Close()
		return nil, fmt.Errorf("bad greeting %x", h)
	}
	b := binary.BigEndian.AppendUint32(nil, 3) // FIXED_NEWSTYLE | NO_ZEROES
	b = binary.BigEndian.AppendUint64(b, 0x49484156454F5054)
	b = binary.BigEndian.AppendUint32(b, 7) // GO
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(name)+2))
	b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
	b = append(append(b, name...), 0, 0)
	if _, err := c.Write(b); err != nil {
		c.Close()
		return nil, err
	}
	for range 16 {
		rh := make([]byte, 20)
		if _, err := io.ReadFull(c, rh); err != nil {
			c.Close()
			return nil, err
		}
		typ := binary.BigEndian.Uint32(rh[12:])
		d := make([]byte, binary.BigEndian.Uint32(rh[16:]))
		if _, err := io.ReadFull(c, d); err != nil {
			c.Close()
			return nil, err
		}
		switch {
		case typ == 1: // ACK
			if cl.size == 0 {
				c.Close()
				return nil, errors.New("GO acknowledged without NBD_INFO_EXPORT")
			}
			return cl, nil
		case typ == 3 && len(d) >= 12 && binary.BigEndian.Uint16(d) == 0: // INFO_EXPORT
			cl.size, cl.flags = binary.BigEndian.Uint64(d[2:]), binary.BigEndian.Uint16(d[10:])
		case typ&(1<<31) != 0:
			c.Close()
			return nil, fmt.Errorf("GO %s: error reply %#x %q", name, typ, d)
		}
	}
	c.Close()
	return nil, errors.New("too many option replies")
}

// send sends one request without waiting for its reply.
func (c *nbdClient) send(typ uint16, off uint64, n uint32, payload []byte) error {
	c.seq++
	b := binary.BigEndian.AppendUint32(nil, 0x25609513)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, c.seq)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, n)
	_, err := c.c.Write(append(b, payload...))
	return err
}

// do sends a request and reads its reply, with readN bytes of data.
func (c *nbdClient) do(typ uint16, off uint64, n uint32, payload []byte, readN int) ([]byte, error) {
	if err := c.send(typ, off, n, payload); err != nil {
		return nil, err
	}
	h := make([]byte, 16)
	if _, err := io.ReadFull(c.c, h); err != nil {
		return nil, err
	}
	if binary.BigEndian.Uint32(h) != 0x67446698 || binary.BigEndian.Uint64(h[8:]) != c.seq {
		return nil, fmt.Errorf("bad reply %x", h)
	}
	if e := binary.BigEndian.Uint32(h[4:]); e != 0 {
		return nil, fmt.Errorf("NBD error %d", e)
	}
	d := make([]byte, readN)
	_, err := io.ReadFull(c.c, d)
	return d, err
}

func (c *nbdClient) write(off int64, p []byte) error {
	_, err := c.do(1, uint64(off), uint32(len(p)), p, 0)
	return err
}

func (c *nbdClient) read(off int64, n int) ([]byte, error) {
	return c.do(0, uint64(off), uint32(n), nil, n)
}

func (c *nbdClient) flush() error {
	_, err := c.do(3, 0, 0, nil, 0)
	return err
}

// startVolumeServe starts `quilt volume serve` on port 0 and returns the
// process and its NBD address, read from its log.
func startVolumeServe(t *testing.T, g *testGrid, dir, state string) (*exec.Cmd, string) {
	t.Helper()
	logPath := filepath.Join(g.base, "serve.log")
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	start, _ := log.Seek(0, io.SeekEnd)
	cmd := g.command("volume", "serve", "--dir", dir, "--state", state, "--listen", "127.0.0.1:0", "--log", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	re := regexp.MustCompile(`serving NBD on (127\.0\.0\.1:\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if int64(len(b)) > start {
			if m := re.FindSubmatch(b[start:]); m != nil {
				return cmd, string(m[1])
			}
		}
		if syscall.Kill(cmd.Process.Pid, 0) != nil || time.Now().After(deadline) {
			t.Fatalf("quilt volume serve did not start: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pattern is n deterministic pseudo-random bytes for seed.
func pattern(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// Crash safety with real processes (and one writer per volume: a second
// server is refused the volume, the restarted one takes its lease over
// at once): a client writes four extents and
// FLUSHes (acknowledged), then overwrites two extents whole and part of a
// third without waiting for a flush, sends a FLUSH it does not wait for,
// and `quilt volume serve` is SIGKILLed. A new `quilt volume serve` on
// the same state directory serves exactly what was flushed, and each
// extent the unflushed writes touched reads either all before or all
// after them, never a mixture.
func TestCLIVolumeServeCrash(t *testing.T) {
	g := startTestGrid(t, 4)
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0"}
	gw.start(t)
	gw.kill() // its registry key is what the volume commands use
	const ext = 4 << 20
	if _, _, err := g.quilt(nil, "volume", "create", "vm", "--size", "20MiB", "--dir", gw.dir); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(g.base, "journals")
	serve, addr := startVolumeServe(t, g, gw.dir, state)
	c, err := dialNBD(addr, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if c.size != 20<<20 {
		t.Fatalf("export size %d", c.size)
	}
	// One writer per volume: a server on another state directory is
	// refused the volume while this one holds its lease.
	other, oaddr := startVolumeServe(t, g, gw.dir, filepath.Join(g.base, "journals2"))
	if c2, err := dialNBD(oaddr, "vm"); err == nil {
		c2.c.Close()
		t.Fatal("a second server opened the volume for writing")
	}
	other.Process.Kill()
	other.Wait()
	flushed := pattern(1, 4*ext)
	if err := c.write(0, flushed); err != nil {
		t.Fatal(err)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	// Unflushed: extents 1 and 2 whole, the first 100 KiB of extent 3.
	later := pattern(2, 2*ext+100<<10)
	if err := c.write(ext, later); err != nil {
		t.Fatal(err)
	}
	if err := c.send(3, 0, 0, nil); err != nil { // FLUSH, not waited for
		t.Fatal(err)
	}
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	c.c.Close()

	_, addr = startVolumeServe(t, g, gw.dir, state)
	c, err = dialNBD(addr, "vm")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.read(0, 5*ext)
	if err != nil {
		t.Fatal(err)
	}
	after := append(append([]byte{}, flushed[:ext]...), later...)
	after = append(after, flushed[len(after):]...)
	for i := range 5 {
		g, before, post := got[i*ext:(i+1)*ext], make([]byte, ext), make([]byte, ext)
		if i < 4 {
			copy(before, flushed[i*ext:])
			copy(post, after[i*ext:])
		}
		switch {
		case bytes.Equal(g, before):
		case bytes.Equal(g, post):
			t.Logf("extent %d: the unflushed write was committed by the flush in flight", i)
		default:
			t.Fatalf("extent %d is neither its flushed contents nor the later write's (torn or lost)", i)
		}
	}
	if !bytes.Equal(got[:ext], flushed[:ext]) || !bytes.Equal(got[4*ext:], make([]byte, ext)) {
		t.Fatal("extents the later writes did not touch changed")
	}
}

// Multi-conn with real processes: `quilt volume serve` announces
// CAN_MULTI_CONN, one connection writes (without a flush) and another
// reads the writes back and FLUSHes, the server is SIGKILLed, and a new
// server on the same state directory serves the writes: the flush on one
// connection made the other's writes durable.
func TestCLIVolumeMultiConn(t *testing.T) {
	g := startTestGrid(t, 4)
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0"}
	gw.start(t)
	gw.kill()
	if _, _, err := g.quilt(nil, "volume", "create", "vm", "--size", "12MiB", "--dir", gw.dir); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(g.base, "journals")
	serve, addr := startVolumeServe(t, g, gw.dir, state)
	var cs [2]*nbdClient
	for i := range cs {
		c, err := dialNBD(addr, "vm")
		if err != nil {
			t.Fatal(err)
		}
		if c.flags&(1<<8) == 0 {
			t.Fatalf("connection %d: flags %#x without CAN_MULTI_CONN", i, c.flags)
		}
		cs[i] = c
	}
	data := pattern(3, 6<<20+12345)
	if err := cs[0].write(1000, data); err != nil {
		t.Fatal(err)
	}
	got, err := cs[1].read(1000, len(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("a connection does not read what another wrote")
	}
	if err := cs[1].flush(); err != nil {
		t.Fatal(err)
	}
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	for _, c := range cs {
		c.c.Close()
	}
	_, addr = startVolumeServe(t, g, gw.dir, state)
	c, err := dialNBD(addr, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = c.read(0, 12<<20); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 12<<20)
	copy(want[1000:], data)
	if !bytes.Equal(got, want) {
		t.Fatal("after the crash the volume lacks writes of the connection that did not flush")
	}
}

// Non-persistent attachments with real processes: each connection to
// the export NAME+np gets a clone of NAME's flushed contents of its own
// (no CAN_MULTI_CONN), listed by quilt volume ls with NAME as its origin
// while connected; what it writes is in it alone, and the clone is gone
// once the client disconnects, NAME unchanged. A volume that does not
// exist has no +np export.
func TestCLIVolumeNonPersistent(t *testing.T) {
	g := startTestGrid(t, 4)
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0"}
	gw.start(t)
	gw.kill()
	if _, _, err := g.quilt(nil, "volume", "create", "vm", "--size", "8MiB", "--dir", gw.dir); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(g.base, "journals")
	serve, addr := startVolumeServe(t, g, gw.dir, state)
	base := pattern(4, 5<<20)
	p, err := dialNBD(addr, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.write(0, base); err != nil {
		t.Fatal(err)
	}
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	p.c.Close()

	var ns [2]*nbdClient
	for i := range ns {
		if ns[i], err = dialNBD(addr, "vm+np"); err != nil {
			t.Fatal(err)
		}
		if ns[i].flags&(1<<8) != 0 || ns[i].size != 8<<20 {
			t.Fatalf("non-persistent attachment %d: flags %#x, size %d", i, ns[i].flags, ns[i].size)
		}
	}
	mine := pattern(5, 3<<20)
	if err := ns[0].write(1<<20, mine); err != nil {
		t.Fatal(err)
	}
	if err := ns[0].flush(); err != nil {
		t.Fatal(err)
	}
	got, err := ns[0].read(0, 5<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{}, base...)
	copy(want[1<<20:], mine)
	if !bytes.Equal(got, want) {
		t.Fatal("a non-persistent attachment does not read its own writes over its volume's contents")
	}
	if got, err = ns[1].read(0, 5<<20); err != nil || !bytes.Equal(got, base) {
		t.Fatalf("another attachment sees the first one's writes (err %v)", err)
	}
	// The clones are the serving process's registry writes: another
	// process's copy of the registry sees them once it has pulled them.
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, _, err = g.quilt(nil, "volume", "ls", "--dir", gw.dir)
		n := len(regexp.MustCompile(`(?m)^vm\.np-[0-9a-f]{8} .* vm$`).FindAllString(out, -1))
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ls shows %d clones of vm while two are attached (err %v):\n%s", n, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, c := range ns {
		c.c.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, _, err = g.quilt(nil, "volume", "ls", "--dir", gw.dir)
		if err == nil && !strings.Contains(out, ".np-") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clones outlive their connections (err %v):\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p, err = dialNBD(addr, "vm")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = p.read(0, 5<<20); err != nil || !bytes.Equal(got, base) {
		t.Fatalf("the volume changed under its non-persistent attachments (err %v)", err)
	}
	if c, err := dialNBD(addr, "nope+np"); err == nil {
		c.c.Close()
		t.Fatal("opened a non-persistent attachment of no volume")
	}

	// A server killed with a clone attached leaves it; the server
	// restarted on its state directory deletes it.
	p.c.Close()
	c, err := dialNBD(addr, "vm+np")
	if err != nil {
		t.Fatal(err)
	}
	serve.Process.Signal(syscall.SIGKILL)
	serve.Wait()
	c.c.Close()
	if out, _, err = g.quilt(nil, "volume", "ls", "--dir", gw.dir); err != nil || !strings.Contains(out, "vm.np-") {
		t.Fatalf("no clone left by the killed server (err %v):\n%s", err, out)
	}
	startVolumeServe(t, g, gw.dir, state)
	if out, _, err = g.quilt(nil, "volume", "ls", "--dir", gw.dir); err != nil || strings.Contains(out, ".np-") {
		t.Fatalf("the restarted server left its predecessor's clone (err %v):\n%s", err, out)
	}
}

// quilt up serves its gateway's volumes over NBD and writes nbd.env;
// quilt volume create against its gateway makes a volume that clients
// then write and read through it. With --nbd off there is no nbd.env.
func TestCLIUpServesNBD(t *testing.T) {
	bin := buildQuilt(t)
	base := t.TempDir()
	envv := append(os.Environ(), "QUILT_HOME="+filepath.Join(base, "home"), "QUILT_GRID=")
	up := func(dir string, extra ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"up", "--port", "0", "--nodes", "3", "--no-fsync", "--dir", dir}, extra...)...)
		cmd.Env = envv
		log, _ := os.Create(dir + ".log")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		return cmd
	}
	dir := filepath.Join(base, "grid")
	up(dir)
	gw := filepath.Join(dir, "gateway")
	env := waitFile(t, filepath.Join(gw, "nbd.env"), 60*time.Second)
	m := regexp.MustCompile(`^export QUILT_NBD=nbd://(127\.0\.0\.1:\d+)$`).FindStringSubmatch(env)
	if m == nil {
		t.Fatalf("nbd.env: %q", env)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, _ := os.ReadFile(dir + ".log")
		if bytes.Contains(b, []byte("NBD:   nbd://"+m[1])) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the banner lacks the NBD address:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	create := exec.Command(bin, "volume", "create", "vm1", "--size", "8MiB", "--dir", gw)
	create.Env = envv
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("volume create: %v\n%s", err, out)
	}
	c, err := dialNBD(m[1], "vm1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	data := pattern(3, 1<<20)
	if err := c.write(3<<20, data); err != nil {
		t.Fatal(err)
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	got, err := c.read(3<<20, len(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	if _, err := dialNBD(m[1], "nope"); err == nil {
		t.Fatal("an unknown export was opened")
	}

	off := filepath.Join(base, "grid-off")
	up(off, "--nbd", "off")
	// The banner follows every front end's start.
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(off + ".log")
		if bytes.Contains(b, []byte("stop with Ctrl-C")) {
			if bytes.Contains(b, []byte("NBD:")) {
				t.Fatalf("--nbd off: the banner has NBD:\n%s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("quilt up --nbd off did not start:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(off, "gateway", "nbd.env")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--nbd off wrote nbd.env: %v", err)
	}
}
