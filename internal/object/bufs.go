package object

import (
	"sync"
	"sync/atomic"
)

// bufList is a free list of buffers of one size, kept for the process's
// uploads (plaintext segments) and reads (blocks, and the room a segment
// is decoded in). Like the codec's segments (see codec.Codec.Release),
// buffers made afresh for every object cost more than they seem: they
// are zeroed, they make garbage the collector must find, and on some
// virtual machines each page touched afresh is a fault in the host. It is
// a channel, not a sync.Pool, because a collection empties a pool, and a
// big transfer runs several.
type bufList struct {
	size int
	free chan []byte
}

// get returns a buffer of the list's size, one given back before if
// there is one.
func (l bufList) get() []byte {
	select {
	case b := <-l.free:
		return b
	default:
		bufsMade.Add(1)
		return make([]byte, l.size)
	}
}

// bufsMade counts the buffers the free lists had to make (for tests).
var bufsMade atomic.Int64

// put gives back a buffer no one uses any more; a buffer of another
// capacity is left to the collector.
func (l bufList) put(b []byte) {
	if cap(b) != l.size {
		return
	}
	select {
	case l.free <- b[:l.size]:
	default:
	}
}

// freeBytes bounds the memory kept in free buffers of one size (at least
// two are kept).
const freeBytes = 32 << 20

var (
	bufMu    sync.Mutex
	bufLists = map[int]bufList{}
)

// freeBufs returns the process's free list of buffers of size bytes.
func freeBufs(size int) bufList {
	bufMu.Lock()
	defer bufMu.Unlock()
	l, ok := bufLists[size]
	if !ok {
		l = bufList{size: size, free: make(chan []byte, max(2, freeBytes/size))}
		bufLists[size] = l
	}
	return l
}
