package cfs

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsclient"
	"github.com/quilt-grid/quilt/internal/object"
)

// Errors of the verbs.
var (
	// ErrNoGrant means the signing key may not write there: it has no
	// grant covering the path, or only revoked ones. It wraps
	// dag.ErrForbidden.
	ErrNoGrant = fmt.Errorf("cfs: %w", dag.ErrForbidden)
	// ErrNotSent means a change was made in the local replica but no
	// node took it: the next command that syncs with the grid sends it.
	ErrNotSent = errors.New("cfs: written locally, not yet sent to the grid (the next cfs command that reaches it will send it)")
)

// Options say where an FS keeps its state and how it reaches the grid.
type Options struct {
	Home    Home           // required
	Nodes   *node.Client   // the grid (required)
	Objects *object.Client // files over dag.BlocksMax are grid objects; nil: they are refused
	// Order, if set, orders the live nodes tried (nsclient.Config.Order).
	Order func([]member.Member) []member.Member
	// GrantWait bounds how long a write by a key with no grant covering
	// its path waits for one to arrive from the grid (a grant made a
	// moment ago elsewhere travels by gossip); default 5 s. Negative: no
	// wait (a mount, whose replica follows the grid all the time).
	GrantWait time.Duration
	// Replica is the file of the replica; default HOME/ns.db, the one
	// the cfs commands share. A long-lived user of a namespace (a mount)
	// keeps its own, so the commands stay free to run beside it.
	Replica string
	NoSync  bool // no fsync of the replica (tests)
}

// FS is one namespace of a Home, opened: its replica and the namespace
// client that keeps it in step with the grid. Its methods are not safe
// for concurrent use. Verbs that change the namespace expect the replica
// synced first (Sync); the ones that only read work on the replica as it
// is.
type FS struct {
	opt Options
	ns  Namespace
	cap nsclient.Cap
	db  *namespace.DB
	c   *nsclient.Client
	// picker keeps the client's choice of node while the replica is
	// closed and reopened (Watch).
	picker *nsclient.Client
}

// Open opens the namespace called name (see State.Find) of opt.Home. It
// does not talk to the grid.
func Open(opt Options, name string) (*FS, error) {
	st, err := opt.Home.State()
	if err != nil {
		return nil, err
	}
	n, err := st.Find(name)
	if err != nil {
		return nil, fmt.Errorf("%w (see %s)", err, opt.Home.StatePath())
	}
	return open(opt, n)
}

func open(opt Options, n Namespace) (*FS, error) {
	if opt.GrantWait == 0 {
		opt.GrantWait = 5 * time.Second
	}
	c, err := n.Cap()
	if err != nil {
		return nil, fmt.Errorf("namespace %q in %s: %w", n.Name, opt.Home.StatePath(), err)
	}
	f := &FS{opt: opt, ns: n, cap: c}
	return f, f.openDB()
}

// openDB opens the Home's replica.
func (f *FS) openDB() error {
	file := f.opt.Replica
	if file == "" {
		file = filepath.Join(string(f.opt.Home), "ns.db")
	}
	db, err := namespace.OpenDB(file, namespace.Options{NoSync: f.opt.NoSync})
	if err != nil {
		return fmt.Errorf("%w (is another quilt cfs command using %s?)", err, file)
	}
	if err := db.Open(f.cap.NS, &f.cap.Read, f.cap.Rules); err != nil {
		db.Close()
		return err
	}
	f.db = db
	if f.picker == nil {
		f.picker = nsclient.New(nsclient.Config{DB: db, Nodes: f.opt.Nodes, Order: f.opt.Order, MembersMaxAge: time.Second})
	}
	f.c = f.picker.WithDB(db)
	return nil
}

// Close closes the replica.
func (f *FS) Close() error {
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	return err
}

// Namespace is what the Home records of the namespace.
func (f *FS) Namespace() Namespace { return f.ns }

// Records is how many records (entries and blocks) the replica holds of
// the namespace.
func (f *FS) Records() uint64 { return f.db.Count(f.cap.NS) }

// Cap is the namespace's capability (what export prints).
func (f *FS) Cap() nsclient.Cap { return f.cap }

