package tree

import (
	"context"
	"io"
	"time"
)

// Object is what a store holds under one key, without its bytes.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time // when the store wrote this version (S3's LastModified)
	// Meta is the user metadata, keys lower case without a prefix; S3
	// shows it as x-amz-meta-KEY. The tree keeps mode and mtime here.
	Meta map[string]string
}

// Listing is one page of a store's keys.
type Listing struct {
	Objects []Object
	// Prefixes are the common prefixes (each ending with the delimiter)
	// that keys were rolled up into, when a delimiter was given.
	Prefixes []string
	// More says there is more after the last key or prefix of the page.
	More bool
}

// Op is one change of a batch given to Store.Apply. Exactly one of three:
//
//   - a copy (From set): Key gets From's object by reference, its bytes
//     never read or written again, with Meta instead of From's metadata
//     if Meta is not nil;
//   - a delete (Delete set): Key is removed (no error if absent);
//   - an empty object (neither): Key gets zero bytes and Meta (the tree's
//     directory markers).
type Op struct {
	Key    string
	From   string
	Delete bool
	Meta   map[string]string
}

// Store is what the tree needs of an object namespace (a gateway bucket,
// or the in-memory MemStore): flat keys of UTF-8 in byte order, each an
// object with metadata. Errors for a missing key wrap fs.ErrNotExist.
type Store interface {
	// Stat returns the object at key.
	Stat(ctx context.Context, key string) (Object, error)
	// List returns up to limit objects (and common prefixes) whose keys
	// start with prefix and sort after after, in byte order. With a
	// delimiter, keys that hold it after the prefix are rolled up into
	// one common prefix each, and an after that is such a prefix resumes
	// past every key under it (S3's ListObjects).
	List(ctx context.Context, prefix, delimiter, after string, limit int) (Listing, error)
	// Open reads length bytes of key's object from off (length < 0: to
	// the end), streaming.
	Open(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Put stores the bytes of r (size bytes, or -1 if unknown) under key
	// with metadata meta, replacing what was there.
	Put(ctx context.Context, key string, r io.Reader, size int64, meta map[string]string) (Object, error)
	// Apply commits a batch of copies by reference, deletes and empty
	// objects together, as few commits as the store can make it: the
	// copies and empty objects first, then the deletes, so a batch cut
	// short leaves extra keys, never lost ones. A copy from a missing
	// key fails the batch before anything is written.
	Apply(ctx context.Context, ops []Op) error
	// Watch sends the keys that change, by any writer, from the moment it
	// returns (it must not wait) until ctx ends; then it closes the
	// channel. A key may be sent more than once, and
	// a watcher that does not keep up may miss some (see Tree.Subscribe).
	Watch(ctx context.Context) (<-chan []string, error)
}
