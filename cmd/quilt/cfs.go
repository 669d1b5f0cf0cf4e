package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// The config filesystem (BaseFS's CLI) over namespaces. Each command keeps
// a replica of the namespace in $QUILT_HOME/cfs/ns.db, brings it up to
// date with one node of the grid (anti-entropy: only what differs
// travels), works on it, and sends new entries to that node, which
// gossips them.

var cfsVerbs = []struct{ name, args, summary string }{
	{"bootstrap", "NAME", "create a namespace; you hold its root key"},
	{"import", "CAP [--name N]", "use a namespace someone shared (quilt:ns:...)"},
	{"export", "", "print the namespace's capability (ID and read key: share with care)"},
	{"genkey", "[NAME]", "make a signing key; prints the public key to grant"},
	{"grant", "KEY PATH", "let KEY (public key or local key name) write under PATH"},
	{"revoke", "KEY", "withdraw KEY's grants, keeping what it wrote so far"},
	{"keys", "", "list granted keys"},
	{"ls", "[-l] [PATH]", "list a directory"},
	{"cat", "PATH", "print a file"},
	{"write", "PATH [FILE|-]", "write a file from FILE or standard input"},
	{"mkdir", "[-p] PATH", "make a directory"},
	{"rm", "[-r] PATH", "remove a file or directory"},
	{"ln", "[-s] TARGET PATH", "link PATH to TARGET (-s: symbolic)"},
	{"chmod", "+x|-x PATH", "set or clear the executable bit"},
	{"log", "PATH", "a path's history"},
	{"revert", "PATH ENTRY", "restore an earlier entry of PATH (see log)"},
	{"show", "[PATH]", "the tree"},
	{"members", "", "the grid's nodes and whether they hold the same log"},
	{"watch", "[--exec CMD]", "run CMD for every new entry (QUILT_EVENT_TYPE, QUILT_EVENT_PATH)"},
}

func cfsUsage() {
	fmt.Fprint(os.Stderr, "Usage: quilt cfs VERB [flags] [args]\n\nA configuration filesystem shared by the grid (BaseFS): every change is a\nsigned log entry, replicated by gossip and anti-entropy.\n\nVerbs:\n")
	for _, v := range cfsVerbs {
		fmt.Fprintf(os.Stderr, "  %-9s %-18s %s\n", v.name, v.args, v.summary)
	}
	fmt.Fprint(os.Stderr, "\nEvery verb takes --grid INVITE and --ns NAME (default: $QUILT_NS, else the\nnamespace last bootstrapped or imported). Keys live in $QUILT_HOME/cfs.\n")
}

func runCFS(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		cfsUsage()
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	verb, args := args[0], args[1:]
	for _, v := range cfsVerbs {
		if v.name == verb {
			return cfsRun(ctx, verb, fmt.Sprintf("Usage: quilt cfs %s %s\n\n%s.", v.name, v.args, v.summary), args)
		}
	}
	cfsUsage()
	return fmt.Errorf("unknown verb %q", verb)
}

// cfsHome is where the config filesystem keeps keys and replicas.
func cfsHome() string { return filepath.Join(home(), "cfs") }

// nsConfig is one namespace this client uses.
type nsConfig struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	ReadKey string `json:"readkey"`
	Rules   string `json:"rules"` // config or object
	Key     string `json:"key"`   // name of the signing key used
}

type cfsState struct {
	Default    string     `json:"default"`
	Namespaces []nsConfig `json:"namespaces"`
}

// loadCFS reads the namespaces this client uses; a damaged file is an
// error, never silently replaced.
func loadCFS() (cfsState, error) {
	var st cfsState
	_, err := atomicfile.ReadJSON(filepath.Join(cfsHome(), "namespaces.json"), &st)
	return st, err
}

func saveCFS(st cfsState) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	return writeFileAtomic(filepath.Join(cfsHome(), "namespaces.json"), append(b, '\n'), 0o600)
}

// writeFileAtomic replaces the file p by b durably, creating its
// directory if need be: after a crash p holds the old or the new content.
func writeFileAtomic(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, mode)
}

func (st *cfsState) find(name string) (nsConfig, error) {
	if name == "" {
		name = os.Getenv("QUILT_NS")
	}
	if name == "" {
		name = st.Default
	}
	for _, n := range st.Namespaces {
		if n.Name == name || n.ID == name {
			return n, nil
		}
	}
	if name == "" {
		return nsConfig{}, errors.New("no namespace yet: create one with 'quilt cfs bootstrap NAME' or 'quilt cfs import CAP'")
	}
	return nsConfig{}, fmt.Errorf("no namespace %q here: see %s", name, filepath.Join(cfsHome(), "namespaces.json"))
}

