package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/cfs"
	"github.com/quilt-grid/quilt/internal/fuse"
	"github.com/quilt-grid/quilt/internal/tree"
)

// mountCFS is quilt mount cfs:NAMESPACE DIR: the namespace's tree as a
// local filesystem (BaseFS's mount). The mount keeps a replica of its own
// ($QUILT_HOME/cfs/mount-ID.db), so the cfs commands, which share ns.db,
// run beside it; the replica follows the grid while mounted.
func mountCFS(ctx context.Context, s *session, name, mnt string, cache time.Duration, debug bool) error {
	opt := cfsOptions(s)
	st, err := opt.Home.State()
	if err != nil {
		return err
	}
	n, err := st.Find(name)
	if err != nil {
		return fmt.Errorf("mount: %w (see %s)", err, opt.Home.StatePath())
	}
	// The replica follows the grid, so a grant arriving shows without a
	// wait at each refused write.
	opt.GrantWait = -1
	opt.Replica = filepath.Join(cfsHome(), "mount-"+n.ID+".db")
	f, err := cfs.Open(opt, n.Name)
	if err != nil {
		return fmt.Errorf("mount: %w (is cfs:%s mounted already?)", err, n.Name)
	}
	defer f.Close()
	store, err := cfs.NewStore(f, s.log)
	if err != nil {
		return fmt.Errorf("mount: cfs:%s: %w", n.Name, err)
	}
	if err := f.Sync(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "quilt mount: warning: no node reached, serving the local copy until one answers: %v\n", err)
	}
	spool := filepath.Join(cfsHome(), "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return err
	}
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		f.Follow(fctx, func(err error) { s.log.Warn("mount: reaching the grid", "err", err) })
	}()
	defer func() { stop(); <-followed }()
	m, err := fuse.Mount(tree.New(store), mnt, fuse.Options{
		Name: "quilt:cfs:" + n.Name, SpoolDir: spool, CacheTimeout: cache, Logger: s.log, Debug: debug, Symlinks: true,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "quilt mount: namespace %s on %s (unmount: fusermount3 -u %s)\n", n.Name, mnt, mnt)
	return serveMount(ctx, m, mnt)
}
