package namespace_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/linkemu"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/zeebo/blake3"
)

// BenchmarkConvergence times one write, made at a random node, until all
// 30 nodes have admitted it: gossip with memberlist's LAN timers, over
// an emulated LAN and over links of 100 ms ± 20 ms one way. Reports the
// median and 99th percentile. Run with -benchtime=Nx (N writes).
func BenchmarkConvergence(b *testing.B) {
	for _, c := range []struct {
		name string
		link linkemu.Link
	}{
		{"lan", linkemu.Link{Delay: 200 * time.Microsecond}},
		{"delay100ms", linkemu.Link{Delay: 100 * time.Millisecond, Jitter: 20 * time.Millisecond}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var mu sync.Mutex
			arrived := map[dag.Hash]int{}
			done := map[dag.Hash]chan struct{}{}
			const N = 30
			onAdmit := func(_ int, raws [][]byte) {
				mu.Lock()
				defer mu.Unlock()
				for _, raw := range raws {
					h := dag.Hash(blake3.Sum256(raw))
					if arrived[h]++; arrived[h] == N {
						if ch := done[h]; ch != nil {
							close(ch)
						}
					}
				}
			}
			g := newEmuGrid(b, N, emuOpts{link: c.link, onAdmit: onAdmit, tune: func(mc *memberlist.Config) {
				def := memberlist.DefaultLANConfig()
				mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = def.ProbeInterval, def.ProbeTimeout, def.GossipInterval
				mc.SuspicionMult, mc.PushPullInterval, mc.TCPTimeout = def.SuspicionMult, def.PushPullInterval, def.TCPTimeout
			}})
			g.bootstrap()
			rng := rand.New(rand.NewPCG(9, 9))
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				node := rng.IntN(N)
				// Know the hash before appending, so the arrival counter
				// is waiting for it.
				h, ch := g.prepare(rng, node, fmt.Sprint("bench ", i), &mu, done)
				start := time.Now()
				g.commit(node, h)
				select {
				case <-ch:
					lat = append(lat, time.Since(start))
				case <-time.After(60 * time.Second):
					b.Fatalf("write %d did not reach all %d nodes within 60 s", i, N)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Milliseconds()), "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// prepare makes (without appending) a write at node i and registers a
// channel closed when every node has admitted it.
func (g *emuGrid) prepare(rng *rand.Rand, i int, tag string, mu *sync.Mutex, done map[dag.Hash]chan struct{}) (*dag.Entry, chan struct{}) {
	m := g.nodes[i]
	name := fmt.Sprint("f", rng.IntN(1000))
	heads, _ := m.db.Heads(g.ns, "/"+name)
	e := g.root.Entry(dag.Write, g.rootH, heads, name, []byte(tag))
	ch := make(chan struct{})
	mu.Lock()
	done[e.Hash()] = ch
	mu.Unlock()
	return e, ch
}

func (g *emuGrid) commit(i int, e *dag.Entry) {
	if _, err := g.nodes[i].rep.Append(g.ns, [][]byte{e.Encode()}, false); err != nil {
		g.t.Fatal(err)
	}
}

// writes makes n signed entries: files directly under the root directory.
func writes(b *testing.B, n int) (dag.NSID, dag.ReadKey, [][]byte) {
	ns, priv, _ := dag.NewNamespace()
	key, _ := dag.NewReadKey()
	w := &dag.Writer{NS: ns, Key: priv, Read: key}
	root := w.Root()
	out := [][]byte{root.Encode()}
	for i := range n {
		out = append(out, w.Entry(dag.Write, root.Hash(), nil, fmt.Sprintf("host-%07d.conf", i), []byte("address 10.1.2.3\nport 7700\n")).Encode())
	}
	return ns, key, out
}

// BenchmarkAppend measures entries appended per second on one replica,
// each checked (signature, grant) and committed with its view update:
// one entry per transaction (a client's write), and in batches of 256 (a
// burst of gossip), with fsync and without.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct {
		name   string
		batch  int
		noSync bool
	}{{"one/fsync", 1, false}, {"batch256/fsync", 256, false}, {"one/nosync", 1, true}, {"batch256/nosync", 256, true}} {
		b.Run(c.name, func(b *testing.B) {
			ns, key, recs := writes(b, b.N)
			db, err := namespace.OpenDB(filepath.Join(b.TempDir(), "ns.db"), namespace.Options{NoSync: c.noSync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.Open(ns, &key, dag.ConfigRules)
			db.Ingest(ns, recs[:1])
			recs = recs[1:]
			b.ResetTimer()
			for len(recs) > 0 {
				n := min(c.batch, len(recs))
				res, err := db.Ingest(ns, recs[:n])
				if err != nil || len(res.Admitted) != n {
					b.Fatalf("ingest: %v, %d of %d admitted", err, len(res.Admitted), n)
				}
				recs = recs[n:]
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkList times listing every name of a directory of 10,000 (and,
// with QUILT_BENCH_1M=1, 1,000,000) files from the materialised view, and
// reports the bytes on disk per entry.
func BenchmarkList(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("QUILT_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ns, key, recs := writes(b, n)
			path := filepath.Join(b.TempDir(), "ns.db")
			db, err := namespace.OpenDB(path, namespace.Options{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.Open(ns, &key, dag.ConfigRules)
			for len(recs) > 0 {
				k := min(10_000, len(recs))
				if _, err := db.Ingest(ns, recs[:k]); err != nil {
					b.Fatal(err)
				}
				recs = recs[k:]
			}
			st, _ := os.Stat(path)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items, err := db.List(ns, "/", "", 0)
				if err != nil || len(items) != n {
					b.Fatalf("listed %d of %d: %v", len(items), n, err)
				}
			}
			b.ReportMetric(float64(st.Size())/float64(n), "disk-bytes/entry")
		})
	}
}
