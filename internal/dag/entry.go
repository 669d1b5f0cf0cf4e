package dag

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/zeebo/blake3"
)

// Hash names a record: the BLAKE3-256 of its encoding.
type Hash [32]byte

// String is the hash in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// Short is the first 12 hex digits, enough to name an entry to a person.
func (h Hash) Short() string { return h.String()[:12] }

// Bytes is the hash as a slice (a copy).
func (h Hash) Bytes() []byte { return append([]byte(nil), h[:]...) }

// IsZero reports whether h is the zero hash.
func (h Hash) IsZero() bool { return h == Hash{} }

// ParseHash reads a hash written by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("dag: %q is not an entry hash (64 hex digits)", s)
	}
	copy(h[:], b)
	return h, nil
}

// Action is what an entry does.
type Action uint8

// The actions of BaseFS.
const (
	Mkdir  Action = 1 + iota // make a directory (the root entry is a mkdir with no parents)
	Write                    // create or replace a file's content
	Delete                   // remove a path (a directory: with everything under it)
	Revert                   // restore an earlier entry of the same path (content: its hash)
	Grant                    // give a key write permission under the anchor (Ref: the public key)
	Revoke                   // withdraw a grant (Ref: the grant's hash)
	Ack                      // acknowledge entries (Parents[1:]) so they outlive a revocation
	Link                     // a hard link: the path shows another entry's content (content: its hash)
	Slink                    // a symbolic link (content: the target path)
	Mode                     // set or clear the executable bit (content: 1 or 0)
	maxAction
)

var actionNames = [...]string{"", "mkdir", "write", "delete", "revert", "grant", "revoke", "ack", "link", "slink", "mode"}

