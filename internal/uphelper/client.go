package uphelper

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/member"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

var (
	// ErrHelperFailed means the helper could not be reached, refused the
	// upload, or went away before it answered. Nothing was acknowledged:
	// the shares it had placed are cancelled (best effort; the rest end
	// with their leases), and the caller may upload directly.
	ErrHelperFailed = errors.New("uphelper: upload through the helper failed")
	// ErrHelperLied means the helper answered with a root other than the
	// one the uploader computed, or named shares the nodes do not hold
	// as computed. Its upload is cancelled; the helper must not be used.
	ErrHelperLied = errors.New("uphelper: the helper's answer does not match the data")
	// ErrNoHelper means a helper address or node ID names no member.
	ErrNoHelper = errors.New("uphelper: no such helper node")
)

// errUploadEnded ends the sealer once the helper has answered or failed.
var errUploadEnded = errors.New("uphelper: upload ended")

// Uploader uploads objects through a helper. Its node client reaches the
// helper and the nodes (the grid's mutual TLS); its object client gives
// the shares its lease and checks them on the nodes.
type Uploader struct {
	Nodes   *node.Client
	Objects *object.Client
	// Wrap, if set, wraps the request body sent to the helper (a
	// progress bar, a byte counter).
	Wrap func(io.Reader) io.Reader
}

// Report says how an upload through a helper went.
type Report struct {
	Helper string // the helper's node ID
	Answer Answer // what the helper said
	// Confirmed are the shares whose node was seen holding them with
	// the trailer the uploader computed; ConfirmedNodes counts their
	// distinct nodes (at least the happiness asked).
	Confirmed      []object.ShareResult
	ConfirmedNodes int
	Sent           int64 // bytes of sealed segments sent to the helper
}

