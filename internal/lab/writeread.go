package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

// recordSize is the record length of the IOzone runs in the Tahoe-LAFS
// paper: files are written and read 128 KiB at a time.
const recordSize = 128 << 10

// writeReadSizes are the file sizes of the paper's IOzone sweep, 64 KiB to
// 128 MiB (quick: a few of them).
func writeReadSizes(quick bool) []int64 {
	if quick {
		return []int64{64 << 10, 512 << 10, 4 << 20}
	}
	var s []int64
	for n := int64(64 << 10); n <= 128<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// system is one storage system under test: something that stores a file
// and reads it back, from one client.
type system struct {
	name string
	put  func(ctx context.Context, r io.Reader, size int64) (string, error)
	get  func(ctx context.Context, ref string, w io.Writer) (int64, error)
	// settle, if set, waits (untimed) after a write for what the system
	// still does in the background (Quilt's shares placed after the
	// acknowledgement), so that it does not overlap the read.
	settle func(ctx context.Context) error
}

// records is a reader of size pseudo-random bytes handed out at most
// recordSize at a time, hashing what it hands out.
type records struct {
	rng  *rand.ChaCha8
	left int64
	buf  []byte
	sum  interface{ Write([]byte) (int, error) }
}

func (r *records) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), recordSize, r.left)
	r.rng.Read(p[:k])
	r.sum.Write(p[:k])
	r.left -= k
	return int(k), nil
}

// recordWriter takes what a download writes and hashes it, as a reader
// of 128 KiB records would.
type recordWriter struct {
	n   int64
	sum interface{ Write([]byte) (int, error) }
}

func (w *recordWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.sum.Write(p)
	return len(p), nil
}

// writeRead writes a file of size bytes and reads it back, and returns the
// two throughputs in MB/s (10^6 bytes per second).
func writeRead(ctx context.Context, s system, size int64, seed uint64) (wMBs, rMBs float64, err error) {
	var seedb [32]byte
	seedb[0], seedb[1] = byte(seed), byte(seed>>8)
	in := sha256.New()
	src := &records{rng: rand.NewChaCha8(seedb), left: size, sum: in}
	start := time.Now()
	ref, err := s.put(ctx, src, size)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: write %s: %w", s.name, report.SizeLabel(size), err)
	}
	wt := time.Since(start)
	if s.settle != nil {
		if err := s.settle(ctx); err != nil {
			return 0, 0, fmt.Errorf("%s: write %s: background: %w", s.name, report.SizeLabel(size), err)
		}
	}
	out := sha256.New()
	dst := &recordWriter{sum: out}
	start = time.Now()
	if _, err := s.get(ctx, ref, dst); err != nil {
		return 0, 0, fmt.Errorf("%s: read %s: %w", s.name, report.SizeLabel(size), err)
	}
	rt := time.Since(start)
	if dst.n != size || !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		return 0, 0, fmt.Errorf("%s: read back %d bytes that differ from the %d written", s.name, dst.n, size)
	}
	return float64(size) / wt.Seconds() / 1e6, float64(size) / rt.Seconds() / 1e6, nil
}

