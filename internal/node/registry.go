package node

import (
	"bytes"
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
	"time"

	"github.com/quilt-grid/quilt/internal/sharefile"
	"github.com/quilt-grid/quilt/internal/sharestore"
	bolt "go.etcd.io/bbolt"
)

// MaxRegistryEntry bounds an entry of the repair registry (a verify
// capability is about 150 bytes).
const MaxRegistryEntry = 1024

// MaxRegistryBatch bounds how many entries one request of
// Client.RegisterMany carries.
const MaxRegistryBatch = 4096

// The repair registry: whoever stores an object gives every node an
// entry for it under its storage index, the object's verify capability
// (enough to find, check and rebuild its shares, never to read them).
// The node keeps the entries as opaque text in DIR/repair.db, a bbolt
// database with one bucket keyed by storage index, so that a batch of
// entries is one transaction and one sync; the repairer (a higher layer)
// parses them. Earlier nodes kept one file per entry in DIR/repair/;
// openRegistry moves those into the database and removes the directory.

var registryBucket = []byte("repair")

// RegistryEntry is an entry of a node's repair registry: the object's
// storage index and its verify capability, as text.
type RegistryEntry struct {
	SI    sharefile.SI
	Entry string
}

// registryEntryJSON is a RegistryEntry on the wire (POST /v1/repair).
type registryEntryJSON struct {
	SI    string `json:"si"`
	Entry string `json:"entry"`
}

func (n *Node) registryPath() string { return filepath.Join(n.cfg.Dir, "repair.db") }

// legacyRegistryDir is where earlier nodes kept one file per entry.
func (n *Node) legacyRegistryDir() string { return filepath.Join(n.cfg.Dir, "repair") }

// openRegistry opens the repair registry's database, moving into it the
// entries of the one-file-per-entry directory of earlier nodes (a crash
// during the move leaves the directory, and the next start moves it
// again).
func (n *Node) openRegistry() error {
	db, err := bolt.Open(n.registryPath(), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: n.cfg.NoSync, NoFreelistSync: true})
	if err != nil {
		return fmt.Errorf("node: repair registry %s: %w", n.registryPath(), err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(registryBucket)
		return err
	}); err != nil {
		db.Close()
		return fmt.Errorf("node: repair registry: %w", err)
	}
	n.registry = db
	old, err := readLegacyRegistry(n.legacyRegistryDir())
	if err != nil || old == nil {
		return err
	}
	batch := make([]RegistryEntry, 0, len(old))
	for si, e := range old {
		if validEntry(e) == nil {
			batch = append(batch, RegistryEntry{SI: si, Entry: e})
		}
	}
	for rest := batch; len(rest) > 0; {
		part := rest[:min(len(rest), 1<<16)] // bounds a transaction's memory
		rest = rest[len(part):]
		if err := n.RegisterMany(part); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(n.legacyRegistryDir()); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.log.Info("repair registry moved into its database", "entries", len(batch))
	return nil
}

// closeRegistry closes the repair registry's database.
func (n *Node) closeRegistry() {
	if n.registry != nil {
		n.registry.Close()
	}
}

// readLegacyRegistry reads the one-file-per-entry registry of earlier
// nodes, nil if there is none. Files that are not entries are skipped.
func readLegacyRegistry(dir string) (map[sharefile.SI]string, error) {
	des, err := os.ReadDir(dir)
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
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil || len(b) > MaxRegistryEntry+1 {
			continue
		}
		out[si] = strings.TrimSpace(string(b))
	}
	return out, nil
}

// validEntry says why an entry cannot be kept, nil if it can.
func validEntry(entry string) error {
	if len(entry) == 0 || len(entry) > MaxRegistryEntry || strings.ContainsAny(entry, "\r\n\x00") {
		return fmt.Errorf("%w: a repair registry entry is one line of 1 to %d bytes", ErrBadRequest, MaxRegistryEntry)
	}
	return nil
}

