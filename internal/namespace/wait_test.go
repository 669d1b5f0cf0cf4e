package namespace_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
	"github.com/quilt-grid/quilt/internal/namespace"
)

// A long poll over HTTP waits while the peer's root is the one seen, and
// answers the new root once it changes. The digest used to be sent
// hex-encoded twice, so the peer never recognised it and answered at once
// with the same root.
func TestHTTPWaitBlocksUntilChange(t *testing.T) {
	db, err := namespace.OpenDB(filepath.Join(t.TempDir(), "ns.db"), namespace.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, priv, _ := dag.NewNamespace()
	rk, _ := dag.NewReadKey()
	if err := db.Open(id, &rk, dag.ConfigRules); err != nil {
		t.Fatal(err)
	}
	w := &dag.Writer{NS: id, Key: priv, Read: rk, Clock: db.Clock()}
	root := w.Root()
	if _, err := db.Ingest(id, [][]byte{root.Encode()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(namespace.API(db, nil))
	defer srv.Close()
	p := namespace.HTTPPeer{Client: srv.Client(), Base: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := db.Root(id)
	got := make(chan namespace.Digest, 1)
	go func() {
		d, err := p.Wait(ctx, id, seen, 15*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	// The poll must still be waiting: nothing changed yet.
	select {
	case d := <-got:
		t.Fatalf("the poll answered before any change: %v (seen %v)", d, seen)
	case <-time.After(200 * time.Millisecond):
	}
	e := w.Entry(dag.Mkdir, root.Hash(), nil, "etc", nil)
	if _, err := db.Ingest(id, [][]byte{e.Encode()}); err != nil {
		t.Fatal(err)
	}
	if d := <-got; d != db.Root(id) || d == seen {
		t.Fatalf("the poll answered %v; the root is %v", d, db.Root(id))
	}
}
