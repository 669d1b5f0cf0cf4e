package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/metrics"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/volume"
)

// s3Service is a running S3 endpoint.
type s3Service struct {
	gw    *gateway.Gateway
	srv   *http.Server
	url   string
	admin gateway.AccessKey
	tls   *s3.TLSSetup         // nil: plain HTTP
	reg   *prometheus.Registry // the S3 requests' metrics (see s3.Instrument)
	// stopLifecycle ends the lifecycle sweep (s3.Server.RunLifecycle).
	stopLifecycle context.CancelFunc
}

// tlsNote is what to print about the endpoint's certificate: the CA to
// trust and its fingerprint, when the gateway made it.
func (s *s3Service) tlsNote() string {
	if s.tls == nil || s.tls.CAFile == "" {
		return ""
	}
	return fmt.Sprintf("TLS certificate from the gateway's CA %s\n  SHA-256 %s\n", s.tls.CAFile, s.tls.Fingerprint)
}

func (s *s3Service) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	if s.stopLifecycle != nil {
		s.stopLifecycle()
	}
	s.gw.Close()
}

// openGateway opens the gateway whose state is in dir, on the grid of s.
func openGateway(ctx context.Context, s *session, dir string, log *slog.Logger) (*gateway.Gateway, error) {
	cfg := gateway.Config{Dir: dir, Nodes: s.nodes, Objects: s.objects, Logger: log, Inline: inlineMax, SegmentSize: segmentSize,
		LeaseRenew: renewEvery, CancelDelay: cancelDelay, References: volumeRefs(s.objects)}
	if uploadHelper.addr != "" {
		cfg.Upload = helperUpload(s, uploadHelper)
	}
	return gateway.Open(ctx, cfg)
}

// volumeRefs returns the gateway.Config.References of the block volumes
// whose maps the gateway's registry holds: their base maps (read with
// objects) and extents, so that its renewal walk keeps them alive. A
// damaged record or a base map not read is an error, and the other
// volumes' objects are still returned (and renewed).
func volumeRefs(objects *object.Client) func(context.Context, *gateway.Gateway) ([]string, error) {
	return func(ctx context.Context, g *gateway.Gateway) ([]string, error) {
		recs, err := g.Records(ctx, volumeSet)
		if err != nil {
			return nil, err
		}
		return volume.References(ctx, objects, recs)
	}
}

// openGatewayCopy opens a second gateway on a copy of the registry's key
// of the gateway in dir, in a temporary directory that close removes:
// the running gateway keeps its replica locked, and sees the changes
// within a second through the grid. quilt key, swift and volume work so.
func openGatewayCopy(ctx context.Context, s *session, dir string) (gw *gateway.Gateway, close func(), err error) {
	reg, err := os.ReadFile(filepath.Join(dir, "registry"))
	if err != nil {
		return nil, nil, fmt.Errorf("no gateway state in %s (start 'quilt gateway --dir %s' or 'quilt up' first): %w", dir, dir, err)
	}
	tmp, err := os.MkdirTemp("", "quilt-gateway-")
	if err != nil {
		return nil, nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, "registry"), reg, 0o600); err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	if gw, err = openGateway(ctx, s, tmp, s.log); err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	return gw, func() { gw.Close(); os.RemoveAll(tmp) }, nil
}

// renewEvery and cancelDelay are --renew-every and --cancel-delay of
// quilt gateway (gateway.Config.LeaseRenew and CancelDelay).
var renewEvery, cancelDelay time.Duration

// registerGatewayLeases adds the lease flags of a gateway: its lease term
// and how often it renews.
func registerGatewayLeases(fs *flag.FlagSet, g *gridFlags) {
	g.registerLease(fs)
	g.registerWaitAll(fs)
	fs.DurationVar(&renewEvery, "renew-every", 24*time.Hour, "how often the gateway walks every bucket and renews the lease of every object referenced (it also does at start); keep it well inside --lease: a gateway down for longer than --lease loses its objects")
	fs.DurationVar(&cancelDelay, "cancel-delay", time.Minute, "how long after a DELETE, overwrite or aborted upload the leases of objects no key references any more are cancelled (reads in flight of the old version finish first)")
}

