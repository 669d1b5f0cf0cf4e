package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base32"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func (c *cfs) ls(p string, long bool) error {
	if p == "" {
		p = "/"
	}
	items, err := c.db.List(c.ns, p, "", 0)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, it := range items {
		name := it.Name
		switch it.Type {
		case dag.Dir:
			name += "/"
		case dag.Symlink:
			name += " -> " + it.Target
		}
		if !long {
			fmt.Fprintln(tw, name)
			continue
		}
		mode := "-rw-"
		switch {
		case it.Type == dag.Dir:
			mode = "drwx"
		case it.Type == dag.Symlink:
			mode = "lrwx"
		case it.Exec:
			mode = "-rwx"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", mode, it.Size, it.Time.Time().Format("2006-01-02 15:04:05"), it.Current.Short(), name)
	}
	return tw.Flush()
}

// content reads a file's bytes (from the grid when they are an object).
func (c *cfs) content(ctx context.Context, data dag.Hash, w io.Writer) error {
	b, isObject, err := c.db.Content(c.ns, data)
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
	_, err = c.sess.objects.Get(ctx, rc, w, 0, -1)
	return err
}

func (c *cfs) cat(ctx context.Context, p string, w io.Writer) error {
	p = namespace.Clean(p)
	for hops := 0; ; hops++ {
		info, err := c.db.Stat(c.ns, p)
		if err != nil {
			return err
		}
		switch info.Type {
		case dag.Dir:
			return fmt.Errorf("%s is a directory", p)
		case dag.Symlink:
			if hops > 8 {
				return fmt.Errorf("%s: too many symbolic links", p)
			}
			t := info.Target
			if !path.IsAbs(t) {
				t = path.Join(path.Dir(p), t)
			}
			p = namespace.Clean(t)
			continue
		}
		return c.content(ctx, info.Data, w)
	}
}

func (c *cfs) write(ctx context.Context, p, file string) error {
	var in io.Reader = os.Stdin
	if file != "" && file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	p = namespace.Clean(p)
	if info, err := c.db.Stat(c.ns, p); err == nil && info.Type == dag.Dir {
		return fmt.Errorf("%s is a directory", p)
	}
	// Read up to the blocks limit; beyond it, the file goes to the grid
	// as an object and the entry holds its capability.
	head, err := io.ReadAll(io.LimitReader(in, dag.BlocksMax+1))
	if err != nil {
		return err
	}
	if _, err := c.mkdirs(ctx, path.Dir(p)); err != nil {
		return err
	}
	if len(head) <= dag.BlocksMax {
		return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.File(a, h, n, head)
		})
	}
	// Shares on as many distinct nodes as the grid has, up to 7 of 10
	// (quilt put's default); a small grid holds several shares a node.
	ms, err := c.sess.nodes.Members(ctx, time.Minute)
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
	rc, _, err := c.sess.objects.Put(ctx, io.MultiReader(bytes.NewReader(head), in), -1, p10, happy)
	if err != nil {
		return err
	}
	return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.ObjectFile(a, h, n, rc.String(), uint64(rc.Size)), nil
	})
}

// signerName names the key behind an entry's signer.
func (c *cfs) signerName(grants []namespace.Grant, signer dag.Hash) string {
	if signer.IsZero() {
		return "root"
	}
	for _, g := range grants {
		if g.Hash == signer {
			if g.Label != "" {
				return g.Label
			}
			return dag.Fingerprint(g.Key)
		}
	}
	return signer.Short()
}

