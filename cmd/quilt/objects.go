package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// encodingFlags are the per-upload encoding choices.
type encodingFlags struct {
	k, n, happy int
	segment     string
}

func (e *encodingFlags) register(fs *flag.FlagSet) {
	d := codec.DefaultParams()
	fs.IntVar(&e.k, "k", d.K, "shares needed to read the file")
	fs.IntVar(&e.n, "n", d.N, "shares written, each to a different node where possible")
	fs.IntVar(&e.happy, "happy", 7, "fail unless shares land on at least this many distinct nodes")
	fs.StringVar(&e.segment, "segment-size", "1MiB", "plaintext bytes per segment")
}

func (e *encodingFlags) params() (codec.Params, error) {
	seg, err := parseSize(e.segment)
	if err != nil {
		return codec.Params{}, err
	}
	p := codec.Params{K: e.k, N: e.n, SegmentSize: int(seg)}
	if err := p.Validate(); err != nil {
		return p, err
	}
	if e.happy < 1 || e.happy > e.n {
		return p, fmt.Errorf("--happy %d must be between 1 and --n %d", e.happy, e.n)
	}
	return p, nil
}

func runPut(ctx context.Context, args []string) error {
	fs := newFlagSet("put", "Usage: quilt put [flags] FILE|-\n\nStores FILE (or standard input) encrypted and erasure-coded on the grid and\nprints its read capability. Keep the capability: it is the only way to read\nthe file back, and anyone who has it can read the file.")
	var g gridFlags
	var e encodingFlags
	g.register(fs)
	g.registerLease(fs)
	g.registerWaitAll(fs)
	e.register(fs)
	verbose := fs.Bool("v", false, "say where each share went, and print the verify capability (for 'quilt check') on standard error")
	var h helperFlags
	h.register(fs, "helper")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	p, err := e.params()
	if err != nil {
		return err
	}
	if err := g.checkLease(); err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	size := int64(-1)
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s is a directory: quilt put stores one file", name)
		}
		in, size = f, st.Size()
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	if h.addr != "" {
		return putThroughHelper(ctx, s, h, in, size, p, e.happy, *verbose)
	}
	if *verbose {
		fmt.Fprintln(os.Stderr, "path: direct (no --helper)")
	}
	bar := startProgress("put", size)
	rc, rep, err := s.objects.Put(ctx, bar.reader(in), size, p, e.happy)
	bar.finish()
	if err != nil && ctx.Err() != nil {
		// The shares were cut off by the interrupt, not lost by nodes.
		return errInterrupted
	}
	if err != nil {
		return err
	}
	return putDone(ctx, s, rc, rep, e.happy, *verbose)
}

// putDone registers an object stored directly for repair, reports it,
// prints its capability and waits for its background completion.
func putDone(ctx context.Context, s *session, rc codec.ReadCap, rep *object.PutReport, happy int, verbose bool) error {
	registerRepair(ctx, s, rc)
	s.saveLinks()
	if verbose {
		for _, sh := range rep.Shares {
			status := "stored"
			if errors.Is(sh.Err, object.ErrPending) {
				status = "still being placed"
			} else if sh.Err != nil {
				status = sh.Err.Error()
			}
			fmt.Fprintf(os.Stderr, "share %2d  node %.8s  %s\n", sh.Share, sh.Node, status)
		}
		fmt.Fprintf(os.Stderr, "%s durable on %d nodes in %d zones (happy %d), %d shares still being placed\n", human(rep.Bytes), rep.Happiness, rep.Zones, happy, rep.Pending)
		fmt.Fprintf(os.Stderr, "verify capability (checks and repairs, cannot read): %s\n", rc.Verify())
	}
	if ms, err := s.nodes.Members(ctx, 1e9); err == nil {
		s.rememberPeers(ms)
	}
	fmt.Println(rc.String())
	if rep.Background != nil {
		// The capability is out; the shares still on their way finish
		// before the command exits. An interrupt leaves them to the
		// grid's repairers (the object is in their registry).
		brep, err := rep.Background.Wait(ctx)
		if err != nil {
			fmt.Fprintf(os.Stderr, "interrupted: %d shares left for the grid's repairers to place\n", rep.Pending)
			return nil
		}
		if verbose || !brep.Healthy {
			placed := 0
			for _, sr := range brep.Uploaded {
				if sr.Err == nil {
					placed++
				}
			}
			fmt.Fprintf(os.Stderr, "background: %d shares uploaded, %d placed by repair in %.1fs", placed, brep.Repaired, brep.Took.Seconds())
			if !brep.Healthy {
				fmt.Fprintf(os.Stderr, "; not all shares are placed (%v): the grid's repairers will\n", brep.Err)
			} else {
				fmt.Fprintln(os.Stderr, "; every share is placed")
			}
		}
	}
	return nil
}

