package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/uphelper"
)

const helperHelp = "upload through this upload helper (a node run with --helper; its node ID, an 8-character prefix of it, or its API address; or auto: the member running a helper with the best measured link): the file's ciphertext goes to it once, and it erasure-codes and places the shares (see docs/grid.md, \"Upload helper\")"

const helperAutoHelp = "with the helper flag: go through the helper only when the links this process has measured make it faster (docs/grid.md), else upload directly; a process that has measured none goes direct; quilt put and get keep what they measured in $QUILT_HOME/links.json for the next command"

// helperFlags choose an upload helper.
type helperFlags struct {
	addr string
	auto bool
}

func (h *helperFlags) register(fs *flag.FlagSet, name string) {
	fs.StringVar(&h.addr, name, "", helperHelp)
	fs.BoolVar(&h.auto, name+"-auto", false, helperAutoHelp)
}

// resolveHelper returns the node ID of the helper name says (a node ID,
// a prefix, an address, or uphelper.Auto), and how it was chosen.
func (s *session) resolveHelper(ctx context.Context, name string) (id, why string, err error) {
	if name == uphelper.Auto {
		return uphelper.Discover(ctx, s.nodes, s.objects.Links())
	}
	id, err = uphelper.Resolve(ctx, s.nodes, name)
	return id, "asked for", err
}

// uploader returns the session's uploader through a helper.
func (s *session) uploader() *uphelper.Uploader {
	return &uphelper.Uploader{Nodes: s.nodes, Objects: s.objects}
}

// helperUpload returns a gateway.Config.Upload that stores objects
// through the helper h names (resolved at the first upload), falling
// back to a direct upload when the helper cannot be reached before the
// upload starts.
func helperUpload(s *session, h helperFlags) func(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, error) {
	var mu sync.Mutex
	var id string
	u := s.uploader()
	return func(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, error) {
		mu.Lock()
		if id == "" {
			var err error
			var why string
			if id, why, err = s.resolveHelper(ctx, h.addr); err == nil {
				s.log.Info("upload helper", "helper", id, "chosen", why)
			} else {
				mu.Unlock()
				s.log.Warn("upload helper not found: uploading directly", "helper", h.addr, "err", err)
				rc, _, err := s.objects.Put(ctx, r, size, p, happy)
				return rc, err
			}
		}
		helper := id
		mu.Unlock()
		rc, path, err := u.PutVia(ctx, helper, h.auto, r, size, p, happy)
		if path != nil {
			s.log.Debug("upload", "helper", path.Helper, "why", path.Why)
		}
		return rc, err
	}
}

// registerRepair puts an object's verify capability in the grid's repair
// registry; a registry that no node took only loses that.
func registerRepair(ctx context.Context, s *session, rc codec.ReadCap) {
	if _, err := repairer.Register(ctx, s.nodes, rc.Verify()); err != nil {
		fmt.Fprintf(os.Stderr, "warning: the object's verify capability is in no node's repair registry: %v\n", err)
	}
}

// putThroughHelper is quilt put --helper: the upload goes through the
// helper (or, with --helper-auto, where Choose says), falling back to a
// direct upload of a file when the helper fails.
func putThroughHelper(ctx context.Context, s *session, h helperFlags, in io.Reader, size int64, p codec.Params, happy int, verbose bool) error {
	helper, why, err := s.resolveHelper(ctx, h.addr)
	if err != nil {
		return err
	}
	if verbose && h.addr == uphelper.Auto {
		fmt.Fprintf(os.Stderr, "helper: %.8s, %s\n", helper, why)
	}
	u := s.uploader()
	bar := startProgress("put", size)
	u.Wrap = bar.reader
	rc, path, err := u.PutVia(ctx, helper, h.auto, in, size, p, happy)
	bar.finish()
	if path != nil && verbose {
		fmt.Fprintf(os.Stderr, "path: %s\n", path.Why)
	}
	if err != nil && ctx.Err() != nil {
		return errInterrupted
	}
	if err != nil {
		return err
	}
	if !path.Helper {
		return putDone(ctx, s, rc, path.Direct, happy, verbose)
	}
	rep := path.Through
	if rep.Answer.Registered == 0 {
		registerRepair(ctx, s, rc)
	}
	s.saveLinks()
	if verbose {
		confirmed := map[int]bool{}
		for _, sr := range rep.Confirmed {
			confirmed[sr.Share] = true
		}
		for _, sh := range rep.Answer.Shares {
			status := "stored, trailer checked on the node"
			switch {
			case sh.Err == "pending":
				status = "still being placed by the helper"
			case sh.Err != "":
				status = sh.Err
			case !confirmed[sh.Share]:
				status = "stored, says the helper (not checked)"
			}
			fmt.Fprintf(os.Stderr, "share %2d  node %.8s  %s\n", sh.Share, sh.Node, status)
		}
		fmt.Fprintf(os.Stderr, "%s sent to helper %.8s as %s of ciphertext; root checked; durable on %d nodes in %d zones (happy %d, %d checked), %d shares still being placed by the helper\n",
			human(rc.Size), helper, human(rep.Sent), rep.Answer.Happiness, rep.Answer.Zones, happy, rep.ConfirmedNodes, rep.Answer.Pending)
		fmt.Fprintf(os.Stderr, "verify capability (checks and repairs, cannot read): %s\n", rc.Verify())
	}
	if ms, err := s.nodes.Members(ctx, 1e9); err == nil {
		s.rememberPeers(ms)
	}
	fmt.Println(rc.String())
	return nil
}