func (c *cfs) log(p string) error {
	p = namespace.Clean(p)
	vs, err := c.db.History(c.ns, p)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return fmt.Errorf("%w: %s has no history", namespace.ErrNotFound, p)
	}
	cur := dag.Hash{}
	if info, err := c.db.Stat(c.ns, p); err == nil {
		cur = info.Current
	}
	grants, _ := c.db.Grants(c.ns)
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for _, v := range vs {
		mark := " "
		if v.Hash == cur {
			mark = "*"
		}
		detail := ""
		switch v.Entry.Action {
		case dag.Write:
			detail = fmt.Sprintf("%d bytes", v.Entry.Size)
			if !v.Complete {
				detail += " (incomplete)"
			}
		case dag.Revert, dag.Link:
			var t dag.Hash
			copy(t[:], v.Content)
			detail = "-> " + t.Short()
		case dag.Slink:
			detail = "-> " + string(v.Content)
		case dag.Mode:
			detail = "-x"
			if len(v.Content) > 0 && v.Content[0] == 1 {
				detail = "+x"
			}
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\tby %s\t%s\n", mark, v.Hash.Short(), v.Entry.Time.Time().Format("2006-01-02 15:04:05.000"),
			v.Entry.Action, c.signerName(grants, v.Entry.Signer), detail)
	}
	return tw.Flush()
}

func (c *cfs) revert(ctx context.Context, p, entry string) error {
	p = namespace.Clean(p)
	vs, err := c.db.History(c.ns, p)
	if err != nil {
		return err
	}
	var target *namespace.Version
	for _, v := range vs {
		if strings.HasPrefix(v.Hash.String(), strings.ToLower(entry)) {
			if target != nil {
				return fmt.Errorf("entry %q is ambiguous: give more digits", entry)
			}
			target = v
		}
	}
	if target == nil || len(entry) < 6 {
		return fmt.Errorf("%s has no entry %q (at least 6 hex digits; see 'quilt cfs log %s')", p, entry, p)
	}
	return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Pointer(dag.Revert, a, h, n, target.Hash), nil
	})
}

func (c *cfs) show(p, indent string) error {
	items, err := c.db.List(c.ns, p, "", 0)
	if err != nil {
		return err
	}
	if indent == "" {
		fmt.Fprintln(c.out, p)
	}
	for _, it := range items {
		suffix := ""
		switch it.Type {
		case dag.Dir:
			suffix = "/"
		case dag.Symlink:
			suffix = " -> " + it.Target
		default:
			suffix = fmt.Sprintf("  (%d bytes)", it.Size)
		}
		fmt.Fprintf(c.out, "%s  %s%s\n", indent, it.Name, suffix)
		if it.Type == dag.Dir {
			if err := c.show(it.Path, indent+"  "); err != nil {
				return err
			}
		}
	}
	return nil
}

// parsePub reads a public key: base32, or the name of a local key.
func parsePub(s string) (ed25519.PublicKey, error) {
	if b, err := b32dec(s); err == nil && len(b) == ed25519.PublicKeySize {
		return b, nil
	}
	if k, err := loadKey(s); err == nil {
		return k.Public().(ed25519.PublicKey), nil
	}
	return nil, fmt.Errorf("%q is neither a public key (as 'quilt cfs genkey' prints) nor a local key name", s)
}

func (c *cfs) grant(ctx context.Context, key, dir, label string) error {
	pub, err := parsePub(key)
	if err != nil {
		return err
	}
	dir = namespace.Clean(dir)
	anchor, err := c.dirEntry(dir)
	if err != nil {
		return err
	}
	w, err := c.writer(dir)
	if err != nil {
		return err
	}
	if label == "" {
		label = dag.Fingerprint(pub)
	}
	if err := c.commit(ctx, w.GrantKey(anchor, label, pub).Encode()); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "key %s may now write under %s\n", dag.Fingerprint(pub), dir)
	return nil
}