// Bootstrap makes a namespace called name with the given rules: its root
// key (saved as NAME-root), its entry in the Home's State, and its root
// entry, sent to the grid. If no node takes the root entry the namespace
// exists all the same (the error wraps ErrNotSent, and the capability is
// returned): the next command that reaches the grid sends it.
func Bootstrap(ctx context.Context, opt Options, name string, rules dag.Rules) (nsclient.Cap, error) {
	st, err := opt.Home.State()
	if err != nil {
		return nsclient.Cap{}, err
	}
	if _, err := st.Find(name); err == nil {
		return nsclient.Cap{}, fmt.Errorf("a namespace named %q exists already", name)
	}
	if rules != dag.ConfigRules && rules != dag.ObjectRules {
		return nsclient.Cap{}, fmt.Errorf("unknown rules %d", rules)
	}
	id, priv, err := dag.NewNamespace()
	if err != nil {
		return nsclient.Cap{}, err
	}
	rk, err := dag.NewReadKey()
	if err != nil {
		return nsclient.Cap{}, err
	}
	if err := opt.Home.saveKey(name+"-root", priv); err != nil {
		return nsclient.Cap{}, err
	}
	n := Namespace{Name: name, ID: id.String(), ReadKey: rk.String(), Rules: "config", Key: name + "-root"}
	if rules == dag.ObjectRules {
		n.Rules = "object"
	}
	st.put(n)
	if err := opt.Home.saveState(st); err != nil {
		return nsclient.Cap{}, err
	}
	f, err := open(opt, n)
	if err != nil {
		return nsclient.Cap{}, err
	}
	defer f.Close()
	w := &dag.Writer{NS: id, Key: priv, Read: rk, Clock: f.db.Clock()}
	return f.cap, f.commit(ctx, w.Root().Encode())
}

// Sync brings the replica and a node's into step.
func (f *FS) Sync(ctx context.Context) error { return f.c.Sync(ctx, f.cap.NS) }

