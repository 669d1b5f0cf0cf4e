package namespace

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/dag"
)

// Limits of the API.
const (
	maxBody   = 64 << 20
	maxHashes = 1 << 17
)

// API serves a replica's namespaces over HTTP, under /v1/ns:
//
//	GET  /v1/ns                      namespaces held: [{"id","count"}]
//	GET  /v1/ns/{id}/root            the root digest {"xor","count"}
//	POST /v1/ns/{id}/digests         body: 0- or 1-byte prefixes, each
//	                                 preceded by its length byte; answer:
//	                                 256 digests (40 bytes) per prefix
//	POST /v1/ns/{id}/hashes          body: 2-byte leaves; answer: hashes
//	POST /v1/ns/{id}/get             body: hashes; answer: records, each
//	                                 preceded by its length (uvarint)
//	POST /v1/ns/{id}/put[?sync=1]    body: records as /get answers; answer:
//	                                 {"admitted","rejected","missing"}
//	GET  /v1/ns/{id}/wait?xor=&count=&timeout=
//	                                 waits until the root differs
//
// append receives records to admit (and gossip, unless fromSync).
func API(db *DB, appendFn func(ns dag.NSID, raws [][]byte, fromSync bool) (Result, error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ns", func(w http.ResponseWriter, r *http.Request) {
		type item struct {
			ID    string `json:"id"`
			Count uint64 `json:"count"`
		}
		out := []item{}
		for _, ns := range db.Namespaces() {
			out = append(out, item{ns.String(), db.Count(ns)})
		}
		writeJSON(w, out)
	})
	withNS := func(f func(w http.ResponseWriter, r *http.Request, ns dag.NSID, body []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			ns, err := dag.ParseNSID(r.PathValue("id"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body, err := readBody(http.MaxBytesReader(w, r.Body, maxBody), r.ContentLength)
			if err != nil {
				http.Error(w, "namespace: request body: "+err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			f(w, r, ns, body)
		}
	}
	mux.HandleFunc("GET /v1/ns/{id}/root", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, _ []byte) {
		writeJSON(w, jsonDigest(db.Root(ns)))
	}))
	mux.HandleFunc("POST /v1/ns/{id}/digests", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, body []byte) {
		out := make([]byte, 0, 256*digestLen*min(257, len(body)))
		for count := 0; len(body) > 0; count++ {
			if count > 257 {
				http.Error(w, "namespace: at most 257 digest prefixes", http.StatusBadRequest)
				return
			}
			n := int(body[0])
			if n > 1 || len(body) < 1+n {
				http.Error(w, "namespace: bad digest prefixes", http.StatusBadRequest)
				return
			}
			ds, _ := db.Digests(ns, body[1:1+n])
			for _, g := range ds {
				out = appendDigest(out, g)
			}
			body = body[1+n:]
		}
		w.Write(out)
	}))
	mux.HandleFunc("POST /v1/ns/{id}/hashes", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, body []byte) {
		if len(body)%2 != 0 || len(body) > 2*65536 {
			http.Error(w, "namespace: at most 65536 leaves of 2 bytes", http.StatusBadRequest)
			return
		}
		seen := map[[2]byte]bool{}
		var leaves [][2]byte
		for i := 0; i < len(body); i += 2 {
			if l := [2]byte{body[i], body[i+1]}; !seen[l] {
				seen[l] = true
				leaves = append(leaves, l)
			}
		}
		var out []byte
		for _, h := range db.Hashes(ns, leaves) {
			out = append(out, h[:]...)
		}
		w.Write(out)
	}))
	mux.HandleFunc("POST /v1/ns/{id}/get", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, body []byte) {
		if len(body)%32 != 0 || len(body)/32 > maxHashes {
			http.Error(w, "namespace: body must be at most 131072 hashes of 32 bytes", http.StatusBadRequest)
			return
		}
		seen := map[dag.Hash]bool{}
		var hs []dag.Hash
		for i := 0; i < len(body); i += 32 {
			if h := dag.Hash(body[i:]); !seen[h] {
				seen[h] = true
				hs = append(hs, h)
			}
		}
		w.Write(frame(db.Get(ns, hs)))
	}))
	mux.HandleFunc("POST /v1/ns/{id}/put", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, body []byte) {
		raws, err := unframe(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := appendFn(ns, raws, r.URL.Query().Get("sync") == "1")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, putResult(res))
	}))
	mux.HandleFunc("GET /v1/ns/{id}/wait", withNS(func(w http.ResponseWriter, r *http.Request, ns dag.NSID, _ []byte) {
		q := r.URL.Query()
		var seen Digest
		if x, err := hex.DecodeString(q.Get("xor")); err == nil && len(x) == 32 {
			copy(seen.Xor[:], x)
		}
		seen.Count, _ = strconv.ParseUint(q.Get("count"), 10, 64)
		timeout, err := time.ParseDuration(q.Get("timeout"))
		if err != nil || timeout <= 0 || timeout > 5*time.Minute {
			timeout = 30 * time.Second
		}
		writeJSON(w, jsonDigest(db.Wait(r.Context(), ns, seen, timeout)))
	}))
	return mux
}

type digestJSON struct {
	Xor   string `json:"xor"`
	Count uint64 `json:"count"`
}

func jsonDigest(g Digest) digestJSON { return digestJSON{hex.EncodeToString(g.Xor[:]), g.Count} }