// checkGatewayLeases refuses a renewal interval that is not well inside
// the lease term.
func checkGatewayLeases(g *gridFlags) error {
	if err := g.checkLease(); err != nil {
		return err
	}
	if renewEvery <= 0 || renewEvery > g.lease/2 {
		return fmt.Errorf("--renew-every %v: want a positive duration at most half of --lease (%v), so that a renewal missed still leaves time", renewEvery, g.lease)
	}
	if cancelDelay < 0 {
		return fmt.Errorf("--cancel-delay %v: want 0 or more", cancelDelay)
	}
	if cancelDelay == 0 {
		cancelDelay = -1 // gateway.Config: at once
	}
	return nil
}

// inlineMax is --inline of quilt gateway: objects up to this size live in
// their namespace entry.
var inlineMax = 4096

// uploadHelper is --upload-helper of quilt gateway and quilt up: the
// upload helper the gateway's objects go through (none: direct).
var uploadHelper helperFlags

// segmentSize is --segment-size of quilt gateway: the segment size of the
// grid objects it stores (0: the default, 1 MiB).
var segmentSize int

// s3TLSFlags are the --s3-tls flags of quilt gateway and quilt up.
type s3TLSFlags struct {
	mode, cert, key string
}

func (f *s3TLSFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "s3-tls", "auto", "HTTPS for the S3 endpoint: on, off, or auto (on unless --s3 is a loopback address and no --s3-tls-cert is given)")
	fs.StringVar(&f.cert, "s3-tls-cert", "", "certificate (PEM) the S3 endpoint serves; default: one issued by the gateway's own CA (DIR/s3-ca.pem)")
	fs.StringVar(&f.key, "s3-tls-key", "", "private key (PEM) of --s3-tls-cert")
}

// setup returns the TLS setup for a gateway in dir listening on addr,
// nil for plain HTTP.
func (f *s3TLSFlags) setup(dir, addr string) (*s3.TLSSetup, error) {
	on := false
	switch f.mode {
	case "on":
		on = true
	case "off":
		if f.cert != "" || f.key != "" {
			return nil, errors.New("--s3-tls-cert and --s3-tls-key need --s3-tls on or auto")
		}
	case "auto", "":
		on = s3.TLSAuto(addr) || f.cert != ""
	default:
		return nil, fmt.Errorf("--s3-tls %q: want on, off or auto", f.mode)
	}
	if !on {
		return nil, nil
	}
	return s3.LoadTLS(dir, addr, f.cert, f.key)
}

// s3BodyTimeoutFlag registers --s3-body-timeout: how long an S3 request
// body may deliver no byte before the request fails with RequestTimeout
// and what it had stored is released (s3.Options.BodyTimeout).
func s3BodyTimeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("s3-body-timeout", 60*time.Second, "how long an S3 request body may deliver no byte before the request fails (400 RequestTimeout) and what it stored is released")
}

// checkS3BodyTimeout rejects a --s3-body-timeout that is not positive.
func checkS3BodyTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("--s3-body-timeout %v: want a positive duration", d)
	}
	return nil
}

// s3DomainFlag registers --s3-domain: the domain under which a host name
// names a bucket (s3.Options.Domain).
func s3DomainFlag(fs *flag.FlagSet) *string {
	return fs.String("s3-domain", "", "serve virtual-hosted-style S3 requests: a request to BUCKET.DOMAIN names BUCKET (needs a wildcard DNS record *.DOMAIN for the gateway); path-style requests work either way")
}

// s3BlockPublicFlag registers --s3-block-public: Block Public Access on
// every bucket, all four settings (s3.Options.BlockPublicAccess).
func s3BlockPublicFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("s3-block-public", false, "block public access to every S3 bucket (all four Block Public Access settings, whatever each bucket's own): no ACL or policy may grant to everyone")
}

