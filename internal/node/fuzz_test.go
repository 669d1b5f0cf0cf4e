package node

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// fuzzShare is a well-formed share (number num of a 2-of-3 object of
// size bytes in 50-byte segments) of storage index si.
func fuzzShare(si sharefile.SI, num int, size int64) []byte {
	l := sharefile.NewLayout(2, 3, 50, size)
	hdr := sharefile.Header{Share: num, K: 2, N: 3, SegmentSize: 50, BlockSize: l.BlockSize, SI: si}
	out := hdr.Marshal()
	t := sharefile.Trailer{Segments: l.Segments, Size: size, LastBlockSize: l.LastBlockSize, ShareRoots: make([]sharefile.Hash, 3)}
	for i := int64(0); i < l.Segments; i++ {
		b := bytes.Repeat([]byte{byte(i)}, l.BlockLen(i))
		out = append(out, b...)
		t.BlockHashes = append(t.BlockHashes, sharefile.BlockHash(b))
	}
	t.ShareRoots[num] = sharefile.ShareRoot(hdr, t.BlockHashes)
	return append(out, t.Marshal()...)
}

// FuzzShareAPI sends the share requests a node takes from peers (PUT,
// GET with a Range, DELETE, scrub) with fuzzed path, headers and body to
// a node's handler over an in-memory store that checks every block. The
// node answers with a status of the kinds it defines, never 500, and its
// error bodies read back (readError) as the kind they were written as.
func FuzzShareAPI(f *testing.F) {
	store := sharestore.NewMem(1 << 30)
	store.CheckBlocks = true
	n := &Node{store: store, log: slog.New(slog.NewTextHandler(io.Discard, nil)), dirty: make(chan struct{}, 1)}
	h := n.handler(nil)

	var si sharefile.SI
	si[0], si[15] = 0xab, 0xcd
	secret := []byte("delete secret")
	lease := sharestore.LeaseFor(secret)
	share := fuzzShare(si, 1, 120)
	siHex, leaseHex := hex.EncodeToString(si[:]), hex.EncodeToString(lease.ID[:])
	f.Add(uint8(0), siHex, "1", leaseHex, "", "", share)
	empty := fuzzShare(si, 0, 0)
	f.Add(uint8(0), siHex, "0", leaseHex, strconv.Itoa(len(empty)), "", empty)
	f.Add(uint8(0), siHex, "0", leaseHex, strconv.Itoa(len(share)), "", empty)
	f.Add(uint8(0), siHex, "1", leaseHex, "", "", share[:len(share)-1])
	f.Add(uint8(0), siHex, "2", "zz", "-1", "", share)
	f.Add(uint8(1), siHex, "1", "", "", "bytes=10-20", []byte(nil))
	f.Add(uint8(1), siHex, "1", "", "", "bytes=-5,0-0", []byte(nil))
	f.Add(uint8(1), siHex, "256", "", "", "", []byte(nil))
	f.Add(uint8(2), siHex, "1", "", "", "", secret)
	f.Add(uint8(3), siHex, "1", "", "", "", []byte(nil))
	f.Add(uint8(4), siHex[:31], "1", "", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, op uint8, siText, num, leaseText, size, rng string, body []byte) {
		path := "/v1/shares/" + url.PathEscape(siText) + "/" + url.PathEscape(num)
		var r *http.Request
		switch op % 5 {
		case 0:
			r = httptest.NewRequest("PUT", path, bytes.NewReader(body))
			r.Header.Set(hdrLease, leaseText)
			if size != "" {
				r.Header.Set(hdrSize, size)
				r.ContentLength = -1
			}
		case 1:
			r = httptest.NewRequest("GET", path, nil)
			r.Header.Set("Range", rng)
		case 2:
			r = httptest.NewRequest("DELETE", path, nil)
			r.Header.Set(hdrSecret, hex.EncodeToString(body))
		case 3:
			r = httptest.NewRequest("POST", path+"/scrub", nil)
		case 4:
			r = httptest.NewRequest("GET", "/v1/shares/"+url.PathEscape(siText), nil)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		resp := w.Result()
		switch {
		case resp.StatusCode == http.StatusInternalServerError:
			t.Fatalf("%s %s: 500 %s", r.Method, path, w.Body.String())
		case resp.StatusCode < 400:
			return
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable, resp.StatusCode == http.StatusNotFound && resp.Header.Get("Content-Type") != "application/json":
			return // from http.ServeContent or the mux, not the node
		}
		var we wireError
		if err := json.Unmarshal(w.Body.Bytes(), &we); err != nil {
			t.Fatalf("%s %s: %d with body %q: %v", r.Method, path, resp.StatusCode, w.Body.String(), err)
		}
		rerr := readError("n", resp)
		var re *RemoteError
		if !errors.As(rerr, &re) || re.Kind != we.Kind || re.Status != resp.StatusCode {
			t.Fatalf("readError = %#v for %d %s", rerr, resp.StatusCode, w.Body.String())
		}
		for _, k := range kinds {
			if k.name == we.Kind && (k.status != resp.StatusCode || !errors.Is(rerr, k.err)) {
				t.Fatalf("kind %s with status %d, errors.Is %v", we.Kind, resp.StatusCode, errors.Is(rerr, k.err))
			}
		}
	})
}
