package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/cfs"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/nsclient"
)

// The config filesystem (BaseFS's CLI): flags and output. The verbs
// themselves are package cfs's; each command keeps a replica of the
// namespace in $QUILT_HOME/cfs/ns.db, brings it up to date with one node
// of the grid, works on it, and sends new entries to that node, which
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
	{"ln", "[-s] TARGET PATH", "link PATH to TARGET (-s: symbolic); also 'link' and 'slink'"},
	{"chmod", "+x|-x PATH", "set or clear the executable bit; also 'mode'"},
	{"log", "PATH", "a path's history"},
	{"revert", "PATH ENTRY", "restore an earlier entry of PATH (see log)"},
	{"show", "[PATH]", "the tree"},
	{"members", "", "the grid's nodes and whether they hold the same log"},
	{"watch", "[--exec CMD]", "run CMD for every new entry (QUILT_EVENT_TYPE, QUILT_EVENT_PATH)"},
}

// cfsAliases are other names of verbs.
var cfsAliases = map[string]string{"link": "ln", "slink": "ln", "mode": "chmod"}

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
	if verb == "slink" {
		args = append([]string{"-s"}, args...)
	}
	name := verb
	if a, ok := cfsAliases[verb]; ok {
		name = a
	}
	for _, v := range cfsVerbs {
		if v.name == name {
			return cfsRun(ctx, name, fmt.Sprintf("Usage: quilt cfs %s %s\n\n%s.", v.name, v.args, v.summary), args)
		}
	}
	cfsUsage()
	return fmt.Errorf("unknown verb %q", verb)
}

// cfsHome is where the config filesystem keeps keys and replicas.
func cfsHome() string { return filepath.Join(home(), "cfs") }

// writeFileAtomic replaces the file p by b durably, creating its
// directory if need be: after a crash p holds the old or the new content.
func writeFileAtomic(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, mode)
}

// cfsOptions are the options of package cfs for this session: the nodes
// the invite names are tried first (the user chose them), then the
// others, each group in random order; the members seen are remembered.
func cfsOptions(s *session) cfs.Options {
	return cfs.Options{Home: cfs.Home(cfsHome()), Nodes: s.nodes, Objects: s.objects,
		Order: func(ms []member.Member) []member.Member {
			s.rememberPeers(ms)
			rand.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
			slices.SortStableFunc(ms, func(a, b member.Member) int {
				ia, ib := slices.Contains(s.given, a.Addr), slices.Contains(s.given, b.Addr)
				switch {
				case ia && !ib:
					return -1
				case ib && !ia:
					return 1
				}
				return 0
			})
			return ms
		}}
}

