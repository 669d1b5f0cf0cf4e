package object_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// FuzzGetRange reads ranges of two objects on a 3-node in-process grid,
// one of one segment (read by the quick path) and one of several, as
// quilt get --range and the gateways ask for them: an offset inside the
// object gives the bytes from there, as many as asked or to the end (a
// negative length: to the end); one outside gives ErrRange.
func FuzzGetRange(f *testing.F) {
	g := testgrid.New(f, testgrid.Options{Nodes: 3})
	c := object.New(object.NodeGrid{Client: g.NodeClient(), MaxAge: time.Second}, object.Options{Stall: 5 * time.Second,
		LeaseSecret: func(si sharefile.SI) []byte { return append([]byte("fuzz lease "), si[:]...) }})
	p := codec.Params{K: 2, N: 3, SegmentSize: 64}
	var objs [2]struct {
		rc   codec.ReadCap
		data []byte
	}
	for i, size := range []int{50, 300} {
		data := bytes.Repeat([]byte{byte(i + 1), 2, 3, 4, 5}, size/5)
		rc, _, err := c.Put(context.Background(), bytes.NewReader(data), int64(len(data)), p, 3)
		if err != nil {
			f.Fatal(err)
		}
		objs[i].rc, objs[i].data = rc, data
	}
	for _, second := range []bool{false, true} {
		for _, r := range [][2]int64{{0, -1}, {0, 0}, {10, 20}, {49, 1}, {50, 0}, {60, 200}, {299, 5}, {-1, 1}, {0, math.MaxInt64}, {10, math.MaxInt64}} {
			f.Add(second, r[0], r[1])
		}
	}
	f.Fuzz(func(t *testing.T, second bool, off, length int64) {
		o := objs[0]
		if second {
			o = objs[1]
		}
		size := int64(len(o.data))
		var b bytes.Buffer
		_, err := c.Get(context.Background(), o.rc, &b, off, length)
		if off < 0 || off > size || off == size && size > 0 && length != 0 {
			if !errors.Is(err, object.ErrRange) {
				t.Fatalf("Get(%d, %d) of %d bytes: %v, want ErrRange", off, length, size, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Get(%d, %d) of %d bytes: %v", off, length, size, err)
		}
		want := o.data[off:]
		if length >= 0 && length < int64(len(want)) {
			want = want[:length]
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("Get(%d, %d) of %d bytes: %d bytes, want %d", off, length, size, b.Len(), len(want))
		}
	})
}
