package lab

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/sftp"
	"github.com/quilt-grid/quilt/internal/webdav"
)

// The INFN paper's file sizes: 100 kB, 1 MB, 10 MB, 100 MB, 1 GB.
var parallelSizes = []int64{100e3, 1e6, 10e6, 100e6, 1e9}

// parallelNp are the numbers of parallel workers: the paper's Table 3
// (Np = Ns × Nm), fewer in the quick variant.
func parallelNp(quick bool) []int {
	if quick {
		return []int{1, 5, 25}
	}
	return []int{1, 5, 25, 50, 100, 200}
}

// The doors parallel-transfers can measure. The Quilt doors of one run
// share a bucket and its files, and each worker picks one at random for
// every transfer, as the paper's scripts picked ownCloud or StoRM over
// the same GPFS; the reference is measured on its own, with the same
// workers, after Quilt at each Np.
const (
	doorWebDAV = "webdav" // Quilt's WebDAV server (ownCloud's door in the paper)
	doorS3     = "s3"     // bulk: S3 multipart through the gateway (StoRM's)
	doorObject = "object" // the gateway's object API in this process
	doorRclone = "rclone" // rclone serve webdav on a local directory: plain disk
)

// defaultDoors are measured when Env.Doors is empty.
var defaultDoors = []string{doorWebDAV, doorS3, doorRclone}

// quiltDoors are the doors into Quilt, in report order.
var quiltDoors = []string{doorWebDAV, doorS3, doorObject}

// parallelPlan is what one parallel-transfers run does.
type parallelPlan struct {
	scale             float64
	sizes             []int64
	nps               []int
	caseTime, timeout time.Duration
	quilt             []string // Quilt doors, mixed in one case per Np
	reference         bool     // rclone too
}

// doors lists the plan's doors in report order.
func (p parallelPlan) doors() []string {
	if p.reference {
		return append(slices.Clone(p.quilt), doorRclone)
	}
	return slices.Clone(p.quilt)
}

// planParallel checks env's parallel-transfers settings and fills in
// their defaults.
func planParallel(env *Env) (parallelPlan, error) {
	p := parallelPlan{scale: env.Scale, nps: parallelNp(env.Quick)}
	switch {
	case p.scale == 0 && env.Quick:
		p.scale = 0.01
	case p.scale == 0:
		p.scale = 1
	case p.scale < 0:
		return p, fmt.Errorf("lab: --scale %g: must be above 0", p.scale)
	}
	for _, s := range parallelSizes {
		p.sizes = append(p.sizes, max(1, int64(float64(s)*p.scale)))
	}
	p.caseTime, p.timeout = 60*time.Second, 10*time.Minute
	if env.Quick {
		p.caseTime, p.timeout = 20*time.Second, 2*time.Minute
	}
	if env.CaseTime > 0 {
		p.caseTime = env.CaseTime
	}
	doors := env.Doors
	if len(doors) == 0 {
		doors = defaultDoors
	}
	seen := map[string]bool{}
	for _, d := range doors {
		switch {
		case seen[d]:
			return p, fmt.Errorf("lab: door %q given twice", d)
		case d == doorRclone:
			p.reference = true
		case slices.Contains(quiltDoors, d):
		default:
			return p, fmt.Errorf("lab: no door %q (there are %s, %s, %s and %s)", d, doorWebDAV, doorS3, doorObject, doorRclone)
		}
		seen[d] = true
	}
	for _, d := range quiltDoors {
		if seen[d] {
			p.quilt = append(p.quilt, d)
		}
	}
	return p, nil
}