// commit sends records through the namespace client.
func (f *FS) commit(ctx context.Context, recs ...[]byte) error {
	err := f.c.Commit(ctx, f.cap.NS, recs)
	if errors.Is(err, nsclient.ErrNoGrid) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// writer returns a writer for changes at p, signed with the namespace's
// key and naming the grant that covers p. A key with no grant covering p
// waits, up to Options.GrantWait, for one to arrive from the grid: a grant
// made a moment ago reaches the node this replica syncs with by gossip.
func (f *FS) writer(ctx context.Context, p string) (*dag.Writer, error) {
	priv, err := f.opt.Home.LoadKey(f.ns.Key)
	if err != nil {
		return nil, err
	}
	w := &dag.Writer{NS: f.cap.NS, Key: priv, Read: f.cap.Read, Clock: f.db.Clock()}
	pub := priv.Public().(ed25519.PublicKey)
	if bytes.Equal(pub, f.cap.NS[:]) {
		return w, nil
	}
	deadline := time.Now().Add(f.opt.GrantWait)
	for {
		g, revoked, err := f.grantFor(pub, p)
		if err != nil {
			return nil, err
		}
		if g != nil {
			w.Grant = g.Hash
			return w, nil
		}
		if revoked || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, f.noGrant(pub, p, revoked)
		}
		if grantWaitHook != nil {
			grantWaitHook()
		}
		// Wait for the node's log to change (or to differ from ours),
		// then pull it.
		seen := f.db.Root(f.cap.NS)
		wctx, cancel := context.WithDeadline(ctx, deadline)
		d, werr := f.c.Wait(wctx, f.cap.NS, seen, time.Until(deadline))
		cancel()
		if werr == nil && d != seen {
			f.c.Sync(ctx, f.cap.NS)
		} else {
			// Nothing new, or no node: do not spin.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// grantWaitHook, if set, is called each time a write waits for a grant
// (tests).
var grantWaitHook func()

// grantFor returns the widest live grant of pub covering p, or whether
// pub had one covering p that was revoked.
func (f *FS) grantFor(pub ed25519.PublicKey, p string) (*namespace.Grant, bool, error) {
	grants, err := f.db.Grants(f.cap.NS)
	if err != nil {
		return nil, false, err
	}
	var best *namespace.Grant
	revoked := false
	for i, g := range grants {
		if !bytes.Equal(g.Key, pub) || !under(p, g.Dir) {
			continue
		}
		if g.Revoked {
			revoked = true
			continue
		}
		if best == nil || len(g.Dir) < len(best.Dir) {
			best = &grants[i]
		}
	}
	return best, revoked && best == nil, nil
}

// noGrant says why the key may not write at p, and what to do.
func (f *FS) noGrant(pub ed25519.PublicKey, p string, revoked bool) error {
	who := fmt.Sprintf("key %q (%s)", f.ns.Key, dag.Fingerprint(pub))
	if revoked {
		return fmt.Errorf("%w: %s was granted %s once, and that grant was revoked", ErrNoGrant, who, p)
	}
	if f.opt.GrantWait < 0 {
		return fmt.Errorf("%w: %s has no grant covering %s in this copy of the namespace; "+
			"someone who may write there can run: quilt cfs grant %s %s", ErrNoGrant, who, p, EncodeKey(pub), path.Dir(p))
	}
	return fmt.Errorf("%w: %s has no grant covering %s in this copy of the namespace (waited %s for one to arrive from the grid). "+
		"If it was granted just now, the grant has not reached the node yet: run the command again in a moment. "+
		"If it was never granted, someone who may write there can run: quilt cfs grant %s %s",
		ErrNoGrant, who, p, f.opt.GrantWait, EncodeKey(pub), path.Dir(p))
}

// dirEntry is the mkdir entry of directory dir.
func (f *FS) dirEntry(dir string) (dag.Hash, error) {
	info, err := f.db.Stat(f.cap.NS, dir)
	if err != nil {
		return dag.Hash{}, fmt.Errorf("%s: %w", dir, err)
	}
	if info.Type != dag.Dir {
		return dag.Hash{}, fmt.Errorf("%s is a %s, not a directory", dir, info.Type)
	}
	return info.Data, nil
}

// mkdirs makes the missing directories down to dir.
func (f *FS) mkdirs(ctx context.Context, dir string) error {
	if _, err := f.dirEntry(dir); err == nil || !errors.Is(err, namespace.ErrNotFound) {
		return err
	}
	if dir == "/" {
		return fmt.Errorf("namespace %q has no root entry here yet: was it bootstrapped, and has a node got it? (quilt cfs members)", f.ns.Name)
	}
	if err := f.mkdirs(ctx, path.Dir(dir)); err != nil {
		return err
	}
	return f.change(ctx, dir, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	})
}

// change appends one entry for path p (made by mk) that replaces its
// current versions.
func (f *FS) change(ctx context.Context, p string, mk nsclient.MakeFunc) error {
	p = namespace.Clean(p)
	if p == "/" {
		return errors.New("the root directory cannot be changed")
	}
	w, err := f.writer(ctx, p)
	if err != nil {
		return err
	}
	err = f.c.Write(ctx, w, f.cap.Rules, p, mk)
	if errors.Is(err, nsclient.ErrNoGrid) {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// Ls lists directory p.
func (f *FS) Ls(p string) ([]namespace.Info, error) {
	return f.db.List(f.cap.NS, namespace.Clean(p), "", 0)
}

// Stat returns what the view shows at p.
func (f *FS) Stat(p string) (namespace.Info, error) {
	return f.db.Stat(f.cap.NS, namespace.Clean(p))
}

// Cat writes file p's content to w, following up to 8 symbolic links;
// content kept in a grid object is read from the grid.
func (f *FS) Cat(ctx context.Context, p string, w io.Writer) error {
	p = namespace.Clean(p)
	for hops := 0; ; hops++ {
		info, err := f.db.Stat(f.cap.NS, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		switch info.Type {
		case dag.Dir:
			return fmt.Errorf("%s is a directory", p)
		case dag.Symlink:
			if hops >= 8 {
				return fmt.Errorf("%s: too many symbolic links", p)
			}
			t := info.Target
			if !path.IsAbs(t) {
				t = path.Join(path.Dir(p), t)
			}
			p = namespace.Clean(t)
			continue
		}
		b, isObject, err := f.db.Content(f.cap.NS, info.Data)
		if err != nil {
			return err
		}
		if !isObject {
			_, err = w.Write(b)
			return err
		}
		rc, err := codec.ParseReadCap(string(b))
		if err != nil {
			return err
		}
		if f.opt.Objects == nil {
			return fmt.Errorf("%s is a grid object and this client reads no objects", p)
		}
		_, err = f.opt.Objects.Get(ctx, rc, w, 0, -1)
		return err
	}
}

// Write makes file p from r, making the missing directories above it.
// Up to dag.BlocksMax bytes go in the log; a larger file is stored as a
// grid object (3-of-10, on as many nodes as the grid has up to 7) and the
// entry holds its capability.
func (f *FS) Write(ctx context.Context, p string, r io.Reader) error {
	p = namespace.Clean(p)
	if info, err := f.db.Stat(f.cap.NS, p); err == nil && info.Type == dag.Dir {
		return fmt.Errorf("%s is a directory", p)
	}
	head, err := io.ReadAll(io.LimitReader(r, dag.BlocksMax+1))
	if err != nil {
		return err
	}
	if err := f.mkdirs(ctx, path.Dir(p)); err != nil {
		return err
	}
	if len(head) <= dag.BlocksMax {
		return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.File(a, h, n, head)
		})
	}
	if f.opt.Objects == nil {
		return fmt.Errorf("%s is over %d bytes and this client stores no objects", p, dag.BlocksMax)
	}
	// Check the grant before storing an object nobody may name.
	if _, err := f.writer(ctx, p); err != nil {
		return err
	}
	ms, err := f.opt.Nodes.Members(ctx, time.Minute)
	if err != nil {
		return err
	}
	happy := 0
	for _, m := range ms {
		if m.State == member.Alive {
			happy++
		}
	}
	p10 := codec.DefaultParams()
	happy = max(1, min(happy, 7, p10.N))
	rc, _, err := f.opt.Objects.Put(ctx, io.MultiReader(bytes.NewReader(head), r), -1, p10, happy)
	if err != nil {
		return err
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.ObjectFile(a, h, n, rc.String(), uint64(rc.Size)), nil
	})
}

// Mkdir makes directory p; with parents, the missing ones above it too,
// and an existing directory is no error.
func (f *FS) Mkdir(ctx context.Context, p string, parents bool) error {
	p = namespace.Clean(p)
	if parents {
		return f.mkdirs(ctx, p)
	}
	if _, err := f.db.Stat(f.cap.NS, p); err == nil {
		return fmt.Errorf("%s exists", p)
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mkdir, a, h, n, nil), nil
	})
}

