package sftp

import (
	"errors"
	"slices"
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
		{cmd: `rsync --server -slogDtpre.iLsfxCIvu .`, err: ErrRsyncOption},
		{cmd: `rsync --server --secluded-args .`, err: ErrRsyncOption},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /x; rm -rf /`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . $HOME`, err: errAny},
		{cmd: "rsync --server -logDtpre.iLsfxCIvu . `id`", err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . "$(id)"`, err: errAny},
		{cmd: `rsync --server -logDtpre.iLsfxCIvu . /x/*`, err: errAny},
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
		if c.sender != tc.sender || !slices.Equal(c.args, tc.args) || !slices.Equal(c.scopes, tc.scopes) || c.partial != tc.partial {
			t.Errorf("%s: sender %v args %q scopes %q partial %v; want %v %q %q %v",
				tc.cmd, c.sender, c.args, c.scopes, c.partial, tc.sender, tc.args, tc.scopes, tc.partial)
		}
	}
}

var errAny = errors.New("any error")
