package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/lab/report"
)

// swift-bench's defaults in the KREONET paper: 100 objects and 200 GETs
// per case; concurrency is swift-bench's default.
const (
	benchObjects     = 100
	benchGets        = 200
	benchConcurrency = 10
)

func putGetDelSizes(quick bool) []int64 {
	if quick {
		return []int64{10, 1000, 100_000, 1_000_000}
	}
	return []int64{10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000}
}

func putGetDelDelays(quick bool) []time.Duration {
	ms := []int{0, 5, 10, 15, 20, 50}
	if quick {
		ms = []int{0, 10, 50}
	}
	var d []time.Duration
	for _, m := range ms {
		d = append(d, time.Duration(m)*time.Millisecond)
	}
	return d
}

// runPutGetDel drives the gateway as swift-bench drives a Swift proxy: at
// the gateway host, benchConcurrency workers PUT the objects, then GET
// random ones, then DELETE them all, and each phase's operations per
// second is measured. The latency added between gateway and storage
// changes between cases, on the running grid.
func runPutGetDel(ctx context.Context, env *Env) error {
	base := env.Scenario
	gws := base.Role("gateway")
	if len(gws) == 0 {
		gws = base.Role("client")
	}
	if len(gws) == 0 {
		return fmt.Errorf("lab: put-get-del needs a gateway (or client) node in scenario %s", base.Name)
	}
	gwName := gws[0].Name
	work, err := env.workDir("put-get-del")
	if err != nil {
		return err
	}
	delays := putGetDelDelays(env.Quick)
	// Gossip timers for the largest added latency, so nodes stay alive
	// across all cases.
	worst := base.AddDelay("gateway", "storage", delays[len(delays)-1])
	cl, gw, err := startWithGateway(ctx, env, base, work, gwName, GossipFor(worst))
	if err != nil {
		return err
	}
	defer cl.Close()
	defer gw.Close()

	objects, gets := benchObjects, benchGets
	if env.Quick {
		objects, gets = 20, 40
	}
	tab := &report.Table{Title: fmt.Sprintf("put-get-del on %s: operations per second, %d objects, %d GETs, concurrency %d", base.Name, objects, gets, benchConcurrency),
		Columns: []string{"added latency", "size", "bytes", "PUT/s", "GET/s", "DEL/s", "PUT MB/s", "GET MB/s", "failed"}}
	type point struct{ x, put, get, del []float64 }
	bySize := map[int64]*point{}
	for ci, d := range delays {
		base.AddDelay("gateway", "storage", d).Apply(cl.Net, cl.Host)
		for si, size := range putGetDelSizes(env.Quick) {
			bucket := fmt.Sprintf("bench-%d-%d", ci, si)
			if err := gw.CreateBucket(ctx, bucket, ""); err != nil {
				return err
			}
			r, err := swiftBench(ctx, gw, bucket, size, objects, gets, uint64(env.Seed)+uint64(ci*100+si))
			if err != nil {
				return err
			}
			env.logf("added %5s  %8s  PUT %7.1f/s  GET %7.1f/s  DEL %7.1f/s  failed %d", d, sizeName(size), r.put, r.get, r.del, r.failed)
			tab.Add(d, sizeName(size), size, r.put, r.get, r.del, r.put*float64(size)/1e6, r.get*float64(size)/1e6, r.failed)
			p := bySize[size]
			if p == nil {
				p = &point{}
				bySize[size] = p
			}
			p.x = append(p.x, float64(d.Milliseconds()))
			p.put, p.get, p.del = append(p.put, r.put), append(p.get, r.get), append(p.del, r.del)
		}
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Scenario %s: %s.", base.Name, base.Description),
		"Driven at the gateway host through the gateway's object API (what the S3 front end calls), as swift-bench ran on the proxy; the added latency is one way, on every link between gateway and storage nodes.")
	if _, _, err := report.Write(env.Out, "put-get-del", tab); err != nil {
		return err
	}
	for _, op := range []string{"PUT", "GET", "DEL"} {
		p := &report.Plot{Title: fmt.Sprintf("%s operations per second on %s", op, base.Name),
			XLabel: "added latency gateway–storage (ms)", YLabel: op + "/s", LogY: true}
		for _, size := range putGetDelSizes(env.Quick) {
			pt := bySize[size]
			y := map[string][]float64{"PUT": pt.put, "GET": pt.get, "DEL": pt.del}[op]
			p.Series = append(p.Series, report.Series{Name: sizeName(size), X: pt.x, Y: y})
		}
		if err := p.Save(filepath.Join(env.Out, fmt.Sprintf("put-get-del-%s.png", lower(op)))); err != nil {
			return err
		}
	}
	return nil
}

func lower(s string) string { return string(bytes.ToLower([]byte(s))) }

type benchResult struct {
	put, get, del float64 // operations per second
	failed        int
}

// swiftBench is swift-bench's cycle on one bucket.
func swiftBench(ctx context.Context, gw *gateway.Gateway, bucket string, size int64, objects, gets int, seed uint64) (benchResult, error) {
	body := make([]byte, size)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(body)
	var failed atomic.Int64
	var firstErr atomic.Value
	phase := func(count int, op func(i int) error) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range benchConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= count || ctx.Err() != nil {
						return
					}
					if err := op(i); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			}()
		}
		wg.Wait()
		return float64(count) / time.Since(start).Seconds()
	}
	name := func(i int) string { return fmt.Sprintf("obj-%06d", i) }
	var r benchResult
	r.put = phase(objects, func(i int) error {
		_, err := gw.Put(ctx, bucket, name(i), bytes.NewReader(body), size, gateway.PutOptions{})
		return err
	})
	rng := rand.New(rand.NewPCG(seed, 1))
	picks := make([]int, gets)
	for i := range picks {
		picks[i] = rng.IntN(objects)
	}
	r.get = phase(gets, func(i int) error {
		_, err := gw.Get(ctx, bucket, name(picks[i]), io.Discard, 0, -1)
		return err
	})
	r.del = phase(objects, func(i int) error { return gw.Delete(ctx, bucket, name(i)) })
	r.failed = int(failed.Load())
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if r.failed > objects/2 {
		return r, fmt.Errorf("lab: %d of %d operations failed, the first: %v", r.failed, 2*objects+gets, firstErr.Load())
	}
	return r, nil
}