// cfsReadOnly are the verbs that work on the local copy when no node
// answers.
var cfsReadOnly = []string{"ls", "cat", "show", "log", "keys", "export"}

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
	argc := func(min, max int) error {
		if fs.NArg() < min || fs.NArg() > max {
			fs.Usage()
			return errUsage
		}
		return nil
	}
	h := cfs.Home(cfsHome())
	// The state file is read first: a damaged one is an error naming it,
	// whatever the verb.
	if _, err := h.State(); err != nil {
		return err
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
		pub, err := h.GenKey(kn)
		if err != nil {
			return err
		}
		fmt.Println(cfs.EncodeKey(pub))
		fmt.Fprintf(os.Stderr, "key %q (fingerprint %s) saved in %s\nan owner grants it with: quilt cfs grant %s PATH\n", kn, dag.Fingerprint(pub), h.KeyPath(kn), cfs.EncodeKey(pub))
		return nil
	case "import":
		if err := argc(1, 1); err != nil {
			return err
		}
		n, err := h.Import(fs.Arg(0), *name, *keyName)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "namespace %s imported as %q; writes are signed with key %q\n", n.ID, n.Name, n.Key)
		return nil
	case "bootstrap":
		if err := argc(1, 1); err != nil {
			return err
		}
		r := dag.ConfigRules
		switch *rules {
		case "config":
		case "object":
			r = dag.ObjectRules
		default:
			return fmt.Errorf("--rules is config or object, not %q", *rules)
		}
		sess, err := g.connect()
		if err != nil {
			return err
		}
		c, err := cfs.Bootstrap(ctx, cfsOptions(sess), fs.Arg(0), r)
		if c != (nsclient.Cap{}) {
			fmt.Println(c)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "namespace %q created; its root key is %s (keep it safe)\nothers use it with: quilt cfs import CAP (the line above: it lets them read)\n", fs.Arg(0), h.KeyPath(fs.Arg(0)+"-root"))
		return nil
	}
	sess, err := g.connect()
	if err != nil {
		return err
	}
	f, err := cfs.Open(cfsOptions(sess), *nsName)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(ctx); err != nil {
		if !slices.Contains(cfsReadOnly, verb) {
			return fmt.Errorf("reaching the grid: %w", err)
		}
		fmt.Fprintf(os.Stderr, "warning: no node reached, showing the local copy: %v\n", err)
	}
	switch verb {
	case "export":
		fmt.Println(f.Cap())
	case "ls":
		if err := argc(0, 1); err != nil {
			return err
		}
		p := "/"
		if fs.NArg() == 1 {
			p = fs.Arg(0)
		}
		return printLs(f, p, *long)
	case "cat":
		if err := argc(1, 1); err != nil {
			return err
		}
		return f.Cat(ctx, fs.Arg(0), os.Stdout)
	case "write":
		if err := argc(1, 2); err != nil {
			return err
		}
		in := os.Stdin
		if file := fs.Arg(1); file != "" && file != "-" {
			fh, err := os.Open(file)
			if err != nil {
				return err
			}
			defer fh.Close()
			in = fh
		}
		return f.Write(ctx, fs.Arg(0), in)
	case "mkdir":
		if err := argc(1, 1); err != nil {
			return err
		}
		return f.Mkdir(ctx, fs.Arg(0), *parents)
	case "rm":
		if err := argc(1, 1); err != nil {
			return err
		}
		return f.Rm(ctx, fs.Arg(0), *recursive)
	case "ln":
		if err := argc(2, 2); err != nil {
			return err
		}
		if *symbolic {
			return f.Slink(ctx, fs.Arg(0), fs.Arg(1))
		}
		return f.Link(ctx, fs.Arg(0), fs.Arg(1))
	case "chmod":
		if err := argc(1, 1); err != nil || mode == "" {
			fs.Usage()
			return errUsage
		}
		return f.Chmod(ctx, fs.Arg(0), mode == "+x")
	case "log":
		if err := argc(1, 1); err != nil {
			return err
		}
		return printLog(f, fs.Arg(0))
	case "revert":
		if err := argc(2, 2); err != nil {
			return err
		}
		return f.Revert(ctx, fs.Arg(0), fs.Arg(1))
	case "show":
		if err := argc(0, 1); err != nil {
			return err
		}
		p := "/"
		if fs.NArg() == 1 {
			p = fs.Arg(0)
		}
		return printShow(f, p)
	case "grant":
		if err := argc(2, 2); err != nil {
			return err
		}
		pub, err := f.Grant(ctx, fs.Arg(0), fs.Arg(1), *label)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "key %s may now write under %s\n", dag.Fingerprint(pub), fs.Arg(1))
	case "revoke":
		if err := argc(1, 1); err != nil {
			return err
		}
		n, err := f.Revoke(ctx, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "revoked %d grant(s) of key %s\n", n, fs.Arg(0))
	case "keys":
		return printKeys(f)
	case "members":
		return printMembers(ctx, f)
	case "watch":
		if err := argc(0, 0); err != nil {
			return err
		}
		return watch(ctx, f, *exec)
	default:
		return errors.New("unknown verb " + verb)
	}
	return nil
}
