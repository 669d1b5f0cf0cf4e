package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/gateway"
)

// runMount is quilt mount BUCKET DIR: the bucket's file tree as a local
// filesystem until it is unmounted (fusermount3 -u) or interrupted; and
// quilt mount cfs:NAMESPACE DIR, a namespace of the configuration
// filesystem (mountCFS).
func runMount(ctx context.Context, args []string) error {
	fs := newFlagSet("mount", `Usage: quilt mount --grid INVITE [flags] BUCKET DIR
       quilt mount --grid INVITE [flags] cfs:NAMESPACE DIR

Mounts the file tree of a gateway's bucket on DIR with FUSE until
'fusermount3 -u DIR', SIGINT or SIGTERM (then it unmounts and exits 0).
Files written are spooled in DIR/spool of the gateway directory and
committed at close and fsync (cfs: in $QUILT_HOME/cfs/spool). The
gateway directory is used by one process
at a time: to mount the buckets of a running 'quilt up' or 'quilt gateway',
give the mount its own --dir holding a copy of that gateway's 'registry'
file.

cfs:NAMESPACE mounts a namespace of the configuration filesystem (as
'quilt cfs' names it: a name or ID; cfs: alone is --ns, $QUILT_NS or the
namespace last bootstrapped or imported). Reads come from a local replica
($QUILT_HOME/cfs/mount-ID.db) that follows the grid; each change is an
entry signed with the namespace's key from $QUILT_HOME/cfs and gossiped.
Where the key has no grant, changes fail with EACCES ("Permission denied")
and reads keep working. --dir, --create and --inline are for buckets
only. See docs/mounts.md.`)
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", filepath.Join(home(), "gateway"), "gateway state directory (buckets)")
	create := fs.Bool("create", false, "make the bucket if it does not exist")
	cache := fs.Duration("cache", time.Second, "how long the kernel caches entries and attributes (changes from other doors invalidate them sooner)")
	debug := fs.Bool("debug", false, "log every FUSE request")
	nsName := fs.String("ns", "", "cfs: the namespace (name or ID) when cfs: names none")
	fs.IntVar(&inlineMax, "inline", 4096, "objects up to this many bytes are kept in the bucket's log, not as erasure-coded grid objects")
	if err := parseArgs(fs, args, 2); err != nil {
		return err
	}
	bucket, mnt := fs.Arg(0), fs.Arg(1)
	if st, err := os.Stat(mnt); err != nil || !st.IsDir() {
		return fmt.Errorf("mount: %s is not a directory", mnt)
	}
	if ns, ok := strings.CutPrefix(bucket, "cfs:"); ok {
		if *create {
			return errors.New("mount: --create is for buckets; make a namespace with 'quilt cfs bootstrap NAME'")
		}
		if ns == "" {
			ns = *nsName
		} else if *nsName != "" && *nsName != ns {
			return fmt.Errorf("mount: cfs:%s and --ns %s name different namespaces", ns, *nsName)
		}
		s, err := g.connect()
		if err != nil {
			return err
		}
		return mountCFS(ctx, s, ns, mnt, *cache, *debug)
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
	return serveMount(ctx, m, mnt)
}

// serveMount waits until m is unmounted, or until ctx ends (SIGINT,
// SIGTERM) and then unmounts it.
func serveMount(ctx context.Context, m *fuse.Server, mnt string) error {
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