func (j digestJSON) digest() (Digest, error) {
	var g Digest
	x, err := hex.DecodeString(j.Xor)
	if err != nil || len(x) != 32 {
		return g, errors.New("namespace: bad digest in answer")
	}
	copy(g.Xor[:], x)
	g.Count = j.Count
	return g, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// FramedPutter is a Peer that takes records framed once for several
// peers (a push to many sends the same body to each).
type FramedPutter interface {
	PutFramed(ctx context.Context, ns dag.NSID, body []byte, fromSync bool) (PutResult, error)
}

// readBody reads a request body whole, into a buffer of the announced
// length when there is one (at most maxBody: r is limited to that).
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 || length > maxBody {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, length+1) // +1: the read that finds the end
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // a body longer than announced: grow
		}
	}
}

// frame joins records, each preceded by its length.
func frame(raws [][]byte) []byte {
	size := 0
	for _, r := range raws {
		size += binary.MaxVarintLen64 + len(r)
	}
	out := make([]byte, 0, size)
	for _, r := range raws {
		out = binary.AppendUvarint(out, uint64(len(r)))
		out = append(out, r...)
	}
	return out
}

func unframe(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) || n > dag.MaxSealed+4096 {
			return nil, errors.New("namespace: bad record framing")
		}
		out = append(out, b[w:w+int(n)])
		b = b[w+int(n):]
	}
	return out, nil
}

// HTTPPeer is a replica reached over HTTP (a node, through its API).
type HTTPPeer struct {
	Client *http.Client
	Base   string // "https://<node-id>"
}

var _ WaitPeer = HTTPPeer{}

func (p HTTPPeer) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, p.Base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("namespace: %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Namespaces implements Peer.
func (p HTTPPeer) Namespaces(ctx context.Context) ([]dag.NSID, error) {
	b, err := p.do(ctx, "GET", "/v1/ns", nil)
	if err != nil {
		return nil, err
	}
	var items []struct{ ID string }
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, err
	}
	var out []dag.NSID
	for _, it := range items {
		if id, err := dag.ParseNSID(it.ID); err == nil {
			out = append(out, id)
		}
	}
	return out, nil
}

// Root implements Peer.
func (p HTTPPeer) Root(ctx context.Context, ns dag.NSID) (Digest, error) {
	return p.digest(ctx, "/v1/ns/"+ns.String()+"/root")
}

// digest GETs a path that answers a root digest.
func (p HTTPPeer) digest(ctx context.Context, path string) (Digest, error) {
	b, err := p.do(ctx, "GET", path, nil)
	if err != nil {
		return Digest{}, err
	}
	var j digestJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Digest{}, err
	}
	return j.digest()
}

// Digests implements Peer.
func (p HTTPPeer) Digests(ctx context.Context, ns dag.NSID, prefixes [][]byte) ([][256]Digest, error) {
	var body []byte
	for _, pre := range prefixes {
		body = append(append(body, byte(len(pre))), pre...)
	}
	b, err := p.do(ctx, "POST", "/v1/ns/"+ns.String()+"/digests", body)
	if err != nil {
		return nil, err
	}
	if len(b) != len(prefixes)*256*40 {
		return nil, errors.New("namespace: short digests answer")
	}
	out := make([][256]Digest, len(prefixes))
	for i := range out {
		for j := range 256 {
			out[i][j] = decodeDigest(b[(i*256+j)*40:][:40])
		}
	}
	return out, nil
}

// Hashes implements Peer.
func (p HTTPPeer) Hashes(ctx context.Context, ns dag.NSID, leaves [][2]byte) ([]dag.Hash, error) {
	body := make([]byte, 0, 2*len(leaves))
	for _, l := range leaves {
		body = append(body, l[:]...)
	}
	b, err := p.do(ctx, "POST", "/v1/ns/"+ns.String()+"/hashes", body)
	if err != nil {
		return nil, err
	}
	if len(b)%32 != 0 {
		return nil, errors.New("namespace: bad hashes answer")
	}
	out := make([]dag.Hash, len(b)/32)
	for i := range out {
		out[i] = dag.Hash(b[32*i:])
	}
	return out, nil
}

// Get implements Peer.
func (p HTTPPeer) Get(ctx context.Context, ns dag.NSID, hashes []dag.Hash) ([][]byte, error) {
	body := make([]byte, 0, 32*len(hashes))
	for _, h := range hashes {
		body = append(body, h[:]...)
	}
	b, err := p.do(ctx, "POST", "/v1/ns/"+ns.String()+"/get", body)
	if err != nil {
		return nil, err
	}
	return unframe(b)
}

// Put implements Peer.
func (p HTTPPeer) Put(ctx context.Context, ns dag.NSID, raws [][]byte, fromSync bool) (PutResult, error) {
	return p.PutFramed(ctx, ns, frame(raws), fromSync)
}

// PutFramed is Put of records already framed for the wire (see
// FramedPutter).
func (p HTTPPeer) PutFramed(ctx context.Context, ns dag.NSID, body []byte, fromSync bool) (PutResult, error) {
	path := "/v1/ns/" + ns.String() + "/put"
	if fromSync {
		path += "?sync=1"
	}
	var res PutResult
	b, err := p.do(ctx, "POST", path, body)
	if err != nil {
		return res, err
	}
	return res, json.Unmarshal(b, &res)
}

// Wait long-polls until the peer's root of ns differs from seen.
func (p HTTPPeer) Wait(ctx context.Context, ns dag.NSID, seen Digest, timeout time.Duration) (Digest, error) {
	// The XOR as hex bytes: dag.Hash has a String method, which %x would
	// hex-encode a second time.
	return p.digest(ctx, fmt.Sprintf("/v1/ns/%s/wait?xor=%s&count=%d&timeout=%s", ns, hex.EncodeToString(seen.Xor[:]), seen.Count, timeout))
}
