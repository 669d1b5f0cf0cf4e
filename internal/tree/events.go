package tree

import (
	"context"
	"strings"
)

// Kind is what happened to a path.
type Kind int

// The kinds of events.
const (
	KindWrite  Kind = iota + 1 // a file was created or overwritten
	KindMkdir                  // a directory was made
	KindRemove                 // a file or directory (and all under it) was removed
	KindRename                 // Path was renamed to To (with all under it)
	KindAttr                   // mode or modification time changed
	// KindChanged: the store says the object at Path changed, by any
	// writer (S3, another gateway, this tree): a cache drops what it
	// holds of Path (for a directory marker, Path is the directory).
	KindChanged
	// KindOverflow: the subscriber fell behind and events were lost; a
	// cache drops everything.
	KindOverflow
)

func (k Kind) String() string {
	switch k {
	case KindWrite:
		return "write"
	case KindMkdir:
		return "mkdir"
	case KindRemove:
		return "remove"
	case KindRename:
		return "rename"
	case KindAttr:
		return "attr"
	case KindChanged:
		return "changed"
	case KindOverflow:
		return "overflow"
	}
	return "unknown"
}

// Event is a change of the tree, for caches.
type Event struct {
	Kind Kind
	Path string // clean, "" for the root
	To   string // the new path of a rename
}

type sub struct {
	ch   chan Event
	lost bool // events were dropped: send KindOverflow first
}

// Subscribe returns a channel of the tree's events, buffered for buf of
// them, and a function that ends the subscription (and closes the
// channel). The tree sends the events of its own operations once they are
// committed, and KindChanged for every key the store reports changed (by
// any writer, so its own changes come twice). Events never block the
// tree: a subscriber whose buffer is full loses events and then receives
// KindOverflow.
func (t *Tree) Subscribe(buf int) (<-chan Event, func()) {
	s := &sub{ch: make(chan Event, max(buf, 1))}
	t.mu.Lock()
	t.subs[s] = true
	if t.stop == nil {
		// The store watches from here on, before the first event of the
		// subscriber's own operations.
		ctx, cancel := context.WithCancel(context.Background())
		keys, err := t.s.Watch(ctx)
		t.stop = cancel
		go t.watch(keys, err)
	}
	t.mu.Unlock()
	return s.ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.subs[s] {
			return
		}
		delete(t.subs, s)
		close(s.ch)
		if len(t.subs) == 0 && t.stop != nil {
			t.stop()
			t.stop = nil
		}
	}
}

// watch relays the store's changes while there are subscribers.
func (t *Tree) watch(keys <-chan []string, err error) {
	if err != nil {
		t.publish(Event{Kind: KindOverflow})
		return
	}
	for ks := range keys {
		for _, k := range ks {
			t.publish(Event{Kind: KindChanged, Path: strings.TrimSuffix(k, "/")})
		}
	}
}

func (t *Tree) publish(e Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.subs {
		if s.lost {
			select {
			case s.ch <- Event{Kind: KindOverflow}:
				s.lost = false
			default:
				continue
			}
		}
		select {
		case s.ch <- e:
		default:
			s.lost = true
		}
	}
}
