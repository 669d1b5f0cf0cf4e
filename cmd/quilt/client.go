package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/identity"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

var errNoGrid = errors.New("no grid given")

// home returns $QUILT_HOME, default ~/.quilt.
func home() string {
	if h := os.Getenv("QUILT_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".quilt")
	}
	return ".quilt"
}

// clientConfig is $QUILT_HOME/config.json, written by 'quilt up' and by
// client commands that learn the grid's members.
type clientConfig struct {
	Grid  string   `json:"grid"`            // invite
	Peers []string `json:"peers,omitempty"` // node addresses last seen alive
	// Gateway is the state directory of the grid's gateway that 'quilt
	// up' runs, where 'quilt key' finds it.
	Gateway string `json:"gateway,omitempty"`
}

func configPath() string { return filepath.Join(home(), "config.json") }

// loadConfig reads the client config; a missing one is empty, a damaged
// one an error naming it.
func loadConfig() (clientConfig, error) {
	var c clientConfig
	_, err := atomicfile.ReadJSON(configPath(), &c)
	return c, err
}

func saveConfig(c clientConfig) error {
	b, _ := json.MarshalIndent(c, "", "  ")
	return writeFileAtomic(configPath(), append(b, '\n'), 0o600)
}

// gridFlags are the flags every client command takes.
type gridFlags struct {
	grid  string
	stall time.Duration
	log   string
	lease time.Duration // --lease of the commands that store or renew (registerLease); 0: the default
	// waitAll (--wait-all of the commands that store, registerWaitAll)
	// makes uploads wait for every share rather than return at
	// happiness (object.Options.AckAtHappy).
	waitAll bool
}

func (g *gridFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.grid, "grid", "", "invite of the grid (quilt://SECRET@host:port,...); default $QUILT_GRID, then $QUILT_HOME/config.json")
	fs.DurationVar(&g.stall, "stall", 20*time.Second, "give up on a node that makes no progress for this long")
	fs.StringVar(&g.log, "log", "warn", "log level: debug, info, warn, error")
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// session is a connected client of a grid.
type session struct {
	inv     identity.Invite
	given   []string // the addresses the invite itself names
	nodes   *node.Client
	objects *object.Client
	log     *slog.Logger
}

// connect resolves the grid and builds the clients; it does not talk to
// the grid yet.
func (g *gridFlags) connect() (*session, error) {
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	src := g.grid
	if src == "" {
		src = os.Getenv("QUILT_GRID")
	}
	if src == "" {
		src = cfg.Grid
	}
	if src == "" {
		return nil, fmt.Errorf("%w: pass --grid INVITE, set QUILT_GRID, or run 'quilt up'", errNoGrid)
	}
	inv, err := identity.ParseInvite(src)
	if err != nil {
		return nil, err
	}
	given := append([]string(nil), inv.Addrs...)
	if cfg.Grid == inv.String() || cfg.Grid == "" {
		inv.Addrs = appendNew(inv.Addrs, cfg.Peers...)
	}
	dir := filepath.Join(home(), "client")
	key, err := identity.LoadOrCreateKey(dir)
	if err != nil {
		return nil, err
	}
	id, err := identity.New(key, inv.Secret)
	if err != nil {
		return nil, err
	}
	lease, err := leaseKey(dir)
	if err != nil {
		return nil, err
	}
	log := newLogger(g.log)
	nc := node.NewClient(inv, id)
	oc := object.New(object.NodeGrid{Client: nc}, object.Options{
		Stall:      g.stall,
		Logger:     log,
		AckAtHappy: !g.waitAll,
		LeaseTerm:  g.lease,
		LeaseSecret: func(si sharefile.SI) []byte {
			m := hmac.New(sha256.New, lease)
			m.Write(si[:])
			return m.Sum(nil)
		},
	})
	s := &session{inv: inv, given: given, nodes: nc, objects: oc, log: log}
	s.loadLinks() // links.go
	return s, nil
}

// rememberPeers keeps the addresses of the members seen alive, so a later
// command reaches the grid even when the invite's nodes are down.
func (s *session) rememberPeers(ms []member.Member) {
	cfg, err := loadConfig()
	if err != nil || cfg.Grid == "" {
		return
	}
	if inv, err := identity.ParseInvite(cfg.Grid); err != nil || inv.Secret != s.inv.Secret {
		return
	}
	var peers []string
	for _, m := range ms {
		if m.State == member.Alive {
			peers = append(peers, m.Addr)
		}
	}
	if len(peers) > 0 {
		cfg.Peers = peers
		saveConfig(cfg)
	}
}

func appendNew(a []string, b ...string) []string {
	for _, x := range b {
		found := false
		for _, y := range a {
			found = found || x == y
		}
		if !found {
			a = append(a, x)
		}
	}
	return a
}

// leaseKey returns this client's secret for deriving the cancel and renew
// secrets of its leases, creating it on first use.
func leaseKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, "lease.key")
	b, err := os.ReadFile(p)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err == nil {
		return nil, fmt.Errorf("%s is damaged (want 32 bytes)", p)
	}
	b = make([]byte, 32)
	rand.Read(b)
	if err := writeFileAtomic(p, b, 0o600); err != nil {
		return nil, err
	}
	return b, nil
}

// newFlagSet returns the flag set of a command whose -h prints usage (the
// synopsis, a blank line, what the command does) and then the flags.
func newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage, "\n\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses args and checks that n arguments remain besides the
// flags (n < 0: any number), printing the usage if not.
func parseArgs(fs *flag.FlagSet, args []string, n int) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := applyConfigFile(fs); err != nil { // --config, where a command has it
		return err
	}
	if n >= 0 && fs.NArg() != n {
		fs.Usage()
		return errUsage
	}
	return nil
}

// parseFlags parses args, returning errUsage on bad flags (the flag
// package has printed the problem and the usage).
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		return errUsage
	}
	return nil
}

// flagsFirst moves flags before positional arguments, so "get CAP -o F"
// works as people type it. "--" ends the flags; "-" is an argument.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
		}
		if i+1 < len(args) {
			flags = append(flags, args[i+1])
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

// parseSize reads sizes like 100, 64KiB, 10MiB, 2GB, 1.5T.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	var f float64
	if _, err := fmt.Sscanf(t, "%g", &f); err != nil || f < 0 {
		return 0, fmt.Errorf("bad size %q (try 100, 64KiB, 10MiB, 2GiB)", s)
	}
	return int64(f * float64(mult)), nil
}

// human formats a byte count.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