// runParallel is the ownCloud/StoRM paper's stress test: for each Np,
// Np workers at a client host that each, until the case's time is up,
// pick a door, a file size and a direction at random and upload a new
// file or download an existing one, checking every byte. A transfer
// fails if it errs, returns a wrong byte or takes longer than the
// timeout; efficiency is the fraction that succeeded.
func runParallel(ctx context.Context, env *Env) error {
	plan, err := planParallel(env)
	if err != nil {
		return err
	}
	sc := env.Scenario
	clients := append(sc.Role("gateway"), sc.Role("client")...)
	if len(plan.quilt) > 0 && len(clients) == 0 {
		return fmt.Errorf("lab: parallel-transfers needs a client or gateway node in scenario %s", sc.Name)
	}
	work, err := env.workDir("parallel-transfers")
	if err != nil {
		return err
	}
	loadStart := loadAverage()
	hc := httpClient(slices.Max(plan.nps))
	defer hc.CloseIdleConnections()

	type group struct {
		name  string
		names []string
		doors map[string]door
		pool  *filePool
		clean func() error // after each case, if not nil
	}
	var groups []group
	if len(plan.quilt) > 0 {
		doors, stop, err := openQuiltDoors(ctx, env, work, clients[0].Name, hc, plan)
		if err != nil {
			return err
		}
		defer stop()
		groups = append(groups, group{"Quilt", plan.quilt, doors, &filePool{}, nil})
	}
	if plan.reference {
		d, stop, err := openRcloneDoor(ctx, env, work, hc, plan.sizes)
		if err != nil {
			return err
		}
		defer stop()
		// The local disk's uploads are removed after each case, which
		// bounds the disk it takes; Quilt keeps its own (deleted objects'
		// shares stay until garbage collection anyway).
		pool := &filePool{}
		clean := func() error {
			if err := pool.removeUploads(filepath.Join(work, rcloneDisk)); err != nil {
				return fmt.Errorf("lab: removing rclone's uploads: %w", err)
			}
			return nil
		}
		groups = append(groups, group{"rclone", []string{doorRclone}, map[string]door{doorRclone: d}, pool, clean})
	}
	for _, g := range groups {
		for _, s := range plan.sizes {
			g.pool.add(seedName(s), s)
		}
	}

	var all []transfer
	for ci, np := range plan.nps {
		for gi, g := range groups {
			env.logf("Np %d: %s (%s), %s", np, g.name, strings.Join(g.names, ", "), plan.caseTime)
			res := parallelCase(ctx, g.doors, g.names, g.pool, plan.sizes, np, plan.caseTime, plan.timeout, uint64(env.Seed)*1000+uint64(ci)*10+uint64(gi))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			all = append(all, res...)
			cells := summarize(res, g.names)
			for _, d := range g.names {
				for _, up := range []bool{false, true} {
					n, ok := opTotals(cells, d, np, up)
					env.logf("Np %3d  %-7s %-8s  transfers %4d  failed %3d", np, d, opName(up), n, n-ok)
				}
			}
			if g.clean != nil {
				if err := g.clean(); err != nil {
					return err
				}
			}
		}
	}
	disk := dirBytes(work)
	loadEnd := loadAverage()
	env.logf("work directory at the end: %.2f GB; load average %s at the start, %s at the end", float64(disk)/1e9, loadStart, loadEnd)

	notes := []string{
		fmt.Sprintf("Scenario %s: %s.", env.Scenario.Name, env.Scenario.Description),
		fmt.Sprintf("File sizes are the paper's 100 kB … 1 GB times %g. Each Np case runs %s: every worker repeatedly picks a door, a size and a direction at random and uploads a new file or downloads one of that size already there (every byte is checked); transfers in flight then finish. A transfer fails on an error, a wrong or missing byte, or after %s. Times are means over the transfers that succeeded.", plan.scale, plan.caseTime, plan.timeout),
		fmt.Sprintf("Machine load average (1, 5, 15 min) %s at the start and %s at the end; %.2f GB in the work directory at the end.", loadStart, loadEnd, float64(disk)/1e9),
	}
	return writeParallelReport(env.Out, all, plan, notes)
}

// seedName is the file of each size there before the first case.
func seedName(size int64) string { return fmt.Sprintf("seed-%d", size) }

// payloadOf is the content of the file called name.
func payloadOf(name string, size int64) payload {
	h := fnv.New64a()
	io.WriteString(h, name)
	return payload{key: h.Sum64(), size: size}
}

