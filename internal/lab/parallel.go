package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/lab/report"
)

// The INFN paper's file sizes: 100 kB, 1 MB, 10 MB, 100 MB, 1 GB.
var parallelSizes = []int64{100e3, 1e6, 10e6, 100e6, 1e9}

func parallelNp(quick bool) []int {
	if quick {
		return []int{1, 5, 25}
	}
	return []int{1, 5, 25, 50, 100, 200}
}

// transfer is one finished (or failed) upload or download.
type transfer struct {
	up   bool
	size int64
	d    time.Duration
	err  error
}

// runParallel runs, for each Np, Np workers at a client host that each,
// until the case's time is up, pick a random file size and a random
// direction and upload a new file or download an existing one through the
// gateway. A transfer fails if it errs or takes longer than the timeout;
// efficiency is the fraction that succeeded.
func runParallel(ctx context.Context, env *Env) error {
	sc := env.Scenario
	clients := append(sc.Role("gateway"), sc.Role("client")...)
	if len(clients) == 0 {
		return fmt.Errorf("lab: parallel-transfers needs a client or gateway node in scenario %s", sc.Name)
	}
	scale := env.Scale
	switch {
	case scale == 0 && env.Quick:
		scale = 0.01
	case scale == 0:
		scale = 1
	case scale < 0:
		return fmt.Errorf("lab: --scale %g: must be above 0", scale)
	}
	var sizes []int64
	for _, s := range parallelSizes {
		sizes = append(sizes, max(1, int64(float64(s)*scale)))
	}
	caseTime, timeout := 60*time.Second, 10*time.Minute
	if env.Quick {
		caseTime, timeout = 10*time.Second, 2*time.Minute
	}
	work, err := env.workDir("parallel-transfers")
	if err != nil {
		return err
	}
	cl, gw, err := startWithGateway(ctx, env, sc, work, clients[0].Name, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer gw.Close()
	const bucket = "transfers"
	if err := gw.CreateBucket(ctx, bucket, ""); err != nil {
		return err
	}
	// One file of each size to download.
	for _, s := range sizes {
		if _, err := gw.Put(ctx, bucket, fmt.Sprintf("seed-%d", s), zeroes(s), s, gateway.PutOptions{}); err != nil {
			return fmt.Errorf("lab: first upload of %s: %w", report.SizeLabel(s), err)
		}
	}

	tab := &report.Table{Title: fmt.Sprintf("parallel-transfers on %s: mean transfer time (s) and efficiency, %s per Np case", sc.Name, caseTime),
		Columns: []string{"Np", "operation"}}
	for _, s := range sizes {
		tab.Columns = append(tab.Columns, sizeName(s))
	}
	tab.Columns = append(tab.Columns, "transfers", "efficiency")
	type curve struct{ x, y []float64 }
	plots := map[string]*curve{}
	for ci, np := range parallelNp(env.Quick) {
		res := parallelCase(ctx, gw, bucket, sizes, np, caseTime, timeout, uint64(env.Seed)+uint64(ci))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for _, up := range []bool{true, false} {
			op := map[bool]string{true: "upload", false: "download"}[up]
			row := []any{np, op}
			ok, all := 0, 0
			for _, s := range sizes {
				var sum time.Duration
				k := 0
				for _, t := range res {
					if t.up == up && t.size == s {
						all++
						if t.err == nil {
							ok++
							k++
							sum += t.d
						}
					}
				}
				if k == 0 {
					row = append(row, nil)
					continue
				}
				mean := sum / time.Duration(k)
				row = append(row, mean.Seconds())
				c := plots[op+" "+sizeName(s)]
				if c == nil {
					c = &curve{}
					plots[op+" "+sizeName(s)] = c
				}
				c.x, c.y = append(c.x, float64(np)), append(c.y, mean.Seconds())
			}
			eff := 0.0
			if all > 0 {
				eff = float64(ok) / float64(all)
			}
			row = append(row, all, eff)
			tab.Add(row...)
			env.logf("Np %3d %-8s transfers %4d  efficiency %.2f", np, op, all, eff)
		}
	}
	tab.Notes = append(tab.Notes, fmt.Sprintf("Scenario %s: %s.", sc.Name, sc.Description),
		fmt.Sprintf("File sizes are the paper's 100 kB … 1 GB times %g. Each worker repeatedly picks a size and a direction at random; a transfer fails on an error or after %s.", scale, timeout),
		"Transfers go through the gateway's object API at the client host, as the paper's scripts went through StoRM and ownCloud.")
	if _, _, err := report.Write(env.Out, "parallel-transfers", tab); err != nil {
		return err
	}
	for _, op := range []string{"upload", "download"} {
		p := &report.Plot{Title: fmt.Sprintf("Mean %s time vs parallel workers on %s", op, sc.Name), XLabel: "Np (parallel workers)", YLabel: "seconds", LogX: true, LogY: true}
		for _, s := range sizes {
			if c := plots[op+" "+sizeName(s)]; c != nil {
				p.Series = append(p.Series, report.Series{Name: sizeName(s), X: c.x, Y: c.y})
			}
		}
		if len(p.Series) == 0 {
			continue
		}
		if err := p.Save(filepath.Join(env.Out, "parallel-transfers-"+op+".png")); err != nil {
			return err
		}
	}
	return nil
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

func zeroes(n int64) io.Reader { return io.LimitReader(zeroReader{}, n) }

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// parallelCase runs np workers for d and returns every transfer.
func parallelCase(ctx context.Context, gw *gateway.Gateway, bucket string, sizes []int64, np int, d, timeout time.Duration, seed uint64) []transfer {
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
				size := sizes[rng.IntN(len(sizes))]
				up := rng.IntN(2) == 0
				tctx, cancel := context.WithTimeout(ctx, timeout)
				start := time.Now()
				var err error
				if up {
					_, err = gw.Put(tctx, bucket, fmt.Sprintf("w%d-%d", w, i), zeroes(size), size, gateway.PutOptions{})
				} else {
					var n countWriter
					_, err = gw.Get(tctx, bucket, fmt.Sprintf("seed-%d", size), &n, 0, -1)
					if err == nil && int64(n) != size {
						err = fmt.Errorf("downloaded %d bytes of %d", n, size)
					}
				}
				el := time.Since(start)
				if errors.Is(tctx.Err(), context.DeadlineExceeded) && err != nil {
					err = fmt.Errorf("timed out after %s: %w", timeout, err)
				}
				cancel()
				mu.Lock()
				out = append(out, transfer{up, size, el, err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