// Register stores an entry of the node's repair registry (as a PUT of
// /v1/repair/SI does): a higher layer that learnt it from another node
// keeps it here too. An entry given again replaces the one before.
func (n *Node) Register(si sharefile.SI, entry string) error {
	return n.RegisterMany([]RegistryEntry{{SI: si, Entry: entry}})
}

// RegisterMany stores entries of the node's repair registry in one
// transaction (as a POST of /v1/repair does): all of them, or none if
// one is not a valid entry.
func (n *Node) RegisterMany(entries []RegistryEntry) error {
	for _, e := range entries {
		if err := validEntry(e.Entry); err != nil {
			return err
		}
	}
	if len(entries) == 0 {
		return nil
	}
	err := n.registry.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(registryBucket)
		for _, e := range entries {
			if err := b.Put(e.SI[:], []byte(e.Entry)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node: repair registry: %w", err)
	}
	return nil
}

// Unregister removes the entry of storage index si from the node's
// repair registry, if it has one: for an object no longer kept.
func (n *Node) Unregister(si sharefile.SI) error {
	err := n.registry.Update(func(tx *bolt.Tx) error { return tx.Bucket(registryBucket).Delete(si[:]) })
	if err != nil {
		return fmt.Errorf("node: repair registry: %w", err)
	}
	return nil
}

// Registered returns the entries of the node's repair registry, by
// storage index.
func (n *Node) Registered() (map[sharefile.SI]string, error) {
	out := map[sharefile.SI]string{}
	err := n.registry.View(func(tx *bolt.Tx) error {
		return tx.Bucket(registryBucket).ForEach(func(k, v []byte) error {
			var si sharefile.SI
			if len(k) != len(si) {
				return nil
			}
			copy(si[:], k)
			out[si] = string(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("node: repair registry: %w", err)
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
	if err := n.Register(si, strings.TrimSpace(string(b))); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// maxRegistryBatchBody bounds the body of a POST of /v1/repair.
const maxRegistryBatchBody = MaxRegistryBatch * (2*MaxRegistryEntry + 128)

func (n *Node) postRegistry(w http.ResponseWriter, r *http.Request) {
	var in []registryEntryJSON
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRegistryBatchBody))
	if err := dec.Decode(&in); err != nil {
		writeError(w, fmt.Errorf("%w: repair registry batch: %v", ErrBadRequest, err))
		return
	}
	if len(in) > MaxRegistryBatch {
		writeError(w, fmt.Errorf("%w: a repair registry batch has at most %d entries, not %d", ErrBadRequest, MaxRegistryBatch, len(in)))
		return
	}
	batch := make([]RegistryEntry, len(in))
	for i, e := range in {
		si, err := sharestore.ParseSI(e.SI)
		if err != nil {
			writeError(w, fmt.Errorf("%w: repair registry batch, entry %d: %v", ErrBadRequest, i, err))
			return
		}
		batch[i] = RegistryEntry{SI: si, Entry: e.Entry}
	}
	if err := n.RegisterMany(batch); err != nil {
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

// RegisterMany gives a node entries of its repair registry in one
// request, which the node keeps in one transaction: at most
// MaxRegistryBatch of them.
func (c *Client) RegisterMany(ctx context.Context, node string, entries []RegistryEntry) error {
	if len(entries) > MaxRegistryBatch {
		return fmt.Errorf("node: a repair registry batch has at most %d entries, not %d", MaxRegistryBatch, len(entries))
	}
	out := make([]registryEntryJSON, len(entries))
	for i, e := range entries {
		out[i] = registryEntryJSON{SI: hex.EncodeToString(e.SI[:]), Entry: e.Entry}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	resp, err := c.doSized(ctx, "POST", node, "/v1/repair", bytes.NewReader(b), int64(len(b)), map[string]string{"Content-Type": "application/json"})
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
