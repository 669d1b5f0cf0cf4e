package sftp

import (
	"errors"
	"fmt"
	"path"
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
	// partial: options that write a file in place or keep a partial one
	// (--partial, --partial-dir, --inplace, --append).
	partial bool
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
// arguments escaped with backslashes since rsync 3.2.4, or quoted).
func parseRsync(cmdline string) (*rsyncCommand, error) {
	w, err := splitCommand(cmdline)
	if err != nil {
		return nil, err
	}
	if len(w) < 2 || path.Base(w[0]) != "rsync" || w[1] != "--server" {
		return nil, ErrNotServed
	}
	c := &rsyncCommand{}
	i := 1
	for ; i < len(w) && w[i] != "."; i++ {
		o := w[i]
		if !strings.HasPrefix(o, "-") {
			return nil, fmt.Errorf("sftp: rsync: %q before the \".\" that ends the options", o)
		}
		name, _, _ := strings.Cut(o, "=")
		switch {
		case name == "--sender":
			c.sender = true
		case name == "--daemon" || name == "--config" || name == "--dparam" || name == "-M":
			return nil, fmt.Errorf("%w: %s (no rsync daemon here)", ErrRsyncOption, name)
		case name == "--protect-args" || name == "--secluded-args":
			return nil, fmt.Errorf("%w: %s: the paths must be on the command line (leave out -s)", ErrRsyncOption, name)
		case name == "--partial" || name == "--partial-dir" || name == "--inplace" || name == "--append" || name == "--append-verify":
			c.partial = true
		case !strings.HasPrefix(o, "--"):
			// A cluster of short options; "e" starts the client's
			// capabilities, which run to its end.
			short, _, _ := strings.Cut(o[1:], "e")
			if strings.ContainsRune(short, 's') {
				return nil, fmt.Errorf("%w: -s (--secluded-args): the paths must be on the command line (leave out -s)", ErrRsyncOption)
			}
			if strings.ContainsRune(short, 'P') {
				c.partial = true
			}
		}
		c.opts = append(c.opts, o)
	}
	if i == len(w) {
		return nil, fmt.Errorf("sftp: rsync: no \".\" after the options")
	}
	paths := w[i+1:]
	if len(paths) == 0 {
		paths = []string{"."}
	}
	for _, p := range paths {
		arg, scope := confine(p)
		c.args = append(c.args, arg)
		c.scopes = append(c.scopes, scope)
	}
	return c, nil
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

// splitCommand splits a command line into words as a POSIX shell does
// for plain words: blanks separate, a backslash quotes the next
// character, '…' and "…" quote (in "…", a backslash quotes only $ ` " \
// and a newline). Expansions are not done: a word with $, `, a glob or an
// operator (; | & < > ( )) unquoted is an error, since no shell runs.
func splitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case ch == '\\':
			in = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					w.WriteByte(s[i])
				}
			}
		case ch == '\'':
			in = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("sftp: command: unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
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
				w.WriteByte(s[i])
			}
			if i == len(s) {
				return nil, errors.New("sftp: command: unterminated \"")
			}
		case strings.IndexByte("$`;|&<>()*?[", ch) >= 0:
			return nil, fmt.Errorf("sftp: command: %q: no shell here to expand it (quote it)", ch)
		default:
			in = true
			w.WriteByte(ch)
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}
