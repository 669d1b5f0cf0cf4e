package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// leaseHelp is the help of --lease, the term of the leases a client
// command gives shares.
const leaseHelp = "how long the lease of each share stored or renewed runs; nodes delete a share once all its leases have expired, so renew (quilt renew, from cron) well within it"

// registerLease adds --lease to a client command's flags.
func (g *gridFlags) registerLease(fs *flag.FlagSet) {
	fs.DurationVar(&g.lease, "lease", object.DefaultLeaseTerm, leaseHelp)
}

// registerWaitAll adds --wait-all to the flags of a command that stores
// objects.
func (g *gridFlags) registerWaitAll(fs *flag.FlagSet) {
	fs.BoolVar(&g.waitAll, "wait-all", false, "make each upload wait until every share is stored (full redundancy) rather than return once shares are durable on --happy distinct nodes, the rest placed in the background")
}

// checkLease refuses a lease term that is no term.
func (g *gridFlags) checkLease() error {
	if g.lease <= 0 {
		return fmt.Errorf("--lease %v: want a positive duration, such as 2160h (90 days)", g.lease)
	}
	return nil
}

func runRm(ctx context.Context, args []string) error {
	fs := newFlagSet("rm", "Usage: quilt rm [flags] CAP...\n\nCancels this client's lease on every share of each object (a read or verify\ncapability of a 'quilt put' of this $QUILT_HOME). A node deletes a share once\nno lease is left on it; a node that is down keeps its shares until their\nleases expire. Only the uploader's lease key ($QUILT_HOME/client/lease.key)\ncan cancel its leases.")
	var g gridFlags
	g.register(fs)
	return leaseCommand(ctx, fs, &g, args, "removed", func(ctx context.Context, s *session, vc codec.VerifyCap) (object.LeaseReport, error) {
		return s.objects.Cancel(ctx, vc.SI)
	})
}

func runRenew(ctx context.Context, args []string) error {
	fs := newFlagSet("renew", "Usage: quilt renew [flags] CAP...\n\nRenews this client's lease on every share of each object to --lease from\nnow. Run it (from cron, say) well within the lease term for every object\nyou keep: a share whose leases have all expired is deleted by its node.")
	var g gridFlags
	g.register(fs)
	g.registerLease(fs)
	return leaseCommand(ctx, fs, &g, args, "renewed", func(ctx context.Context, s *session, vc codec.VerifyCap) (object.LeaseReport, error) {
		return s.objects.Renew(ctx, vc.SI)
	})
}

// leaseCommand runs fn on the object of every capability in args, and
// says what it did to each. It fails if any failed.
func leaseCommand(ctx context.Context, fs *flag.FlagSet, g *gridFlags, args []string, did string, fn func(context.Context, *session, codec.VerifyCap) (object.LeaseReport, error)) error {
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if fs.Lookup("lease") != nil {
		if err := g.checkLease(); err != nil {
			return err
		}
	}
	var caps []codec.VerifyCap
	for _, a := range fs.Args() {
		vc, err := codec.ParseVerifyCap(a)
		if err != nil {
			return err
		}
		caps = append(caps, vc)
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	failed := 0
	for _, vc := range caps {
		if ctx.Err() != nil {
			return errInterrupted
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		rep, err := fn(cctx, s, vc)
		cancel()
		for _, p := range rep.Failed {
			fmt.Fprintf(os.Stderr, "node %.8s did not answer: %v\n", p.Node, p.Err)
		}
		switch {
		case errors.Is(err, object.ErrNoLease) && rep.Refused > 0:
			fmt.Fprintf(os.Stderr, "%x: %d nodes hold shares of it, none with a lease of this client's (%s)\n", vc.SI[:], rep.Refused, home())
			failed++
		case errors.Is(err, object.ErrNoLease):
			fmt.Fprintf(os.Stderr, "%x: no live node holds a share of it\n", vc.SI[:])
			failed++
		case err != nil:
			fmt.Fprintf(os.Stderr, "%x: %v\n", vc.SI[:], err)
			failed++
		case did == "removed":
			fmt.Printf("%x: lease cancelled on %d shares on %d nodes, %d shares deleted\n", vc.SI[:], rep.Shares, rep.Nodes, rep.Removed)
		default:
			fmt.Printf("%x: lease renewed on %d shares on %d nodes\n", vc.SI[:], rep.Shares, rep.Nodes)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects not %s", failed, len(caps), did)
	}
	return nil
}
