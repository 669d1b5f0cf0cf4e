package object_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharestore"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// randReader yields n pseudo-random bytes without holding them.
func randReader(seed uint64, n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}), n)
}

func digest(r io.Reader) [32]byte {
	h := sha256.New()
	io.Copy(h, r)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

func put(t *testing.T, c *object.Client, seed uint64, size int64, p codec.Params, happy int) (codec.ReadCap, *object.PutReport) {
	t.Helper()
	rc, rep, err := c.Put(context.Background(), randReader(seed, size), size, p, happy)
	if err != nil {
		t.Fatalf("put %d bytes: %v", size, err)
	}
	return rc, rep
}

func mustGet(t *testing.T, c *object.Client, rc codec.ReadCap, seed uint64) *object.GetReport {
	t.Helper()
	h := sha256.New()
	rep, err := c.Get(context.Background(), rc, h, 0, -1)
	if err != nil {
		t.Fatalf("get: %v (problems %v)", err, rep)
	}
	var got [32]byte
	h.Sum(got[:0])
	if got != digest(randReader(seed, rc.Size)) {
		t.Fatalf("get returned different bytes")
	}
	return rep
}

func problemNodes(ps []object.Problem) map[string]bool {
	m := map[string]bool{}
	for _, p := range ps {
		m[p.Node] = true
	}
	return m
}

// A 50 MiB object round-trips on 10 nodes, ranges read exactly the bytes
// asked, and survives 7 of 10 nodes stopped.
func TestGridRoundTripAndSevenDown(t *testing.T) {
	skipInRaceRun(t)
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	c := g.Objects(object.Options{})
	const size = 50 << 20
	rc, rep := put(t, c, 1, size, codec.DefaultParams(), 7)
	if rep.Happiness != 10 {
		t.Fatalf("happiness %d, want 10 on 10 nodes", rep.Happiness)
	}
	mustGet(t, c, rc, 1)

	var all bytes.Buffer
	io.Copy(&all, randReader(1, size))
	ranges := [][2]int64{{0, 1}, {0, 1 << 20}, {1<<20 - 1, 2}, {12345678, 3 << 20}, {size - 10, 10}, {size - 1, 100}, {7, 0}}
	for _, rg := range ranges {
		var b bytes.Buffer
		if _, err := c.Get(context.Background(), rc, &b, rg[0], rg[1]); err != nil {
			t.Fatalf("range %v: %v", rg, err)
		}
		want := all.Bytes()[rg[0]:min(rg[0]+rg[1], size)]
		if !bytes.Equal(b.Bytes(), want) {
			t.Fatalf("range %v: got %d bytes, want %d", rg, b.Len(), len(want))
		}
	}
	if _, err := c.Get(context.Background(), rc, io.Discard, size+1, 1); !errors.Is(err, object.ErrRange) {
		t.Fatalf("range past the end: %v", err)
	}

	// Stop 7 of 10: any 3 shares still read.
	for _, i := range rand.Perm(10)[:7] {
		g.Kill(i)
	}
	mustGet(t, c, rc, 1)
	// And one more makes it unreadable, with an error that says why.
	for i := range g.Nodes {
		if g.Nodes[i] != nil {
			g.Kill(i)
			break
		}
	}
	_, err := c.Get(context.Background(), rc, io.Discard, 0, -1)
	if !errors.Is(err, object.ErrUnavailable) || !strings.Contains(err.Error(), "2 good shares of the 3 needed") {
		t.Fatalf("with 2 nodes left: %v", err)
	}
}

// A node that serves corrupted data is detected and reported; the read
// succeeds from the others. Both lies are tried: a damaged trailer, and
// true trailers with damaged blocks from a node that answers fastest.
func TestGridLyingNode(t *testing.T) {
	for _, blocksOnly := range []bool{false, true} {
		g := testgrid.New(t, testgrid.Options{Nodes: 10, Wrap: func(i int, s sharestore.Store) sharestore.Store {
			if i == 0 {
				return testgrid.Liar(s, blocksOnly)
			}
			// The honest nodes answer a little slower, so the reader
			// picks the liar among its fastest k and must notice it.
			return testgrid.Slow(s, 150*time.Millisecond)
		}})
		c := g.Objects(object.Options{})
		rc, _ := put(t, c, 2, 5<<20, codec.DefaultParams(), 7)
		rep := mustGet(t, c, rc, 2)
		liar := string(g.Nodes[0].ID())
		if !problemNodes(rep.Problems)[liar] {
			t.Fatalf("blocksOnly=%v: liar %s not reported; problems %v", blocksOnly, liar[:8], rep.Problems)
		}
		for _, p := range rep.Problems {
			if p.Node != liar {
				t.Errorf("honest node %.8s reported: %v", p.Node, p.Err)
			}
		}
		// A verifying check finds it too.
		crep, err := c.Check(context.Background(), rc.Verify(), true)
		if err != nil {
			t.Fatal(err)
		}
		if crep.Good != 9 {
			t.Fatalf("check: %d good shares, want 9 (the liar's is bad)", crep.Good)
		}
		g.Stop()
	}
}

// A node that answers quickly but sends slowly (a far end of a radio
// link) holds up a read only for a couple of segments: the reader moves
// that share's stream to a spare holder and reads from the fastest k.
func TestGridReadLeavesSlowNode(t *testing.T) {
	skipInRaceRun(t)
	rates := make([]*atomic.Int64, 10)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Wrap: func(i int, s sharestore.Store) sharestore.Store {
		rates[i] = new(atomic.Int64)
		return testgrid.Throttle(s, rates[i])
	}})
	c := g.Objects(object.Options{})
	rc, prep := put(t, c, 3, 12<<20, codec.DefaultParams(), 7)
	// Slow down the node that holds data share 0: 200 kB/s, where a
	// block of 1 MiB segments is 350 kB.
	slow := ""
	for _, s := range prep.Shares {
		if s.Share == 0 {
			slow = s.Node
		}
	}
	for i, n := range g.Nodes {
		if string(n.ID()) == slow {
			rates[i].Store(200_000)
		}
	}
	rep := mustGet(t, c, rc, 3)
	if slices.Contains(rep.Shares, 0) {
		t.Errorf("read still used share 0 on the slow node at the end: shares %v", rep.Shares)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("a slow node is not a problem, but: %v", rep.Problems)
	}
}

