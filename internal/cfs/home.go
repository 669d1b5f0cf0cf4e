// Package cfs is the configuration filesystem (BaseFS) as a front end
// (layer 5): every verb of `quilt cfs` — bootstrap, genkey, import, write,
// cat, ls, mkdir, rm, ln, chmod, show, log, revert, grant, revoke, keys,
// members, watch — as library functions over the namespace client
// (internal/nsclient). The command parses flags and prints; the rules of
// who may write what, how a revoke keeps what was acknowledged, and how a
// watch follows the grid are here.
//
// A Home is a directory of local state: signing keys, the list of
// namespaces used (namespaces.json) and one replica (ns.db) of all of
// them. An FS is one namespace opened from a Home: its replica, kept in
// step with one live node by the namespace client, which also carries
// every change to the grid. Only one process at a time may hold a Home's
// replica (another waits up to 5 s for it), so an FS is short-lived,
// except Watch, which lets go of the replica while it waits, and a mount,
// which keeps a replica of its own (Options.Replica) that Follow keeps in
// step with the grid.
//
// Store is a namespace seen as the flat keys of the file tree
// (internal/tree), so the FUSE mount serves it as it serves a bucket
// (quilt mount cfs:NAMESPACE).
package cfs

import (
	"crypto/ed25519"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/nsclient"
)

// Home is a directory of config filesystem state ($QUILT_HOME/cfs).
type Home string

// Namespace is one namespace a Home uses.
type Namespace struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	ReadKey string `json:"readkey"`
	Rules   string `json:"rules"` // config or object
	Key     string `json:"key"`   // name of the signing key used
}

// Cap is the namespace's capability.
func (n Namespace) Cap() (nsclient.Cap, error) {
	var c nsclient.Cap
	var err error
	if c.NS, err = dag.ParseNSID(n.ID); err != nil {
		return c, err
	}
	if c.Read, err = dag.ParseReadKey(n.ReadKey); err != nil {
		return c, err
	}
	c.Rules = dag.ConfigRules
	if n.Rules == "object" {
		c.Rules = dag.ObjectRules
	}
	return c, nil
}

// State is the list of namespaces a Home uses (namespaces.json).
type State struct {
	Default    string      `json:"default"`
	Namespaces []Namespace `json:"namespaces"`
}

// StatePath is the file of the Home's State.
func (h Home) StatePath() string { return filepath.Join(string(h), "namespaces.json") }

// State reads the namespaces the Home uses; a missing file is an empty
// State, a damaged one an error naming the file (never replaced).
func (h Home) State() (State, error) {
	var st State
	_, err := atomicfile.ReadJSON(h.StatePath(), &st)
	return st, err
}

func (h Home) saveState(st State) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	return writeFile(h.StatePath(), append(b, '\n'))
}

// writeFile replaces the file p by b durably, making its directory if
// need be.
func writeFile(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, 0o600)
}

// Find returns the namespace called name (or with that ID). An empty name
// is $QUILT_NS, else the namespace last bootstrapped or imported.
func (st State) Find(name string) (Namespace, error) {
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
		return Namespace{}, errors.New("no namespace yet: create one with 'quilt cfs bootstrap NAME' or 'quilt cfs import CAP'")
	}
	return Namespace{}, fmt.Errorf("%w: no namespace %q here", ErrNoNamespace, name)
}

// ErrNoNamespace means the Home does not use a namespace of that name.
var ErrNoNamespace = errors.New("cfs: unknown namespace")

func (st *State) put(n Namespace) {
	st.Namespaces = slices.DeleteFunc(st.Namespaces, func(o Namespace) bool { return o.Name == n.Name })
	st.Namespaces = append(st.Namespaces, n)
	st.Default = n.Name
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// EncodeKey writes a public key (or a seed) as genkey prints it.
func EncodeKey(b []byte) string { return strings.ToLower(b32.EncodeToString(b)) }

func decodeKey(s string) ([]byte, error) { return b32.DecodeString(strings.ToUpper(s)) }

// KeyPath is the file of the signing key called name.
func (h Home) KeyPath(name string) string { return filepath.Join(string(h), "keys", name+".key") }

// LoadKey reads the signing key called name.
func (h Home) LoadKey(name string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(h.KeyPath(name))
	if err != nil {
		return nil, fmt.Errorf("signing key %q: %w (make one with 'quilt cfs genkey %s')", name, err, name)
	}
	seed, err := decodeKey(strings.TrimSpace(string(b)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is damaged", h.KeyPath(name))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func (h Home) saveKey(name string, k ed25519.PrivateKey) error {
	if name == "" || strings.ContainsAny(name, `/\`) || name[0] == '.' {
		return fmt.Errorf("%q cannot name a key (no slash, not starting with a dot)", name)
	}
	if _, err := os.Stat(h.KeyPath(name)); err == nil {
		return fmt.Errorf("a key named %q exists already (%s)", name, h.KeyPath(name))
	}
	return writeFile(h.KeyPath(name), []byte(EncodeKey(k.Seed())+"\n"))
}

// GenKey makes a signing key called name and returns its public key (what
// an owner grants).
func (h Home) GenKey(name string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	return pub, h.saveKey(name, priv)
}

// ParsePub reads a public key: as GenKey's caller prints it (base32), or
// the name of a key of this Home.
func (h Home) ParsePub(s string) (ed25519.PublicKey, error) {
	if b, err := decodeKey(s); err == nil && len(b) == ed25519.PublicKeySize {
		return b, nil
	}
	if k, err := h.LoadKey(s); err == nil {
		return k.Public().(ed25519.PublicKey), nil
	}
	return nil, fmt.Errorf("%q is neither a public key (as 'quilt cfs genkey' prints) nor a local key name", s)
}

// Import adds a namespace someone shared (its capability) under a local
// name (default: the first 8 characters of its ID); writes are signed with
// the key called key. It becomes the default namespace.
func (h Home) Import(capStr, name, key string) (Namespace, error) {
	c, err := nsclient.ParseCap(capStr)
	if err != nil {
		return Namespace{}, err
	}
	st, err := h.State()
	if err != nil {
		return Namespace{}, err
	}
	n := Namespace{Name: name, ID: c.NS.String(), ReadKey: c.Read.String(), Rules: "config", Key: key}
	if c.Rules == dag.ObjectRules {
		n.Rules = "object"
	}
	if n.Name == "" {
		n.Name = n.ID[:8]
	}
	if n.Key == "" {
		n.Key = "default"
	}
	st.put(n)
	return n, h.saveState(st)
}