func runWriteRead(ctx context.Context, env *Env) error {
	sc := env.Scenario
	clients := sc.Role("client")
	if len(env.Clients) > 0 {
		var chosen []scenario.Node
		for _, name := range env.Clients {
			i := slices.IndexFunc(clients, func(n scenario.Node) bool { return n.Name == name })
			if i < 0 {
				return fmt.Errorf("lab: write-read: scenario %s has no client %q", sc.Name, name)
			}
			chosen = append(chosen, clients[i])
		}
		clients = chosen
	}
	if len(clients) == 0 {
		return fmt.Errorf("lab: write-read needs a client in scenario %s", sc.Name)
	}
	sizes := writeReadSizes(env.Quick)
	if len(env.Sizes) > 0 {
		sizes = env.Sizes
	}
	work, err := env.workDir("write-read")
	if err != nil {
		return err
	}
	env.logf("starting %d Quilt nodes", len(sc.Role("storage")))
	helperNode, helperFor, err := helperOf(env)
	if err != nil {
		return err
	}
	cl, err := StartCluster(ctx, sc, ClusterOptions{Dir: filepath.Join(work, "quilt"), Seed: env.Seed, Helper: helperNode})
	if err != nil {
		return err
	}
	defer cl.Close()
	names := map[string]string{} // node ID → scenario name, for traces
	for _, n := range cl.Nodes {
		names[string(n.Node.ID())] = n.Name
	}
	var helperID string
	for _, cn := range cl.Nodes {
		if cn.Name == helperNode {
			helperID = string(cn.Node.ID())
			env.logf("upload helper on %s (%.8s) for client %s", helperNode, helperID, helperFor)
		}
	}

	// Tahoe-LAFS, if asked for, runs beside it on the same emulated
	// network.
	var tg *tahoeBeside
	if env.Tahoe != "" {
		tg, err = startTahoeBeside(ctx, env, cl, work)
		if err != nil {
			return fmt.Errorf("lab: tahoe: %w", err)
		}
		defer tg.Close()
	}

	repeats := 3
	if env.Quick {
		repeats = 1
	}
	if env.Runs > 0 {
		repeats = env.Runs
	}
	tab := writeReadTable(sc)
	seed := uint64(env.Seed)
	for _, c := range clients {
		nc, oc, err := cl.ClientWith(c.Name, func(o *object.Options) { o.AckAtHappy = !env.WaitAll })
		if err != nil {
			return err
		}
		var last *object.PutReport
		name := "quilt"
		if helperID != "" && c.Name == helperFor {
			name = "quilt+helper"
		}
		systems := []system{{
			name: name,
			put: func(ctx context.Context, r io.Reader, size int64) (string, error) {
				p := codec.DefaultParams()
				if env.SegmentSize > 0 {
					p.SegmentSize = env.SegmentSize
				}
				if name == "quilt+helper" {
					// The shares the helper places after the
					// acknowledgement are its own to finish.
					last = nil
					u := &uphelper.Uploader{Nodes: nc, Objects: oc}
					rc, rep, err := u.Put(ctx, helperID, r, size, p, 7)
					if err == nil {
						env.logf("quilt+helper: sent %d bytes of ciphertext; helper acknowledged on %d nodes (%d checked), %d shares pending", rep.Sent, rep.Answer.Happiness, rep.ConfirmedNodes, rep.Answer.Pending)
					}
					return rc.String(), err
				}
				rc, rep, err := oc.Put(ctx, r, size, p, 7)
				last = rep
				return rc.String(), err
			},
			settle: func(ctx context.Context) error {
				if last == nil || last.Background == nil {
					return nil
				}
				b, err := last.Background.Wait(ctx)
				if err != nil {
					return err
				}
				env.logf("quilt: acknowledged on %d nodes, the %d other shares placed %.1fs later (healthy %v)", last.Happiness, last.Pending, b.Took.Seconds(), b.Healthy)
				return nil
			},
			get: func(ctx context.Context, ref string, w io.Writer) (int64, error) {
				rc, err := codec.ParseReadCap(ref)
				if err != nil {
					return 0, err
				}
				rep, err := oc.Get(ctx, rc, w, 0, -1)
				if err != nil {
					return 0, err
				}
				if env.Trace && len(rep.Reads) > 0 {
					env.logf("quilt: read of %s: fetching from %d ms, %d holders at once at most, %d hedges", report.SizeLabel(rc.Size), rep.Located.Milliseconds(), rep.Holders, rep.Hedges)
					for _, h := range rep.Reads {
						env.logf("quilt:   %-5s share %d  %3d blocks  %9d bytes  %6.2f MB/s  asked at %4d ms, last block at %4d ms",
							names[h.Node], h.Share, h.Blocks, h.Bytes, h.Rate/1e6, h.First.Milliseconds(), h.Last.Milliseconds())
					}
				}
				return rc.Size, nil
			},
		}}
		if tg != nil {
			tg.At(c.Name)
			systems = append(systems, system{name: tg.systemName(env), put: func(ctx context.Context, r io.Reader, _ int64) (string, error) {
				return tg.Put(ctx, r)
			}, get: tg.Get})
		}
		// One small file first, unmeasured: connections to the nodes are
		// made, as on a mounted file system that has been in use.
		for _, s := range systems {
			if _, _, err := writeRead(ctx, s, 64<<10, 0); err != nil {
				return err
			}
		}
		for _, size := range sizes {
			for _, s := range systems {
				var ws, rs []float64
				var failed []string
				for range repeats {
					seed++
					w, r, err := writeRead(ctx, s, size, seed)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err != nil {
						// A system that cannot store the file on this
						// network is a result, not the end of the run.
						env.logf("%-10s client %-6s %9s  FAILED: %v", s.name, c.Name, report.SizeLabel(size), err)
						failed = append(failed, err.Error())
						continue
					}
					ws, rs = append(ws, w), append(rs, r)
				}
				if len(ws) == 0 {
					tab.Add(s.name, c.Name, report.SizeLabel(size), size, repeats, nil, nil, nil, nil, nil, nil, failureNote(failed))
					continue
				}
				w1, wm, w3 := report.Quartiles(ws)
				r1, rm, r3 := report.Quartiles(rs)
				env.logf("%-10s client %-6s %9s  write %7.2f MB/s  read %7.2f MB/s", s.name, c.Name, report.SizeLabel(size), wm, rm)
				tab.Add(s.name, c.Name, report.SizeLabel(size), size, repeats, wm, w1, w3, rm, r1, r3, failureNote(failed))
			}
		}
	}
	return saveWriteRead(env.Out, sc, tab)
}