// parseRange reads "a-b" (inclusive, as HTTP), "a-" or "-n" (the last n).
func parseRange(s string, size int64) (off, length int64, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad range %q: use a-b, a- or -n (bytes, inclusive)", s)
	}
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bad range %q", s)
		}
		return max(size-n, 0), min(n, size), nil
	case b == "":
		off, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("bad range %q", s)
		}
		return off, -1, nil
	}
	off, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || end < off {
		return 0, 0, fmt.Errorf("bad range %q", s)
	}
	return off, end - off + 1, nil
}

func runGet(ctx context.Context, args []string) error {
	fs := newFlagSet("get", "Usage: quilt get [flags] CAP\n\nReads the file whose read capability is CAP. Every block is checked; nodes\nthat are down, slow or lying are worked around.")
	var g gridFlags
	g.register(fs)
	out := fs.String("o", "-", "write to this file (written whole, or not at all) instead of standard output")
	rng := fs.String("range", "", "read only bytes a-b (inclusive), a- (from a) or -n (the last n)")
	verbose := fs.Bool("v", false, "say which shares were read and which nodes misbehaved")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	rc, err := codec.ParseReadCap(fs.Arg(0))
	if err != nil {
		return err
	}
	off, length := int64(0), int64(-1)
	if *rng != "" {
		if off, length, err = parseRange(*rng, rc.Size); err != nil {
			return err
		}
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	var w io.Writer = os.Stdout
	var tmp *os.File
	if *out != "-" {
		tmp, err = os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".quilt-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		w = tmp
	}
	total := rc.Size - off
	if length >= 0 {
		total = min(length, total)
	}
	bar := startProgress("get", total)
	rep, err := s.objects.Get(ctx, rc, bar.writer(w), off, length)
	bar.finish()
	if *verbose && rep != nil {
		fmt.Fprintf(os.Stderr, "read shares %v\n", rep.Shares)
		for _, p := range rep.Problems {
			fmt.Fprintf(os.Stderr, "worked around node %.8s (share %d): %v\n", p.Node, p.Share, p.Err)
		}
	}
	if ctx.Err() != nil {
		// Interrupted: the reader stops where it was; what was written is
		// not the object (the temporary file is removed).
		return errInterrupted
	}
	if err != nil {
		return err
	}
	if rep == nil || rep.Bytes != total {
		var got int64
		if rep != nil {
			got = rep.Bytes
		}
		return fmt.Errorf("read only %d of the %d bytes asked for", got, total)
	}
	s.saveLinks()
	if tmp != nil {
		// Renamed into place only once whole. Not fsynced, as cp does not:
		// the file is as durable as any other the user writes.
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), *out); err != nil {
			return err
		}
	}
	return nil
}

func runCheck(ctx context.Context, args []string) error {
	fs := newFlagSet("check", "Usage: quilt check [flags] CAP\n\nReports which shares of the object are where, and whether they are good.\nA verify capability (quilt:v:...) is enough: checking and repairing need\nno key.")
	var g gridFlags
	g.register(fs)
	verify := fs.Bool("verify", false, "read every block of every share and check it (slower)")
	repair := fs.Bool("repair", false, "rebuild shares that have no good copy, and damaged copies in place, from any k good ones (implies --verify)")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	vc, err := codec.ParseVerifyCap(fs.Arg(0))
	if err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	check := s.objects.Check
	if *repair {
		check, *verify = s.objects.Repair, true
	}
	rep, err := check(ctx, vc, *verify)
	if rep != nil {
		fmt.Printf("object %x: %s, %d-of-%d\n", vc.SI[:], human(vc.Size), vc.K, vc.N)
		for _, c := range rep.Copies {
			status := "good"
			if c.Err != nil {
				status = "BAD: " + c.Err.Error()
			}
			fmt.Printf("  share %2d  node %.8s  %s\n", c.Share, c.Node, status)
		}
		for _, c := range rep.Repaired {
			status := "rebuilt"
			if c.Err != nil {
				status = "rebuild FAILED: " + c.Err.Error()
			}
			fmt.Printf("  share %2d  node %.8s  %s\n", c.Share, c.Node, status)
		}
		for _, p := range rep.Unreached {
			fmt.Printf("  node %.8s did not answer: %v\n", p.Node, p.Err)
		}
		state := "healthy"
		switch {
		case !rep.Readable():
			state = "UNREADABLE"
		case !rep.Clean():
			state = "readable, not healthy (run with --repair)"
		}
		fmt.Printf("%d of %d shares good on %d nodes: %s\n", rep.Good, rep.Total, rep.Nodes, state)
		switch {
		case err != nil:
		case !rep.Readable():
			err = errors.New("object is not readable")
		case !rep.Clean():
			err = fmt.Errorf("object is not healthy: %d of %d shares good, %d damaged copies", rep.Good, rep.Total, len(rep.Damaged()))
		}
	}
	return err
}
