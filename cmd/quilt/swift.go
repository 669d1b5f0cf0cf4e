package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quilt-grid/quilt/internal/atomicfile"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/gateway/swift"
)

// swiftService is a running Swift endpoint (with its identity service).
type swiftService struct {
	srv      *http.Server
	url      string // base URL: auth at url/auth/v1.0 and url/v3
	user     swiftUser
	region   string
	endpoint string // the catalog entry this gateway registered
	ids      *keystone.Service
	api      *swift.Server
	stop     chan struct{}
	done     chan struct{}
}

// swiftUser is the first Swift user, kept in DIR/swift.json.
type swiftUser struct {
	Project  string `json:"project"`
	User     string `json:"user"`
	Password string `json:"password"`
}

func (s *swiftService) Close() {
	close(s.stop)
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
}

// pruneEvery is how often a gateway removes expired tokens' records;
// expireEvery how often it removes the objects whose X-Delete-At has
// come.
const (
	pruneEvery  = 10 * time.Minute
	expireEvery = 30 * time.Second
)

// prune removes expired tokens' records and expired objects until Close.
func (s *swiftService) prune(log *slog.Logger) {
	defer close(s.done)
	tokens := time.NewTicker(pruneEvery)
	defer tokens.Stop()
	objects := time.NewTicker(expireEvery)
	defer objects.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tokens.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if n, err := s.ids.Prune(ctx); err != nil {
				log.Warn("swift: pruning expired tokens", "err", err)
			} else if n > 0 {
				log.Info("swift: expired tokens pruned", "n", n)
			}
			cancel()
		case <-objects.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if n, err := s.api.Expire(ctx); err != nil {
				log.Warn("swift: removing expired objects", "err", err)
			} else if n > 0 {
				log.Info("swift: expired objects removed", "n", n)
			}
			cancel()
		}
	}
}

// swiftConfig is how a gateway serves Swift.
type swiftConfig struct {
	addr, region, publicURL string
	ttl                     time.Duration
}

// startSwift serves Swift on cfg.addr over gw (already serving S3 with
// admin as its first key): on first use it makes the project "admin",
// acting as the admin key, and its user admin:admin, kept in
// dir/swift.json; it registers this gateway's endpoint in its region and
// writes dir/swift.env.
func startSwift(ctx context.Context, gw *gateway.Gateway, dir string, admin gateway.AccessKey, cfg swiftConfig, log *slog.Logger) (*swiftService, error) {
	ids := keystone.New(gw, keystone.Config{TokenTTL: cfg.ttl})
	user, err := firstSwiftUser(ctx, ids, dir, admin)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("swift: listen on %s: %w", cfg.addr, err)
	}
	svc := &swiftService{url: "http://" + ln.Addr().String(), user: user, region: cfg.region, ids: ids,
		stop: make(chan struct{}), done: make(chan struct{})}
	public := strings.TrimSuffix(cfg.publicURL, "/")
	if public == "" {
		public = svc.url
	}
	// The endpoint this directory registered last time (another URL,
	// with another port) leaves the catalog.
	epFile := filepath.Join(dir, "swift-endpoint")
	if old, err := os.ReadFile(epFile); err == nil && len(old) > 0 {
		ids.Unregister(ctx, strings.TrimSpace(string(old)))
	}
	ep, err := ids.Register(ctx, keystone.Endpoint{Region: cfg.region, Public: public})
	if err == nil {
		err = writeFileAtomic(epFile, []byte(ep.ID+"\n"), 0o600)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	svc.endpoint = ep.ID
	svc.api = swift.New(gw, ids, swift.Options{Region: cfg.region, PublicURL: public, Logger: log})
	svc.srv = svc.api.HTTPServer()
	go svc.srv.Serve(ln)
	go svc.prune(log)
	env := fmt.Sprintf(`export ST_AUTH=%s/auth/v1.0
export ST_USER=%s:%s
export ST_KEY=%s
export OS_AUTH_URL=%s/v3
export OS_USERNAME=%s
export OS_PASSWORD=%s
export OS_PROJECT_NAME=%s
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=%s
export OS_IDENTITY_API_VERSION=3
`, public, user.Project, user.User, user.Password, public, user.User, user.Password, user.Project, cfg.region)
	if err := writeFileAtomic(filepath.Join(dir, "swift.env"), []byte(env), 0o600); err != nil {
		svc.Close()
		return nil, err
	}
	return svc, nil
}

// firstSwiftUser returns the gateway's first Swift user, made with its
// project on first start (with no password if another gateway sharing
// the registry made it).
func firstSwiftUser(ctx context.Context, ids *keystone.Service, dir string, admin gateway.AccessKey) (swiftUser, error) {
	p := filepath.Join(dir, "swift.json")
	var u swiftUser
	if found, err := atomicfile.ReadJSON(p, &u); found || err != nil {
		return u, err
	}
	u = swiftUser{Project: "admin", User: "admin"}
	if _, err := ids.Project(ctx, u.Project); errors.Is(err, keystone.ErrNoProject) {
		if _, err := ids.AddProject(ctx, u.Project, admin.ID); err != nil {
			return u, err
		}
	} else if err != nil {
		return u, err
	}
	_, pw, err := ids.AddUser(ctx, u.Project, u.User, "")
	if errors.Is(err, keystone.ErrExists) {
		// Another gateway sharing the registry made it and keeps its
		// password: this one's swift.env has none.
		return u, nil
	}
	if err != nil {
		return u, err
	}
	u.Password = pw
	return u, atomicfile.WriteJSON(p, u, 0o600)
}

