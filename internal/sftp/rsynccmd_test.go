package sftp

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestRsyncCommand: the exec commands served and refused, and how their
// paths are confined to the bucket.
func TestRsyncCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd     string
		sender  bool
		args    []string
		scopes  []string
		partial bool
		globs   map[int]string
		err     error // nil: accepted; errAny: any error
	}{
		{cmd: `rsync --server -vlogDtprce.iLsfxCIvu . /up/`, args: []string{"./up/"}, scopes: []string{"up"}},
		{cmd: `rsync --server --sender -logDtprce.iLsfxCIvu . /up/ /b`, sender: true, args: []string{"./up/", "./b"}, scopes: []string{"up", "b"}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu --delete . .`, args: []string{"."}, scopes: []string{""}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu .`, args: []string{"."}, scopes: []string{""}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /`, args: []string{"."}, scopes: []string{""}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . ~/x`, args: []string{"./x"}, scopes: []string{"x"}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . ~`, args: []string{"."}, scopes: []string{""}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . ../../etc/passwd`, args: []string{"./etc/passwd"}, scopes: []string{"etc/passwd"}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /a/../../b/./c/../d/`, args: []string{"./b/./d/"}, scopes: []string{"b/d"}},
		{cmd: `rsync --server --sender -logDtpRe.iLsfxCIvu . /a/./../../x`, sender: true, args: []string{"./a/./x"}, scopes: []string{"a/x"}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /with\ space/it\'s`, args: []string{"./with space/it's"}, scopes: []string{"with space/it's"}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . '/quoted dir/x' "/d q"`, args: []string{"./quoted dir/x", "./d q"}, scopes: []string{"quoted dir/x", "d q"}},
		{cmd: `/usr/bin/rsync --server -logDtpre.iLsfxCIvu --partial . /x`, args: []string{"./x"}, scopes: []string{"x"}, partial: true},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu --inplace . /x`, args: []string{"./x"}, scopes: []string{"x"}, partial: true},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu --partial-dir=.p . /x`, args: []string{"./x"}, scopes: []string{"x"}, partial: true},
		// The capabilities after "e" are not options: "s" there is not -s.
		{cmd: `rsync --server -le.s . /x`, args: []string{"./x"}, scopes: []string{"x"}},

		{cmd: `ls /`, err: ErrNotServed},
		{cmd: `rsync --version`, err: ErrNotServed},
		{cmd: `sh -c 'rsync --server . x'`, err: ErrNotServed},
		{cmd: ``, err: ErrNotServed},
		{cmd: `rsync --server --daemon .`, err: ErrRsyncOption},
		{cmd: `rsync --server --config=/etc/x --daemon .`, err: ErrRsyncOption},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu . /x`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /x; rm -rf /`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . $HOME`, err: errAny},
		{cmd: "rsync --server -logDtpre.iLsfxCIvu . `id`", err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . "$(id)"`, err: errAny},
		// Wildcards: a download's are expanded on the tree (expand); an
		// upload's destination is a name.
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /x/*`, args: []string{"./x/*"}, scopes: []string{"x/*"}},
		{cmd: `rsync --server --sender -logDtpre.iLsfxCIvu . /x/*.txt /y\*/[ab]/`, sender: true,
			args: []string{"./x/*.txt", "./y*/[ab]/"}, scopes: []string{"x/*.txt", "y*/[ab]"},
			globs: map[int]string{0: "x/*.txt", 1: `y\*/[ab]`}},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . 'unterminated`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu /x`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu x . y`, err: errAny},
	} {
		c, err := parseRsync(tc.cmd)
		switch {
		case tc.err == errAny && err == nil, tc.err == nil && err != nil,
			tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
			t.Errorf("%s: error %v, want %v", tc.cmd, err, tc.err)
			continue
		case err != nil:
			continue
		}
		if c.sender != tc.sender || !slices.Equal(c.args, tc.args) || !slices.Equal(c.scopes, tc.scopes) || c.partial != tc.partial ||
			!maps.Equal(c.globs, tc.globs) {
			t.Errorf("%s: sender %v args %q scopes %q partial %v globs %v; want %v %q %q %v %v",
				tc.cmd, c.sender, c.args, c.scopes, c.partial, c.globs, tc.sender, tc.args, tc.scopes, tc.partial, tc.globs)
		}
	}
}

var errAny = errors.New("any error")

