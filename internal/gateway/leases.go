package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
	"github.com/quilt-grid/quilt/internal/node"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/repairer"
	"github.com/quilt-grid/quilt/internal/sharefile"
)

// Leases of the gateway's grid objects (docs/grid.md, "Leases").
//
// Every grid object the gateway stores (a whole object, or a part of a
// multipart one) gets a lease on its shares of the object client's term
// (object.Options.LeaseTerm, 90 days by default). The gateway keeps them
// alive with a renewal walk: at start and every Config.LeaseRenew it
// reads every bucket, and the registry's multipart uploads in progress,
// and renews the lease of every grid object referenced there. An object
// no key references any more is not renewed and its shares expire.
//
// To free space sooner, a DELETE, an overwrite or an aborted upload
// hands the grid objects it unreferenced to the retirer, which, after
// Config.CancelDelay (so that a read of the old version in flight can
// finish), walks the bucket (and the uploads) afresh and cancels the
// lease of each object that nothing references any more: a copy made by
// reference (a rename of the file tree) keeps its object. Cancellation
// is best effort: one that fails, or that the gateway stops before,
// leaves the object to expire.

// retirement is a set of grid objects that a change unreferenced in a
// bucket.
type retirement struct {
	bucket string
	caps   []string
	due    time.Time
}

// leaseKeeper runs the renewal walk and the retirer.
type leaseKeeper struct {
	g      *Gateway
	retire chan retirement
	reg    chan string // read capabilities of new objects, to register (registerLoop)
	stop   chan struct{}
	wg     sync.WaitGroup
}

// startLeases starts the renewal walk and the retirer of g.
func startLeases(g *Gateway) *leaseKeeper {
	k := &leaseKeeper{g: g, retire: make(chan retirement, 1024), stop: make(chan struct{})}
	if g.cfg.Objects == nil {
		return k
	}
	k.wg.Add(2)
	go k.renewLoop()
	go k.retireLoop()
	if g.cfg.Nodes != nil {
		k.reg = make(chan string, registerQueue)
		k.wg.Add(1)
		go k.registerLoop()
	}
	return k
}

// registerQueue is how many new objects may wait for registerLoop before
// a write waits for it.
const registerQueue = 4096

// register hands the read capability of an object just stored to
// registerLoop, which gives the nodes' repair registries its verify
// capability soon after, in a batch with the others written meanwhile.
// An object not registered by the time the gateway stops (or whose
// registration fails) is registered by the next renewal walk: the one
// at the next start at the latest.
func (k *leaseKeeper) register(cap string) {
	if k.reg == nil {
		return
	}
	select {
	case k.reg <- cap:
	case <-k.stop:
	}
}

// registerDelay is how long registerLoop gathers the objects written
// after the first of a batch.
const registerDelay = time.Second

// registerLoop registers the objects handed to register: those written
// within registerDelay of the first go in one batch (up to
// node.MaxRegistryBatch), so that a batch costs each node one request
// and one transaction however many writes it serves. At stop, what is
// queued is sent before it returns, within registerFlush.
func (k *leaseKeeper) registerLoop() {
	defer k.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// At stop, what is in flight and what is queued get
		// registerFlush, then are cut off (a node that does not answer
		// must not hold the gateway's Close).
		select {
		case <-k.stop:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(registerFlush)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(registerDelay)
	t.Stop()
	for {
		var batch []string
		select {
		case c := <-k.reg:
			batch = append(batch, c)
		case <-k.stop:
			k.flushRegistrations(ctx)
			return
		}
		t.Reset(registerDelay)
	gather:
		for len(batch) < node.MaxRegistryBatch {
			select {
			case c := <-k.reg:
				batch = append(batch, c)
			case <-t.C:
				break gather
			case <-k.stop:
				t.Stop()
				k.g.registerCaps(ctx, batch)
				k.flushRegistrations(ctx)
				return
			}
		}
		t.Stop()
		k.g.registerCaps(ctx, batch)
	}
}

// registerFlush bounds how long a stopping gateway spends registering
// what is in flight and queued.
const registerFlush = 10 * time.Second

// flushRegistrations registers what is queued, at stop.
func (k *leaseKeeper) flushRegistrations(ctx context.Context) {
	var batch []string
	for {
		select {
		case c := <-k.reg:
			batch = append(batch, c)
			continue
		default:
		}
		break
	}
	if len(batch) > 0 {
		k.g.registerCaps(ctx, batch)
	}
}

func (k *leaseKeeper) close() {
	close(k.stop)
	k.wg.Wait()
}

// renewLoop walks at start and then every LeaseRenew.
func (k *leaseKeeper) renewLoop() {
	defer k.wg.Done()
	every := k.g.cfg.LeaseRenew
	if every < 0 {
		return
	}
	if every == 0 {
		every = 24 * time.Hour
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-k.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		k.g.RenewLeases(ctx)
		cancel()
		t.Reset(every)
	}
}

// RenewReport is what a renewal walk did.
type RenewReport struct {
	Objects int // grid objects referenced
	Renewed int // of them, renewed on at least one share
	Failed  int // not renewed: no live node holds a share, or none answered
}

// RenewLeases walks every bucket, the uploads in progress and
// Config.References and renews the lease of every grid object they
// reference, as the gateway does at start and every Config.LeaseRenew.
func (g *Gateway) RenewLeases(ctx context.Context) (RenewReport, error) {
	var rep RenewReport
	refs, err := g.allRefs(ctx)
	if err != nil {
		g.log.Warn("lease renewal: walk of the buckets failed", "err", err)
		return rep, err
	}
	rep.Objects = len(refs)
	caps := make([]string, 0, len(refs))
	for _, c := range refs {
		caps = append(caps, c)
	}
	g.registerCaps(ctx, caps)
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for si := range refs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := g.cfg.Objects.Renew(ctx, si)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failed++
				g.log.Warn("lease renewal failed", "si", fmt.Sprintf("%x", si[:]), "err", err)
				return
			}
			rep.Renewed++
		}()
	}
	wg.Wait()
	g.log.Info("leases renewed", "objects", rep.Objects, "renewed", rep.Renewed, "failed", rep.Failed)
	return rep, ctx.Err()
}

