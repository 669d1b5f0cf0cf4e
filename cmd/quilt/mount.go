package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/gateway"
)

// runMount is quilt mount BUCKET DIR: the bucket's file tree as a local
// filesystem until it is unmounted (fusermount3 -u) or interrupted.
func runMount(ctx context.Context, args []string) error {
	fs := newFlagSet("mount", "Usage: quilt mount --grid INVITE [flags] BUCKET DIR\n\nMounts the file tree of a gateway's bucket on DIR with FUSE until\n'fusermount3 -u DIR', SIGINT or SIGTERM (then it unmounts and exits 0).\nFiles written are spooled in DIR/spool of the gateway directory and\ncommitted at close and fsync. The gateway directory is used by one process\nat a time: to mount the buckets of a running 'quilt up' or 'quilt gateway',\ngive the mount its own --dir holding a copy of that gateway's 'registry'\nfile. See docs/mounts.md.")
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", filepath.Join(home(), "gateway"), "gateway state directory")
	create := fs.Bool("create", false, "make the bucket if it does not exist")
	cache := fs.Duration("cache", time.Second, "how long the kernel caches entries and attributes (changes from other doors invalidate them sooner)")
	debug := fs.Bool("debug", false, "log every FUSE request")
	fs.IntVar(&inlineMax, "inline", 4096, "objects up to this many bytes are kept in the bucket's log, not as erasure-coded grid objects")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	bucket, mnt := fs.Arg(0), fs.Arg(1)
	if st, err := os.Stat(mnt); err != nil || !st.IsDir() {
		return fmt.Errorf("mount: %s is not a directory", mnt)
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	gw, err := openGateway(ctx, s, *dir, s.log)
	if err != nil {
		return err
	}
	defer gw.Close()
	if err := findBucket(ctx, gw, bucket, *create); err != nil {
		return err
	}
	spool := filepath.Join(*dir, "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return err
	}
	m, err := fuse.Mount(gw.Tree(bucket), mnt, fuse.Options{
		Name: "quilt:" + bucket, SpoolDir: spool, CacheTimeout: *cache, Logger: s.log, Debug: *debug,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "quilt mount: bucket %s on %s (unmount: fusermount3 -u %s)\n", bucket, mnt, mnt)
	select {
	case <-m.Done():
		return nil
	case <-ctx.Done():
	}
	if err := m.Unmount(); err != nil {
		// Busy (a shell's working directory, an open file): detach it
		// now; the kernel drops it when the last user goes.
		fmt.Fprintf(os.Stderr, "quilt mount: %v; unmounting lazily\n", err)
		if out, err := exec.Command("fusermount3", "-u", "-z", mnt).CombinedOutput(); err != nil {
			return fmt.Errorf("mount: fusermount3 -u -z %s: %v: %s", mnt, err, out)
		}
		select {
		case <-m.Done():
		case <-time.After(10 * time.Second):
			return fmt.Errorf("mount: %s still served 10 s after a lazy unmount", mnt)
		}
	}
	return nil
}

// findBucket checks that gw has bucket, making it if create is set.
func findBucket(ctx context.Context, gw *gateway.Gateway, bucket string, create bool) error {
	bs, err := gw.Buckets(ctx)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if b.Name == bucket {
			return nil
		}
	}
	if !create {
		return fmt.Errorf("mount: no bucket %q in this gateway (--create makes it)", bucket)
	}
	if err := gw.CreateBucket(ctx, bucket, ""); err != nil && !errors.Is(err, gateway.ErrBucketExists) {
		return fmt.Errorf("mount: bucket %s: %w", bucket, err)
	}
	return nil
}