func runSwift(ctx context.Context, args []string) error {
	fs := newFlagSet("swift", `Usage: quilt swift project add NAME [--key ID]
       quilt swift project list
       quilt swift user add PROJECT:USER [--password P]
       quilt swift user list
       quilt swift user delete PROJECT:USER
       quilt swift endpoint list
       quilt swift endpoint delete ID

Manages the Swift identity service of the gateway in --dir: projects (each
a Swift account, acting as an S3 access key: a new non-admin one unless
--key names one), their users (a random password is made and printed unless
--password gives one), and the endpoints of the gateways in the catalog.`)
	var g gridFlags
	g.register(fs)
	dir := fs.String("dir", "", "gateway state directory (default: the gateway 'quilt up' runs for the default grid, else $QUILT_HOME/gateway as for 'quilt gateway')")
	key := fs.String("key", "", "project add: the S3 access key the project acts as")
	password := fs.String("password", "", "user add: the password (default: a random one, printed)")
	if err := parseArgs(fs, args, -1); err != nil {
		return err
	}
	if fs.NArg() < 2 {
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
	ids := keystone.New(gw, keystone.Config{})
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	noun, verb := fs.Arg(0), fs.Arg(1)
	switch {
	case noun == "project" && verb == "add" && fs.NArg() == 3:
		k := *key
		if k == "" {
			ak, err := gw.CreateKey(ctx, false, nil)
			if err != nil {
				return err
			}
			k = ak.ID
		}
		p, err := ids.AddProject(ctx, fs.Arg(2), k)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s %s\n", p.Name, p.Account(), p.Key)
		fmt.Fprintln(os.Stderr, "(project, Swift account, S3 access key it acts as)")
	case noun == "project" && verb == "list" && fs.NArg() == 2:
		ps, err := ids.Projects(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "PROJECT\tACCOUNT\tACCESS KEY\tCREATED")
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Account(), p.Key, p.Created.Format("2006-01-02 15:04"))
		}
	case noun == "user" && (verb == "add" || verb == "delete") && fs.NArg() == 3:
		project, name, ok := strings.Cut(fs.Arg(2), ":")
		if !ok {
			return fmt.Errorf("want PROJECT:USER, not %q", fs.Arg(2))
		}
		if verb == "delete" {
			return ids.DeleteUser(ctx, project, name)
		}
		_, pw, err := ids.AddUser(ctx, project, name, *password)
		if err != nil {
			return err
		}
		fmt.Printf("%s:%s %s\n", project, name, pw)
		if *password == "" {
			fmt.Fprintln(os.Stderr, "(user and password; the password is shown once here, and kept only as a hash)")
		}
	case noun == "user" && verb == "list" && fs.NArg() == 2:
		us, err := ids.Users(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "USER\tCREATED")
		for _, u := range us {
			fmt.Fprintf(tw, "%s:%s\t%s\n", u.Project, u.Name, u.Created.Format("2006-01-02 15:04"))
		}
	case noun == "endpoint" && verb == "list" && fs.NArg() == 2:
		es, err := ids.Endpoints(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "ID\tREGION\tPUBLIC\tINTERNAL\tREGISTERED")
		for _, e := range es {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Region, e.Public, e.Internal, e.Updated.Format("2006-01-02 15:04"))
		}
	case noun == "endpoint" && verb == "delete" && fs.NArg() == 3:
		return ids.Unregister(ctx, fs.Arg(2))
	default:
		fs.Usage()
		return errUsage
	}
	return tw.Flush()
}

// upSwift starts the Swift endpoint of quilt up beside its S3 one, in
// region RegionOne: on addr, or port+2·nodes+1 of host (any free port if
// port is 0).
func upSwift(ctx context.Context, s3 *s3Service, dir, host string, port, nodes int, addr string, log *slog.Logger) (*swiftService, error) {
	if addr == "" {
		addr = net.JoinHostPort(host, "0")
		if port != 0 {
			addr = net.JoinHostPort(host, fmt.Sprint(port+2*nodes+1))
		}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sw, err := startSwift(sctx, s3.gw, dir, s3.admin, swiftConfig{addr: addr, region: "RegionOne", ttl: keystone.DefaultTTL}, log)
	if err != nil {
		return nil, fmt.Errorf("swift: %w", err)
	}
	return sw, nil
}

// banner is what quilt up prints of the Swift endpoint.
func (s *swiftService) banner(env string) string {
	return fmt.Sprintf("Swift: %s/auth/v1.0 (v1) and %s/v3 (Keystone)  user %s:%s  password %s\n       . %s; swift upload photos FILE; swift list photos\n",
		s.url, s.url, s.user.Project, s.user.User, s.user.Password, env)
}
