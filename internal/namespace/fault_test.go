package namespace

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// The namespace store is bbolt, which takes no injected file system: its
// faults are real ones. TestNamespaceDiskFull runs a DB on a small tmpfs
// the test mounts; TestNamespaceCrash SIGKILLs a process appending to a
// DB (this test binary, run again as crashChild).

// crashChildEnv, set to a DB's path, makes this test binary the
// appending process of TestNamespaceCrash instead of running tests.
const crashChildEnv = "QUILT_NS_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		if err := crashChild(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// appender writes entries into one namespace of a DB: the root, then a
// file per entry at the root, /f00000 onwards.
type appender struct {
	ns   dag.NSID
	key  dag.ReadKey
	w    *dag.Writer
	root dag.Hash
}

func newAppender(d *DB) (*appender, error) {
	ns, priv, err := dag.NewNamespace()
	if err != nil {
		return nil, err
	}
	key, err := dag.NewReadKey()
	if err != nil {
		return nil, err
	}
	a := &appender{ns: ns, key: key, w: &dag.Writer{NS: ns, Key: priv, Read: key}}
	if err := d.Open(ns, &key, dag.ConfigRules); err != nil {
		return nil, err
	}
	root := a.w.Root()
	if err := ingestOne(d, ns, root.Encode()); err != nil {
		return nil, err
	}
	a.root = root.Hash()
	return a, nil
}

// entry is the i-th entry, a file of 1000 bytes, and its name.
func (a *appender) entry(i int) (string, *dag.Entry) {
	content := []byte(strings.Repeat(fmt.Sprintf("entry %d ", i), 200))[:1000]
	name := fmt.Sprintf("f%05d", i)
	return name, a.w.Entry(dag.Write, a.root, nil, name, content)
}

// ingestOne ingests one record and says whether it was admitted.
func ingestOne(d *DB, ns dag.NSID, raw []byte) error {
	res, err := d.Ingest(ns, [][]byte{raw})
	if err != nil {
		return err
	}
	if len(res.Rejected) > 0 {
		return res.Rejected[0]
	}
	if len(res.Admitted) != 1 {
		return fmt.Errorf("%d records admitted of 1", len(res.Admitted))
	}
	return nil
}

