package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/keystone"
	"github.com/quilt-grid/quilt/internal/gateway/swift"
	"github.com/quilt-grid/quilt/internal/lab/openstack"
	"github.com/quilt-grid/quilt/internal/lab/report"
	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

// swiftBenchSizes are Experiment II's object sizes, 100 kB to 100 MB
// (quick: the smaller ones).
func swiftBenchSizes(quick bool) []int64 {
	if quick {
		return []int64{100_000, 1_000_000, 10_000_000}
	}
	return []int64{100_000, 1_000_000, 10_000_000, 100_000_000}
}

// swiftBenchDelays are the latencies added between proxy (gateway) and
// storage, 0 to 50 ms as in the paper.
func swiftBenchDelays(quick bool) []time.Duration {
	ms := []int{0, 10, 25, 50}
	if quick {
		ms = []int{0, 10, 50}
	}
	var d []time.Duration
	for _, m := range ms {
		d = append(d, time.Duration(m)*time.Millisecond)
	}
	return d
}

// swiftBenchLimit bounds one swift-bench run: generous, since 100 MB
// objects through a slow emulated link take long, but finite.
func swiftBenchLimit(size int64, objects, gets int) time.Duration {
	bytes := float64(size) * float64(2*objects+gets) * 3 // three copies' worth per PUT, to be safe
	return 5*time.Minute + time.Duration(bytes/1e6)*time.Second
}

// endpoint is a Swift API swift-bench can be pointed at.
type endpoint struct {
	name               string
	authURL, user, key string
}

// serveQuiltSwift serves gw's Swift API on a loopback port, with a
// project acting as a new admin key and its user, and returns the
// endpoint and a function that stops the server.
func serveQuiltSwift(ctx context.Context, gw *gateway.Gateway) (endpoint, func(), error) {
	admin, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		return endpoint{}, nil, err
	}
	ids := keystone.New(gw, keystone.Config{})
	if _, err := ids.AddProject(ctx, "bench", admin.ID); err != nil && !errors.Is(err, keystone.ErrExists) {
		return endpoint{}, nil, err
	}
	_, pass, err := ids.AddUser(ctx, "bench", "tester", "")
	if err != nil {
		return endpoint{}, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return endpoint{}, nil, err
	}
	url := "http://" + ln.Addr().String()
	srv := swift.New(gw, ids, swift.Options{Region: "RegionOne", PublicURL: url}).HTTPServer()
	go srv.Serve(ln)
	return endpoint{name: "quilt", authURL: url + "/auth/v1.0", user: "bench:tester", key: pass},
		func() { srv.Close() }, nil
}

