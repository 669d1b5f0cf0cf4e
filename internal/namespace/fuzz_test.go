package namespace

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// fuzzNamespace is a namespace with a few records in it, made by a
// dag.Writer with a fixed key.
func fuzzNamespace() (dag.NSID, dag.ReadKey, [][]byte) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
	var ns dag.NSID
	copy(ns[:], priv.Public().(ed25519.PublicKey))
	var key dag.ReadKey
	key[0] = 7
	w := &dag.Writer{NS: ns, Key: priv, Read: key, Clock: &dag.Clock{Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}}
	root := w.Root()
	dir := w.Entry(dag.Mkdir, root.Hash(), nil, "d", nil)
	file, blocks := w.File(dir.Hash(), nil, "f", bytes.Repeat([]byte("x"), 2000))
	raws := [][]byte{root.Encode(), dir.Encode(), file.Encode()}
	for _, b := range blocks {
		raws = append(raws, b.Encode())
	}
	return ns, key, raws
}

// FuzzUnframe splits framed record lists, as a replica does with a peer's
// push or an answer to a get: what splits frames back to the same
// records. (Not to the same bytes: a length may come as an overlong
// varint, which unframe reads like binary.Uvarint; the records, which
// carry their own hashes, are what counts.)
func FuzzUnframe(f *testing.F) {
	_, _, raws := fuzzNamespace()
	f.Add(frame(raws))
	f.Add(frame([][]byte{{}, {1}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{5, 1, 2})
	f.Add([]byte{0x82, 0x00, 1, 2}) // an overlong length
	f.Fuzz(func(t *testing.T, b []byte) {
		raws, err := unframe(b)
		if err != nil {
			return
		}
		framed := frame(raws)
		if len(framed) > len(b) {
			t.Fatalf("frame(unframe(%x)) = %x, longer", b, framed)
		}
		again, err := unframe(framed)
		if err != nil || len(again) != len(raws) {
			t.Fatalf("unframe(frame(unframe(%x))): %d records, %v; want %d", b, len(again), err, len(raws))
		}
		for i := range raws {
			if !bytes.Equal(again[i], raws[i]) {
				t.Fatalf("record %d: %x, then %x", i, raws[i], again[i])
			}
		}
	})
}

// FuzzAPI sends request bodies to a replica's sync API (digests, hashes,
// get, put), served by a real DB: every answer is 200 or a client error,
// and a put is answered with a PutResult.
func FuzzAPI(f *testing.F) {
	ns, key, raws := fuzzNamespace()
	db, err := OpenDB(f.TempDir()+"/ns.db", Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	if err := db.Open(ns, &key, dag.ConfigRules); err != nil {
		f.Fatal(err)
	}
	if _, err := db.Ingest(ns, raws[:2]); err != nil {
		f.Fatal(err)
	}
	api := API(db, func(ns dag.NSID, raws [][]byte, _ bool) (Result, error) { return db.Ingest(ns, raws) })
	routes := []string{"digests", "hashes", "get", "put"}

	h0, h1 := dag.RawHash(raws[0]), dag.RawHash(raws[1])
	f.Add(uint8(0), []byte{0, 1, h0[0], 1, h1[0]})
	f.Add(uint8(0), []byte{2, 1, 2})
	f.Add(uint8(1), []byte{h0[0], h0[1], h1[0], h1[1]})
	f.Add(uint8(1), []byte{1, 2, 3})
	f.Add(uint8(2), append(h0[:], h1[:]...))
	f.Add(uint8(2), h0[:31])
	f.Add(uint8(3), frame(raws))
	f.Add(uint8(3), frame(raws[2:3]))
	f.Add(uint8(3), []byte{0x80})
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := "/v1/ns/" + ns.String() + "/" + routes[int(route)%len(routes)]
		r := httptest.NewRequest("POST", path, bytes.NewReader(body))
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("POST %s: %d %s", path, w.Code, w.Body.String())
		}
		if w.Code != http.StatusOK {
			return
		}
		switch routes[int(route)%len(routes)] {
		case "put":
			var res PutResult
			if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
				t.Fatalf("put answer %q: %v", w.Body.String(), err)
			}
		case "get":
			got, err := unframe(w.Body.Bytes())
			if err != nil {
				t.Fatalf("get answer does not unframe: %v", err)
			}
			asked := map[dag.Hash]bool{}
			for i := 0; i+32 <= len(body); i += 32 {
				asked[dag.Hash(body[i:])] = true
			}
			for _, raw := range got {
				if h := dag.RawHash(raw); !asked[h] {
					t.Fatalf("get answered a record that was not asked for: %x", h)
				}
			}
		case "hashes":
			if w.Body.Len()%32 != 0 {
				t.Fatalf("hashes answer of %d bytes", w.Body.Len())
			}
		}
	})
}