// blockPublic is the s3.Options.BlockPublicAccess of --s3-block-public.
func blockPublic(on bool) s3.PublicAccessBlock {
	return s3.PublicAccessBlock{BlockPublicAcls: on, IgnorePublicAcls: on, BlockPublicPolicy: on, RestrictPublicBuckets: on}
}

// s3InsecureSSECFlag registers --s3-sse-c-insecure: accept customer
// keys (SSE-C) over plain HTTP (s3.Options.AllowInsecureSSEC).
func s3InsecureSSECFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("s3-sse-c-insecure", false, "accept SSE-C customer keys in S3 requests over plain HTTP (refused by default, as on S3: a key sent in the clear is given away); for a gateway behind a proxy that terminates TLS")
}

// s3LifecycleFlag registers --s3-lifecycle-every: how often the
// buckets' lifecycle rules are applied (s3.Options.LifecycleEvery).
func s3LifecycleFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("s3-lifecycle-every", time.Hour, "how often the gateway applies the buckets' S3 lifecycle rules (expires objects, aborts old uploads); 0 or negative: never")
}

// lifecycleInterval is s3.Options.LifecycleEvery for the flag's value:
// 0 or negative means never (s3's negative).
func lifecycleInterval(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// startS3 starts a gateway serving S3 on addr (HTTPS as tf says), with
// opt's region, time limits, domain and logger, creating its first
// (admin) access key on first use and writing dir/s3.env.
func startS3(ctx context.Context, s *session, dir, addr string, tf s3TLSFlags, opt s3.Options) (*s3Service, error) {
	region, log := opt.Region, opt.Logger
	tlsSetup, err := tf.setup(dir, addr)
	if err != nil {
		return nil, err
	}
	gw, err := openGateway(ctx, s, dir, log)
	if err != nil {
		return nil, err
	}
	admin, err := adminKey(ctx, gw, dir)
	if err != nil {
		gw.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		gw.Close()
		return nil, fmt.Errorf("s3: listen on %s: %w", addr, err)
	}
	api := s3.New(gw, opt)
	svc := &s3Service{gw: gw, admin: admin, url: "http://" + ln.Addr().String(),
		srv: api.HTTPServer(), tls: tlsSetup}
	lctx, stop := context.WithCancel(context.Background())
	svc.stopLifecycle = stop
	go api.RunLifecycle(lctx)
	svc.reg = metrics.NewRegistry()
	svc.reg.MustRegister(s.objects.Collectors()...)
	svc.srv.Handler = s3.Instrument(svc.srv.Handler, svc.reg)
	if tlsSetup != nil {
		host := ln.Addr().String()
		if s3.Wildcard(addr) {
			_, port, _ := net.SplitHostPort(host)
			host = net.JoinHostPort("localhost", port)
		}
		svc.url = "https://" + host
		svc.srv.TLSConfig = tlsSetup.Config
		go svc.srv.ServeTLS(ln, "", "")
	} else {
		go svc.srv.Serve(ln)
	}
	env := fmt.Sprintf("export AWS_ENDPOINT_URL=%s\nexport AWS_ACCESS_KEY_ID=%s\nexport AWS_SECRET_ACCESS_KEY=%s\nexport AWS_DEFAULT_REGION=%s\n",
		svc.url, admin.ID, admin.Secret, region)
	if tlsSetup != nil && tlsSetup.CAFile != "" {
		ca, err := filepath.Abs(tlsSetup.CAFile)
		if err != nil {
			ca = tlsSetup.CAFile
		}
		env += fmt.Sprintf("export AWS_CA_BUNDLE=%s\n", ca)
	}
	if err := writeFileAtomic(filepath.Join(dir, "s3.env"), []byte(env), 0o600); err != nil {
		svc.Close()
		return nil, err
	}
	return svc, nil
}

// adminKey returns the gateway's first access key, made on first start
// and kept in dir/admin.json.
func adminKey(ctx context.Context, gw *gateway.Gateway, dir string) (gateway.AccessKey, error) {
	p := filepath.Join(dir, "admin.json")
	var k gateway.AccessKey
	if found, err := atomicfile.ReadJSON(p, &k); found || err != nil {
		return k, err
	}
	k, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		return k, err
	}
	b, _ := json.MarshalIndent(k, "", "  ")
	return k, writeFileAtomic(p, b, 0o600)
}

