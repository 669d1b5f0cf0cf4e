// Command s3load measures an S3 endpoint with aws-sdk-go-v2: PUT and GET
// throughput of 1, 16 and 128 MiB objects at concurrency 1 and 8, and
// PUT/GET operations per second of 4 KiB objects at concurrency 8. The
// same program measures Quilt and MinIO, so both see the same load.
//
//	s3load -endpoint http://127.0.0.1:7780 -key ID -secret SECRET -label quilt
//
// It makes (and empties) a bucket named s3load-<random>. Every case is
// bounded in count and time. With -pid, it also reports the CPU time the
// server process used per operation (read from /proc before and after
// each phase; work the server defers past a phase's end is not counted).
// Before each measured phase, every one of its concurrent clients makes
// one request of the same kind, unmeasured (of at most 1 MiB; see
// warmUp).
// With -split as well, it prints each process's share to stderr, and the
// phase's span on CLOCK_MONOTONIC, the clock of `perf record -k
// monotonic`, so that a profile of the whole run can be cut to a phase.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sys/unix"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("AWS_ENDPOINT_URL"), "S3 endpoint")
	key := flag.String("key", os.Getenv("AWS_ACCESS_KEY_ID"), "access key ID")
	secret := flag.String("secret", os.Getenv("AWS_SECRET_ACCESS_KEY"), "secret key")
	label := flag.String("label", "s3", "name of the system, for the table")
	budget := flag.Duration("time", 20*time.Second, "time budget of each case")
	quick := flag.Bool("quick", false, "skip 128 MiB")
	only := flag.String("only", "", "run only these cases, comma-separated, of 1M, 16M, 128M, 4K (default: all)")
	pids := flag.String("pid", "", "also report the CPU time the server spends per operation, from /proc (Linux): its process ID, or a comma-separated list whose times are added (a grid of node processes and a gateway)")
	flag.BoolVar(&split, "split", false, "with -pid, also print each process's CPU time per operation (to stderr)")
	maxCount := flag.Int("count", 64, "at most this many objects in each case of 1 MiB and more (4 KiB: 4,000)")
	flag.Parse()
	for _, f := range strings.Split(*pids, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 0 {
			log.Fatalf("-pid: %q is not a process ID", f)
		}
		serverPIDs = append(serverPIDs, pid)
	}
	want := func(c string) bool { return *only == "" || slices.Contains(strings.Split(*only, ","), c) }
	c := s3.New(s3.Options{BaseEndpoint: endpoint, Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(*key, *secret, "")})
	ctx := context.Background()
	rb := make([]byte, 4)
	rand.Read(rb)
	bucket := fmt.Sprintf("s3load-%x", rb)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		log.Fatal(err)
	}
	data := make([]byte, 128<<20)
	rand.Read(data)
	if len(serverPIDs) > 0 {
		if _, err := cpuTime(); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("| system | case | concurrency | PUT | GET | server CPU per PUT | per GET |\n|---|---|---|---|---|---|---|\n")
	} else {
		fmt.Printf("| system | case | concurrency | PUT | GET |\n|---|---|---|---|---|\n")
	}
	sizes := []int{1 << 20, 16 << 20, 128 << 20}
	if *quick {
		sizes = sizes[:2]
	}
	for _, size := range sizes {
		if !want(fmt.Sprintf("%dM", size>>20)) {
			continue
		}
		for _, conc := range []int{1, 8} {
			count := max(conc, min(*maxCount, int(256<<20/size)*conc/2))
			put, get := run(ctx, c, bucket, data[:size], conc, count, *budget)
			mb := float64(size) / 1e6
			fmt.Printf("| %s | %d MiB | %d | %.1f MB/s | %.1f MB/s%s\n", *label, size>>20, conc, put.rate*mb, get.rate*mb, cpuColumns(put, get))
		}
	}
	if !want("4K") {
		return
	}
	put, get := run(ctx, c, bucket, data[:4096], 8, 4000, *budget)
	fmt.Printf("| %s | 4 KiB | 8 | %.0f ops/s | %.0f ops/s%s\n", *label, put.rate, get.rate, cpuColumns(put, get))
}

// serverPIDs are the processes whose CPU time is reported (none: no
// report).
var serverPIDs []int

// split asks for each server process's share of the CPU time per
// operation, to see where it goes (the gateway, the node it writes
// through, the others).
var split bool

