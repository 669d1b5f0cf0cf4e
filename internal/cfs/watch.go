package cfs

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// Event is an entry that arrived while watching.
type Event struct {
	Type  string   // the action: write, mkdir, delete, revert, grant, …
	Path  string   // the path it changed; for a grant, revoke or ack, the directory it hangs from
	Entry dag.Hash // the entry
	Time  dag.HLC
}

// Watcher receives what Watch sees. Any field may be nil.
type Watcher struct {
	// Ready is called once, when the replica is up to date with a node
	// (or the first try to reach one failed): entries from then on are
	// events.
	Ready func()
	// Event is called for every entry that arrives, in time order. The
	// replica is closed while it runs, so it may run cfs commands of the
	// same Home.
	Event func(Event)
	// Trouble is told when a node could not be reached; Watch then tries
	// another after a pause.
	Trouble func(err error)
}

// Watch calls w.Event for every entry that arrives from now on — from any
// node, or from another command of this Home — until ctx ends, which is
// not an error. It waits on a node for changes (a long poll of up to
// 30 s) and pulls only what changed. The replica is closed while Watch
// waits and while events are handled, and reopened for each sync.
func (f *FS) Watch(ctx context.Context, w Watcher) error {
	known := map[dag.Hash]bool{}
	var lastRemote namespace.Digest
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for first := true; ctx.Err() == nil; first = false {
		if f.db == nil {
			if err := f.openDB(); err != nil {
				return err
			}
		}
		err := f.Sync(ctx)
		var events []Event
		for _, h := range f.db.All(f.cap.NS) {
			if known[h] {
				continue
			}
			known[h] = true
			raws := f.db.Get(f.cap.NS, []dag.Hash{h})
			if first || len(raws) == 0 {
				continue
			}
			r, derr := dag.Decode(raws[0])
			if derr != nil || r.Entry == nil {
				continue // a block: part of a write's event
			}
			ev := Event{Type: r.Entry.Action.String(), Entry: h, Time: r.Entry.Time}
			if v, verr := f.db.Version(f.cap.NS, h); verr == nil {
				ev.Path = v.Path
			} else if d, ok := f.anchorDir(r.Entry); ok {
				ev.Path = d
			}
			events = append(events, ev)
		}
		if first && w.Ready != nil {
			w.Ready()
		}
		slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.Time, b.Time) })
		root := f.db.Root(f.cap.NS)
		f.Close()
		for _, ev := range events {
			if ctx.Err() != nil {
				return nil
			}
			if w.Event != nil {
				w.Event(ev)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if w.Trouble != nil {
				w.Trouble(err)
			}
			pause(2 * time.Second)
			continue
		}
		remote, err := f.c.Wait(ctx, f.cap.NS, root, 30*time.Second)
		if err == nil && remote == lastRemote {
			// The node holds what this replica refuses (or the other way
			// round), or its long poll ended early: do not spin.
			pause(time.Second)
		}
		lastRemote = remote
	}
	return nil
}

// anchorDir is the directory a grant, revoke or ack hangs from.
func (f *FS) anchorDir(e *dag.Entry) (string, bool) {
	if e.IsRoot() {
		return "/", true
	}
	v, err := f.db.Version(f.cap.NS, e.Anchor())
	if err != nil {
		return "", false
	}
	return v.Path, true
}

// Follow keeps f's replica in step with the grid until ctx ends: it syncs,
// then waits on a node for a change (a long poll of up to 30 s) and syncs
// again, so entries from other writers arrive within moments of reaching
// that node, and entries kept locally are sent. trouble (if not nil) is
// told when no node could be reached; Follow tries again after a pause.
// Unlike Watch, it keeps the replica open.
func (f *FS) Follow(ctx context.Context, trouble func(error)) {
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	var lastRemote namespace.Digest
	for ctx.Err() == nil {
		if err := f.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			if trouble != nil {
				trouble(err)
			}
			pause(2 * time.Second)
			continue
		}
		root := f.db.Root(f.cap.NS)
		remote, err := f.c.Wait(ctx, f.cap.NS, root, 30*time.Second)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if trouble != nil {
				trouble(err)
			}
			pause(2 * time.Second)
			continue
		}
		if remote == lastRemote && remote != root {
			// The node holds what this replica refuses (or the other
			// way round): do not spin.
			pause(time.Second)
		}
		lastRemote = remote
	}
}