func (st *cfsState) put(n nsConfig) {
	st.Namespaces = slices.DeleteFunc(st.Namespaces, func(o nsConfig) bool { return o.Name == n.Name })
	st.Namespaces = append(st.Namespaces, n)
	st.Default = n.Name
}

// keyPath is the file of a named signing key.
func keyPath(name string) string { return filepath.Join(cfsHome(), "keys", name+".key") }

func loadKey(name string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(keyPath(name))
	if err != nil {
		return nil, fmt.Errorf("signing key %q: %w (make one with 'quilt cfs genkey %s')", name, err, name)
	}
	seed, err := b32dec(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is damaged", keyPath(name))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func saveKey(name string, k ed25519.PrivateKey) error {
	if _, err := os.Stat(keyPath(name)); err == nil {
		return fmt.Errorf("a key named %q exists already (%s)", name, keyPath(name))
	}
	return writeFileAtomic(keyPath(name), []byte(b32enc(k.Seed())+"\n"), 0o600)
}

func b32enc(b []byte) string { return strings.ToLower(strings.TrimRight(b32.EncodeToString(b), "=")) }
func b32dec(s string) ([]byte, error) {
	return b32.DecodeString(strings.ToUpper(s))
}

// nsCap is how a namespace is shared: its ID, read key and, for object
// namespaces, the rules (conflict rules are part of what everyone must
// agree on).
func nsCap(n nsConfig) string {
	c := "quilt:ns:" + n.ID + ":" + n.ReadKey
	if n.Rules == "object" {
		c += ":object"
	}
	return c
}

// cfs is a command working on one namespace through a local replica.
type cfs struct {
	sess *session
	st   cfsState
	cfg  nsConfig
	ns   dag.NSID
	key  dag.ReadKey
	db   *namespace.DB
	peer *namespace.HTTPPeer
	out  io.Writer
}

func (c *cfs) rules() dag.Rules {
	if c.cfg.Rules == "object" {
		return dag.ObjectRules
	}
	return dag.ConfigRules
}

func (c *cfs) open(g *gridFlags, name string) error {
	var err error
	if c.cfg, err = c.st.find(name); err != nil {
		return err
	}
	if c.ns, err = dag.ParseNSID(c.cfg.ID); err != nil {
		return err
	}
	if c.key, err = dag.ParseReadKey(c.cfg.ReadKey); err != nil {
		return err
	}
	if c.sess, err = g.connect(); err != nil {
		return err
	}
	return c.openDB()
}

// openDB opens the local replica. Only one process at a time may hold it
// (others wait up to 5 s), so long-running verbs close it while idle.
func (c *cfs) openDB() error {
	db, err := namespace.OpenDB(filepath.Join(cfsHome(), "ns.db"), namespace.Options{})
	if err != nil {
		return fmt.Errorf("%w (is another quilt cfs command using %s?)", err, cfsHome())
	}
	if err := db.Open(c.ns, &c.key, c.rules()); err != nil {
		db.Close()
		return err
	}
	c.db = db
	return nil
}

func (c *cfs) close() {
	if c.db != nil {
		c.db.Close()
		c.db = nil
	}
}

// connectNode picks an alive node that answers.
func (c *cfs) connectNode(ctx context.Context) error {
	if c.peer != nil {
		return nil
	}
	ms, err := c.sess.nodes.Members(ctx, 0)
	if err != nil {
		return err
	}
	c.sess.rememberPeers(ms)
	// The nodes the invite names first (the user chose them), then the
	// others, each group in random order.
	rand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	slices.SortStableFunc(ms, func(a, b member.Member) int {
		ia, ib := slices.Contains(c.sess.given, a.Addr), slices.Contains(c.sess.given, b.Addr)
		switch {
		case ia && !ib:
			return -1
		case ib && !ia:
			return 1
		}
		return 0
	})
	var last error
	for _, m := range ms {
		if m.State != member.Alive {
			continue
		}
		p := &namespace.HTTPPeer{Client: c.sess.nodes.HTTP(), Base: "https://" + m.ID}
		if _, err := p.Root(ctx, c.ns); err != nil {
			last = err
			continue
		}
		c.peer = p
		return nil
	}
	return fmt.Errorf("no node answered: %v", last)
}

// sync brings the local replica and the node's into step.
func (c *cfs) sync(ctx context.Context) error {
	if err := c.connectNode(ctx); err != nil {
		return err
	}
	_, err := namespace.Sync(ctx, c.db, c.ns, c.peer, true)
	return err
}

// commit admits new records locally (the same checks every node makes)
// and sends them to the node.
func (c *cfs) commit(ctx context.Context, recs ...[]byte) error {
	res, err := c.db.Ingest(c.ns, recs)
	if err != nil {
		return err
	}
	if len(res.Rejected) > 0 {
		return res.Rejected[0]
	}
	if len(res.Admitted) != len(recs) {
		return fmt.Errorf("%d of %d records could not be checked (missing references)", len(recs)-len(res.Admitted), len(recs))
	}
	if c.peer == nil {
		return errors.New("written locally but no node reached: it will be sent by the next cfs command that reaches the grid")
	}
	pr, err := c.peer.Put(ctx, c.ns, recs, false)
	if err != nil {
		return fmt.Errorf("written locally, not yet sent to the grid (the next cfs command will): %w", err)
	}
	if len(pr.Rejected) > 0 {
		return fmt.Errorf("the node refused the change: %s", pr.Rejected[0])
	}
	return nil
}

// writer returns a writer for changes under dir, with the signing key of
// this namespace and the grant that covers dir.
func (c *cfs) writer(dir string) (*dag.Writer, error) {
	priv, err := loadKey(c.cfg.Key)
	if err != nil {
		return nil, err
	}
	w := &dag.Writer{NS: c.ns, Key: priv, Read: c.key, Clock: c.db.Clock()}
	pub := priv.Public().(ed25519.PublicKey)
	if bytes.Equal(pub, c.ns[:]) {
		return w, nil
	}
	grants, err := c.db.Grants(c.ns)
	if err != nil {
		return nil, err
	}
	best := -1
	for i, g := range grants {
		if g.Revoked || !bytes.Equal(g.Key, pub) || !under(dir, g.Dir) {
			continue
		}
		if best < 0 || len(g.Dir) < len(grants[best].Dir) {
			best = i
		}
	}
	if best < 0 {
		return nil, fmt.Errorf("%w: key %q (%s) has no grant covering %s; someone who may write there can run: quilt cfs grant %s %s",
			dag.ErrForbidden, c.cfg.Key, dag.Fingerprint(pub), dir, b32enc(pub), dir)
	}
	w.Grant = grants[best].Hash
	return w, nil
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// dirEntry is the mkdir entry of directory dir.
func (c *cfs) dirEntry(dir string) (dag.Hash, error) {
	info, err := c.db.Stat(c.ns, dir)
	if err != nil {
		return dag.Hash{}, err
	}
	if info.Type != dag.Dir {
		return dag.Hash{}, fmt.Errorf("%s is a %s, not a directory", dir, info.Type)
	}
	return info.Data, nil
}

// mkdirs makes the missing directories down to dir and returns dir's
// entry.
func (c *cfs) mkdirs(ctx context.Context, dir string) (dag.Hash, error) {
	if h, err := c.dirEntry(dir); err == nil || !errors.Is(err, namespace.ErrNotFound) {
		return h, err
	}
	if dir == "/" {
		return dag.Hash{}, fmt.Errorf("namespace %q has no root entry here yet: was it bootstrapped, and has a node got it? (quilt cfs members)", c.cfg.Name)
	}
	parent, err := c.mkdirs(ctx, filepath.Dir(dir))
	if err != nil {
		return parent, err
	}
	w, err := c.writer(dir)
	if err != nil {
		return dag.Hash{}, err
	}
	heads, _ := c.db.Heads(c.ns, dir)
	e := w.Entry(dag.Mkdir, parent, heads, filepath.Base(dir), nil)
	return e.Hash(), c.commit(ctx, e.Encode())
}

// change appends one entry for path p, made by mk from the writer, the
// parent directory's entry and p's current heads.
func (c *cfs) change(ctx context.Context, p string, mk func(w *dag.Writer, anchor dag.Hash, heads []dag.Hash, name string) (*dag.Entry, []*dag.Block)) error {
	p = namespace.Clean(p)
	if p == "/" {
		return errors.New("the root directory cannot be changed")
	}
	anchor, err := c.dirEntry(filepath.Dir(p))
	if err != nil {
		return err
	}
	w, err := c.writer(p)
	if err != nil {
		return err
	}
	heads, err := c.db.Heads(c.ns, p)
	if err != nil {
		return err
	}
	for _, h := range heads { // be later than what we replace
		if v, err := c.db.Version(c.ns, h); err == nil {
			c.db.Clock().Observe(v.Entry.Time)
		}
	}
	e, blocks := mk(w, anchor, heads, filepath.Base(p))
	recs := [][]byte{e.Encode()}
	for _, b := range blocks {
		recs = append(recs, b.Encode())
	}
	return c.commit(ctx, recs...)
}

func cfsRun(ctx context.Context, verb, usage string, args []string) error {
	fs := newFlagSet("cfs "+verb, usage)
	var g gridFlags
	g.register(fs)
	nsName := fs.String("ns", "", "namespace (name or ID)")
	long := fs.Bool("l", false, "ls: long listing")
	parents := fs.Bool("p", false, "mkdir: make parents as needed, no error if it exists")
	recursive := fs.Bool("r", false, "rm: remove a directory and what is under it")
	symbolic := fs.Bool("s", false, "ln: make a symbolic link")
	exec := fs.String("exec", "", "watch: command to run (in sh) for every new entry")
	name := fs.String("name", "", "import: local name of the namespace (default: a prefix of its ID)")
	keyName := fs.String("key", "default", "import: the signing key to write with")
	rules := fs.String("rules", "config", "bootstrap: conflict rules, config (BaseFS) or object (last writer wins); they travel in the capability")
	label := fs.String("label", "", "grant: a name for the key (default: its fingerprint)")
	// chmod's +x/-x look like flags; take them out first.
	var mode string
	if verb == "chmod" {
		for i, a := range args {
			if a == "+x" || a == "-x" {
				mode, args = a, append(slices.Clone(args[:i]), args[i+1:]...)
				break
			}
		}
	}
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	st, err := loadCFS()
	if err != nil {
		return err
	}
	c := &cfs{st: st, out: os.Stdout}
	defer c.close()
	argc := func(min, max int) error {
		if fs.NArg() < min || fs.NArg() > max {
			fs.Usage()
			return errUsage
		}
		return nil
	}
	switch verb {
	case "genkey":
		if err := argc(0, 1); err != nil {
			return err
		}
		kn := "default"
		if fs.NArg() == 1 {
			kn = fs.Arg(0)
		}
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return err
		}
		if err := saveKey(kn, priv); err != nil {
			return err
		}
		fmt.Printf("%s\n", b32enc(pub))
		fmt.Fprintf(os.Stderr, "key %q (fingerprint %s) saved in %s\nan owner grants it with: quilt cfs grant %s PATH\n", kn, dag.Fingerprint(pub), keyPath(kn), b32enc(pub))
		return nil
	case "import":
		if err := argc(1, 1); err != nil {
			return err
		}
		rest, ok := strings.CutPrefix(fs.Arg(0), "quilt:ns:")
		parts := strings.Split(rest, ":")
		if !ok || len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "object") {
			return errors.New("a namespace capability looks like quilt:ns:ID:READKEY (as 'quilt cfs export' prints)")
		}
		id, rk := parts[0], parts[1]
		*rules = "config"
		if len(parts) == 3 {
			*rules = "object"
		}
		if _, err := dag.ParseNSID(id); err != nil {
			return err
		}
		if _, err := dag.ParseReadKey(rk); err != nil {
			return err
		}
		n := nsConfig{Name: *name, ID: id, ReadKey: rk, Rules: *rules, Key: *keyName}
		if n.Name == "" {
			n.Name = id[:8]
		}
		c.st.put(n)
		if err := saveCFS(c.st); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "namespace %s imported as %q; writes are signed with key %q\n", id, n.Name, n.Key)
		return nil
	case "bootstrap":
		if err := argc(1, 1); err != nil {
			return err
		}
		if *rules != "config" && *rules != "object" {
			return fmt.Errorf("--rules is config or object, not %q", *rules)
		}
		nn := fs.Arg(0)
		if _, err := c.st.find(nn); err == nil {
			return fmt.Errorf("a namespace named %q exists already", nn)
		}
		id, priv, err := dag.NewNamespace()
		if err != nil {
			return err
		}
		rk, err := dag.NewReadKey()
		if err != nil {
			return err
		}
		if err := saveKey(nn+"-root", priv); err != nil {
			return err
		}
		c.st.put(nsConfig{Name: nn, ID: id.String(), ReadKey: rk.String(), Rules: *rules, Key: nn + "-root"})
		if err := saveCFS(c.st); err != nil {
			return err
		}
		if err := c.open(&g, nn); err != nil {
			return err
		}
		w := &dag.Writer{NS: c.ns, Key: priv, Read: c.key, Clock: c.db.Clock()}
		if err := c.connectNode(ctx); err != nil {
			c.peer = nil // commit keeps the root locally; the next command sends it
		}
		if err := c.commit(ctx, w.Root().Encode()); err != nil {
			fmt.Println(nsCap(c.cfg))
			return err
		}
		fmt.Println(nsCap(c.cfg))
		fmt.Fprintf(os.Stderr, "namespace %q created; its root key is %s (keep it safe)\nothers use it with: quilt cfs import CAP (the line above: it lets them read)\n", nn, keyPath(nn+"-root"))
		return nil
	}
	if err := c.open(&g, *nsName); err != nil {
		return err
	}
	if err := c.sync(ctx); err != nil {
		if verb != "ls" && verb != "cat" && verb != "show" && verb != "log" && verb != "keys" {
			return fmt.Errorf("reaching the grid: %w", err)
		}
		fmt.Fprintf(os.Stderr, "warning: no node reached, showing the local copy: %v\n", err)
	}
	switch verb {
	case "export":
		fmt.Println(nsCap(c.cfg))
	case "ls":
		if err := argc(0, 1); err != nil {
			return err
		}
		return c.ls(fs.Arg(0), *long)
	case "cat":
		if err := argc(1, 1); err != nil {
			return err
		}
		return c.cat(ctx, fs.Arg(0), os.Stdout)
	case "write":
		if err := argc(1, 2); err != nil {
			return err
		}
		return c.write(ctx, fs.Arg(0), fs.Arg(1))
	case "mkdir":
		if err := argc(1, 1); err != nil {
			return err
		}
		p := namespace.Clean(fs.Arg(0))
		if *parents {
			_, err := c.mkdirs(ctx, p)
			return err
		}
		if _, err := c.db.Stat(c.ns, p); err == nil {
			return fmt.Errorf("%s exists", p)
		}
		return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.Entry(dag.Mkdir, a, h, n, nil), nil
		})
	case "rm":
		if err := argc(1, 1); err != nil {
			return err
		}
		p := namespace.Clean(fs.Arg(0))
		info, err := c.db.Stat(c.ns, p)
		if err != nil {
			return err
		}
		if info.Type == dag.Dir && !*recursive {
			if items, _ := c.db.List(c.ns, p, "", 1); len(items) > 0 {
				return fmt.Errorf("%s is a directory that is not empty: use rm -r", p)
			}
		}
		return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.Entry(dag.Delete, a, h, n, nil), nil
		})
	case "ln":
		if err := argc(2, 2); err != nil {
			return err
		}
		target, p := fs.Arg(0), fs.Arg(1)
		if *symbolic {
			return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
				return w.Entry(dag.Slink, a, h, n, []byte(target)), nil
			})
		}
		info, err := c.db.Stat(c.ns, target)
		if err != nil {
			return err
		}
		if info.Type != dag.File {
			return fmt.Errorf("%s is a %s: hard links are to files", target, info.Type)
		}
		return c.change(ctx, p, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.Pointer(dag.Link, a, h, n, info.Data), nil
		})
	case "chmod":
		if err := argc(1, 1); err != nil || mode == "" {
			fs.Usage()
			return errUsage
		}
		if _, err := c.db.Stat(c.ns, fs.Arg(0)); err != nil {
			return err
		}
		bit := byte(0)
		if mode == "+x" {
			bit = 1
		}
		return c.change(ctx, fs.Arg(0), func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
			return w.Entry(dag.Mode, a, h, n, []byte{bit}), nil
		})
	case "log":
		if err := argc(1, 1); err != nil {
			return err
		}
		return c.log(fs.Arg(0))
	case "revert":
		if err := argc(2, 2); err != nil {
			return err
		}
		return c.revert(ctx, fs.Arg(0), fs.Arg(1))
	case "show":
		if err := argc(0, 1); err != nil {
			return err
		}
		p := "/"
		if fs.NArg() == 1 {
			p = fs.Arg(0)
		}
		return c.show(namespace.Clean(p), "")
	case "grant":
		if err := argc(2, 2); err != nil {
			return err
		}
		return c.grant(ctx, fs.Arg(0), fs.Arg(1), *label)
	case "revoke":
		if err := argc(1, 1); err != nil {
			return err
		}
		return c.revoke(ctx, fs.Arg(0))
	case "keys":
		return c.keys()
	case "members":
		return c.members(ctx)
	case "watch":
		if err := argc(0, 0); err != nil {
			return err
		}
		return c.watch(ctx, *exec)
	}
	return nil
}