func (a Action) String() string {
	if a > 0 && a < maxAction {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Kind says where a write's content is.
type Kind uint8

// Where content lives.
const (
	Inline Kind = iota // in the entry's sealed part
	Blocks             // in a chain of blocks; Ref is the first block's hash
	Object             // in a grid object; the sealed content is its read capability
	maxKind
)

// Limits of the encoding. An entry with a short name and small inline
// content is well under 1 KB, one gossip message.
const (
	MaxName    = 255       // bytes in one path component
	MaxParents = 64        // anchor plus superseded or acknowledged entries
	MaxRef     = 64        // clear reference
	MaxSealed  = 16 << 10  // sealed name and content of one entry
	MaxBlock   = 1024      // sealed bytes in one block
	InlineMax  = 512       // content bytes kept inline by default; more goes to blocks
	BlocksMax  = 256 << 10 // content bytes kept in blocks by default; more goes to an object
	entryTag   = 0x01
	blockTag   = 0x81
	sigSize    = 64
)

// Errors of decoding and checking. Checker wraps them with detail.
var (
	ErrMalformed = errors.New("dag: malformed record")
	ErrBadSig    = errors.New("dag: bad signature")
	ErrForbidden = errors.New("dag: signer may not write here")
	ErrRevoked   = errors.New("dag: signer's grant was revoked")
	ErrBadKey    = errors.New("dag: wrong read key or corrupt sealed data")
)

// Entry is one signed log entry. Its zero value is not valid; build one
// with a Writer.
type Entry struct {
	Action  Action
	Kind    Kind
	Parents []Hash // Parents[0] is the anchor (a directory entry); none for a root entry
	Time    HLC    // informative: hybrid logical clock of the writer
	Size    uint64 // content size in bytes (a file's, for writes)
	Signer  Hash   // the grant entry that admitted the signing key; zero: the root key
	Ref     []byte // clear: granted public key, revoked grant, or first block
	Sealed  []byte // name and content, sealed under the read key
	Sig     [sigSize]byte
}

// Anchor is the directory entry this entry hangs from (zero for a root).
func (e *Entry) Anchor() Hash {
	if len(e.Parents) == 0 {
		return Hash{}
	}
	return e.Parents[0]
}

// Supersedes lists the entries after the anchor: the versions of the same
// path this entry replaces (or, for an ack or revoke, acknowledges).
func (e *Entry) Supersedes() []Hash {
	if len(e.Parents) < 2 {
		return nil
	}
	return e.Parents[1:]
}

// IsRoot reports whether e is a root entry: the namespace's top directory.
func (e *Entry) IsRoot() bool { return len(e.Parents) == 0 }

// RefHash is Ref read as a hash (revoke target, first block).
func (e *Entry) RefHash() (h Hash) {
	copy(h[:], e.Ref)
	return h
}

// body appends the signed part of the encoding.
func (e *Entry) body(b []byte) []byte {
	b = append(b, entryTag, byte(e.Action), byte(e.Kind), byte(len(e.Parents)))
	for _, p := range e.Parents {
		b = append(b, p[:]...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(e.Time))
	b = binary.AppendUvarint(b, e.Size)
	if e.Signer.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = append(b, e.Signer[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Ref)))
	b = append(b, e.Ref...)
	b = binary.AppendUvarint(b, uint64(len(e.Sealed)))
	return append(b, e.Sealed...)
}

// Encode is the entry's canonical encoding, signature included.
func (e *Entry) Encode() []byte {
	return e.appendEncoding(make([]byte, 0, 128+32*len(e.Parents)+len(e.Ref)+len(e.Sealed)))
}

func (e *Entry) appendEncoding(b []byte) []byte { return append(e.body(b), e.Sig[:]...) }

// Hash is the entry's content address.
func (e *Entry) Hash() (h Hash) {
	withScratch(func(b []byte) []byte {
		b = e.appendEncoding(b)
		h = blake3.Sum256(b)
		return b
	})
	return h
}

// scratch keeps buffers for encodings that are only hashed or compared
// (an entry is checked and hashed several times on its way into a
// replica; each encoding made afresh was garbage at once).
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// withScratch calls f with an empty scratch buffer; f returns the buffer
// it used (grown, maybe), which must not be kept.
func withScratch(f func([]byte) []byte) {
	bp := scratch.Get().(*[]byte)
	b := f((*bp)[:0])
	if cap(b) <= 64<<10 {
		*bp = b[:0]
		scratch.Put(bp)
	}
}

// signed is what the signature covers: a domain tag, the namespace and the
// body, so an entry cannot be replayed into another namespace.
func (e *Entry) signed(ns NSID) []byte {
	b := append([]byte("quilt namespace entry v1\x00"), ns[:]...)
	return e.body(b)
}

// Block is one piece of a file too big to be inline: sealed bytes and the
// hash of the next block (zero for the last).
type Block struct {
	Next   Hash
	Sealed []byte
}

// Encode is the block's canonical encoding.
func (b *Block) Encode() []byte {
	out := make([]byte, 0, 1+32+3+len(b.Sealed))
	out = append(out, blockTag)
	out = append(out, b.Next[:]...)
	out = binary.AppendUvarint(out, uint64(len(b.Sealed)))
	return append(out, b.Sealed...)
}

// Hash is the block's content address.
func (b *Block) Hash() Hash { return blake3.Sum256(b.Encode()) }

// Record is a decoded record: exactly one of Entry and Block is set.
type Record struct {
	Hash  Hash
	Entry *Entry
	Block *Block
	Raw   []byte // the encoding (the caller's buffer; do not modify)
}

// RawHash is the hash of an encoded record: the hash Decode gives it, if
// it decodes.
func RawHash(raw []byte) Hash { return blake3.Sum256(raw) }

// Decode reads one record. It accepts only the canonical encoding, so a
// record has exactly one hash.
func Decode(raw []byte) (Record, error) {
	r := Record{Hash: RawHash(raw), Raw: raw}
	if len(raw) == 0 {
		return r, fmt.Errorf("%w: empty", ErrMalformed)
	}
	d := decoder{b: raw[1:]}
	switch raw[0] {
	case entryTag:
		e := &Entry{}
		e.Action, e.Kind = Action(d.byte()), Kind(d.byte())
		n := int(d.byte())
		if n > MaxParents {
			return r, fmt.Errorf("%w: %d parents", ErrMalformed, n)
		}
		if n > 0 {
			e.Parents = make([]Hash, n)
		}
		for i := range e.Parents {
			e.Parents[i] = d.hash()
		}
		e.Time = HLC(d.uint64())
		e.Size = d.uvarint()
		switch d.byte() {
		case 0:
		case 1:
			e.Signer = d.hash()
		default:
			d.fail()
		}
		e.Ref = d.bytes(MaxRef)
		e.Sealed = d.bytes(MaxSealed)
		copy(e.Sig[:], d.take(sigSize))
		if d.err || len(d.b) != 0 {
			return r, fmt.Errorf("%w: bad entry encoding", ErrMalformed)
		}
		if err := e.wellFormed(); err != nil {
			return r, err
		}
		canonical := false
		withScratch(func(b []byte) []byte {
			b = e.appendEncoding(b)
			canonical = bytes.Equal(b, raw)
			return b
		})
		if !canonical {
			return r, fmt.Errorf("%w: entry not in canonical form", ErrMalformed)
		}
		r.Entry = e
	case blockTag:
		b := &Block{Next: d.hash(), Sealed: d.bytes(MaxBlock)}
		if d.err || len(d.b) != 0 || len(b.Sealed) == 0 || !bytes.Equal(b.Encode(), raw) {
			return r, fmt.Errorf("%w: bad block encoding", ErrMalformed)
		}
		r.Block = b
	default:
		return r, fmt.Errorf("%w: unknown record type %#x", ErrMalformed, raw[0])
	}
	return r, nil
}

// wellFormed checks what can be checked of an entry alone.
func (e *Entry) wellFormed() error {
	bad := func(why string) error { return fmt.Errorf("%w: %s entry: %s", ErrMalformed, e.Action, why) }
	if e.Action == 0 || e.Action >= maxAction {
		return bad("unknown action")
	}
	if e.Kind >= maxKind || (e.Kind != Inline && e.Action != Write) {
		return bad("bad content kind")
	}
	if e.IsRoot() && (e.Action != Mkdir || !e.Signer.IsZero()) {
		return bad("a root entry must be a mkdir by the root key")
	}
	if len(e.Sealed) > MaxSealed || len(e.Parents) > MaxParents {
		return bad("too big")
	}
	switch {
	case e.Action == Grant && len(e.Ref) != 32:
		return bad("a grant names a 32-byte public key")
	case e.Action == Revoke && len(e.Ref) != 32:
		return bad("a revoke names a grant")
	case e.Kind == Blocks && len(e.Ref) != 32:
		return bad("content in blocks needs the first block's hash")
	case e.Action != Grant && e.Action != Revoke && e.Kind != Blocks && len(e.Ref) != 0:
		return bad("unexpected reference")
	case e.Action == Ack && len(e.Parents) < 2:
		return bad("an ack acknowledges at least one entry")
	}
	return nil
}

// decoder reads fields, remembering the first error.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) fail() { d.err, d.b = true, nil }

func (d *decoder) take(n int) []byte {
	if n < 0 || len(d.b) < n {
		d.fail()
		return make([]byte, max(n, 0))
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte { return d.take(1)[0] }

func (d *decoder) hash() (h Hash) {
	copy(h[:], d.take(32))
	return h
}

func (d *decoder) uint64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(limit int) []byte {
	n := d.uvarint()
	if n > uint64(limit) {
		d.fail()
		return nil
	}
	v := d.take(int(n))
	if len(v) == 0 {
		return nil
	}
	return v
}
