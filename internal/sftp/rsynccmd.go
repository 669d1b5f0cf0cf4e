package sftp

import (
	"bufio"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// rsyncCommand is an "rsync --server" command line as a client's rsync
// sends it through ssh, parsed, with its paths confined to the user's
// bucket.
type rsyncCommand struct {
	// sender: the server sends (a download); else it receives.
	sender bool
	// opts are the options, as sent ("--server" first).
	opts []string
	// args are the path arguments rewritten inside the bucket: relative
	// to its root ("./x/y"), keeping a trailing "/" and "/./" markers
	// (rsync's --relative), never above the root.
	args []string
	// scopes are the tree paths the arguments name (clean, no leading
	// "/", "" for the root): what is copied to the staging directory.
	scopes []string
	// globs are, for a download, the arguments with wildcards (a
	// path.Match pattern of the tree path, by index in args), to expand
	// on the tree as the shell of an sshd would (expand).
	globs map[int]string
	// partial: options that write a file in place or keep a partial one
	// (--partial, --partial-dir, --inplace, --append).
	partial bool
	// inPlace: options that write into existing files (--inplace,
	// --append).
	inPlace bool
	// secluded: -s (--secluded-args): the options after the command
	// line's and the paths come on the channel (readSecluded); the rsync
	// run is given them on its command line instead.
	secluded bool
	// sizesOnly: an upload whose options only compare sizes and times of
	// the files already there and, for the files it replaces, read them
	// as the basis of a delta (lazySafe): their bytes need not be staged.
	sizesOnly bool
}

// Errors of a command that is not served.
var (
	// ErrNotServed is a command other than "rsync --server".
	ErrNotServed = errors.New("sftp: only the sftp subsystem and rsync (rsync --server) are served")
	// ErrRsyncOption is an rsync option the server refuses.
	ErrRsyncOption = errors.New("sftp: rsync option not served")
)

// parseRsync parses the command of an SSH exec request. It accepts only
// "rsync --server [--sender] OPTIONS . PATH...", as rsync sends it (its
// arguments escaped with backslashes since rsync 3.2.4, or quoted), or
// "rsync --server [--sender] -s... OPTIONS", whose other options and paths
// follow on the channel (readSecluded).
func parseRsync(cmdline string) (*rsyncCommand, error) {
	ws, err := splitCommand(cmdline)
	if err != nil {
		return nil, err
	}
	if len(ws) < 2 || path.Base(ws[0].s) != "rsync" || ws[1].s != "--server" {
		return nil, ErrNotServed
	}
	c := &rsyncCommand{sizesOnly: true}
	i := 1
	for ; i < len(ws) && ws[i].s != "."; i++ {
		if err := c.option(ws[i].s); err != nil {
			return nil, err
		}
	}
	if c.secluded {
		if i < len(ws) {
			return nil, fmt.Errorf("sftp: rsync: -s with paths on the command line")
		}
		return c, nil
	}
	if i == len(ws) {
		return nil, fmt.Errorf("sftp: rsync: no \".\" after the options")
	}
	c.addPaths(ws[i+1:])
	return c, nil
}

// option takes one option of the server's command line.
func (c *rsyncCommand) option(o string) error {
	if !strings.HasPrefix(o, "-") || o == "-" {
		return fmt.Errorf("sftp: rsync: %q before the \".\" that ends the options", o)
	}
	name, _, _ := strings.Cut(o, "=")
	switch {
	case name == "--sender":
		c.sender = true
		c.sizesOnly = false
	case name == "--daemon" || name == "--config" || name == "--dparam" || name == "-M":
		return fmt.Errorf("%w: %s (no rsync daemon here)", ErrRsyncOption, name)
	case name == "--protect-args" || name == "--secluded-args":
		c.secluded = true
		return nil // the server reads the arguments itself
	case name == "--partial" || name == "--partial-dir":
		c.partial = true
	case name == "--inplace" || name == "--append" || name == "--append-verify":
		c.partial, c.inPlace = true, true
	case !strings.HasPrefix(o, "--"):
		// A cluster of short options; "e" starts the client's
		// capabilities, which run to its end.
		short, caps, hasCaps := strings.Cut(o[1:], "e")
		if strings.ContainsRune(short, 's') {
			c.secluded = true
			short = strings.ReplaceAll(short, "s", "")
			if o = "-" + short; hasCaps {
				o += "e" + caps
			}
			if o == "-" {
				return nil
			}
		}
		if strings.ContainsRune(short, 'P') {
			c.partial = true
		}
	}
	if !lazySafe(o) {
		c.sizesOnly = false
	}
	c.opts = append(c.opts, o)
	return nil
}

// addPaths takes the path arguments: confined to the bucket, and for a
// download, those with wildcards marked for expand.
func (c *rsyncCommand) addPaths(ws []word) {
	if len(ws) == 0 {
		ws = []word{{s: "."}}
	}
	for _, w := range ws {
		arg, scope := confine(w.s)
		// The pattern confined as the path; "/./" (--relative) is not
		// expanded.
		if w.glob != "" && c.sender && !strings.Contains(w.glob, "/./") {
			_, gscope := confine(w.glob)
			if c.globs == nil {
				c.globs = map[int]string{}
			}
			c.globs[len(c.args)] = gscope
		}
		c.args = append(c.args, arg)
		c.scopes = append(c.scopes, scope)
	}
}

// maxSecluded bounds the arguments read from the channel.
const maxSecluded = 1 << 20

// readSecluded reads the arguments a client with -s (--secluded-args)
// sends first on the channel: "rsync", options, ".", paths, each ending
// in a NUL, and an empty one after the last. rsync's server expands the
// paths' wildcards itself, so a path with one is a pattern (a backslash
// quotes).
func (c *rsyncCommand) readSecluded(r *bufio.Reader) error {
	var args []string
	n := 0
	for {
		a, err := r.ReadString(0)
		if err != nil {
			return fmt.Errorf("sftp: rsync: reading the arguments of -s: %w", err)
		}
		if n += len(a); n > maxSecluded {
			return fmt.Errorf("sftp: rsync: the arguments of -s pass %d bytes", maxSecluded)
		}
		a = a[:len(a)-1]
		if a == "" {
			break
		}
		args = append(args, a)
	}
	if len(args) == 0 || path.Base(args[0]) != "rsync" {
		return fmt.Errorf("sftp: rsync: the arguments of -s do not start with rsync")
	}
	i := 1
	for ; i < len(args) && args[i] != "."; i++ {
		if err := c.option(args[i]); err != nil {
			return err
		}
	}
	if i == len(args) {
		return fmt.Errorf("sftp: rsync: no \".\" after the options of -s")
	}
	ws := make([]word, 0, len(args)-i-1)
	for _, a := range args[i+1:] {
		w := word{s: a}
		if hasMeta(a) {
			w.s, w.glob = unescape(a), a
		}
		ws = append(ws, w)
	}
	c.addPaths(ws)
	return nil
}

// lazySafe reports whether an rsync option (of the receiving server)
// leaves the bytes of the files already at the destination unread except
// as the basis of a delta, and unused once rsync has replaced them (by a
// new file, renamed into place). Then a staged file may hold zeros of its
// size instead of its bytes: rsync's quick check reads only sizes and
// times, and a delta against zeros still builds the right file (rsync
// checks the whole file's checksum). Not so for --checksum (-c), which
// compares the bytes; --append and --inplace, which keep them; --backup
// (-b), --link-dest, --copy-dest and hard links (-H), which keep or reuse
// the old file; and any option not known here.
func lazySafe(o string) bool {
	if !strings.HasPrefix(o, "--") {
		short, _, _ := strings.Cut(o[1:], "e")
		for _, r := range short {
			if !strings.ContainsRune("vqlogDtprRxzSuWOJmIykKEdinh", r) {
				return false
			}
		}
		return true
	}
	name, _, _ := strings.Cut(o[2:], "=")
	switch name {
	case "server", "delete", "delete-before", "delete-during", "delete-delay", "delete-after",
		"delete-excluded", "delete-missing-args", "ignore-missing-args", "force", "max-delete",
		"size-only", "modify-window", "timeout", "partial", "partial-dir", "delay-updates",
		"existing", "ignore-existing", "min-size", "max-size", "mkpath", "numeric-ids",
		"compress-choice", "compress-level", "checksum-choice", "ignore-errors", "omit-dir-times",
		"omit-link-times", "bwlimit", "no-implied-dirs", "safe-links", "munge-links", "chmod",
		"prune-empty-dirs", "fuzzy", "info", "debug", "log-format", "sparse", "preallocate",
		"whole-file", "no-whole-file", "stats", "msgs2stderr", "no-msgs2stderr", "stop-after",
		"stop-at", "max-alloc", "block-size", "checksum-seed", "no-r", "no-relative", "no-W":
		return true
	}
	return false
}

// hasMeta reports whether pattern p has a wildcard not escaped.
func hasMeta(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// unescape removes a pattern's escapes.
func unescape(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// expandGlob lists the tree paths pattern matches, one element at a time
// as a shell does (a wildcard does not match a leading "." or a "/"),
// sorted; none is nil. readDir lists a directory's names.
func expandGlob(pattern string, readDir func(dir string) ([]string, error)) []string {
	cur := []string{""}
	for _, el := range strings.Split(pattern, "/") {
		var next []string
		for _, d := range cur {
			if !hasMeta(el) {
				next = append(next, path.Join(d, unescape(el)))
				continue
			}
			names, err := readDir(d)
			if err != nil {
				continue
			}
			for _, n := range names {
				if strings.HasPrefix(n, ".") && !strings.HasPrefix(el, ".") {
					continue
				}
				if ok, _ := path.Match(el, n); ok {
					next = append(next, path.Join(d, n))
				}
			}
		}
		cur = next
	}
	slices.Sort(cur)
	return cur
}

// expand replaces each argument with wildcards by the tree paths it
// matches that exist (directories only for one that ends in "/"), as the
// shell of an sshd would; one that matches nothing stays as it is (rsync
// then says it does not exist). stat tells whether p exists and is a
// directory.
func (c *rsyncCommand) expand(readDir func(dir string) ([]string, error), stat func(p string) (exists, dir bool)) {
	if len(c.globs) == 0 {
		return
	}
	var args, scopes []string
	for i, a := range c.args {
		g, ok := c.globs[i]
		var ms []string
		if ok {
			for _, m := range expandGlob(g, readDir) {
				if ok, dir := stat(m); ok && (dir || !strings.HasSuffix(a, "/")) {
					ms = append(ms, m)
				}
			}
		}
		if len(ms) == 0 {
			args, scopes = append(args, a), append(scopes, c.scopes[i])
			continue
		}
		for _, m := range ms {
			arg := "./" + m
			if strings.HasSuffix(a, "/") {
				arg += "/"
			}
			args, scopes = append(args, arg), append(scopes, m)
		}
	}
	c.args, c.scopes, c.globs = args, scopes, nil
}

// confine maps a path the client named to the same path in the bucket:
// "/" and "~" are the bucket's root, ".." stops at it. It returns the
// argument for the rsync that runs in the staging directory ("./x/y",
// with a trailing "/" and "/./" markers kept) and the tree path.
func confine(p string) (arg, scope string) {
	switch {
	case p == "~":
		p = "/"
	case strings.HasPrefix(p, "~/"):
		p = p[1:]
	}
	trailing := strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || p == "."
	parts := strings.Split(p, "/./")
	var out, tp []string
	for _, q := range parts {
		c := strings.TrimPrefix(path.Clean("/"+q), "/")
		if c == "" {
			continue
		}
		out = append(out, c)
		tp = append(tp, c)
	}
	scope = path.Clean("/" + strings.Join(tp, "/"))[1:]
	arg = "./" + strings.Join(out, "/./")
	if len(out) == 0 {
		arg = "."
	}
	if trailing && arg != "." {
		arg += "/"
	}
	return arg, scope
}

// word is one word of a command line: s, and if it has wildcards not
// quoted, glob, the word as a path.Match pattern (quoted wildcards
// escaped).
type word struct{ s, glob string }

// splitCommand splits a command line into words as a POSIX shell does
// for plain words: blanks separate, a backslash quotes the next
// character, '…' and "…" quote (in "…", a backslash quotes only $ ` " \
// and a newline). Wildcards (* ? [) not quoted are marked for expand.
// Other expansions are not done: $, ` or an operator (; | & < > ( ))
// not quoted is an error, since no shell runs.
func splitCommand(s string) ([]word, error) {
	var words []word
	var w, pat strings.Builder
	in, glob := false, false // inside a word; it has a wildcard
	// lit adds a quoted character.
	lit := func(b byte) {
		w.WriteByte(b)
		if strings.IndexByte("*?[\\", b) >= 0 {
			pat.WriteByte('\\')
		}
		pat.WriteByte(b)
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				x := word{s: w.String()}
				if glob {
					x.glob = pat.String()
				}
				words = append(words, x)
				w.Reset()
				pat.Reset()
				in, glob = false, false
			}
		case ch == '\\':
			in = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					lit(s[i])
				}
			}
		case ch == '\'':
			in = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("sftp: command: unterminated '")
			}
			for k := i + 1; k < i+1+j; k++ {
				lit(s[k])
			}
			i += 1 + j
		case ch == '"':
			in = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return nil, fmt.Errorf("sftp: command: %q: no shell here to expand it", s[i])
				}
				lit(s[i])
			}
			if i == len(s) {
				return nil, errors.New("sftp: command: unterminated \"")
			}
		case strings.IndexByte("$`;|&<>()", ch) >= 0:
			return nil, fmt.Errorf("sftp: command: %q: no shell here to run it (quote it)", ch)
		case ch == '*' || ch == '?' || ch == '[':
			in, glob = true, true
			w.WriteByte(ch)
			pat.WriteByte(ch)
		default:
			in = true
			w.WriteByte(ch)
			pat.WriteByte(ch)
		}
	}
	if in {
		x := word{s: w.String()}
		if glob {
			x.glob = pat.String()
		}
		words = append(words, x)
	}
	return words, nil
}
