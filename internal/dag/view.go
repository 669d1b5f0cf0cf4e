package dag

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
)

// Rules chooses how concurrent versions of a path are decided.
type Rules uint8

const (
	// ConfigRules are BaseFS's, for configuration: incomplete writes are
	// ignored; then the branch whose signer has higher authority wins;
	// then the branch with more distinct contributors; then the higher
	// hash.
	ConfigRules Rules = iota
	// ObjectRules are for object namespaces (buckets): incomplete writes
	// are ignored; then higher authority; then the later timestamp (last
	// writer wins); then the higher hash.
	ObjectRules
)

// Version is one entry of a path, opened with the read key.
type Version struct {
	Hash      Hash
	Entry     *Entry
	Path      string // the path the entry names
	Content   []byte // inline content, object capability, link or revert target, mode
	Authority int    // of its signer (Checker.Authority): lower wins
	SignerKey string // the signer's public key (contributors are counted by key)
	Complete  bool   // its content is all here (false for a write whose blocks are missing)
}

// Resolve returns the current version of a path among all its versions
// (nil if there are none). The versions are those of one path; entries
// outside the slice are ignored. The result depends only on the set, not
// on its order.
func Resolve(vs []*Version, rules Rules) *Version {
	live := make(map[Hash]*Version, len(vs))
	for _, v := range vs {
		if v.Complete {
			live[v.Hash] = v
		}
	}
	superseded := map[Hash]bool{}
	for _, v := range live {
		for _, p := range v.Entry.Supersedes() {
			if _, ok := live[p]; ok && p != v.Hash {
				superseded[p] = true
			}
		}
	}
	var best *Version
	bestContrib := 0
	for _, v := range live {
		if superseded[v.Hash] {
			continue
		}
		c := 0
		if rules == ConfigRules {
			c = contributors(v, live)
		}
		if best == nil || better(v, c, best, bestContrib, rules) {
			best, bestContrib = v, c
		}
	}
	return best
}

// better reports whether head a beats head b.
func better(a *Version, ac int, b *Version, bc int, rules Rules) bool {
	if a.Authority != b.Authority {
		return a.Authority < b.Authority
	}
	if rules == ConfigRules && ac != bc {
		return ac > bc
	}
	if rules == ObjectRules && a.Entry.Time != b.Entry.Time {
		return a.Entry.Time > b.Entry.Time
	}
	return bytes.Compare(a.Hash[:], b.Hash[:]) > 0
}

// contributors counts the distinct signers of a head and the versions it
// supersedes, directly or not.
func contributors(head *Version, live map[Hash]*Version) int {
	signers := map[string]bool{}
	seen := map[Hash]bool{head.Hash: true}
	stack := []*Version{head}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		signers[v.SignerKey] = true
		for _, p := range v.Entry.Supersedes() {
			if pv, ok := live[p]; ok && !seen[p] {
				seen[p] = true
				stack = append(stack, pv)
			}
		}
	}
	return len(signers)
}

// Type is what a path is.
type Type uint8

// Path types.
const (
	Absent Type = iota
	Dir
	File
	Symlink
)

func (t Type) String() string { return [...]string{"absent", "dir", "file", "symlink"}[t] }

// State is what a path shows.
type State struct {
	Type    Type
	Current Hash     // the entry that decided it
	Data    *Version // for a file: the write whose content it shows; for a directory: its mkdir
	Exec    bool     // executable bit
	Target  string   // for a symlink
	Size    uint64
	Time    HLC // of the current entry
}

// StateOf follows a current version to what the path shows: a revert to
// the entry it restores, a hard link to its target, a mode change to the
// version it changes. find looks versions up by hash (any path); a
// missing one makes the path absent.
func StateOf(v *Version, find func(Hash) *Version) State {
	st := State{Current: v.Hash, Time: v.Entry.Time}
	exec := -1 // unset
	for range 1024 {
		if v == nil {
			return State{Current: st.Current, Time: st.Time}
		}
		switch v.Entry.Action {
		case Mkdir:
			st.Type, st.Data = Dir, v
		case Write:
			st.Type, st.Data, st.Size = File, v, v.Entry.Size
			if exec < 0 {
				exec = execOf(v, find)
			}
			st.Exec = exec == 1
		case Slink:
			st.Type, st.Target = Symlink, string(v.Content)
		case Delete:
			st.Type = Absent
		case Revert, Link:
			// The target must be among the entry's parents, so it is
			// always there when the entry is: the view cannot depend on
			// the order of arrival.
			var h Hash
			copy(h[:], v.Content)
			if len(v.Content) != len(h) || !slices.Contains(v.Entry.Supersedes(), h) {
				return State{Current: st.Current, Time: st.Time}
			}
			v = find(h)
			continue
		case Mode:
			if exec < 0 {
				exec = 0
				if len(v.Content) > 0 && v.Content[0] == 1 {
					exec = 1
				}
			}
			v = find(prev(v))
			continue
		}
		return st
	}
	return State{Current: st.Current, Time: st.Time}
}