// Resolve returns the node ID of the member that s names: its node ID, a
// prefix of it of at least 8 characters, or its API address.
func Resolve(ctx context.Context, nc *node.Client, s string) (string, error) {
	ms, err := nc.Members(ctx, 2*time.Second)
	if err != nil {
		return "", err
	}
	var found []string
	for _, m := range ms {
		if m.ID == s || m.Addr == s || (len(s) >= 8 && strings.HasPrefix(m.ID, s)) {
			found = append(found, m.ID)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: %q is no member's node ID or address", ErrNoHelper, s)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: %q names %d members", ErrNoHelper, s, len(found))
}

// Auto is the helper name (quilt put --helper auto, quilt gateway
// --upload-helper auto) that has the client choose among the members
// that run a helper (Discover).
const Auto = "auto"

// Discover returns the node ID of the live member running an upload
// helper (member.Meta.Helper) that the client's link estimates (its
// object.Client.Links) make the best to send a file to: the highest
// upload throughput measured, else the shortest round trip (measured or
// predicted from network coordinates), else the first by ID; and says
// why in words.
func Discover(ctx context.Context, nc *node.Client, links map[string]object.LinkEstimate) (id, why string, err error) {
	ms, err := nc.Members(ctx, 2*time.Second)
	if err != nil {
		return "", "", err
	}
	type cand struct {
		id  string
		up  float64
		rtt time.Duration
	}
	var cs []cand
	for _, m := range ms {
		if m.State != member.Alive || !m.Helper {
			continue
		}
		e := links[m.ID]
		rtt := e.RTT
		if rtt == 0 {
			rtt = e.Predicted
		}
		cs = append(cs, cand{m.ID, e.Up, rtt})
	}
	if len(cs) == 0 {
		return "", "", fmt.Errorf("%w: no live member of the grid runs an upload helper (quilt node --helper)", ErrNoHelper)
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		switch {
		case a.up != b.up:
			return a.up > b.up
		case (a.rtt > 0) != (b.rtt > 0):
			return a.rtt > 0
		case a.rtt != b.rtt:
			return a.rtt < b.rtt
		}
		return a.id < b.id
	})
	c := cs[0]
	switch {
	case c.up > 0:
		why = fmt.Sprintf("the fastest measured upload link (%.0f kB/s) of %d helpers", c.up/1e3, len(cs))
	case c.rtt > 0:
		why = fmt.Sprintf("the shortest round trip (%v) of %d helpers, no upload measured", c.rtt.Round(time.Millisecond), len(cs))
	default:
		why = fmt.Sprintf("the first by ID of %d helpers, no link measured", len(cs))
	}
	return c.id, why, nil
}

// HelperStatus asks a helper for its status at these parameters.
func HelperStatus(ctx context.Context, nc *node.Client, helper string, p codec.Params, happy int) (Status, error) {
	if _, err := nc.Members(ctx, 2*time.Second); err != nil {
		return Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+helper+PathStatus+"?"+query(p, happy).Encode(), nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := nc.HTTP().Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("%w: helper %.8s: %w", ErrHelperFailed, helper, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return Status{}, fmt.Errorf("%w: helper %.8s: %s: %s", ErrHelperFailed, helper, resp.Status, strings.TrimSpace(string(b)))
	}
	var st Status
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

func query(p codec.Params, happy int) url.Values {
	return url.Values{"k": {strconv.Itoa(p.K)}, "n": {strconv.Itoa(p.N)}, "seg": {strconv.Itoa(p.SegmentSize)}, "happy": {strconv.Itoa(happy)}}
}

// Put stores the bytes of r (size bytes, or -1: not known) through the
// helper node helper (a node ID): it seals the segments under a new key,
// sends them, and checks the helper's answer against the root it
// computes itself. It returns the read capability only when the root
// matches and the shares are seen on at least happy distinct nodes.
func (u *Uploader) Put(ctx context.Context, helper string, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, *Report, error) {
	if err := p.Validate(); err != nil {
		return codec.ReadCap{}, nil, err
	}
	if happy < 1 || happy > p.N {
		return codec.ReadCap{}, nil, fmt.Errorf("uphelper: happiness %d must be between 1 and n=%d", happy, p.N)
	}
	key := codec.NewKey()
	si := key.StorageIndex()
	lease, err := u.Objects.LeaseFor(si)
	if err != nil {
		return codec.ReadCap{}, nil, err
	}
	cd, err := codec.New(p, key)
	if err != nil {
		return codec.ReadCap{}, nil, err
	}
	if _, err := u.Nodes.Members(ctx, 2*time.Second); err != nil {
		return codec.ReadCap{}, nil, err
	}
	rep := &Report{Helper: helper}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The sealer: reads the plaintext, seals each segment, codes it here
	// too (for the root; the shares are not kept) and sends the sealed
	// bytes.
	pr, pw := io.Pipe()
	tree := codec.NewTree(p, si)
	var total int64
	sealed := make(chan error, 1)
	go func() {
		err := seal(r, size, cd, tree, pw, &total)
		pw.CloseWithError(errOr(err, io.EOF))
		sealed <- err
	}()
	q := query(p, happy)
	q.Set("si", hex.EncodeToString(si[:]))
	var sent atomic.Int64
	var body io.Reader = &counter{r: pr, n: &sent}
	if u.Wrap != nil {
		body = u.Wrap(body)
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "https://"+helper+PathUpload, body)
	if err != nil {
		return codec.ReadCap{}, nil, err
	}
	if size >= 0 {
		q.Set("size", strconv.FormatInt(size, 10))
		req.ContentLength = sealedLen(size, p)
	}
	req.URL.RawQuery = q.Encode()
	leaseHeaders(req.Header, lease)
	resp, err := u.Nodes.HTTP().Do(req)
	pr.CloseWithError(errUploadEnded)
	serr := <-sealed
	rep.Sent = sent.Load()
	if serr != nil && !errors.Is(serr, io.ErrClosedPipe) && !errors.Is(serr, errUploadEnded) {
		// The input failed: that, not the helper, is the error.
		if resp != nil {
			resp.Body.Close()
		}
		u.cancel(si)
		return codec.ReadCap{}, rep, serr
	}
	if err != nil {
		u.cancel(si)
		return codec.ReadCap{}, rep, fmt.Errorf("%w: helper %.8s went away mid-upload (%d bytes sent), nothing was acknowledged: %w", ErrHelperFailed, helper, rep.Sent, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		u.cancel(si)
		return codec.ReadCap{}, rep, fmt.Errorf("%w: helper %.8s: %s: %s", ErrHelperFailed, helper, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep.Answer); err != nil {
		u.cancel(si)
		return codec.ReadCap{}, rep, fmt.Errorf("%w: helper %.8s: reading its answer: %w", ErrHelperFailed, helper, err)
	}
	root, trailers := tree.Finish(total)
	if got := rep.Answer.Root; got != hex.EncodeToString(root[:]) || rep.Answer.Size != total {
		u.cancel(si)
		return codec.ReadCap{}, rep, fmt.Errorf("%w: helper %.8s says root %.16s… of %d bytes, the data's is %x… of %d", ErrHelperLied, helper, got, rep.Answer.Size, root[:8], total)
	}
	var claimed []object.ShareResult
	for _, s := range rep.Answer.Shares {
		if s.Err == "" {
			claimed = append(claimed, object.ShareResult{Share: s.Share, Node: s.Node})
		}
	}
	rep.Confirmed = u.Objects.ConfirmShares(ctx, si, trailers, claimed)
	nodes := map[string]bool{}
	for _, sr := range rep.Confirmed {
		nodes[sr.Node] = true
	}
	rep.ConfirmedNodes = len(nodes)
	if rep.ConfirmedNodes < happy {
		u.cancel(si)
		return codec.ReadCap{}, rep, fmt.Errorf("%w: helper %.8s says %d nodes hold shares, %d distinct nodes were seen holding them as computed (%d needed)", ErrHelperLied, helper, rep.Answer.Happiness, rep.ConfirmedNodes, happy)
	}
	return codec.ReadCap{Key: key, Root: root, Params: p, Size: total}, rep, nil
}

// cancel removes, best effort, the shares of a failed upload through the
// helper: they carry this uploader's lease, and no capability of them
// was returned.
func (u *Uploader) cancel(si sharefile.SI) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u.Objects.Cancel(ctx, si)
}

// sealedLen is the length of the sealed segments of size bytes.
func sealedLen(size int64, p codec.Params) int64 {
	segs := max(1, (size+int64(p.SegmentSize)-1)/int64(p.SegmentSize))
	return size + segs*int64(codec.SealedSize(0))
}

// seal reads r segment by segment, seals each, adds its hashes to tree
// and writes it to w; total gets the plaintext's length.
func seal(r io.Reader, size int64, cd *codec.Codec, tree *codec.Tree, w io.Writer, total *int64) error {
	p := cd.Params()
	cur, next := make([]byte, p.SegmentSize), make([]byte, p.SegmentSize)
	out := make([]byte, 0, codec.SealedSize(p.SegmentSize))
	seg := cd.NewSegment()
	defer cd.Release(seg)
	n, eof, err := readFull(r, cur)
	for idx := int64(0); ; idx++ {
		if err != nil {
			return err
		}
		// Read ahead to learn whether this segment is the last.
		var nn int
		if !eof {
			nn, eof, err = readFull(r, next)
			if err != nil {
				return err
			}
		}
		last := eof && nn == 0
		*total += int64(n)
		if size >= 0 && *total > size {
			return fmt.Errorf("uphelper: input is longer than the %d bytes announced", size)
		}
		out, err = cd.Seal(out[:0], idx, last, cur[:n])
		if err != nil {
			return err
		}
		if err := cd.EncodeSealed(seg, idx, out); err != nil {
			return err
		}
		tree.Add(seg)
		if _, err := w.Write(out); err != nil {
			return err
		}
		if last {
			if size >= 0 && *total != size {
				return fmt.Errorf("uphelper: input was %d bytes, not the %d announced", *total, size)
			}
			return nil
		}
		cur, next, n = next, cur, nn
	}
}

// readFull fills buf from r and says whether r ended.
func readFull(r io.Reader, buf []byte) (int, bool, error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return n, true, nil
	case err != nil:
		return n, false, fmt.Errorf("uphelper: reading input: %w", err)
	}
	return n, false, nil
}

func errOr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n *atomic.Int64
}

func (c *counter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}