// Rm removes p; a directory that is not empty only with recursive (what
// is under it goes with it).
func (f *FS) Rm(ctx context.Context, p string, recursive bool) error {
	p = namespace.Clean(p)
	info, err := f.db.Stat(f.cap.NS, p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if info.Type == dag.Dir && !recursive {
		if items, _ := f.db.List(f.cap.NS, p, "", 1); len(items) > 0 {
			return fmt.Errorf("%s is a directory that is not empty: use rm -r", p)
		}
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// Link makes p a hard link to file target: the same content, whatever
// target becomes later.
func (f *FS) Link(ctx context.Context, target, p string) error {
	info, err := f.db.Stat(f.cap.NS, namespace.Clean(target))
	if err != nil {
		return fmt.Errorf("%s: %w", target, err)
	}
	if info.Type != dag.File {
		return fmt.Errorf("%s is a %s: hard links are to files", target, info.Type)
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Pointer(dag.Link, a, h, n, info.Data), nil
	})
}

// Slink makes p a symbolic link to target (a path, absolute or relative
// to p's directory, that need not exist).
func (f *FS) Slink(ctx context.Context, target, p string) error {
	if target == "" {
		return errors.New("a symbolic link needs a target")
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Slink, a, h, n, []byte(target)), nil
	})
}

// Chmod sets (exec) or clears p's executable bit.
func (f *FS) Chmod(ctx context.Context, p string, exec bool) error {
	if _, err := f.db.Stat(f.cap.NS, namespace.Clean(p)); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	bit := byte(0)
	if exec {
		bit = 1
	}
	return f.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Mode, a, h, n, []byte{bit}), nil
	})
}

// TreeItem is one path of Tree, Depth directories below its root.
type TreeItem struct {
	namespace.Info
	Depth int
}

// Tree lists everything under directory p, depth first, each directory's
// names in order.
func (f *FS) Tree(p string) ([]TreeItem, error) {
	var out []TreeItem
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		items, err := f.db.List(f.cap.NS, dir, "", 0)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		for _, it := range items {
			out = append(out, TreeItem{Info: it, Depth: depth})
			if it.Type == dag.Dir {
				if err := walk(it.Path, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(namespace.Clean(p), 0)
}