// execOf finds the executable bit a write inherits from the versions it
// supersedes (the nearest mode change).
func execOf(v *Version, find func(Hash) *Version) int {
	for range 1024 {
		p := prev(v)
		if p.IsZero() {
			return 0
		}
		if v = find(p); v == nil {
			return 0
		}
		if v.Entry.Action == Mode {
			if len(v.Content) > 0 && v.Content[0] == 1 {
				return 1
			}
			return 0
		}
		if v.Entry.Action == Delete {
			return 0
		}
	}
	return 0
}

// prev is the first version an entry supersedes (zero if none).
func prev(v *Version) Hash {
	if len(v.Entry.Parents) < 2 {
		return Hash{}
	}
	return v.Entry.Parents[1]
}

// Tree is a whole view, built from scratch: the reference for tests and
// for checking a materialised view.
type Tree struct {
	Paths    map[string]State      // every path that exists
	Versions map[string][]*Version // every path's versions, oldest first
}

// BuildTree opens every entry of a log with key and resolves every path.
// Entries that do not open (another key) are skipped.
func BuildTree(l *Log, ns NSID, key ReadKey, rules Rules) *Tree {
	c := Checker{NS: ns, Index: l}
	byHash := map[Hash]*Version{}
	paths := map[Hash]string{}
	var pathOf func(h Hash, depth int) (string, bool)
	pathOf = func(h Hash, depth int) (string, bool) {
		if p, ok := paths[h]; ok {
			return p, true
		}
		e, ok := l.Entry(h)
		if !ok || depth > 4096 {
			return "", false
		}
		name, _, err := key.Open(e.Sealed)
		if err != nil {
			return "", false
		}
		if e.IsRoot() {
			paths[h] = "/"
			return "/", true
		}
		dir, ok := pathOf(e.Anchor(), depth+1)
		if !ok {
			return "", false
		}
		p, ok := JoinName(dir, name, rules)
		if !ok {
			return "", false
		}
		paths[h] = p
		return p, true
	}
	t := &Tree{Paths: map[string]State{}, Versions: map[string][]*Version{}}
	l.Each(func(h Hash, e *Entry) {
		if e.Action == Grant || e.Action == Revoke || e.Action == Ack {
			return
		}
		p, ok := pathOf(h, 0)
		if !ok {
			return
		}
		_, content, _ := key.Open(e.Sealed)
		v := &Version{Hash: h, Entry: e, Path: p, Content: content,
			Authority: c.Authority(e.Signer), SignerKey: c.SignerKey(e.Signer), Complete: complete(l, e)}
		byHash[h] = v
		t.Versions[p] = append(t.Versions[p], v)
	})
	find := func(h Hash) *Version { return byHash[h] }
	for p, vs := range t.Versions {
		slices.SortFunc(vs, func(a, b *Version) int {
			return cmpVersions(a, b)
		})
		if w := Resolve(vs, rules); w != nil {
			if st := StateOf(w, find); st.Type != Absent {
				t.Paths[p] = st
			}
		}
	}
	// A path shows only if every directory above it does.
	for p := range t.Paths {
		for d := ParentDir(p, rules); d != ""; d = ParentDir(d, rules) {
			if t.Paths[d].Type != Dir {
				delete(t.Paths, p)
				break
			}
		}
	}
	return t
}

// Children lists the names directly under dir, sorted.
func (t *Tree) Children(dir string) []string {
	var out []string
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for p := range t.Paths {
		if p != "/" && strings.HasPrefix(p, prefix) && !strings.Contains(p[len(prefix):], "/") {
			out = append(out, p[len(prefix):])
		}
	}
	slices.Sort(out)
	return out
}

// cmpVersions orders versions by time, then hash: history order.
func cmpVersions(a, b *Version) int {
	if c := cmp.Compare(a.Entry.Time, b.Entry.Time); c != 0 {
		return c
	}
	return bytes.Compare(a.Hash[:], b.Hash[:])
}

// complete reports whether a write's blocks are all in the log.
func complete(l *Log, e *Entry) bool {
	if e.Kind != Blocks {
		return true
	}
	for h, n := e.RefHash(), 0; !h.IsZero(); n++ {
		b, ok := l.Block(h)
		if !ok || n > 1<<20 {
			return false
		}
		h = b.Next
	}
	return true
}
