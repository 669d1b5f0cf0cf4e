// Package gateway is what every object front end (S3 now, Swift next)
// needs below its protocol (layer 5): buckets as object namespaces, access
// keys with per-bucket permissions, and objects put and read as streams —
// small ones inline in the namespace entry, larger ones as encrypted,
// erasure-coded grid objects.
//
// A gateway is the trusted party of docs/design.md: it holds the namespaces'
// keys, and storage nodes see only ciphertext. Its state is itself a
// namespace — the registry, a config namespace whose root key lives in the
// gateway's directory — holding the buckets (their IDs, read keys and
// root keys), the access keys and the accounts (users.go). Gateways that share the registry's
// capability and key serve the same buckets: each keeps its own replica of
// the namespaces, syncs it with the grid's nodes, and sees another's writes
// as soon as their entries reach it.
package gateway

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/nsclient"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

// Errors every front end maps to its protocol's.
var (
	ErrNoBucket     = errors.New("gateway: no such bucket")
	ErrBucketExists = errors.New("gateway: bucket exists")
	ErrNotEmpty     = errors.New("gateway: bucket not empty")
	ErrBadBucket    = errors.New("gateway: invalid bucket name")
	ErrNoKey        = errors.New("gateway: no such key")
	ErrBadKey       = errors.New("gateway: invalid key")
	ErrDenied       = errors.New("gateway: access denied")
	// ErrNoGrid means no node took a change or answered (the namespace
	// client's error, after its retries).
	ErrNoGrid = nsclient.ErrNoGrid
)

// Perm is what an access key may do with a bucket.
type Perm int

// Permissions, each including the ones before it.
const (
	None Perm = iota
	Read
	Write
	Owner
)

func (p Perm) String() string { return [...]string{"none", "read", "write", "owner"}[p] }

// ParsePerm reads "read", "write" or "owner".
func ParsePerm(s string) (Perm, error) {
	for p := Read; p <= Owner; p++ {
		if p.String() == s {
			return p, nil
		}
	}
	return None, fmt.Errorf("gateway: permission is read, write or owner, not %q", s)
}

// Config configures a gateway.
type Config struct {
	Dir     string         // state: registry key and capability, replica (required)
	Nodes   *node.Client   // the grid's nodes
	Objects *object.Client // objects on the grid
	// Upload, if set, stores the grid objects instead of Objects.Put:
	// through an upload helper (package uphelper; quilt gateway
	// --upload-helper). It returns the object's read capability.
	Upload func(ctx context.Context, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, error)
	// Inline is the largest object kept in its namespace entry rather
	// than as a grid object; default 4096.
	Inline int
	// SegmentSize is the segment size of the grid objects the gateway
	// stores (codec.Params.SegmentSize); default codec.DefaultParams'
	// (1 MiB). Smaller segments let a reader notice a slow holder and
	// spread a file over more holders sooner, on slow links.
	SegmentSize int
	// SyncEvery is how often the gateway pulls changes from the grid;
	// default 1 s. Lists also pull first.
	SyncEvery time.Duration
	NoSync    bool // no fsync of the replica (tests)
	Logger    *slog.Logger
	// LeaseRenew is how often the gateway walks every bucket and renews
	// the lease of every grid object referenced (it also does at
	// start); default 24 h, negative: never. Keep it well inside the
	// object client's lease term (object.Options.LeaseTerm): a gateway
	// that renews nothing for a whole term loses its objects.
	LeaseRenew time.Duration
	// CancelDelay is how long after a DELETE, an overwrite or an aborted
	// upload the gateway cancels the leases of the grid objects no key
	// references any more (so reads of the old version in flight can
	// finish); default 1 min, negative: at once.
	CancelDelay time.Duration
	// References, if set, returns the read capabilities of grid objects
	// kept by something other than buckets (the extents of block
	// volumes, whose maps are records of the registry): the renewal walk
	// renews them too. A failure is logged and the walk goes on with the
	// buckets' objects.
	References func(ctx context.Context, g *Gateway) ([]string, error)
}