// checkAcked checks that a DB holds every acknowledged entry of ns (file
// name -> entry hash), in its log and as the current version of its
// file, and that its view is the one built from scratch from the
// records it holds.
func checkAcked(t *testing.T, d *DB, ns dag.NSID, key dag.ReadKey, acked map[string]dag.Hash) {
	t.Helper()
	for name, h := range acked {
		if got := d.Get(ns, []dag.Hash{h}); len(got) != 1 {
			t.Fatalf("acknowledged entry %s (%s) is not in the log", name, h.Short())
		}
		info, err := d.Stat(ns, "/"+name)
		if err != nil || info.Current != h {
			t.Fatalf("acknowledged entry %s: Stat = %s, %v; want version %s", name, info.Current.Short(), err, h.Short())
		}
	}
	l, pool := dag.NewLog(), &dag.Pool{NS: ns}
	for _, raw := range d.Get(ns, d.All(ns)) {
		r, err := dag.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Ingest(l, r); err != nil {
			t.Fatal(err)
		}
	}
	if l.Len() != len(d.All(ns)) {
		t.Fatalf("the DB's %d records make a log of %d: some wait for references", len(d.All(ns)), l.Len())
	}
	got, want := walk(t, d, ns), treeSummary(dag.BuildTree(l, ns, key, dag.ConfigRules))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("view differs from the one its records make:\n got %v\nwant %v", got, want)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on a new directory and
// unmounts it when the test ends.
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Fatalf("mounting a %d-byte tmpfs for a full disk (the test must run as root, or with CAP_SYS_ADMIN): %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

// TestNamespaceDiskFull appends to a DB on a 2 MiB tmpfs until the
// disk is full: an append then fails with an error saying so (ENOSPC);
// every entry acknowledged, before or after the first failure, reads
// back, then and after reopening the DB on the full disk, with a
// consistent view; once space is freed, the refused entries and more go
// in.
func TestNamespaceDiskFull(t *testing.T) {
	dir := mountTmpfs(t, 2<<20)
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 512<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ns.db")
	d, err := OpenDB(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAppender(d)
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]dag.Hash{}
	// Until the disk is full, then ten more: a failed commit may have
	// left room a smaller one fits in, and any append acknowledged is
	// held to the same standard.
	fails, next := 0, 0
	for ; next < 5000 && fails < 10; next++ {
		name, e := a.entry(next)
		err := ingestOne(d, a.ns, e.Encode())
		if err == nil {
			acked[name] = e.Hash()
			continue
		}
		if fails == 0 {
			t.Logf("full after %d entries: %v", len(acked), err)
		}
		fails++
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("append on a full disk: %v; want an error saying the disk is full", err)
		}
	}
	if fails == 0 {
		t.Fatalf("%d entries of 1000 bytes fit on a 2 MiB disk", next)
	}
	checkAcked(t, d, a.ns, a.key, acked)
	if err := d.Close(); err != nil {
		t.Fatalf("closing the DB on a full disk: %v", err)
	}
	if d, err = OpenDB(path, Options{}); err != nil {
		t.Fatalf("reopening the DB on a full disk: %v", err)
	}
	checkAcked(t, d, a.ns, a.key, acked)
	// Space again: the refused entries, and more.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	for i := range next + 20 {
		if _, ok := acked[fmt.Sprintf("f%05d", i)]; ok {
			continue
		}
		name, e := a.entry(i)
		if err := ingestOne(d, a.ns, e.Encode()); err != nil {
			t.Fatalf("append %d once space is freed: %v", i, err)
		}
		acked[name] = e.Hash()
	}
	checkAcked(t, d, a.ns, a.key, acked)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

// crashChild is the process TestNamespaceCrash kills: it opens the DB
// at path, makes a namespace, prints "ns <id> <read key>", then appends
// entries from three goroutines at once (group commits), printing
// "ack <name> <hash>" once each Ingest has returned, until killed (or
// after 100,000 entries).
func crashChild(path string) error {
	d, err := OpenDB(path, Options{})
	if err != nil {
		return err
	}
	a, err := newAppender(d)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	say("ns %x %x", a.ns[:], a.key[:])
	errs := make(chan error, 3)
	for g := range 3 {
		go func() {
			for i := g; i < 100_000; i += 3 {
				name, e := a.entry(i)
				if err := ingestOne(d, a.ns, e.Encode()); err != nil {
					errs <- err
					return
				}
				h := e.Hash()
				say("ack %s %x", name, h[:])
			}
			errs <- nil
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			return err
		}
	}
	return d.Close()
}

// TestNamespaceCrash runs this test binary as a process appending to a
// DB and SIGKILLs it at a random moment (seeded, logged), four times
// over on the same DB: after each kill the DB opens, holds every entry
// the process acknowledged, in its log and its view, and its view is the
// one its records make; the namespaces of earlier rounds are intact.
func TestNamespaceCrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("QUILT_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (QUILT_CRASH_SEED=%d repeats this run)", seed, seed)
	rng := mrand.New(mrand.NewPCG(seed, 1))
	path := filepath.Join(t.TempDir(), "ns.db")
	type round struct {
		ns    dag.NSID
		key   dag.ReadKey
		acked map[string]dag.Hash
	}
	var rounds []round
	for r := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cur := round{acked: map[string]dag.Hash{}}
		lines := bufio.NewScanner(stdout)
		// The namespace, then the first acknowledgement: the process is
		// appending.
		if !lines.Scan() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: the appending process said nothing: %s", r, stderr.String())
		}
		var nsHex, keyHex string
		if _, err := fmt.Sscanf(lines.Text(), "ns %s %s", &nsHex, &keyHex); err != nil {
			t.Fatalf("round %d: %q: %v", r, lines.Text(), err)
		}
		hex.Decode(cur.ns[:], []byte(nsHex))
		hex.Decode(cur.key[:], []byte(keyHex))
		done := make(chan error, 1)
		go func() {
			for lines.Scan() {
				var name, hHex string
				if _, err := fmt.Sscanf(lines.Text(), "ack %s %s", &name, &hHex); err != nil {
					done <- fmt.Errorf("%q: %v", lines.Text(), err)
					return
				}
				var h dag.Hash
				hex.Decode(h[:], []byte(hHex))
				cur.acked[name] = h
			}
			done <- lines.Err()
		}()
		wait := time.Duration(20+rng.IntN(400)) * time.Millisecond
		t.Logf("round %d: SIGKILL after %v", r, wait)
		time.Sleep(wait)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil { // the pipe ends with the process
			t.Fatal(err)
		}
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: the appending process ended before the kill (%v): %s", r, werr, stderr.String())
		}
		t.Logf("round %d: %d entries acknowledged before the kill", r, len(cur.acked))
		rounds = append(rounds, cur)
		d, err := OpenDB(path, Options{})
		if err != nil {
			t.Fatalf("round %d: reopening after the kill: %v", r, err)
		}
		for _, p := range rounds {
			checkAcked(t, d, p.ns, p.key, p.acked)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
