package bulk

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/clock"
)

func TestParse(t *testing.T) {
	cases := []struct {
		arg  string
		want Location
		dir  bool
		err  bool
	}{
		{"s3://photos/2026/a.jpg", Location{Bucket: "photos", Key: "2026/a.jpg"}, false, false},
		{"s3://photos", Location{Bucket: "photos"}, true, false},
		{"s3://photos/", Location{Bucket: "photos"}, true, false},
		{"s3://photos/album/", Location{Bucket: "photos", Key: "album/"}, true, false},
		{"drive:", Location{Bucket: "home"}, true, false},
		{"drive:/", Location{Bucket: "home"}, true, false},
		{"drive:docs/x.txt", Location{Bucket: "home", Key: "docs/x.txt"}, false, false},
		{"drive:/docs/", Location{Bucket: "home", Key: "docs/"}, true, false},
		{"./local/file", Location{Local: "./local/file"}, false, false},
		{"dir/", Location{Local: "dir/"}, true, false},
		{"s3://", Location{}, false, true},
		{"s3:///key", Location{}, false, true},
		{"s3://b/a//c", Location{}, false, true},
		{"s3://b/a/../c", Location{}, false, true},
		{"drive:./x", Location{}, false, true},
		{"http://example.org/x", Location{}, false, true},
		{"", Location{}, false, true},
	}
	for _, c := range cases {
		got, err := Parse(c.arg, "home")
		if c.err {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) = %+v, %v; want ErrSyntax", c.arg, got, err)
			}
			continue
		}
		if err != nil || got != c.want || got.Dir() != c.dir {
			t.Errorf("Parse(%q) = %+v (dir %v), %v; want %+v (dir %v)", c.arg, got, got.Dir(), err, c.want, c.dir)
		}
	}
	if _, err := Parse("drive:x", ""); !errors.Is(err, ErrSyntax) {
		t.Errorf("drive: without a bucket: %v", err)
	}
}

func TestPartSizeFor(t *testing.T) {
	if got := partSizeFor(1<<30, DefaultPartSize); got != DefaultPartSize {
		t.Errorf("1 GiB: %d", got)
	}
	// 200 GiB in 16 MiB parts would be 12,800 parts: the part grows to
	// whole MiB, at most 10,000 parts.
	size := int64(200 << 30)
	got := partSizeFor(size, DefaultPartSize)
	if got%(1<<20) != 0 || numParts(size, got) > maxParts {
		t.Errorf("200 GiB: part %d, %d parts", got, numParts(size, got))
	}
}

