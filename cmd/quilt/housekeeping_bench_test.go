package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkS3Housekeeping measures S3 PUT and GET throughput through a
// gateway on six real nodes, one of them killed after a 96 MiB fill, with
// the nodes' background work off ("off": no scrub, no repair passes) and
// on at the default budgets ("on": scrub at --scrub-rate 4 MiB/s, its
// pass short enough that the rate binds; repair passes every second,
// rebuilding the killed node's shares at --repair-budget 4 MiB/s). One
// operation is a PUT of 8 MiB and a GET of 8 MiB; it reports each's
// MB/s. Run it with a fixed count (docs/benchmarks.md):
//
//	go test -run '^$' -bench S3Housekeeping -benchtime 12x ./cmd/quilt/
func BenchmarkS3Housekeeping(b *testing.B) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"off", []string{"--scrub-every", "-1s", "--repair-every", "-1s"}},
		{"on", []string{"--scrub-every", "20s", "--repair-every", "1s"}},
	} {
		b.Run(c.name, func(b *testing.B) { benchS3Housekeeping(b, c.args) })
	}
}

func benchS3Housekeeping(b *testing.B, args []string) {
	const nodes, object = 6, 8 << 20
	g := startTestGridFunc(b, nodes, func(int) []string { return append([]string{"--no-fsync"}, args...) })
	gw := &chaosGateway{g: g, dir: filepath.Join(g.base, "gateway"), addr: "127.0.0.1:0"}
	b.Cleanup(gw.kill)
	gw.start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client := gw.client()
	bucket := aws.String("bench")
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, object)
	rand.Read(body)
	put := func(key string) {
		copy(body, key)
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			b.Fatalf("PUT %s: %v", key, err)
		}
	}
	const fill = 12
	for i := range fill {
		put(fmt.Sprintf("fill/%d", i))
	}
	g.killNode(nodes - 1)
	g.waitAlive(nodes - 1) // gossip has declared it dead
	// A new gateway process: the running one counts the nodes alive
	// from a member list it keeps 10 s, and would ask for 6 nodes.
	gw.kill()
	gw.start(b)
	client = gw.client()
	var putTime, getTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		put(fmt.Sprintf("op/%d", i))
		putTime += time.Since(start)
		start = time.Now()
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(fmt.Sprintf("fill/%d", i%fill))})
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, out.Body)
		out.Body.Close()
		if err != nil || n != object {
			b.Fatalf("GET: %d bytes, %v", n, err)
		}
		getTime += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)*object/1e6/putTime.Seconds(), "PUT-MB/s")
	b.ReportMetric(float64(b.N)*object/1e6/getTime.Seconds(), "GET-MB/s")
}