// Gateway serves buckets and objects.
type Gateway struct {
	cfg      Config
	db       *namespace.DB
	ns       *nsclient.Client // reads and writes db's namespaces through the grid
	log      *slog.Logger
	registry bucket // the gateway's own namespace

	createMu sync.Mutex // one bucket creation at a time here
	mu       sync.Mutex
	buckets  map[string]*bucket
	md5      md5s     // ETag hashes of uploads
	keys     keyLocks // per-key locks of object writes (conditional writes)

	stop   chan struct{}
	wg     sync.WaitGroup
	leases *leaseKeeper // renewal walk and retirer (leases.go)

	regMu      sync.Mutex
	registered map[sharefile.SI]bool // in the repair registries (leases.go)

	acct  accounts   // users, groups, verified logins (users.go)
	quota quotaState // quotas and bucket usage (quota.go)
}

// bucket is an open object namespace.
type bucket struct {
	name  string
	ns    dag.NSID
	key   dag.ReadKey
	w     *dag.Writer
	rules dag.Rules
	// created is when the registry says the bucket was made (zero for
	// the registry itself).
	created time.Time
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

func enc(b []byte) string { return strings.ToLower(b32.EncodeToString(b)) }
func dec(s string) ([]byte, error) {
	return b32.DecodeString(strings.ToUpper(s))
}

// registryFile is DIR/registry: the registry namespace's capability and
// root key, which is all a second gateway needs to serve the same
// buckets.
type registryFile struct {
	ID      string `json:"id"`
	ReadKey string `json:"readkey"`
	RootKey string `json:"rootkey"`
}

// Open opens (creating on first use) the gateway in cfg.Dir and brings its
// replica up to date with the grid.
func Open(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Inline <= 0 {
		cfg.Inline = 4096
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	reg, fresh, err := loadRegistry(cfg.Dir)
	if err != nil {
		return nil, err
	}
	db, err := namespace.OpenDB(filepath.Join(cfg.Dir, "ns.db"), namespace.Options{NoSync: cfg.NoSync})
	if err != nil {
		return nil, err
	}
	g := &Gateway{cfg: cfg, db: db, log: cfg.Logger, buckets: map[string]*bucket{}, stop: make(chan struct{}),
		ns: nsclient.New(nsclient.Config{DB: db, Nodes: cfg.Nodes})}
	if g.registry, err = openBucket(db, "", reg, dag.ConfigRules); err != nil {
		db.Close()
		return nil, err
	}
	if fresh {
		// The registry's root and its two directories.
		root := g.registry.w.Root()
		recs := [][]byte{root.Encode(),
			g.registry.w.Entry(dag.Mkdir, root.Hash(), nil, "buckets", nil).Encode(),
			g.registry.w.Entry(dag.Mkdir, root.Hash(), nil, "keys", nil).Encode()}
		if err := g.commit(ctx, &g.registry, recs); err != nil {
			db.Close()
			return nil, err
		}
	} else if err := g.sync(ctx, &g.registry); err != nil {
		g.log.Warn("gateway: registry not synced with the grid", "err", err)
	}
	g.wg.Add(1)
	go g.background()
	g.leases = startLeases(g)
	return g, nil
}

func loadRegistry(dir string) (registryFile, bool, error) {
	p := filepath.Join(dir, "registry")
	var reg registryFile
	b, err := os.ReadFile(p)
	if err == nil {
		if err := json.Unmarshal(b, &reg); err != nil {
			return reg, false, fmt.Errorf("gateway: %s: %w", p, err)
		}
		return reg, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return reg, false, err
	}
	if reg, err = newNamespaceFile(); err != nil {
		return reg, false, err
	}
	b, _ = json.MarshalIndent(reg, "", "  ")
	// The registry holds every bucket's root key: it is written durably,
	// and a crash leaves no half-written registry.
	if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
		return reg, false, fmt.Errorf("gateway: %w", err)
	}
	return reg, true, nil
}

// newNamespaceFile makes the keys of a new namespace.
func newNamespaceFile() (registryFile, error) {
	id, priv, err := dag.NewNamespace()
	if err != nil {
		return registryFile{}, err
	}
	rk, err := dag.NewReadKey()
	if err != nil {
		return registryFile{}, err
	}
	return registryFile{ID: id.String(), ReadKey: rk.String(), RootKey: enc(priv.Seed())}, nil
}

func openBucket(db *namespace.DB, name string, f registryFile, rules dag.Rules) (bucket, error) {
	id, err := dag.ParseNSID(f.ID)
	if err != nil {
		return bucket{}, err
	}
	rk, err := dag.ParseReadKey(f.ReadKey)
	if err != nil {
		return bucket{}, err
	}
	seed, err := dec(f.RootKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return bucket{}, fmt.Errorf("gateway: damaged root key of %q", name)
	}
	if err := db.Open(id, &rk, rules); err != nil {
		return bucket{}, err
	}
	return bucket{name: name, ns: id, key: rk, rules: rules,
		w: &dag.Writer{NS: id, Key: ed25519.NewKeyFromSeed(seed), Read: rk, Clock: db.Clock()}}, nil
}

// Close stops the gateway.
func (g *Gateway) Close() error {
	g.leases.close()
	close(g.stop)
	g.wg.Wait()
	return g.db.Close()
}

// background pulls changes from the grid.
func (g *Gateway) background() {
	defer g.wg.Done()
	t := time.NewTicker(g.cfg.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		g.sync(ctx, &g.registry)
		g.mu.Lock()
		bs := make([]*bucket, 0, len(g.buckets))
		for _, b := range g.buckets {
			bs = append(bs, b)
		}
		g.mu.Unlock()
		for _, b := range bs {
			g.sync(ctx, b)
		}
		cancel()
	}
}

// nodePeer returns the node the gateway talks to, picking a live one if
// need be (the namespace client's choice).
func (g *Gateway) nodePeer(ctx context.Context) (*namespace.HTTPPeer, error) {
	return g.ns.Peer(ctx)
}

// dropPeer makes the gateway pick another node next time.
func (g *Gateway) dropPeer(p *namespace.HTTPPeer) { g.ns.Drop(p) }

// sync brings a namespace's replica and a node's into step (the
// namespace client's retry policy: docs/namespaces.md).
func (g *Gateway) sync(ctx context.Context, b *bucket) error {
	return g.ns.Sync(ctx, b.ns)
}

// commit admits new records locally and sends them to a node, which
// gossips them; it fails if either refuses them or no node took them.
func (g *Gateway) commit(ctx context.Context, b *bucket, recs [][]byte) error {
	return g.ns.Commit(ctx, b.ns, recs)
}

// write appends one entry (and its blocks) for path p of b, replacing
// the path's current versions.
func (g *Gateway) write(ctx context.Context, b *bucket, p string, mk func(w *dag.Writer, anchor dag.Hash, heads []dag.Hash, name string) (*dag.Entry, []*dag.Block)) error {
	if err := g.ns.Write(ctx, b.w, b.rules, p, mk); err != nil {
		if b.name == "" {
			return fmt.Errorf("gateway: registry: %w", err)
		}
		return fmt.Errorf("gateway: bucket %q: %w", b.name, err)
	}
	return nil
}

// readFile returns the content of a file of a namespace (nil if absent).
func (g *Gateway) readFile(b *bucket, p string) ([]byte, error) {
	c, _, err := g.ns.ReadFile(b.ns, p)
	return c, err
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// Prefixes and suffixes S3 reserves (access points, Object Lambda,
// directory buckets, multi-region access points, table buckets).
var (
	reservedPrefixes = []string{"xn--", "sthree-", "amzn-s3-demo-"}
	reservedSuffixes = []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}
)

// CheckBucketName applies S3's rules for bucket names: 3-63 of a-z 0-9 .
// -, starting and ending with a letter or digit, no two periods or a
// period and a hyphen side by side, not an IP address, none of S3's
// reserved prefixes and suffixes.
func CheckBucketName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: %q %s", ErrBadBucket, name, why)
	}
	switch {
	case !bucketName.MatchString(name):
		return bad("(3-63 of a-z 0-9 . -, starting and ending with a letter or digit)")
	case strings.Contains(name, ".."), strings.Contains(name, ".-"), strings.Contains(name, "-."):
		return bad("(no two periods, or a period and a hyphen, side by side)")
	case net4(name):
		return bad("(not formatted as an IP address)")
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return bad("(the prefix " + p + " is reserved)")
		}
	}
	for _, sfx := range reservedSuffixes {
		if strings.HasSuffix(name, sfx) {
			return bad("(the suffix " + sfx + " is reserved)")
		}
	}
	return nil
}