func (c *cfs) revoke(ctx context.Context, key string) error {
	pub, err := parsePub(key)
	if err != nil {
		// A fingerprint or label also names a granted key.
		grants, gerr := c.db.Grants(c.ns)
		if gerr != nil {
			return fmt.Errorf("revoke: reading the grants: %w", gerr)
		}
		for _, g := range grants {
			if dag.Fingerprint(g.Key) == key || g.Label == key {
				pub = g.Key
			}
		}
		if pub == nil {
			return err
		}
	}
	grants, err := c.db.Grants(c.ns)
	if err != nil {
		return fmt.Errorf("revoke: reading the grants: %w", err)
	}
	// Acknowledge what the key wrote that the view shows now, so the
	// revocation keeps the current state (BaseFS's ack). A directory that
	// cannot be listed aborts the revoke: acknowledging less than is shown
	// would let the purge drop visible entries.
	shown := map[dag.Hash][]dag.Hash{}
	var walk func(dir string) error
	walk = func(dir string) error {
		items, err := c.db.List(c.ns, dir, "", 0)
		if err != nil {
			return fmt.Errorf("revoke: listing %s: %w (nothing revoked)", dir, err)
		}
		for _, it := range items {
			for _, h := range []dag.Hash{it.Current, it.Data} {
				if v, err := c.db.Version(c.ns, h); err == nil {
					shown[v.Entry.Signer] = append(shown[v.Entry.Signer], h)
				}
			}
			if it.Type == dag.Dir {
				if err := walk(it.Path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return err
	}
	signerOf := func(h dag.Hash) (dag.Hash, dag.Hash, bool) {
		raws := c.db.Get(c.ns, []dag.Hash{h})
		if len(raws) == 0 {
			return dag.Hash{}, dag.Hash{}, false
		}
		r, err := dag.Decode(raws[0])
		if err != nil || r.Entry == nil {
			return dag.Hash{}, dag.Hash{}, false
		}
		return r.Entry.Signer, r.Entry.Anchor(), true
	}
	n := 0
	for _, g := range grants {
		if g.Revoked || !bytes.Equal(g.Key, pub) {
			continue
		}
		_, anchor, ok := signerOf(g.Hash)
		if !ok {
			continue
		}
		// The grant and the grants its key made, transitively: what they
		// signed and the tree shows now is acknowledged.
		chain := map[dag.Hash]bool{g.Hash: true}
		for grew := true; grew; {
			grew = false
			for _, sub := range grants {
				if s, _, ok := signerOf(sub.Hash); ok && chain[s] && !chain[sub.Hash] {
					chain[sub.Hash], grew = true, true
				}
			}
		}
		var ack []dag.Hash
		for s := range chain {
			ack = append(ack, shown[s]...)
		}
		slices.SortFunc(ack, func(a, b dag.Hash) int { return bytes.Compare(a[:], b[:]) })
		ack = slices.Compact(ack)
		w, err := c.writer(path.Dir(g.Dir + "/x"))
		if err != nil {
			return err
		}
		// Acknowledgements go first (63 parents per entry), then the
		// revoke: a node must see them before it purges.
		var recs [][]byte
		const per = dag.MaxParents - 1
		for len(ack) > per {
			recs = append(recs, w.Ack(anchor, ack[:per]).Encode())
			ack = ack[per:]
		}
		recs = append(recs, w.RevokeGrant(anchor, g.Hash, ack).Encode())
		if err := c.commit(ctx, recs...); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("key %s has no grant to revoke", dag.Fingerprint(pub))
	}
	fmt.Fprintf(os.Stderr, "revoked %d grant(s) of key %s\n", n, dag.Fingerprint(pub))
	return nil
}

func (c *cfs) keys() error {
	grants, err := c.db.Grants(c.ns)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", "FINGERPRINT", "LABEL", "UNDER", "STATE")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", dag.Fingerprint(c.ns.PublicKey()), "root", "/", "root key")
	for _, g := range grants {
		state := "granted"
		if g.Revoked {
			state = "revoked"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", dag.Fingerprint(g.Key), g.Label, g.Dir, state)
	}
	return tw.Flush()
}

func (c *cfs) members(ctx context.Context) error {
	ms, err := c.sess.nodes.Members(ctx, 0)
	if err != nil {
		return err
	}
	mine := c.db.Root(c.ns)
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", "NODE", "ADDRESS", "STATE", "RECORDS", "LOG")
	for _, m := range ms {
		records, log := "-", "-"
		if m.State == member.Alive {
			p := namespace.HTTPPeer{Client: c.sess.nodes.HTTP(), Base: "https://" + m.ID}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if r, err := p.Root(cctx, c.ns); err == nil {
				records = fmt.Sprint(r.Count)
				log = "same as here"
				if r != mine {
					log = "differs"
				}
			} else {
				log = "no answer"
			}
			cancel()
		}
		fmt.Fprintf(tw, "%.12s\t%s\t%s\t%s\t%s\n", m.ID, m.Addr, m.State, records, log)
	}
	return tw.Flush()
}

// watch runs cmd (or prints a line) for every entry that arrives from now
// on — from any node, or from another cfs command of this QUILT_HOME —
// waiting on a node for changes and pulling them. The replica is closed
// while handlers run and while waiting, so handlers may run cfs commands.
func (c *cfs) watch(ctx context.Context, cmd string) error {
	type event struct {
		typ, path, entry string
		time             dag.HLC
	}
	known := map[dag.Hash]bool{}
	var lastRemote namespace.Digest
	fmt.Fprintf(os.Stderr, "watching namespace %q; Ctrl-C to stop\n", c.cfg.Name)
	for first := true; ctx.Err() == nil; first = false {
		if c.db == nil {
			if err := c.openDB(); err != nil {
				return err
			}
		}
		err := c.sync(ctx)
		var events []event
		for _, h := range c.db.All(c.ns) {
			if known[h] {
				continue
			}
			known[h] = true
			raws := c.db.Get(c.ns, []dag.Hash{h})
			if first || len(raws) == 0 {
				continue
			}
			r, derr := dag.Decode(raws[0])
			if derr != nil || r.Entry == nil {
				continue // a block: part of a write's event
			}
			ev := event{typ: r.Entry.Action.String(), entry: h.String(), time: r.Entry.Time}
			if v, verr := c.db.Version(c.ns, h); verr == nil {
				ev.path = v.Path
			} else if d, ok := c.grantDir(r.Entry); ok {
				ev.path = d
			}
			events = append(events, ev)
		}
		if first {
			fmt.Fprintln(os.Stderr, "watch: up to date")
		}
		slices.SortStableFunc(events, func(a, b event) int { return cmp.Compare(a.time, b.time) })
		root := c.db.Root(c.ns)
		c.close()
		for _, ev := range events {
			if cmd == "" {
				fmt.Fprintf(c.out, "%s %s %s\n", ev.typ, ev.path, ev.entry[:12])
				continue
			}
			sh := exec.CommandContext(ctx, "sh", "-c", cmd)
			sh.Stdout, sh.Stderr = os.Stdout, os.Stderr
			sh.Env = append(os.Environ(), "QUILT_EVENT_TYPE="+ev.typ, "QUILT_EVENT_PATH="+ev.path,
				"QUILT_EVENT_ENTRY="+ev.entry, "QUILT_NAMESPACE="+c.cfg.Name, "QUILT_NAMESPACE_ID="+c.cfg.ID)
			if err := sh.Run(); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "watch: handler for %s %s: %v\n", ev.typ, ev.path, err)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(os.Stderr, "watch: %v; trying another node\n", err)
			c.peer = nil
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
			continue
		}
		remote, err := c.peer.Wait(ctx, c.ns, root, 30*time.Second)
		switch {
		case err != nil && ctx.Err() == nil:
			c.peer = nil
		case err == nil && remote == lastRemote:
			// The node holds what we refuse (or we hold what it refuses):
			// do not spin.
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
		lastRemote = remote
	}
	return nil
}

// grantDir is the directory a grant, revoke or ack hangs from.
func (c *cfs) grantDir(e *dag.Entry) (string, bool) {
	if e.IsRoot() {
		return "/", true
	}
	v, err := c.db.Version(c.ns, e.Anchor())
	if err != nil {
		return "", false
	}
	return v.Path, true
}
