package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// runNodeDrain is `quilt node drain`: it marks a node draining, and waits
// until its repairer has moved every share it held to other nodes.
func runNodeDrain(ctx context.Context, args []string) error {
	fs := newFlagSet("node drain", "Usage: quilt node drain [flags] NODE-ID\n\nMarks a node draining: it takes no new shares, and moves every share it\nholds to other nodes (copies checked against their hashes, with their\nleases, under its --repair-budget). Waits until it holds none and says\nwhether it is safe to turn off. NODE-ID may be a unique prefix.")
	var g gridFlags
	g.register(fs)
	timeout := fs.Duration("timeout", time.Hour, "give up waiting after this long (the node goes on draining)")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	ms, err := s.nodes.Members(ctx, 0)
	if err != nil {
		return err
	}
	want := fs.Arg(0)
	var id string
	for _, m := range ms {
		if strings.HasPrefix(m.ID, want) {
			if id != "" {
				return fmt.Errorf("%q names more than one node: give more of the ID", want)
			}
			id = m.ID
		}
	}
	if id == "" || want == "" {
		return fmt.Errorf("no member of the grid has the ID %q (see quilt nodes)", want)
	}
	st, err := s.nodes.Drain(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "node %.16s draining: %d shares to move\n", id, st.Shares)
	deadline := time.Now().Add(*timeout)
	last := st
	for {
		// Done once a pass has run since ours was asked for and found
		// nothing left.
		if st.Shares == 0 && !st.Running && st.Passes > 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %.16s still holds %d shares after %v (last pass: %d not moved %s); it goes on draining", id, st.Shares, *timeout, st.Failed, st.Err)
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(500 * time.Millisecond):
		}
		if st, err = s.nodes.DrainStatus(ctx, id); err != nil {
			return err
		}
		if st.Moved != last.Moved || st.Failed != last.Failed {
			fmt.Fprintf(os.Stderr, "moved %d, %d left, %d not moved in the last pass\n", st.Moved, st.Shares, st.Failed)
		}
		last = st
	}
	if st.Doubled > 0 {
		return fmt.Errorf("node %.16s holds no shares, but %d went to nodes that already held a share of the same object (no other node had room): those objects are on fewer nodes; add nodes and repair before turning it off", id, st.Doubled)
	}
	fmt.Printf("node %.16s holds no shares; every share moved to a node holding none of its object's: safe to turn off\n", id)
	return nil
}