var containerName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$`)

// CheckContainerName applies the rules for a bucket made through Swift: a
// bucket name, or 1-255 of A-Z a-z 0-9 . _ - not starting with a period,
// as Swift's own names such as CONTAINER_segments and those swift-bench
// makes. Such a bucket is reached through S3 path-style requests only
// (virtual-hosted style needs a host name).
func CheckContainerName(name string) error {
	if CheckBucketName(name) == nil {
		return nil
	}
	if !containerName.MatchString(name) {
		return fmt.Errorf("%w: %q (a container name is 1-255 of A-Z a-z 0-9 . _ -, not starting with a period)", ErrBadBucket, name)
	}
	return nil
}

// knownName reports whether name may name a bucket: one S3 may make, or
// one Swift may.
func knownName(name string) bool { return CheckContainerName(name) == nil }

// net4 reports whether s looks like an IPv4 address: four dot-separated
// runs of digits.
func net4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// bucketRecord is a bucket in the registry.
type bucketRecord struct {
	registryFile
	Created time.Time `json:"created"`
	Owner   string    `json:"owner,omitempty"` // access key that made it
}

// Owner returns the access key that made a bucket.
func (g *Gateway) Owner(ctx context.Context, name string) (string, error) {
	raw, err := g.readFile(&g.registry, "/buckets/"+name)
	if err != nil || raw == nil {
		return "", ErrNoBucket
	}
	var rec bucketRecord
	return rec.Owner, json.Unmarshal(raw, &rec)
}

// BucketInfo describes a bucket.
type BucketInfo struct {
	Name    string
	Created time.Time
	Owner   string
}

// bucket opens a bucket by name.
func (g *Gateway) bucket(ctx context.Context, name string) (*bucket, error) {
	g.mu.Lock()
	b := g.buckets[name]
	g.mu.Unlock()
	if b != nil {
		// Still this bucket? (It may have been deleted, or made again
		// with another namespace, through another gateway.)
		if raw, err := g.readFile(&g.registry, "/buckets/"+name); err == nil && raw != nil {
			var rec bucketRecord
			if json.Unmarshal(raw, &rec) == nil && rec.ID == b.ns.String() {
				return b, nil
			}
		}
		g.mu.Lock()
		delete(g.buckets, name)
		g.mu.Unlock()
	}
	if !knownName(name) {
		return nil, ErrNoBucket
	}
	raw, err := g.readFile(&g.registry, "/buckets/"+name)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		// Perhaps another gateway just made it.
		if g.sync(ctx, &g.registry) == nil {
			raw, err = g.readFile(&g.registry, "/buckets/"+name)
		}
		if raw == nil || err != nil {
			return nil, ErrNoBucket
		}
	}
	var rec bucketRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("gateway: bucket %q record: %w", name, err)
	}
	nb, err := openBucket(g.db, name, rec.registryFile, dag.ObjectRules)
	if err != nil {
		return nil, err
	}
	nb.created = rec.Created
	if g.db.Count(nb.ns) == 0 {
		g.sync(ctx, &nb)
	}
	g.mu.Lock()
	g.buckets[name] = &nb
	g.mu.Unlock()
	return &nb, nil
}

// CreateBucket makes a bucket owned by access key owner; its name must
// follow S3's rules (CheckBucketName).
func (g *Gateway) CreateBucket(ctx context.Context, name, owner string) error {
	if err := CheckBucketName(name); err != nil {
		return err
	}
	return g.createBucket(ctx, name, owner)
}

// CreateContainer makes a bucket for Swift, owned by access key owner; its
// name may be any Swift container name CheckContainerName accepts.
func (g *Gateway) CreateContainer(ctx context.Context, name, owner string) error {
	if err := CheckContainerName(name); err != nil {
		return err
	}
	return g.createBucket(ctx, name, owner)
}

// createBucket makes a bucket of a name already checked.
func (g *Gateway) createBucket(ctx context.Context, name, owner string) error {
	if owner != "" {
		if k, err := g.Key(ctx, owner); err == nil && k.User != "" {
			return fmt.Errorf("%w: the key of account %q reaches its home only, and makes no bucket", ErrDenied, k.User)
		}
	}
	g.createMu.Lock()
	defer g.createMu.Unlock()
	if _, err := g.bucket(ctx, name); err == nil {
		return ErrBucketExists
	}
	f, err := newNamespaceFile()
	if err != nil {
		return err
	}
	rec := bucketRecord{registryFile: f, Created: time.Now().UTC(), Owner: owner}
	nb, err := openBucket(g.db, name, rec.registryFile, dag.ObjectRules)
	if err != nil {
		return err
	}
	nb.created = rec.Created
	if err := g.commit(ctx, &nb, [][]byte{nb.w.Root().Encode()}); err != nil {
		return err
	}
	body, _ := json.Marshal(rec)
	if err := g.write(ctx, &g.registry, "/buckets/"+name, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	}); err != nil {
		return err
	}
	// Two creations at once (here or on another gateway) both write the
	// record; one wins. Only the winner's bucket is the bucket.
	g.sync(ctx, &g.registry)
	if raw, _ := g.readFile(&g.registry, "/buckets/"+name); raw != nil {
		var won bucketRecord
		if json.Unmarshal(raw, &won) == nil && won.ID != rec.ID {
			return ErrBucketExists
		}
	}
	g.mu.Lock()
	g.buckets[name] = &nb
	g.mu.Unlock()
	return nil
}

// DeleteBucket removes an empty bucket: one with no object and no
// multipart upload in progress (ErrNotEmpty, ErrUploadsOpen).
func (g *Gateway) DeleteBucket(ctx context.Context, name string) error {
	b, err := g.bucket(ctx, name)
	if err != nil {
		return err
	}
	g.sync(ctx, b)
	items, err := g.db.List(b.ns, "/", "", 1)
	if err != nil {
		return err
	}
	if len(items) > 0 {
		return ErrNotEmpty
	}
	// Uploads another gateway started are in the registry: pull it
	// first. (An upload that still slips in belongs to this bucket's
	// namespace, not its name: no later bucket of the name sees it.)
	g.sync(ctx, &g.registry)
	us, err := g.uploadsOf(b)
	if err != nil {
		return err
	}
	if len(us) > 0 {
		return fmt.Errorf("%w: %d in progress (abort or complete them first)", ErrUploadsOpen, len(us))
	}
	if err := g.write(ctx, &g.registry, "/buckets/"+name, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	}); err != nil {
		return err
	}
	g.mu.Lock()
	delete(g.buckets, name)
	g.mu.Unlock()
	// Grants name buckets: take them back, so a bucket made later under
	// this name does not inherit them.
	keys, err := g.Keys(ctx)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, ok := k.Buckets[name]; ok {
			delete(k.Buckets, name)
			if err := g.PutKey(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// Buckets lists the buckets, by name.
func (g *Gateway) Buckets(ctx context.Context) ([]BucketInfo, error) {
	g.sync(ctx, &g.registry)
	items, err := g.db.List(g.registry.ns, "/buckets", "", 0)
	if err != nil {
		return nil, err
	}
	var out []BucketInfo
	for _, it := range items {
		raw, err := g.readFile(&g.registry, it.Path)
		if err != nil || raw == nil {
			continue
		}
		var rec bucketRecord
		if json.Unmarshal(raw, &rec) == nil {
			out = append(out, BucketInfo{Name: it.Name, Created: rec.Created, Owner: rec.Owner})
		}
	}
	return out, nil
}

// AccessKey is a key a client signs requests with.
type AccessKey struct {
	ID      string          `json:"id"`
	Secret  string          `json:"secret"`
	Admin   bool            `json:"admin,omitempty"` // every bucket, and may create buckets and keys
	Buckets map[string]Perm `json:"buckets,omitempty"`
	Created time.Time       `json:"created"`
	// User is the account whose home key this is (users.go): it may not
	// make buckets, which would be outside the account's quota.
	User string `json:"user,omitempty"`
}

// CreateKey makes an access key.
func (g *Gateway) CreateKey(ctx context.Context, admin bool, buckets map[string]Perm) (AccessKey, error) {
	id := make([]byte, 10)
	secret := make([]byte, 30)
	rand.Read(id)
	rand.Read(secret)
	k := AccessKey{ID: "QK" + strings.ToUpper(b32.EncodeToString(id)), Secret: base64.RawStdEncoding.EncodeToString(secret),
		Admin: admin, Buckets: buckets, Created: time.Now().UTC()}
	return k, g.PutKey(ctx, k)
}

// PutKey stores (or replaces) an access key.
func (g *Gateway) PutKey(ctx context.Context, k AccessKey) error {
	body, _ := json.Marshal(k)
	return g.write(ctx, &g.registry, "/keys/"+k.ID, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.File(a, h, n, body)
	})
}

// Key returns an access key.
func (g *Gateway) Key(ctx context.Context, id string) (AccessKey, error) {
	var k AccessKey
	if strings.ContainsAny(id, "/\x00") || id == "" || id == "." || id == ".." {
		return k, ErrDenied
	}
	raw, err := g.readFile(&g.registry, "/keys/"+id)
	if err == nil && raw == nil {
		g.sync(ctx, &g.registry)
		raw, err = g.readFile(&g.registry, "/keys/"+id)
	}
	if err != nil {
		return k, err
	}
	if raw == nil {
		return k, ErrDenied
	}
	return k, json.Unmarshal(raw, &k)
}

// Keys lists the access keys.
func (g *Gateway) Keys(ctx context.Context) ([]AccessKey, error) {
	g.sync(ctx, &g.registry)
	items, err := g.db.List(g.registry.ns, "/keys", "", 0)
	if err != nil {
		return nil, err
	}
	var out []AccessKey
	for _, it := range items {
		if raw, _ := g.readFile(&g.registry, it.Path); raw != nil {
			var k AccessKey
			if json.Unmarshal(raw, &k) == nil {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// DeleteKey removes an access key.
func (g *Gateway) DeleteKey(ctx context.Context, id string) error {
	if _, err := g.Key(ctx, id); err != nil {
		return err
	}
	return g.write(ctx, &g.registry, "/keys/"+id, func(w *dag.Writer, a dag.Hash, h []dag.Hash, n string) (*dag.Entry, []*dag.Block) {
		return w.Entry(dag.Delete, a, h, n, nil), nil
	})
}

// Allowed reports whether key k may act on bucket with permission p.
func (k AccessKey) Allowed(bucket string, p Perm) bool {
	return k.Admin || k.Buckets[bucket] >= p
}