// TestRsyncGlob: wildcards of a download expand on the tree as a shell's
// would, element by element; a quoted one is a plain character.
func TestRsyncGlob(t *testing.T) {
	dirs := map[string][]string{
		"":     {".hidden", "a.txt", "b.txt", "c.jpg", "d", "y*"},
		"d":    {"e.txt", "f"},
		"d/f":  {"g.txt"},
		"y*":   {"a", "b", "c"},
		"y*/a": {"z"},
	}
	stat := func(p string) (bool, bool) {
		d, n := "", p
		if i := strings.LastIndex(p, "/"); i >= 0 {
			d, n = p[:i], p[i+1:]
		}
		_, dir := dirs[p]
		return slices.Contains(dirs[d], n), dir
	}
	readDir := func(d string) ([]string, error) {
		if n, ok := dirs[d]; ok {
			return n, nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tc := range []struct {
		cmd    string
		args   []string
		scopes []string
	}{
		{`rsync --server --sender -le. . /*.txt`, []string{"./a.txt", "./b.txt"}, []string{"a.txt", "b.txt"}},
		{`rsync --server --sender -le. . /*`, []string{"./a.txt", "./b.txt", "./c.jpg", "./d", "./y*"}, []string{"a.txt", "b.txt", "c.jpg", "d", "y*"}},
		{`rsync --server --sender -le. . /.h*`, []string{"./.hidden"}, []string{".hidden"}},
		{`rsync --server --sender -le. . /*/*.txt /d/*/`, []string{"./d/e.txt", "./d/f/"}, []string{"d/e.txt", "d/f"}},
		{`rsync --server --sender -le. . /../*.jpg`, []string{"./c.jpg"}, []string{"c.jpg"}},
		{`rsync --server --sender -le. . /y\*/[ab]`, []string{"./y*/a", "./y*/b"}, []string{"y*/a", "y*/b"}},
		{`rsync --server --sender -le. . '/y*'`, []string{"./y*"}, []string{"y*"}},
		{`rsync --server --sender -le. . /*.png /d`, []string{"./*.png", "./d"}, []string{"*.png", "d"}},
		{`rsync --server --sender -le. . /*/z`, []string{"./*/z"}, []string{"*/z"}},
		{`rsync --server --sender -le. . /*/a/z`, []string{"./y*/a/z"}, []string{"y*/a/z"}},
		{`rsync --server --sender -le. . /*/`, []string{"./d/", "./y*/"}, []string{"d", "y*"}},
	} {
		c, err := parseRsync(tc.cmd)
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		c.expand(readDir, stat)
		if !slices.Equal(c.args, tc.args) || !slices.Equal(c.scopes, tc.scopes) {
			t.Errorf("%s: args %q scopes %q, want %q %q", tc.cmd, c.args, c.scopes, tc.args, tc.scopes)
		}
	}
}

// TestRsyncSecluded: with -s, the options and paths come on the channel
// after the command, NUL-terminated; the bytes after them are rsync's.
func TestRsyncSecluded(t *testing.T) {
	for _, tc := range []struct {
		cmd, in string
		sender  bool
		opts    []string
		args    []string
		globs   map[int]string
		rest    string
		err     bool
	}{
		{cmd: `rsync --server --sender -slogDtprce.iLsfxCIvu`, in: "rsync\x00.\x00/a b/*.txt\x00../../c\x00\x00 \x00\x00\x00",
			sender: true, opts: []string{"--server", "--sender", "-logDtprce.iLsfxCIvu"}, args: []string{"./a b/*.txt", "./c"},
			globs: map[int]string{0: "a b/*.txt"}, rest: " \x00\x00\x00"},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu`, in: "rsync\x00--delete\x00.\x00/d e/\x00\x00",
			opts: []string{"--server", "-logDtpre.iLsfxCIvu", "--delete"}, args: []string{"./d e/"}},
		{cmd: `rsync --server -s`, in: "rsync\x00-logDtpre.iLsfxCIvu\x00.\x00x\x00\x00",
			opts: []string{"--server", "-logDtpre.iLsfxCIvu"}, args: []string{"./x"}},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu`, in: "rsync\x00--daemon\x00.\x00x\x00\x00", err: true},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu`, in: "sh\x00.\x00x\x00\x00", err: true},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu`, in: "rsync\x00x\x00\x00", err: true},
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu`, in: "rsync\x00.\x00x", err: true},
	} {
		c, err := parseRsync(tc.cmd)
		if err != nil || !c.secluded {
			t.Fatalf("%s: %v, secluded %v", tc.cmd, err, c != nil && c.secluded)
		}
		r := bufio.NewReader(strings.NewReader(tc.in))
		err = c.readSecluded(r)
		if tc.err {
			if err == nil {
				t.Errorf("%s %q: no error", tc.cmd, tc.in)
			}
			continue
		}
		rest, _ := io.ReadAll(r)
		if err != nil || c.sender != tc.sender || !slices.Equal(c.opts, tc.opts) || !slices.Equal(c.args, tc.args) ||
			!maps.Equal(c.globs, tc.globs) || string(rest) != tc.rest {
			t.Errorf("%s %q: %v sender %v opts %q args %q globs %v rest %q", tc.cmd, tc.in, err, c.sender, c.opts, c.args, c.globs, rest)
		}
	}
}