// filePool is what a group of doors' workers may download: the seed
// files and every upload that succeeded, by size. It is safe for
// concurrent use.
type filePool struct {
	mu    sync.Mutex
	files map[int64][]string
}

func (fp *filePool) add(name string, size int64) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.files == nil {
		fp.files = map[int64][]string{}
	}
	fp.files[size] = append(fp.files[size], name)
}

// removeUploads removes every file but the seeds from the pool and from
// dir.
func (fp *filePool) removeUploads(dir string) error {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for size, names := range fp.files {
		for _, n := range names {
			if n != seedName(size) {
				if err := os.Remove(filepath.Join(dir, n)); err != nil {
					return err
				}
			}
		}
		fp.files[size] = []string{seedName(size)}
	}
	return nil
}

// pick returns a random file of size, or false if there is none.
func (fp *filePool) pick(rng *rand.Rand, size int64) (string, bool) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	names := fp.files[size]
	if len(names) == 0 {
		return "", false
	}
	return names[rng.IntN(len(names))], true
}

// parallelCase runs np workers for d over doors (picked at random from
// names for each transfer) and returns every transfer.
func parallelCase(ctx context.Context, doors map[string]door, names []string, pool *filePool, sizes []int64, np int, d, timeout time.Duration, seed uint64) []transfer {
	var mu sync.Mutex
	var out []transfer
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range np {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				dn := names[rng.IntN(len(names))]
				size := sizes[rng.IntN(len(sizes))]
				up := rng.IntN(2) == 0
				name, ok := "", false
				if !up {
					name, ok = pool.pick(rng, size)
				}
				if !ok {
					up, name = true, fmt.Sprintf("np%d-w%d-%d", np, w, i)
				}
				p := payloadOf(name, size)
				tctx, cancel := context.WithTimeout(ctx, timeout)
				start := time.Now()
				var err error
				if up {
					err = doors[dn].upload(tctx, name, p)
				} else {
					err = doors[dn].download(tctx, name, p)
				}
				el := time.Since(start)
				if err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
					err = fmt.Errorf("timed out after %s: %w", timeout, err)
				}
				cancel()
				if up && err == nil {
					pool.add(name, size)
				}
				mu.Lock()
				out = append(out, transfer{door: dn, np: np, up: up, size: size, d: el, err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// openQuiltDoors starts a grid under env's scenario with a gateway at
// the scenario node at, makes the bucket the doors share with one file of
// each size in it, serves WebDAV and S3 on loopback ports, and returns
// plan.quilt's doors and a function that stops it all.
func openQuiltDoors(ctx context.Context, env *Env, work, at string, hc *http.Client, plan parallelPlan) (map[string]door, func(), error) {
	cl, gw, err := startWithGateway(ctx, env, env.Scenario, work, at, nil)
	if err != nil {
		return nil, nil, err
	}
	var stops []func()
	stop := func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	stops = append(stops, func() { cl.Close() }, func() { gw.Close() })
	fail := func(err error) (map[string]door, func(), error) { stop(); return nil, nil, err }

	const bucket, user = "files", "load"
	if err := gw.CreateBucket(ctx, bucket, ""); err != nil {
		return fail(err)
	}
	for _, s := range plan.sizes {
		n := seedName(s)
		if _, err := gw.Put(ctx, bucket, n, payloadOf(n, s).section(0, s), s, gateway.PutOptions{}); err != nil {
			return fail(fmt.Errorf("lab: first upload of %s: %w", sizeName(s), err))
		}
	}
	doors := map[string]door{}
	for _, d := range plan.quilt {
		switch d {
		case doorObject:
			doors[d] = objectDoor{gw: gw, bucket: bucket}
		case doorWebDAV:
			pass := randomPassword()
			line, err := sftp.PasswordLine(user, bucket, pass)
			if err != nil {
				return fail(err)
			}
			users, err := sftp.ParseUsers(strings.NewReader(line + "\n"))
			if err != nil {
				return fail(err)
			}
			spool := filepath.Join(work, "webdav-spool")
			if err := os.MkdirAll(spool, 0o700); err != nil {
				return fail(err)
			}
			srv, err := webdav.New(webdav.Config{
				Users:    func() (sftp.Users, error) { return users, nil },
				Tree:     sftp.GatewayTrees(gw),
				Object:   webdav.GatewayObjects(gw),
				SpoolDir: spool,
			})
			if err != nil {
				return fail(err)
			}
			u, stopServer, err := serveLoopback(&http.Server{Handler: srv, ReadHeaderTimeout: 30 * time.Second})
			if err != nil {
				return fail(err)
			}
			stops = append(stops, stopServer)
			doors[d] = webdavDoor{base: u + webdav.Prefix + user + "/", user: user, pass: pass, hc: hc}
		case doorS3:
			key, err := gw.CreateKey(ctx, true, nil)
			if err != nil {
				return fail(err)
			}
			u, stopServer, err := serveLoopback(s3.New(gw, s3.Options{}).HTTPServer())
			if err != nil {
				return fail(err)
			}
			stops = append(stops, stopServer)
			c := awss3.New(awss3.Options{
				BaseEndpoint: aws.String(u),
				Region:       "us-east-1",
				UsePathStyle: true,
				Credentials:  credentials.NewStaticCredentialsProvider(key.ID, key.Secret, ""),
				HTTPClient:   hc,
				Retryer:      aws.NopRetryer{},
			})
			doors[d] = s3Door{c: c, bucket: bucket, part: s3Part, streams: s3Streams}
		}
	}
	if err := checkDoors(ctx, doors, plan.sizes[0]); err != nil {
		return fail(err)
	}
	return doors, stop, nil
}

// rcloneDisk is the directory under the work directory that rclone serves.
const rcloneDisk = "rclone-disk"

// openRcloneDoor fills a local directory with one file of each size,
// serves it with rclone serve webdav and returns its door and a function
// that stops rclone.
func openRcloneDoor(ctx context.Context, env *Env, work string, hc *http.Client, sizes []int64) (door, func(), error) {
	dir := filepath.Join(work, rcloneDisk)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	for _, s := range sizes {
		if err := writePayload(filepath.Join(dir, seedName(s)), payloadOf(seedName(s), s)); err != nil {
			return nil, nil, err
		}
	}
	const user = "load"
	pass := randomPassword()
	rs, err := startRclone(ctx, dir, user, pass)
	if err != nil {
		return nil, nil, err
	}
	env.logf("rclone serve webdav %s at %s", dir, rs.url)
	d := webdavDoor{base: rs.url, user: user, pass: pass, hc: hc}
	if err := checkDoors(ctx, map[string]door{doorRclone: d}, sizes[0]); err != nil {
		rs.close()
		return nil, nil, err
	}
	return d, rs.close, nil
}

// checkDoors downloads the smallest seed file through each door, so a
// door that does not work at all is an error before any case runs.
func checkDoors(ctx context.Context, doors map[string]door, size int64) error {
	for name, d := range doors {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := d.download(ctx, seedName(size), payloadOf(seedName(size), size))
		cancel()
		if err != nil {
			return fmt.Errorf("lab: door %s: first download: %w", name, err)
		}
	}
	return nil
}

// writePayload writes p to a new file at path.
func writePayload(path string, p payload) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, p.section(0, p.size)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// serveLoopback serves hs on a new 127.0.0.1 port and returns its URL
// ("http://127.0.0.1:PORT") and a function that stops it.
func serveLoopback(hs *http.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go hs.Serve(ln)
	return "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}

func randomPassword() string {
	b := make([]byte, 18)
	crand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// loadAverage is the machine's load average ("1.20 0.90 0.75"), or "?"
// where /proc/loadavg cannot be read.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// sizeName writes a size as the INFN paper does, in decimal units.
func sizeName(n int64) string {
	switch {
	case n >= 1e9 && n%1e9 == 0:
		return fmt.Sprintf("%d GB", n/1e9)
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%d MB", n/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%d kB", n/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
