package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// Headers of the node API.
const (
	hdrLease  = "X-Quilt-Lease"         // hex of the lease's ID (hash of the renew secret) on PUT
	hdrCancel = "X-Quilt-Cancel"        // hex of the lease's cancel hash on PUT; absent: the ID
	hdrTerm   = "X-Quilt-Lease-Seconds" // how long a lease runs from now, on PUT and renew; absent on PUT: for ever
	hdrSecret = "X-Quilt-Secret"        // hex of the cancel secret on DELETE and cancel, of the renew secret on renew
	hdrSize   = "X-Quilt-Size"          // a share's length on a PUT whose body is chunked
	hdrOnly   = "X-Quilt-Only-Share"    // on PUT: refuse if another share of the object is held or arriving (incoming.go)
)

// kinds of error that cross the wire, so the far side can match them with
// errors.Is against the same sentinels.
var kinds = []struct {
	name   string
	err    error
	status int
}{
	{"not_found", sharestore.ErrNotFound, http.StatusNotFound},
	{"full", sharestore.ErrFull, http.StatusInsufficientStorage},
	{"forbidden", sharestore.ErrForbidden, http.StatusForbidden},
	{"corrupt", sharestore.ErrCorrupt, http.StatusUnprocessableEntity},
	{"exists", sharestore.ErrExists, http.StatusConflict},
	{"bad_request", ErrBadRequest, http.StatusBadRequest},
}

// ErrBadRequest means a node could not make sense of a request.
var ErrBadRequest = errors.New("node: bad request")

type wireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, err error) {
	we := wireError{Kind: "internal", Message: err.Error()}
	status := http.StatusInternalServerError
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			we.Kind, status = k.name, k.status
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(we)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// RemoteError is an error a node answered with. It matches the sentinel
// of its kind with errors.Is.
type RemoteError struct {
	Node    string
	Status  int
	Kind    string
	Message string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("node %.8s: %s", e.Node, e.Message)
}

// Is reports whether the remote error is of target's kind.
func (e *RemoteError) Is(target error) bool {
	for _, k := range kinds {
		if k.name == e.Kind && k.err == target {
			return true
		}
	}
	return false
}

func readError(node string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var we wireError
	if json.Unmarshal(body, &we) != nil || we.Kind == "" {
		we = wireError{Kind: "internal", Message: fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)}
	}
	return &RemoteError{Node: node, Status: resp.StatusCode, Kind: we.Kind, Message: we.Message}
}

// ShareInfo is a stored share as the API shows it.
type ShareInfo struct {
	Share int    `json:"share"`
	Size  int64  `json:"size"`
	Root  string `json:"root"` // hex
	// Trailer is the share's trailer (its hashes), when asked for with
	// ListShares(..., true); a reader checks it against its capability
	// and so needs no second round trip for it.
	Trailer []byte `json:"trailer,omitempty"`
}

func shareInfo(i sharestore.Info) ShareInfo {
	return ShareInfo{Share: i.Share, Size: i.Size, Root: fmt.Sprintf("%x", i.Root[:])}
}

func siHex(si sharefile.SI) string { return fmt.Sprintf("%x", si[:]) }
