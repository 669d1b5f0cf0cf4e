package bulk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/quilt-grid/quilt/internal/bulk"
)

// Copying a directory into a bucket, four parts in flight, at most
// 1 MiB/s, resumable from ~/.cache/quilt/cp; the same call again later
// sends only what is missing.
func Example() {
	ctx := context.Background()
	client, err := bulk.NewClient(bulk.Endpoint{URL: "http://127.0.0.1:7780", KeyID: "ID", Secret: "SECRET"})
	if err != nil {
		log.Fatal(err)
	}
	c, err := bulk.New(client, bulk.Config{Parallel: 4, Limiter: bulk.NewLimiter(1<<20, nil), StateDir: "/home/ana/.cache/quilt/cp"})
	if err != nil {
		log.Fatal(err)
	}
	src, _ := bulk.Parse("/home/ana/photos", "")
	dst, _ := bulk.Parse("s3://photos/2026/", "")
	files, err := c.Plan(ctx, src, dst, true)
	if err != nil {
		log.Fatal(err) // a missing source or bucket: errors.Is(err, fs.ErrNotExist), bulk.ErrNoBucket
	}
	st, err := c.Run(ctx, files)
	fmt.Printf("%d copied, %d already there, %d failed: %v\n", st.Files, st.Skipped, st.Failed, err)
}