// runSwiftBench is the Swift paper's Experiment II with swift-bench
// itself as the load: for each added latency between gateway and storage
// and each object size, swift-bench PUTs the objects, GETs random ones
// and DELETEs them, 10 workers, against Quilt's Swift API (the gateway at
// the scenario's gateway host, its nodes behind the links) and against
// OpenStack Swift from PyPI, whose object servers sit behind links equal
// to those from the gateway to the first storage nodes.
func runSwiftBench(ctx context.Context, env *Env) error {
	base := env.Scenario
	gws, storage := base.Role("gateway"), base.Role("storage")
	if len(gws) == 0 || len(storage) < swiftReplicas {
		return fmt.Errorf("lab: swift-bench needs a gateway and at least %d storage nodes in scenario %s", swiftReplicas, base.Name)
	}
	gwName := gws[0].Name
	work, err := env.workDir("swift-bench")
	if err != nil {
		return err
	}
	env.logf("making sure OpenStack Swift %s and swift-bench %s are installed (pip, the first time a few minutes)",
		openstack.SwiftVersion, openstack.SwiftBenchVersion)
	venv, err := openstack.EnsureVenv(ctx, env.SwiftVenv)
	if err != nil {
		return fmt.Errorf("lab: swift-bench: %w", err)
	}
	delays := swiftBenchDelays(env.Quick)
	worst := base.AddDelay("gateway", "storage", delays[len(delays)-1])
	cl, gw, err := startWithGateway(ctx, env, base, work, gwName, GossipFor(worst))
	if err != nil {
		return err
	}
	defer cl.Close()
	defer gw.Close()
	quilt, stop, err := serveQuiltSwift(ctx, gw)
	if err != nil {
		return err
	}
	defer stop()
	systems := []endpoint{quilt}

	// OpenStack Swift: its proxy server is the host "swift-GATEWAY",
	// object server i the host "swift-STORAGE_i".
	proxyHost := "swift-" + gwName
	var swiftHosts []string
	for _, sn := range storage[:swiftReplicas] {
		swiftHosts = append(swiftHosts, "swift-"+sn.Name)
	}
	env.logf("starting OpenStack Swift %s: proxy, account, container and %d object servers behind the same links", openstack.SwiftVersion, swiftReplicas)
	var notes []string
	oc, err := openstack.Start(ctx, openstack.Options{Venv: venv, Dir: filepath.Join(work, "openstack"), Objects: swiftReplicas,
		Net: cl.Net, ProxyHost: proxyHost, StorageHosts: swiftHosts, NoSync: true, Log: env.Log})
	if err != nil {
		// Quilt's side is still a result.
		env.logf("OpenStack Swift did not start, measuring Quilt only: %v", err)
		notes = append(notes, "OpenStack Swift did not start: "+oneLine(err.Error(), 600))
	} else {
		defer oc.Close()
		systems = append(systems, endpoint{name: "openstack-swift", authURL: oc.AuthURL(), user: oc.User, key: oc.Key})
	}

	objects, gets := benchObjects, benchGets
	if env.Quick {
		objects, gets = 20, 40
	}
	tab := &report.Table{Title: fmt.Sprintf("swift-bench on %s: requests per second, %d objects, %d GETs, concurrency %d", base.Name, objects, gets, benchConcurrency),
		Columns: []string{"system", "added latency", "size", "bytes", "PUT/s", "GET/s", "DEL/s", "PUT MB/s", "GET MB/s",
			"PUT s", "GET s", "DEL s", "failed PUT/GET/DEL", "error"}}
	type key struct {
		sys  string
		size int64
	}
	type series struct{ x, put, get, del []float64 }
	points := map[key]*series{}
	var order []key
	for ci, d := range delays {
		sc := base.AddDelay("gateway", "storage", d)
		sc.Apply(cl.Net, cl.Host)
		for i, sn := range storage[:swiftReplicas] {
			cl.Net.SetLink(proxyHost, swiftHosts[i], sc.Link(gwName, sn.Name))
			cl.Net.SetLink(swiftHosts[i], proxyHost, sc.Link(sn.Name, gwName))
			if lim, ok := sc.HostLimit(sn.Name); ok {
				cl.Net.SetHost(swiftHosts[i], lim)
			}
		}
		if lim, ok := sc.HostLimit(gwName); ok {
			cl.Net.SetHost(proxyHost, lim)
		}
		for si, size := range swiftBenchSizes(env.Quick) {
			for _, sys := range systems {
				cfg := openstack.BenchConfig{AuthURL: sys.authURL, User: sys.user, Key: sys.key, Concurrency: benchConcurrency,
					Objects: objects, Gets: gets, Size: size, Container: fmt.Sprintf("bench-%d-%d", ci, si)}
				r, _, err := openstack.RunBench(ctx, venv.Bin("swift-bench"), cfg, swiftBenchLimit(size, objects, gets))
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					// A run that does not finish on this network is a
					// result, as the paper's 100 MB runs beyond 15 ms.
					env.logf("%-15s added %5s  %8s  FAILED: %v", sys.name, d, sizeName(size), oneLine(err.Error(), 300))
					tab.Add(sys.name, d, sizeName(size), size, nil, nil, nil, nil, nil, nil, nil, nil, nil, oneLine(err.Error(), 160))
					continue
				}
				env.logf("%-15s added %5s  %8s  PUT %7.1f/s  GET %7.1f/s  DEL %7.1f/s  failed %d/%d/%d",
					sys.name, d, sizeName(size), r.Put.Rate, r.Get.Rate, r.Del.Rate, r.Put.Failures, r.Get.Failures, r.Del.Failures)
				tab.Add(sys.name, d, sizeName(size), size, r.Put.Rate, r.Get.Rate, r.Del.Rate,
					r.Put.Rate*float64(size)/1e6, r.Get.Rate*float64(size)/1e6,
					r.Put.Seconds, r.Get.Seconds, r.Del.Seconds, fmt.Sprintf("%d/%d/%d", r.Put.Failures, r.Get.Failures, r.Del.Failures), "")
				k := key{sys.name, size}
				p := points[k]
				if p == nil {
					p = &series{}
					points[k] = p
					order = append(order, k)
				}
				p.x = append(p.x, float64(d.Milliseconds()))
				p.put, p.get, p.del = append(p.put, r.Put.Rate), append(p.get, r.Get.Rate), append(p.del, r.Del.Rate)
			}
		}
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Scenario %s: %s.", base.Name, base.Description),
		fmt.Sprintf("swift-bench %s (10 workers, one container) on this host against each system's TempAuth v1.0 endpoint; rates are swift-bench's own (its **FINAL** lines, one decimal), PUT/GET/DEL s the phases' lengths from its log's timestamps.", openstack.SwiftBenchVersion),
		fmt.Sprintf("quilt: the gateway's Swift API at the scenario's %s, its %d nodes behind the links (3-of-10 erasure coding). openstack-swift: Swift %s, a proxy server with TempAuth and memcached, %d object servers (one replica each) behind links equal to those from %s to %s, account and container servers reached directly; servers under eatmydata, as Quilt's lab nodes do not fsync.",
			gwName, len(storage), openstack.SwiftVersion, swiftReplicas, gwName, strings.Join(names(storage[:swiftReplicas]), ", ")),
		"The added latency is one way, on every link between gateway (proxy) and storage.")
	tab.Notes = append(tab.Notes, notes...)
	if _, _, err := report.Write(env.Out, "swift-bench", tab); err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("lab: swift-bench: no run finished (see %s)", filepath.Join(env.Out, "swift-bench.md"))
	}
	for _, op := range []string{"PUT", "GET", "DEL"} {
		p := &report.Plot{Title: fmt.Sprintf("swift-bench %s/s on %s", op, base.Name),
			XLabel: "added latency gateway–storage (ms)", YLabel: op + "/s", LogY: true}
		for _, k := range order {
			pt := points[k]
			y := map[string][]float64{"PUT": pt.put, "GET": pt.get, "DEL": pt.del}[op]
			p.Series = append(p.Series, report.Series{Name: k.sys + " " + sizeName(k.size), X: pt.x, Y: y})
		}
		if err := p.Save(filepath.Join(env.Out, fmt.Sprintf("swift-bench-%s.png", lower(op)))); err != nil {
			return err
		}
	}
	return nil
}

// swiftReplicas is the number of object servers, and replicas, of the
// OpenStack Swift cluster: the paper's three.
const swiftReplicas = 3

func names(ns []scenario.Node) []string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return s
}

// oneLine returns s on one line, cut to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
