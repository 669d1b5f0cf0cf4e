package posixtest

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestLocal runs the table on a plain local directory, where every case
// must give its local result: the table's record of what Linux does.
func TestLocal(t *testing.T) {
	Run(t, t.TempDir(), nil)
}

// TestJudge: a result passes when it is the local one, or the named
// difference; anything else fails, and so does a named difference that
// no longer happens.
func TestJudge(t *testing.T) {
	eperm := Difference{Err: syscall.EPERM, Why: "no links"}
	obs := Difference{Err: ErrDiffers, Why: "seconds only"}
	wrapped := fmt.Errorf("rename a b: %w", syscall.ENOTEMPTY)
	for _, c := range []struct {
		want, got error
		diff      Difference
		named     bool
		fails     string // a part of the complaint; "" to pass
	}{
		{nil, nil, Difference{}, false, ""},
		{syscall.ENOTEMPTY, wrapped, Difference{}, false, ""},
		{syscall.ENOTEMPTY, syscall.EPERM, Difference{}, false, "result EPERM; a local directory gives ENOTEMPTY"},
		{nil, syscall.EIO, Difference{}, false, "result EIO; a local directory gives ok"},
		{syscall.ENOENT, nil, Difference{}, false, "result ok; a local directory gives ENOENT"},
		{nil, differs("x reads %q", "y"), Difference{}, false, `result x reads "y"`},
		{nil, syscall.EPERM, eperm, true, ""},
		{nil, nil, eperm, true, "does not happen any more"},
		{nil, syscall.EIO, eperm, true, "the named difference is EPERM (no links)"},
		{nil, differs("mtime is 1, want 2"), obs, true, ""},
		{nil, syscall.EPERM, obs, true, "the named difference is"},
	} {
		got := judge(c.want, c.got, c.diff, c.named)
		if c.fails == "" && got != "" || !strings.Contains(got, c.fails) {
			t.Errorf("judge(%v, %v, %v, %v) = %q, want %q", c.want, c.got, c.diff, c.named, got, c.fails)
		}
	}
}

// TestValidate: a difference must name a case, a result and a reason.
func TestValidate(t *testing.T) {
	got := validate(Differences{
		"Symlink":  {Err: syscall.EPERM, Why: "no links"},
		"NoSuch":   {Err: syscall.EPERM, Why: "x"},
		"HardLink": {Err: syscall.EPERM},
		"Fifo":     {Why: "no result"},
	})
	want := []string{
		`posixtest: a difference is named for "NoSuch", which is no case`,
		"posixtest: the difference for Fifo needs both Err and Why",
		"posixtest: the difference for HardLink needs both Err and Why",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDescribe names results for the report.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{syscall.ENOENT, "ENOENT"},
		{fmt.Errorf("open x: %w", syscall.EISDIR), "EISDIR"},
		{differs("a reads %q", "b"), `a reads "b"`},
		{errors.New("other"), "other"},
	} {
		if got := describe(c.err); got != c.want {
			t.Errorf("describe(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