func TestParseMtime(t *testing.T) {
	for s, want := range map[string]time.Time{
		"1700000000.123456789": time.Unix(1700000000, 123456789),
		"1700000000":           time.Unix(1700000000, 0),
		"1700000000.5":         time.Unix(1700000000, 500000000),
	} {
		if got, ok := parseMtime(s); !ok || !got.Equal(want) {
			t.Errorf("parseMtime(%q) = %v %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "x", "1.x"} {
		if _, ok := parseMtime(s); ok {
			t.Errorf("parseMtime(%q) accepted", s)
		}
	}
}

// Checkpoints round-trip; a missing one is none; damaged ones, other
// versions and impossible contents are ErrCheckpoint (the copy starts
// over), never a panic or a silent zero.
func TestCheckpointFiles(t *testing.T) {
	dir := t.TempDir()
	up := uploadCheckpointPath(dir, "/src/a", "b", "k")
	if up == uploadCheckpointPath(dir, "/src/a", "b", "k2") || filepath.Dir(up) != dir {
		t.Fatalf("checkpoint paths %s", up)
	}
	if c, err := loadUploadCheckpoint(up); c != nil || err != nil {
		t.Fatalf("missing checkpoint: %+v %v", c, err)
	}
	want := &uploadCheckpoint{Version: checkpointVersion, Source: "/src/a", Size: 100 << 20, MtimeNS: 42, Bucket: "b", Key: "k",
		UploadID: "u1", PartSize: 16 << 20, SHA256: strings.Repeat("ab", 32), PartSums: []string{"1", "2", "3", "4", "5", "6", "7"},
		Parts: []donePart{{Number: 3, ETag: `"e3"`, SHA256: "s3"}, {Number: 1, ETag: `"e1"`, SHA256: "s1"}}}
	if err := saveCheckpoint(up, want); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(up); st.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint mode %v", st.Mode())
	}
	got, err := loadUploadCheckpoint(up)
	if err != nil || got.UploadID != "u1" || len(got.Parts) != 2 || got.Parts[1].ETag != `"e1"` || got.MtimeNS != 42 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	sortParts(got.Parts)
	if got.Parts[0].Number != 1 {
		t.Errorf("sortParts: %+v", got.Parts)
	}
	down := downloadCheckpointPath(filepath.Join(dir, "out.bin"))
	if !strings.HasSuffix(down, "out.bin.quilt-cp-partial.json") {
		t.Errorf("download checkpoint %s", down)
	}
	if err := saveCheckpoint(down, &downloadCheckpoint{Version: 1, Bucket: "b", Key: "k", ETag: "e", Size: 10, PartSize: 4, Done: []int{0, 2}}); err != nil {
		t.Fatal(err)
	}
	if d, err := loadDownloadCheckpoint(down); err != nil || len(d.Done) != 2 {
		t.Fatalf("download round trip: %+v %v", d, err)
	}
	bad := map[string]string{
		"truncated":     `{"version": 1, "upload_id": "u`,
		"not json":      "\x00\x01garbage",
		"other version": `{"version": 99, "upload_id": "u", "part_size": 5}`,
		"no upload id":  `{"version": 1, "part_size": 5}`,
		"no part size":  `{"version": 1, "upload_id": "u"}`,
		"part sums":     `{"version": 1, "upload_id": "u", "part_size": 5, "size": 11, "part_sums": ["a", "b"]}`,
	}
	for name, body := range bad {
		os.WriteFile(up, []byte(body), 0o600)
		if c, err := loadUploadCheckpoint(up); !errors.Is(err, ErrCheckpoint) || c != nil {
			t.Errorf("%s upload checkpoint: %+v %v", name, c, err)
		}
	}
	for name, body := range map[string]string{
		"range past the end": `{"version": 1, "size": 10, "part_size": 4, "done": [3]}`,
		"negative range":     `{"version": 1, "size": 10, "part_size": 4, "done": [-1]}`,
		"no part size":       `{"version": 1, "size": 10}`,
		"damaged":            `{"version": 1, "size": 1`,
	} {
		os.WriteFile(down, []byte(body), 0o600)
		if c, err := loadDownloadCheckpoint(down); !errors.Is(err, ErrCheckpoint) || c != nil {
			t.Errorf("%s download checkpoint: %+v %v", name, c, err)
		}
	}
}

// The limiter lets through the rate per second of its clock and no
// more: with a fake clock, bytes read track the time advanced.
func TestLimiterFollowsItsClock(t *testing.T) {
	clk := clock.NewFake()
	const rate = 10 << 10 // 10 KiB/s: bursts of 1 KiB
	l := NewLimiter(rate, clk)
	if l.burst != 1024 {
		t.Fatalf("burst %d", l.burst)
	}
	data := bytes.Repeat([]byte("x"), 40<<10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bctx, finished := context.WithCancel(ctx)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		_, err := io.Copy(&out, l.Reader(ctx, bytes.NewReader(data)))
		done <- err
		finished()
	}()
	// Step the clock a tenth of a second at a time, each time the reader
	// waits: a step lets at most a tenth of the rate through.
	steps := 0
	for ; ; steps++ {
		if err := clk.BlockUntilContext(bctx, 1); err != nil {
			break // the copy is done (or the test timed out: below)
		}
		if got, most := l.Consumed(), int64(steps+1)*1024; got > most {
			t.Fatalf("after %v of the clock %d bytes passed, at most %d allowed", time.Duration(steps)*100*time.Millisecond, got, most)
		}
		clk.Advance(100 * time.Millisecond)
	}
	if err := <-done; err != nil || out.Len() != len(data) {
		t.Fatalf("copy: %v, %d bytes", err, out.Len())
	}
	if steps < 39 {
		t.Fatalf("40 KiB at 10 KiB/s went through in %v of the clock", time.Duration(steps)*100*time.Millisecond)
	}
	if l.Consumed() != int64(len(data)) {
		t.Fatalf("consumed %d, want %d", l.Consumed(), len(data))
	}
}

// A cancelled context stops a limited reader waiting for its turn.
func TestLimiterCancel(t *testing.T) {
	clk := clock.NewFake()
	l := NewLimiter(1000, clk)
	ctx, cancel := context.WithCancel(context.Background())
	r := l.Reader(ctx, bytes.NewReader(make([]byte, 10000)))
	buf := make([]byte, 4096)
	if _, err := r.Read(buf); err != nil { // the burst
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := r.Read(buf); errc <- err }()
	clk.BlockUntilContext(context.Background(), 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
}
