package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// BenchmarkSmallPut: 4 KiB PUTs (inline objects) one at a time and at
// concurrency 8 (bench/s3load's small case) through the S3 API of a
// gateway on a 10-node in-process grid, with the AWS SDK. The gateway's
// replica fsyncs its commits (the nodes' do not, in a test grid).
// Reports PUT/s.
func BenchmarkSmallPut(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("conc%d", conc), func(b *testing.B) { smallPuts(b, conc) })
	}
}

func smallPuts(b *testing.B, conc int) {
	g := testgrid.New(b, testgrid.Options{Nodes: 10})
	ctx := context.Background()
	gw, err := gateway.Open(ctx, gateway.Config{Dir: b.TempDir(), Nodes: g.NodeClient(), Objects: g.Objects(object.Options{})})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	key, err := gw.CreateKey(ctx, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s3.New(gw, s3.Options{}))
	defer srv.Close()
	c := client(srv.URL, key.ID, key.Secret)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("small")}); err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 4096)
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("small"), Key: aws.String(fmt.Sprint("k", i)), Body: bytes.NewReader(body)}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "PUT/s")
}
