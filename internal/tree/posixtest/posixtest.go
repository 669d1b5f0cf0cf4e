// Package posixtest is a table of POSIX file-system behaviours, written
// once and run on any directory: a plain local directory, where it
// records what Linux does; a FUSE mount of a bucket (internal/fuse); an
// sshfs mount of the SFTP server (internal/sftp). It drives the directory
// with plain system calls (package os and syscall), as any program would.
//
// Each case runs in a fresh subdirectory and ends in one result: success,
// the errno of the operation it is about, or ErrDiffers when its
// operations succeed but what they leave (bytes, sizes, modes, times) is
// not what a local directory shows. A file system that is not a local
// directory names, in Differences, each case where its result differs and
// why. Run fails a case whose result is neither the local one nor the
// named difference, and a named difference that does not happen any more,
// so a table of differences kept beside the test (docs/mounts.md) stays
// true. Run logs a report of every case: the local result, this file
// system's, and the reason for each difference.
//
// The cases are not safe to run in parallel on one directory tree of the
// same name; Run runs them one after the other.
package posixtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"

	"golang.org/x/sys/unix"
)

// ErrDiffers is the result of a case whose operations succeed but whose
// observation (bytes read, a size, a mode, a time, a listing) is not what
// a local directory shows; the case's error wraps it with what was seen.
var ErrDiffers = errors.New("posixtest: not what a local directory shows")

// Difference is how a file system differs from a local directory in one
// case.
type Difference struct {
	// Err is the case's result on this file system: the syscall.Errno its
	// operation fails with, io.EOF for a read that comes back short, or
	// ErrDiffers. It must not be nil.
	Err error
	// Why is the reason, shown in the report. It must not be empty.
	Why string
}

// Differences names, by case name, the cases where a file system's result
// is not a local directory's.
type Differences map[string]Difference

// testCase is one behaviour. want is a local directory's result (0:
// success). run sets up in dir, failing the test (t.Fatal) if the set-up
// fails, and returns the result.
type testCase struct {
	name string
	want syscall.Errno
	run  func(t *testing.T, dir string) error
}

// Names returns the names of the cases, in the order Run runs them.
func Names() []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.name)
	}
	return out
}

// Run runs every case in a fresh subdirectory of dir (named after the
// case; dir must not hold those names yet). A case passes when its result
// is the local directory's, or, for a case named in diffs, the named
// difference.
func Run(t *testing.T, dir string, diffs Differences) {
	t.Helper()
	for _, e := range validate(diffs) {
		t.Error(e)
	}
	type row struct{ name, local, here, verdict string }
	var rows []row
	for _, c := range cases {
		r := row{name: c.name, local: describe(errOf(c.want)), here: "-", verdict: "FAIL: set-up failed"}
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(dir, c.name)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			err := c.run(t, d)
			r.here = describe(err)
			diff, named := diffs[c.name]
			switch e := judge(errOf(c.want), err, diff, named); {
			case e != "":
				r.verdict = "FAIL: " + e
				t.Error(e)
			case named:
				r.verdict = "differs: " + diff.Why
				t.Logf("differs as named: %s (a local directory: %s): %s", r.here, r.local, diff.Why)
			default:
				r.verdict = "same"
			}
		})
		rows = append(rows, r)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tlocal directory\there\tverdict\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, r.local, r.here, r.verdict)
	}
	tw.Flush()
	t.Logf("POSIX behaviours of %s:\n%s", dir, b.String())
}

// validate returns what is wrong with diffs: names of no case, and
// differences without a result or a reason.
func validate(diffs Differences) []string {
	var out []string
	names := Names()
	for name, d := range diffs {
		if !slices.Contains(names, name) {
			out = append(out, fmt.Sprintf("posixtest: a difference is named for %q, which is no case", name))
		}
		if d.Err == nil || d.Why == "" {
			out = append(out, fmt.Sprintf("posixtest: the difference for %s needs both Err and Why", name))
		}
	}
	slices.Sort(out)
	return out
}

// judge returns why a case's result got fails, or "" if it passes: want
// is a local directory's result, diff the named difference if named.
func judge(want, got error, diff Difference, named bool) string {
	switch {
	case named && matches(got, diff.Err):
		return ""
	case named && matches(got, want):
		return fmt.Sprintf("result %s, as a local directory's: the named difference (%s: %s) does not happen any more",
			describe(got), describe(diff.Err), diff.Why)
	case named:
		return fmt.Sprintf("result %s; the named difference is %s (%s), and a local directory gives %s",
			describe(got), describe(diff.Err), diff.Why, describe(want))
	case !matches(got, want):
		return fmt.Sprintf("result %s; a local directory gives %s", describe(got), describe(want))
	}
	return ""
}

// errOf is nil for errno 0, else the errno.
func errOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// matches reports whether err is the result want (nil: success).
func matches(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// describe names a result: "ok", an errno's name, or the observation.
func describe(err error) string {
	var e syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrDiffers) && err != ErrDiffers:
		return strings.TrimPrefix(err.Error(), ErrDiffers.Error()+": ")
	case errors.As(err, &e):
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return err.Error()
}

// differs is ErrDiffers with what was seen.
func differs(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDiffers, fmt.Sprintf(format, args...))
}

// mustWrite makes a file with body, failing the test if it cannot.
func mustWrite(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatalf("set-up: %v", err)
	}
}

// mustMkdir makes directories, failing the test if it cannot.
func mustMkdir(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.MkdirAll(n, 0o755); err != nil {
			t.Fatalf("set-up: %v", err)
		}
	}
}

// mustOpen opens a file, failing the test if it cannot; it is closed at
// the end of the test if still open.
func mustOpen(t *testing.T, name string, flag int) *os.File {
	t.Helper()
	f, err := os.OpenFile(name, flag, 0o644)
	if err != nil {
		t.Fatalf("set-up: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// content checks that name reads want.
func content(name, want string) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if string(b) != want {
		return differs("%s reads %q, want %q", filepath.Base(name), short(b), short([]byte(want)))
	}
	return nil
}

// short is b for a message, cut after 40 bytes.
func short(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%s... (%d bytes)", b[:40], len(b))
	}
	return string(b)
}

// gone checks that name does not exist.
func gone(name string) error {
	_, err := os.Stat(name)
	if err == nil {
		return differs("%s still exists", filepath.Base(name))
	}
	if !errors.Is(err, syscall.ENOENT) {
		return err
	}
	return nil
}

// readAt reads n bytes at off from f.
func readAt(f *os.File, n int, off int64) (string, error) {
	b := make([]byte, n)
	m, err := f.ReadAt(b, off)
	if err == io.EOF && m == n {
		err = nil
	}
	return string(b[:m]), err
}

// pattern is n bytes that differ from one offset to the next.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7/5 + i>>9)
	}
	return b
}

// ensureEqual is nil if got is want, else ErrDiffers with what.
func ensureEqual(what string, got, want any) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return differs("%s is %v, want %v", what, got, want)
	}
	return nil
}

// mustEqualBytes checks a large read.
func mustEqualBytes(what string, got, want []byte) error {
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		return differs("%s: %d bytes, want %d; first difference at %d", what, len(got), len(want), i)
	}
	return nil
}