// writeReadTable is write-read's empty results table on scenario sc: a
// row per system, client and size.
func writeReadTable(sc *scenario.Scenario) *report.Table {
	return &report.Table{Title: fmt.Sprintf("write-read on %s: sequential write and read, %d KiB records, 3-of-10", sc.Name, recordSize>>10),
		Columns: []string{"system", "client", "size", "bytes", "runs", "write MB/s (median)", "write q1", "write q3", "read MB/s (median)", "read q1", "read q3", "failed"}}
}

// saveWriteRead writes tab (a writeReadTable) to out as CSV and
// Markdown, with the scenario's notes and then notes, and plots each
// system and client's median write and read rates against file size.
// A failed case (no rate) is left out of the plots.
func saveWriteRead(out string, sc *scenario.Scenario, tab *report.Table, notes ...string) error {
	tab.Notes = append(tab.Notes, fmt.Sprintf("Scenario %s: %s.", sc.Name, sc.Description),
		"MB/s = 10^6 bytes per second of file data; every read is checked against what was written.")
	tab.Notes = append(tab.Notes, notes...)
	if _, _, err := report.Write(out, "write-read", tab); err != nil {
		return err
	}
	type key struct{ sys, client string }
	var order []key
	series := map[key][3][]float64{} // sizes, write medians, read medians
	var sizes []int64
	for _, row := range tab.Rows {
		wm, ok1 := row[5].(float64)
		rm, ok2 := row[8].(float64)
		size := row[3].(int64)
		if !ok1 || !ok2 {
			continue
		}
		k := key{row[0].(string), row[1].(string)}
		if _, ok := series[k]; !ok {
			order = append(order, k)
		}
		v := series[k]
		v[0], v[1], v[2] = append(v[0], float64(size)), append(v[1], wm), append(v[2], rm)
		series[k] = v
		if !slices.Contains(sizes, size) {
			sizes = append(sizes, size)
		}
	}
	slices.Sort(sizes)
	for i, what := range []string{"write", "read"} {
		p := &report.Plot{Title: fmt.Sprintf("Sequential %s on %s (%d KiB records)", what, sc.Name, recordSize>>10),
			XLabel: "file size", YLabel: "MB/s", LogX: true, XTicks: sizeTicks(sizes)}
		for _, k := range order {
			v := series[k]
			p.Series = append(p.Series, report.Series{Name: k.sys + ", client " + k.client, X: v[0], Y: v[1+i]})
		}
		if err := p.Save(filepath.Join(out, "write-read-"+what+".png")); err != nil {
			return err
		}
	}
	return nil
}

// failureNote summarises the errors of a case's failed runs for its
// table cell: how many, and the first one, cut short.
func failureNote(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	e := errs[0]
	if len(e) > 160 {
		e = e[:160] + "…"
	}
	return fmt.Sprintf("%d: %s", len(errs), e)
}

// sizeTicks labels a log axis of sizes.
func sizeTicks(sizes []int64) []report.Tick {
	var t []report.Tick
	step := max(1, len(sizes)/6)
	for i := 0; i < len(sizes); i += step {
		t = append(t, report.Tick{Value: float64(sizes[i]), Label: report.SizeLabel(sizes[i])})
	}
	return t
}

// helperOf resolves Env.Helper to a storage node's name ("best-node":
// the one with the fastest uplink, unlimited counting fastest) and the
// client whose writes go through it.
func helperOf(env *Env) (node, client string, err error) {
	if env.Helper == "" {
		return "", "", nil
	}
	client = env.HelperFor
	if client == "" {
		client = "worst"
	}
	sc := env.Scenario
	if len(sc.Role("client")) > 0 {
		found := false
		for _, c := range sc.Role("client") {
			found = found || c.Name == client
		}
		if !found {
			return "", "", fmt.Errorf("lab: --helper-for %q: scenario %s has no such client", client, sc.Name)
		}
	}
	if env.Helper != "best-node" {
		for _, s := range sc.Role("storage") {
			if s.Name == env.Helper {
				return s.Name, client, nil
			}
		}
		return "", "", fmt.Errorf("lab: --helper %q: scenario %s has no such storage node (or say best-node)", env.Helper, sc.Name)
	}
	var best int64 = -1
	for _, s := range sc.Role("storage") {
		up := s.Up
		if up == 0 {
			up = 1 << 62
		}
		if up > best {
			node, best = s.Name, up
		}
	}
	return node, client, nil
}