// registerCaps gives the repair registries of the grid's nodes the
// verify capability of each of caps (read capabilities) that this
// gateway has not yet registered since it started, as quilt put does
// (repairer.RegisterAll, in batches), so that the nodes' repairers look
// after the gateway's objects without any read capability. Best effort:
// a failure is logged, and the next renewal walk tries again.
func (g *Gateway) registerCaps(ctx context.Context, caps []string) {
	if g.cfg.Nodes == nil {
		return
	}
	var vcs []codec.VerifyCap
	seen := map[sharefile.SI]bool{}
	g.regMu.Lock()
	for _, c := range caps {
		rc, err := codec.ParseReadCap(c)
		if err != nil {
			continue
		}
		vc := rc.Verify()
		if g.registered[vc.SI] || seen[vc.SI] {
			continue
		}
		seen[vc.SI] = true
		vcs = append(vcs, vc)
	}
	g.regMu.Unlock()
	for len(vcs) > 0 && ctx.Err() == nil {
		batch := vcs[:min(len(vcs), node.MaxRegistryBatch)]
		vcs = vcs[len(batch):]
		if _, err := repairer.RegisterAll(ctx, g.cfg.Nodes, batch); err != nil {
			g.log.Warn("repair registry: objects not registered; the next renewal walk tries again", "objects", len(batch), "err", err)
			continue
		}
		g.regMu.Lock()
		if g.registered == nil {
			g.registered = map[sharefile.SI]bool{}
		}
		for _, vc := range batch {
			g.registered[vc.SI] = true
		}
		g.regMu.Unlock()
	}
}

// allRefs returns the storage indexes of the grid objects that every
// bucket and every upload in progress reference, each with a read
// capability of it.
func (g *Gateway) allRefs(ctx context.Context) (map[sharefile.SI]string, error) {
	buckets, err := g.Buckets(ctx)
	if err != nil {
		return nil, err
	}
	refs := map[sharefile.SI]string{}
	for _, bi := range buckets {
		b, err := g.bucket(ctx, bi.Name)
		if errors.Is(err, ErrNoBucket) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		g.sync(ctx, b)
		if err := g.bucketRefs(b, refs); err != nil {
			return nil, err
		}
	}
	if g.cfg.References != nil {
		caps, err := g.cfg.References(ctx, g)
		if err != nil {
			g.log.Warn("lease renewal: other references not read; their objects are not renewed this time", "err", err)
		}
		addCaps(refs, caps)
	}
	return refs, g.uploadRefs(refs)
}

// bucketRefs adds the grid objects the keys of b reference to refs.
func (g *Gateway) bucketRefs(b *bucket, refs map[sharefile.SI]string) error {
	var datas []dag.Hash
	err := g.db.Scan(b.ns, "/", "", func(it namespace.Info) bool {
		if it.Type == dag.File {
			datas = append(datas, it.Data)
		}
		return true
	})
	if err != nil {
		return err
	}
	// Records are read after the scan (see List).
	for _, d := range datas {
		raw, _, err := g.db.Content(b.ns, d)
		if err != nil {
			return err
		}
		info, _, err := decodeRecord(raw)
		if err != nil {
			continue // not an object record: references nothing
		}
		addCaps(refs, recordCaps(info))
	}
	return nil
}