func runGateway(ctx context.Context, args []string) error {
	fs := newFlagSet("gateway", "Usage: quilt gateway --grid INVITE [flags]\n\nServes the grid's buckets over S3 (and Swift, with --swift) until interrupted. The gateway holds the\nkeys: storage nodes see only ciphertext. Its state (the registry of buckets\nand access keys, a replica of their namespaces) is in --dir; a second gateway\ngiven a copy of DIR/registry serves the same buckets.")
	var g gridFlags
	g.register(fs)
	addr := fs.String("s3", "127.0.0.1:7780", "S3 endpoint address (host:port)")
	var tf s3TLSFlags
	tf.register(fs)
	dir := fs.String("dir", filepath.Join(home(), "gateway"), "gateway state directory")
	region := fs.String("region", "us-east-1", "region reported to S3 clients, and this gateway's region in the Swift catalog")
	var sw swiftConfig
	fs.StringVar(&sw.addr, "swift", "", "also serve Swift (and its identity service) on this address (host:port)")
	fs.StringVar(&sw.publicURL, "public-url", "", "Swift: base URL clients reach this gateway by, for the catalog (default: http://the --swift address)")
	fs.DurationVar(&sw.ttl, "token-ttl", keystone.DefaultTTL, "Swift: how long a token lives")
	fs.IntVar(&inlineMax, "inline", 4096, "objects up to this many bytes are kept in the bucket's log, not as erasure-coded grid objects")
	uploadHelper.register(fs, "upload-helper")
	segSize := fs.String("segment-size", "1MiB", "segment size of the grid objects stored (smaller on slow links: a reader notices a slow holder sooner and spreads over more holders)")
	metricsAddr := fs.String("metrics", "", metricsHelp)
	bodyTimeout := s3BodyTimeoutFlag(fs)
	domain := s3DomainFlag(fs)
	blockPub := s3BlockPublicFlag(fs)
	insecureSSEC := s3InsecureSSECFlag(fs)
	lifecycleEvery := s3LifecycleFlag(fs)
	addConfigFlag(fs)
	registerGatewayLeases(fs, &g)
	if err := parseArgs(fs, args, 0); err != nil {
		return err
	}
	if err := checkGatewayLeases(&g); err != nil {
		return err
	}
	seg, err := parseSize(*segSize)
	if err != nil {
		return fmt.Errorf("--segment-size: %w", err)
	}
	if p := (codec.Params{K: 3, N: 10, SegmentSize: int(seg)}); seg > 1<<30 || p.Validate() != nil {
		return fmt.Errorf("--segment-size %s: want a size such as 256KiB, a multiple of k", *segSize)
	}
	segmentSize = int(seg)
	if err := checkS3BodyTimeout(*bodyTimeout); err != nil {
		return err
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	svc, err := startS3(ctx, s, *dir, *addr, tf, s3.Options{Region: *region, BodyTimeout: *bodyTimeout, Domain: *domain, AllowInsecureSSEC: *insecureSSEC, LifecycleEvery: lifecycleInterval(*lifecycleEvery), BlockPublicAccess: blockPublic(*blockPub), Logger: s.log})
	if err != nil {
		return err
	}
	defer svc.Close()
	if *metricsAddr != "" {
		ms, err := metrics.Listen(*metricsAddr, svc.reg)
		if err != nil {
			return err
		}
		defer ms.Close()
		fmt.Fprintf(os.Stderr, "metrics: %s\n", ms.URL())
	}
	fmt.Fprintf(os.Stderr, "quilt gateway: S3 at %s\n%saccess key %s (admin; secret in %s)\ntry:  . %s; aws s3 ls\n",
		svc.url, svc.tlsNote(), svc.admin.ID, filepath.Join(*dir, "admin.json"), filepath.Join(*dir, "s3.env"))
	if sw.addr != "" {
		sw.region = *region
		sv, err := startSwift(ctx, svc.gw, *dir, svc.admin, sw, s.log)
		if err != nil {
			return err
		}
		defer sv.Close()
		fmt.Fprintf(os.Stderr, "Swift at %s (region %s): auth %s/auth/v1.0 and %s/v3, user %s:%s\ntry:  . %s; swift list\n",
			sv.url, sw.region, sv.url, sv.url, sv.user.Project, sv.user.User, filepath.Join(*dir, "swift.env"))
	}
	<-ctx.Done()
	return nil
}

func runKey(ctx context.Context, args []string) error {
	fs := newFlagSet("key", "Usage: quilt key create [--admin] [--bucket NAME=read|write|owner ...]\n       quilt key list\n       quilt key delete ID\n\nManages the S3 access keys of the gateway in --dir.")
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", "", "gateway state directory (default: the gateway 'quilt up' runs for the default grid, else $QUILT_HOME/gateway as for 'quilt gateway')")
	admin := fs.Bool("admin", false, "create: the key may use every bucket and make buckets")
	var perms multiFlag
	fs.Var(&perms, "bucket", "create: NAME=read|write|owner (repeatable)")
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errUsage
	}
	if *dir == "" {
		*dir = keyDir(g.grid)
	}
	s, err := g.connect()
	if err != nil {
		return err
	}
	gw, closeGW, err := openGatewayCopy(ctx, s, *dir)
	if err != nil {
		return err
	}
	defer closeGW()
	switch verb := fs.Arg(0); {
	case verb == "create" && fs.NArg() == 1:
		bs := map[string]gateway.Perm{}
		for _, p := range perms {
			name, perm, ok := strings.Cut(p, "=")
			pp, err := gateway.ParsePerm(perm)
			if !ok || err != nil {
				return fmt.Errorf("--bucket %q: want NAME=read|write|owner", p)
			}
			bs[name] = pp
		}
		k, err := gw.CreateKey(ctx, *admin, bs)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", k.ID, k.Secret)
		fmt.Fprintln(os.Stderr, "(access key ID and secret; the secret is shown once here, and kept in the gateway's registry)")
	case verb == "list" && fs.NArg() == 1:
		ks, err := gw.Keys(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tIDENTITY\tCREATED\tPERMISSIONS")
		for _, k := range ks {
			var ps []string
			if k.Admin {
				ps = append(ps, "admin")
			}
			for b, p := range k.Buckets {
				ps = append(ps, b+"="+p.String())
			}
			sort.Strings(ps)
			// The identity is what S3 ACLs and policies name (docs/s3.md).
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.ID, gateway.KeyIdentity(k).ID, k.Created.Format("2006-01-02 15:04"), strings.Join(ps, " "))
		}
		return tw.Flush()
	case verb == "delete" && fs.NArg() == 2:
		return gw.DeleteKey(ctx, fs.Arg(1))
	default:
		fs.Usage()
		return errUsage
	}
	return nil
}

// keyDir is the gateway 'quilt key' works on without --dir: the one
// 'quilt up' runs, when the grid is the default grid it recorded, else
// the default of 'quilt gateway'.
func keyDir(gridFlag string) string {
	def := filepath.Join(home(), "gateway")
	cfg, err := loadConfig()
	if err != nil || cfg.Gateway == "" {
		return def
	}
	grid := gridFlag
	if grid == "" {
		grid = os.Getenv("QUILT_GRID")
	}
	if grid != "" && grid != cfg.Grid {
		return def
	}
	return cfg.Gateway
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