// monotonic is CLOCK_MONOTONIC in seconds, the clock of perf record -k
// monotonic: -split prints each phase's span on it.
func monotonic() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// result is one phase of a case: operations per second, and the server's
// CPU time per operation (if measured).
type result struct {
	rate  float64
	cpuOp time.Duration
}

// cpuColumns ends a table row: the server CPU columns, if measured.
func cpuColumns(put, get result) string {
	if len(serverPIDs) == 0 {
		return " |"
	}
	return fmt.Sprintf(" | %.2f ms | %.2f ms |", float64(put.cpuOp.Microseconds())/1e3, float64(get.cpuOp.Microseconds())/1e3)
}

// cpuTime returns the user+system CPU time each server process has used
// (in the order of serverPIDs).
func cpuTime() ([]time.Duration, error) {
	out := make([]time.Duration, len(serverPIDs))
	for i, pid := range serverPIDs {
		t, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// procCPU returns the user+system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command name (field 2) is in parentheses and may hold spaces.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// warmUp runs op(0) ... op(conc-1) at once, unmeasured, before a phase:
// the phase then measures the server at work, not the connections and
// buffers its first requests set up. A grid's gateway opens a TLS
// connection to each of ten nodes for every upload it runs at once, so
// that some 70 handshakes (each an X25519MLKEM768 exchange and Ed25519
// signatures at both ends) fell inside the first 64 PUTs at concurrency
// 8, the lone uploads before having opened one connection per node;
// MinIO, one process, had 7 new client connections.
func warmUp(conc int, op func(i int) error) {
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for w := range conc {
		wg.Add(1)
		go func() { defer wg.Done(); errs[w] = op(w) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			log.Fatalf("warm-up: %v", err)
		}
	}
}

// run PUTs count objects (stopping at the budget), then GETs them; it
// returns operations per second of each, and the server's CPU time per
// operation if -pid is set. Each phase has a warm-up (see warmUp) of
// objects of at most 1 MiB, under other keys.
func run(ctx context.Context, c *s3.Client, bucket string, body []byte, conc, count int, budget time.Duration) (result, result) {
	var next atomic.Int64
	var done atomic.Int64
	warmBody := body[:min(len(body), 1<<20)]
	warmKey := func(i int) string { return fmt.Sprintf("warm-%d-%d", len(body), i) }
	warmUp(conc, func(i int) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(warmKey(i)), Body: bytes.NewReader(warmBody)})
		return err
	})
	phase := func(op func(i int) error) result {
		next.Store(0)
		done.Store(0)
		var cpu0 []time.Duration
		mono0 := monotonic()
		if len(serverPIDs) > 0 {
			cpu0, _ = cpuTime()
		}
		start := time.Now()
		deadline := start.Add(budget)
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					i := int(next.Add(1)) - 1
					if i >= count {
						return
					}
					if err := op(i); err != nil {
						log.Fatal(err)
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		r := result{rate: float64(done.Load()) / time.Since(start).Seconds()}
		if cpu1, err := cpuTime(); len(serverPIDs) > 0 && done.Load() > 0 && err == nil && cpu0 != nil {
			var parts []string
			var total time.Duration
			for i := range cpu1 {
				used := cpu1[i] - cpu0[i]
				total += used
				parts = append(parts, fmt.Sprintf("%d:%.0fµs", serverPIDs[i], float64(used.Microseconds())/float64(done.Load())))
			}
			r.cpuOp = total / time.Duration(done.Load())
			if split {
				fmt.Fprintf(os.Stderr, "%d-byte objects, %d at once, CPU per op: %s (CLOCK_MONOTONIC %.3f-%.3f)\n", len(body), conc, strings.Join(parts, " "), mono0, monotonic())
			}
		}
		return r
	}
	keyOf := func(i int) string { return fmt.Sprintf("obj-%d-%d", len(body), i) }
	put := phase(func(i int) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(keyOf(i)), Body: bytes.NewReader(body)})
		return err
	})
	stored := int(done.Load())
	count = stored
	warmUp(conc, func(i int) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(warmKey(i))})
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, out.Body)
		out.Body.Close()
		return err
	})
	get := phase(func(i int) error {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String(keyOf(i))})
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, out.Body)
		out.Body.Close()
		if err == nil && n != int64(len(body)) {
			err = fmt.Errorf("got %d bytes of %d", n, len(body))
		}
		return err
	})
	for i := 0; i < stored; i++ {
		c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(keyOf(i))})
	}
	for i := range conc {
		c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(warmKey(i))})
	}
	return put, get
}