// uploadRefs adds the grid objects of the parts of the uploads in
// progress to refs.
func (g *Gateway) uploadRefs(refs map[sharefile.SI]string) error {
	items, err := g.db.List(g.registry.ns, "/uploads", "", 0)
	if errors.Is(err, namespace.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, it := range items {
		parts, err := g.parts(it.Name)
		if err != nil {
			return err
		}
		for _, p := range parts {
			addCaps(refs, []string{p.Cap})
		}
	}
	return nil
}

// recordCaps returns the read capabilities of the grid objects an
// object record references: its own, or its parts'.
func recordCaps(info ObjectInfo) []string {
	var out []string
	if info.Cap != "" {
		out = append(out, info.Cap)
	}
	for _, p := range info.Parts {
		if p.Cap != "" {
			out = append(out, p.Cap)
		}
	}
	return out
}

func addCaps(refs map[sharefile.SI]string, caps []string) {
	for _, c := range caps {
		if si, ok := capSI(c); ok {
			refs[si] = c
		}
	}
}

func capSI(c string) (sharefile.SI, bool) {
	if c == "" {
		return sharefile.SI{}, false
	}
	rc, err := codec.ParseReadCap(c)
	if err != nil {
		return sharefile.SI{}, false
	}
	return rc.Key.StorageIndex(), true
}

// capsAt returns the grid objects that the current version of path p of
// b references (none if there is none): what a write to p is about to
// unreference.
func (g *Gateway) capsAt(b *bucket, p string) []string {
	st, err := g.db.Stat(b.ns, p)
	if err != nil || st.Type != dag.File {
		return nil
	}
	raw, _, err := g.db.Content(b.ns, st.Data)
	if err != nil {
		return nil
	}
	info, _, err := decodeRecord(raw)
	if err != nil {
		return nil
	}
	return recordCaps(info)
}

// retire hands grid objects that a change of bucket b unreferenced to
// the retirer, which cancels their leases unless something still
// references them. It never blocks: with the retirer's queue full, the
// objects are left to expire.
func (g *Gateway) retire(b *bucket, caps []string) {
	if len(caps) == 0 || g.leases == nil || g.cfg.Objects == nil {
		return
	}
	select {
	case g.leases.retire <- retirement{bucket: b.name, caps: caps, due: time.Now().Add(g.cancelDelay())}:
	default:
		g.log.Debug("lease retirer busy: objects left to expire", "count", len(caps))
	}
}

func (g *Gateway) cancelDelay() time.Duration {
	switch d := g.cfg.CancelDelay; {
	case d < 0:
		return 0
	case d == 0:
		return time.Minute
	default:
		return d
	}
}

// retireLoop cancels the leases of retired objects once due, in one batch
// per tick: one fresh walk of every bucket, the uploads and the other
// references per batch.
func (k *leaseKeeper) retireLoop() {
	defer k.wg.Done()
	var pending []retirement
	tick := min(max(k.g.cancelDelay()/4, 20*time.Millisecond), 5*time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-k.stop:
			return
		case r := <-k.retire:
			pending = append(pending, r)
			continue
		case <-t.C:
		}
		now := time.Now()
		var due []string
		rest := pending[:0]
		for _, r := range pending {
			if r.due.After(now) {
				rest = append(rest, r)
			} else {
				due = append(due, r.caps...)
			}
		}
		pending = rest
		if len(due) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			k.g.cancelUnreferenced(ctx, due)
			cancel()
		}
	}
}

// cancelUnreferenced cancels the leases of those of caps that no bucket
// (as a fresh sync shows it), no upload in progress and nothing of
// Config.References names.
func (g *Gateway) cancelUnreferenced(ctx context.Context, caps []string) {
	// Every bucket, not only the one that dropped the objects: a copy by
	// reference (Swift's COPY, Rewrite) may name an object of another
	// bucket. Anything not read leaves the objects to expire.
	buckets, err := g.Buckets(ctx)
	if err != nil {
		g.log.Warn("lease cancellation: buckets not listed; objects left to expire", "err", err)
		return
	}
	refs := map[sharefile.SI]string{}
	for _, bi := range buckets {
		b, err := g.bucket(ctx, bi.Name)
		switch {
		case errors.Is(err, ErrNoBucket):
			continue // gone: it references nothing
		case err != nil:
			g.log.Warn("lease cancellation: bucket not read; objects left to expire", "bucket", bi.Name, "err", err)
			return
		}
		if err := g.sync(ctx, b); err != nil {
			g.log.Warn("lease cancellation: bucket not synced; objects left to expire", "bucket", bi.Name, "err", err)
			return
		}
		if err := g.bucketRefs(b, refs); err != nil {
			g.log.Warn("lease cancellation: bucket not walked; objects left to expire", "bucket", bi.Name, "err", err)
			return
		}
	}
	if err := g.uploadRefs(refs); err != nil {
		g.log.Warn("lease cancellation: uploads not read; objects left to expire", "err", err)
		return
	}
	if g.cfg.References != nil {
		other, err := g.cfg.References(ctx, g)
		if err != nil {
			g.log.Warn("lease cancellation: other references not read; objects left to expire", "err", err)
			return
		}
		addCaps(refs, other)
	}
	done := map[sharefile.SI]bool{}
	for _, c := range caps {
		si, ok := capSI(c)
		if _, kept := refs[si]; !ok || kept || done[si] {
			continue
		}
		done[si] = true
		rep, err := g.cfg.Objects.Cancel(ctx, si)
		if err != nil && !errors.Is(err, object.ErrNoLease) {
			g.log.Info("lease cancellation failed; the object will expire", "si", fmt.Sprintf("%x", si[:]), "err", err)
			continue
		}
		g.log.Debug("lease cancelled", "si", fmt.Sprintf("%x", si[:]), "shares", rep.Shares, "deleted", rep.Removed)
	}
}
