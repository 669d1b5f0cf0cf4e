package dag

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// NewNamespace makes a root key; its public half is the namespace's ID.
func NewNamespace() (NSID, ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	var id NSID
	copy(id[:], pub)
	return id, priv, err
}

// Writer makes signed entries for one key in one namespace. It is safe for
// concurrent use if Clock is.
type Writer struct {
	NS    NSID
	Key   ed25519.PrivateKey
	Grant Hash // the grant that admitted Key; zero when Key is the root key
	Read  ReadKey
	Clock *Clock // nil: a clock of the writer's own
}

// CheckName reports whether name is a usable path component.
func CheckName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("dag: %q is not a file name", name)
	case len(name) > MaxName:
		return fmt.Errorf("dag: name longer than %d bytes", MaxName)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("dag: name %q contains '/' or NUL", name)
	}
	return nil
}

// MaxKey is the longest key of an object namespace (S3's limit).
const MaxKey = 1024

// CheckKey reports whether key is usable in an object namespace: 1 to
// 1024 bytes of UTF-8 without NUL. Object namespaces are flat: a key's
// '/' are part of the key, not directories.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("dag: empty key")
	case len(key) > MaxKey:
		return fmt.Errorf("dag: key longer than %d bytes", MaxKey)
	case !utf8.ValidString(key) || strings.ContainsRune(key, 0):
		return fmt.Errorf("dag: key is not UTF-8 without NUL")
	}
	return nil
}

// JoinName is the path of an entry named name in directory dir. Config
// namespaces are trees of names without '/'; object namespaces are flat,
// every key in the root directory, so the path is "/" and the key as is.
func JoinName(dir, name string, rules Rules) (string, bool) {
	if rules == ObjectRules {
		if dir != "/" || CheckKey(name) != nil {
			return "", false
		}
		return "/" + name, true
	}
	if CheckName(name) != nil {
		return "", false
	}
	return path.Join(dir, name), true
}

// ParentDir is the directory holding path p ("" for the root).
func ParentDir(p string, rules Rules) string {
	if p == "/" {
		return ""
	}
	if rules == ObjectRules {
		return "/"
	}
	return path.Dir(p)
}

// Sign sets the entry's signer, time (if unset) and signature.
func (w *Writer) Sign(e *Entry) *Entry {
	if w.Clock == nil {
		w.Clock = &Clock{}
	}
	if e.Time == 0 {
		e.Time = w.Clock.Next()
	}
	e.Signer = w.Grant
	copy(e.Sig[:], ed25519.Sign(w.Key, e.signed(w.NS)))
	// A signature made here needs no check by this process's replicas.
	if k, ok := newSigKey(w.NS, e.Hash(), w.Key.Public().(ed25519.PublicKey)); ok {
		verifiedSigs.add(k)
	}
	return e
}

// Root makes a root entry: the namespace's top directory. Only the root
// key's is valid.
func (w *Writer) Root() *Entry {
	return w.Sign(&Entry{Action: Mkdir, Sealed: w.Read.Seal("", nil)})
}

// Entry makes an entry named name in directory anchor that supersedes
// prev (the path's current entries, as the writer sees them).
func (w *Writer) Entry(a Action, anchor Hash, prev []Hash, name string, content []byte) *Entry {
	return w.Sign(&Entry{Action: a, Parents: append([]Hash{anchor}, prev...),
		Size: uint64(len(content)), Sealed: w.Read.Seal(name, content)})
}

// Pointer makes a revert (restore target, an earlier entry of the same
// path) or a hard link (show target, an entry of any path). The target is
// named in the content and among the parents, so it is always present
// where the pointer is.
func (w *Writer) Pointer(a Action, anchor Hash, prev []Hash, name string, target Hash) *Entry {
	if !slices.Contains(prev, target) {
		prev = append(slices.Clone(prev), target)
	}
	return w.Entry(a, anchor, prev, name, target[:])
}

// File makes a write entry. Content up to InlineMax is sealed inline;
// more is split into a chain of blocks (returned for storing with the
// entry).
func (w *Writer) File(anchor Hash, prev []Hash, name string, content []byte) (*Entry, []*Block) {
	return w.FileInline(anchor, prev, name, content, InlineMax)
}

// FileInline is File with content up to inline bytes sealed inline (as
// far as MaxSealed allows). An entry with more than InlineMax inline is
// too big for one gossip message (replicas pass it on by direct pushes
// and anti-entropy instead), but it is one record where blocks would be
// several, each admitted (stored, indexed, summed into the log's
// digests) at every replica.
func (w *Writer) FileInline(anchor Hash, prev []Hash, name string, content []byte, inline int) (*Entry, []*Block) {
	if len(content) <= inline && sealedLen(name, content) <= MaxSealed {
		return w.Entry(Write, anchor, prev, name, content), nil
	}
	chunk := MaxBlock - 29 // what one sealed block holds: nonce, tag, empty name
	n := (len(content) + chunk - 1) / chunk
	blocks := make([]*Block, n)
	var next Hash
	for i := n - 1; i >= 0; i-- {
		b := &Block{Next: next, Sealed: w.Read.Seal("", content[i*chunk:min(len(content), (i+1)*chunk)])}
		blocks[i], next = b, b.Hash()
	}
	e := w.Sign(&Entry{Action: Write, Kind: Blocks, Parents: append([]Hash{anchor}, prev...),
		Size: uint64(len(content)), Ref: next[:], Sealed: w.Read.Seal(name, nil)})
	return e, blocks
}

// ObjectFile makes a write entry whose content is a grid object.
func (w *Writer) ObjectFile(anchor Hash, prev []Hash, name, readCap string, size uint64) *Entry {
	return w.Sign(&Entry{Action: Write, Kind: Object, Parents: append([]Hash{anchor}, prev...),
		Size: size, Sealed: w.Read.Seal(name, []byte(readCap))})
}

// GrantKey makes a grant of pub under directory anchor, labelled name.
func (w *Writer) GrantKey(anchor Hash, name string, pub ed25519.PublicKey) *Entry {
	return w.Sign(&Entry{Action: Grant, Parents: []Hash{anchor}, Ref: append([]byte(nil), pub...),
		Sealed: w.Read.Seal(name, nil)})
}

// RevokeGrant makes a revoke of grant g, which hangs from anchor; ack
// lists entries to keep (they are acknowledged by the revoke itself).
func (w *Writer) RevokeGrant(anchor, g Hash, ack []Hash) *Entry {
	return w.Sign(&Entry{Action: Revoke, Parents: append([]Hash{anchor}, ack...), Ref: g[:],
		Sealed: w.Read.Seal("", nil)})
}

// Ack makes an acknowledgement of entries, hung from anchor.
func (w *Writer) Ack(anchor Hash, entries []Hash) *Entry {
	return w.Sign(&Entry{Action: Ack, Parents: append([]Hash{anchor}, entries...), Sealed: w.Read.Seal("", nil)})
}
