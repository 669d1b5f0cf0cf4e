package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
)

// MaxRegistryEntry bounds an entry of the repair registry (a verify
// capability is about 150 bytes).
const MaxRegistryEntry = 1024

// The repair registry: whoever stores an object gives every node an
// entry for it under its storage index, the object's verify capability
// (enough to find, check and rebuild its shares, never to read them), in
// DIR/repair/<storage index>. The node keeps the entries as opaque text;
// the repairer (a higher layer) parses them.

func (n *Node) registryDir() string { return filepath.Join(n.cfg.Dir, "repair") }

// Register stores an entry of the node's repair registry (as a PUT of
// /v1/repair/SI does): a higher layer that learnt it from another node
// keeps it here too.
func (n *Node) Register(si sharefile.SI, entry string) error { return n.register(si, entry) }

// register stores an entry of the repair registry.
func (n *Node) register(si sharefile.SI, entry string) error {
	if len(entry) == 0 || len(entry) > MaxRegistryEntry || strings.ContainsAny(entry, "\r\n\x00") {
		return fmt.Errorf("%w: a repair registry entry is one line of 1 to %d bytes", ErrBadRequest, MaxRegistryEntry)
	}
	if err := os.MkdirAll(n.registryDir(), 0o700); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return writeFileAtomic(filepath.Join(n.registryDir(), hex.EncodeToString(si[:])), []byte(entry+"\n"))
}

// Registered returns the entries of the node's repair registry, by
// storage index. Files that are not entries are skipped.
func (n *Node) Registered() (map[sharefile.SI]string, error) {
	des, err := os.ReadDir(n.registryDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	out := map[sharefile.SI]string{}
	for _, de := range des {
		si, err := sharestore.ParseSI(de.Name())
		if err != nil || !de.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n.registryDir(), de.Name()))
		if err != nil || len(b) > MaxRegistryEntry+1 {
			continue
		}
		out[si] = strings.TrimSpace(string(b))
	}
	return out, nil
}

func (n *Node) putRegistry(w http.ResponseWriter, r *http.Request) {
	si, err := sharestore.ParseSI(r.PathValue("si"))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxRegistryEntry+1))
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ErrBadRequest, err))
		return
	}
	if err := n.register(si, strings.TrimSpace(string(b))); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) getRegistry(w http.ResponseWriter, r *http.Request) {
	reg, err := n.Registered()
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]string, 0, len(reg))
	for _, e := range reg {
		out = append(out, e)
	}
	sort.Strings(out)
	writeJSON(w, 200, out)
}

// Register gives a node an entry of its repair registry for the object
// of storage index si: the object's verify capability, as text.
func (c *Client) Register(ctx context.Context, node string, si sharefile.SI, entry string) error {
	resp, err := c.do(ctx, "PUT", node, "/v1/repair/"+hex.EncodeToString(si[:]), strings.NewReader(entry), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Registry returns the entries of a node's repair registry.
func (c *Client) Registry(ctx context.Context, node string) ([]string, error) {
	resp, err := c.do(ctx, "GET", node, "/v1/repair", nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []string
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxRegistryList)).Decode(&out); err != nil {
		return nil, fmt.Errorf("node %.8s: repair registry: %w", node, err)
	}
	return out, nil
}

// maxRegistryList bounds the answer of a registry read: a million
// entries.
const maxRegistryList = 1 << 30