// gatedReader hands out its bytes up to gateAt, signals that it got
// there, and waits for the test to open the gate: a test can act in the
// middle of an upload.
type gatedReader struct {
	r       io.Reader
	n       int64
	gateAt  int64
	gate    chan struct{} // closed by the test to let the rest through
	at      chan struct{} // closed when the reader reaches gateAt
	reached sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.n >= g.gateAt {
		g.reached.Do(func() { close(g.at) })
		<-g.gate
	}
	if g.n < g.gateAt {
		p = p[:min(int64(len(p)), g.gateAt-g.n)]
	}
	m, err := g.r.Read(p)
	g.n += int64(m)
	return m, err
}

// A node killed mid-upload never serves a half-written share: the upload
// completes on the others, and the node, restarted, holds nothing of it.
func TestGridNodeKilledMidUpload(t *testing.T) {
	skipInRaceRun(t)
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	c := g.Objects(object.Options{})
	const size = 20 << 20
	gr := &gatedReader{r: randReader(3, size), gateAt: 8 << 20, gate: make(chan struct{}), at: make(chan struct{})}
	type result struct {
		rc  codec.ReadCap
		rep *object.PutReport
		err error
	}
	done := make(chan result)
	go func() {
		rc, rep, err := c.Put(context.Background(), gr, size, codec.DefaultParams(), 7)
		done <- result{rc, rep, err}
	}()
	<-gr.at
	// Some segments are out; the victim holds a share in flight.
	victim := 4
	victimID := string(g.Nodes[victim].ID())
	g.Kill(victim)
	close(gr.gate)
	res := <-done
	if res.err != nil {
		t.Fatalf("upload with one node killed: %v", res.err)
	}
	if res.rep.Happiness != 9 {
		t.Fatalf("happiness %d, want 9", res.rep.Happiness)
	}
	for _, s := range res.rep.Shares {
		if (s.Node == victimID) != (s.Err != nil) {
			t.Fatalf("share %d on %.8s: err %v", s.Share, s.Node, s.Err)
		}
	}
	g.Restart(victim)
	infos, err := g.Nodes[victim].Store().List(context.Background(), res.rc.Key.StorageIndex())
	if err != nil || len(infos) != 0 {
		t.Fatalf("restarted node lists %v (err %v) of an upload it died in", infos, err)
	}
	// Every other node still holds the share it stored.
	lost := -1
	for _, s := range res.rep.Shares {
		if s.Node == victimID {
			lost = s.Share
		}
	}
	for _, n := range g.Nodes {
		for _, s := range res.rep.Shares {
			if s.Node != string(n.ID()) || s.Err != nil {
				continue
			}
			infos, err := n.Store().List(context.Background(), res.rc.Key.StorageIndex())
			if err != nil || !slices.ContainsFunc(infos, func(in sharestore.Info) bool { return in.Key.Share == s.Share }) {
				t.Fatalf("node %.8s lost share %d: holds %v, err %v", s.Node, s.Share, infos, err)
			}
		}
	}
	mustGet(t, c, res.rc, 3)
	// A check sees the nine shares. (It asks the nodes in the member
	// list; under the race detector on two cores, memberlist may count a
	// node starved of CPU dead for a moment, so look again before
	// failing.)
	var crep *object.CheckReport
	for try := 0; ; try++ {
		crep, err = c.Check(context.Background(), res.rc.Verify(), true)
		if err == nil && crep.Good == 9 {
			break
		}
		if try == 20 {
			t.Fatalf("check after the kill: %+v, err %v", crep, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Repair rebuilds the lost share from any k (and, should a holder
	// drop out of the member list meanwhile, that one's too: more copies,
	// never fewer).
	rrep, err := c.Repair(context.Background(), res.rc.Verify(), false)
	if err != nil || !rrep.Healthy() || !slices.ContainsFunc(rrep.Repaired, func(s object.ShareStatus) bool { return s.Share == lost && s.Err == nil }) {
		t.Fatalf("repair of share %d: %+v, err %v", lost, rrep, err)
	}
	for try := 0; ; try++ {
		after, err := c.Check(context.Background(), res.rc.Verify(), true)
		if err == nil && after.Healthy() {
			break
		}
		if try == 20 {
			t.Fatalf("check after repair: %+v, err %v", after, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Losing too many nodes mid-upload fails the upload, and no node is left
// with a share of it.
func TestGridUploadFailsBelowHappiness(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	c := g.Objects(object.Options{})
	const size = 20 << 20
	gr := &gatedReader{r: randReader(4, size), gateAt: 6 << 20, gate: make(chan struct{}), at: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, _, err := c.Put(context.Background(), gr, size, codec.DefaultParams(), 7)
		done <- err
	}()
	<-gr.at
	for i := 0; i < 4; i++ {
		g.Kill(i)
	}
	close(gr.gate)
	err := <-done
	if !errors.Is(err, object.ErrUnhappy) {
		t.Fatalf("upload after losing 4 of 10 nodes: %v, want ErrUnhappy", err)
	}
	for i, nd := range g.Nodes {
		if nd == nil {
			continue
		}
		if u := nd.Store().Usage(); u.Shares != 0 {
			t.Fatalf("node %d holds %d shares of a failed upload", i, u.Shares)
		}
		// The aborted shares' temporary files go too: a node may still
		// be ending the request when Put has returned.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left, err := os.ReadDir(filepath.Join(g.Dirs[i], "store", "tmp"))
			if len(left) == 0 || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d keeps %d temporary files of a failed upload (%v)", i, len(left), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A full node is skipped; an upload that cannot be placed says why.
func TestGridFullNodeAndUnhappy(t *testing.T) {
	skipInRaceRun(t)
	g := testgrid.New(t, testgrid.Options{Nodes: 10, Capacity: func(i int) int64 {
		if i == 3 {
			return 1 << 20 // too small for a share of 20 MiB
		}
		return 0
	}})
	c := g.Objects(object.Options{})
	rc, rep := put(t, c, 5, 20<<20, codec.DefaultParams(), 7)
	full := string(g.Nodes[3].ID())
	for _, s := range rep.Shares {
		if s.Node == full {
			t.Fatalf("share %d placed on the full node", s.Share)
		}
	}
	if rep.Happiness != 9 {
		t.Fatalf("happiness %d, want 9", rep.Happiness)
	}
	mustGet(t, c, rc, 5)
	// Asking for 10 distinct nodes cannot work with one full.
	_, _, err := c.Put(context.Background(), randReader(6, 20<<20), 20<<20, codec.DefaultParams(), 10)
	if !errors.Is(err, object.ErrUnhappy) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("happy=10 with a full node: %v", err)
	}
}

// Bad capabilities get clear errors; a well-formed one for an object that
// is not on the grid says so.
func TestGridBadCapability(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	c := g.Objects(object.Options{})
	for _, s := range []string{"", "quilt:r:zzzz", "not a cap", "quilt:v:aaaa"} {
		if _, err := codec.ParseReadCap(s); !errors.Is(err, codec.ErrBadCap) {
			t.Fatalf("ParseReadCap(%q): %v", s, err)
		}
	}
	// A capability built in code with impossible parameters (not parsed)
	// is refused, not divided by.
	for _, bad := range []codec.ReadCap{{}, {Params: codec.Params{K: 4, N: 3, SegmentSize: 1 << 20}, Size: 10}} {
		if _, err := c.Get(context.Background(), bad, io.Discard, 0, -1); !errors.Is(err, codec.ErrBadCap) {
			t.Fatalf("Get with %+v: %v", bad.Params, err)
		}
		if _, err := c.Check(context.Background(), bad.Verify(), false); !errors.Is(err, codec.ErrBadCap) {
			t.Fatalf("Check with %+v: %v", bad.Params, err)
		}
	}
	absent := codec.ReadCap{Key: codec.NewKey(), Params: codec.Params{K: 2, N: 3, SegmentSize: 1 << 20}, Size: 100}
	_, err := c.Get(context.Background(), absent, io.Discard, 0, -1)
	if !errors.Is(err, object.ErrUnavailable) || !strings.Contains(err.Error(), "found 0 good shares") {
		t.Fatalf("absent object: %v", err)
	}
	// The right storage index with a wrong root: shares exist but are not
	// this object's, and nothing is returned.
	rc, _ := put(t, c, 7, 1000, codec.Params{K: 2, N: 3, SegmentSize: 1 << 20}, 3)
	forged := rc
	forged.Root[0] ^= 1
	var out bytes.Buffer
	if _, err := c.Get(context.Background(), forged, &out, 0, -1); !errors.Is(err, object.ErrUnavailable) || out.Len() != 0 {
		t.Fatalf("wrong root: %v, %d bytes out", err, out.Len())
	}
}

// An input longer or shorter than the size announced fails the upload,
// whether it ends inside a segment or on a segment boundary, and no node
// keeps a share of it.
func TestGridPutWrongSize(t *testing.T) {
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	c := g.Objects(object.Options{})
	p := codec.Params{K: 2, N: 3, SegmentSize: 4096}
	for _, tc := range []struct{ actual, announced int64 }{
		{10000, 12000}, // ends inside a segment
		{8192, 12288},  // ends on a boundary
		{0, 10},
		{12000, 10000}, // goes on inside a segment
		{8193, 8192},   // one byte past a boundary
		{5, 0},
	} {
		_, _, err := c.Put(context.Background(), randReader(1, tc.actual), tc.announced, p, 3)
		if err == nil || !strings.Contains(err.Error(), "announced") {
			t.Errorf("%d bytes announced as %d: %v", tc.actual, tc.announced, err)
		}
	}
	for i, n := range g.Nodes {
		if u := n.Store().Usage(); u.Shares != 0 {
			t.Errorf("node %d keeps %d shares of failed uploads", i, u.Shares)
		}
	}
	for _, size := range []int64{0, 1, 8192, 10000} {
		rc, _ := put(t, c, 2, size, p, 3)
		mustGet(t, c, rc, 2)
	}
}

// A node sends each share's trailer with its share list when asked, byte
// for byte the share's tail, so a read checks it without a second round
// trip; without asking, none is sent.
func TestListTrailers(t *testing.T) {
	skipInRaceRun(t)
	g := testgrid.New(t, testgrid.Options{Nodes: 10})
	c := g.Objects(object.Options{})
	rc, rep := put(t, c, 4, 3<<20+17, codec.DefaultParams(), 7)
	ng := object.NodeGrid{Client: g.NodeClient()}
	if _, err := ng.Nodes(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := rc.Verify().Layout()
	for _, s := range rep.Shares {
		tr, err := ng.ListTrailers(context.Background(), s.Node, rc.Verify().SI)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tr[s.Share]
		if !ok || len(got) != l.TrailerLen() {
			t.Fatalf("share %d on %.8s: trailer of %d bytes listed, want %d", s.Share, s.Node, len(got), l.TrailerLen())
		}
		rd, err := ng.GetShare(context.Background(), s.Node, sharestore.Key{SI: rc.Verify().SI, Share: s.Share}, l.TrailerOffset(), int64(l.TrailerLen()))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(rd)
		rd.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("share %d: listed trailer differs from the share's tail", s.Share)
		}
		if _, err := rc.Verify().CheckTrailer(s.Share, got); err != nil {
			t.Fatalf("share %d: listed trailer does not check: %v", s.Share, err)
		}
	}
	infos, err := ng.Client.ListShares(context.Background(), rep.Shares[0].Node, rc.Verify().SI, false)
	if err != nil || len(infos) == 0 {
		t.Fatalf("plain list: %v %v", infos, err)
	}
	for _, in := range infos {
		if in.Trailer != nil {
			t.Error("a trailer was sent without being asked for")
		}
	}
}
