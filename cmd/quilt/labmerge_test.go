package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quilt lab merge write-read pools the results directories it is given
// into one, and refuses what it cannot pool with a clear error and a
// non-zero exit, writing nothing.
func TestCLILabMerge(t *testing.T) {
	bin := buildQuilt(t)
	header := "system,client,size,bytes,runs,write MB/s (median),write q1,write q3,read MB/s (median),read q1,read q3,failed\n"
	dir := func(rows string) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "write-read.csv"), []byte(header+rows), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := dir("quilt,worst,128 MiB,134217728,1,0.140,0.140,0.140,0.150,0.150,0.150,\n")
	b := dir("quilt,worst,128 MiB,134217728,1,0.148,0.148,0.148,0.146,0.146,0.146,\n")
	three := dir("quilt,worst,128 MiB,134217728,3,0.148,0.147,0.149,0.146,0.145,0.147,\n")

	out := filepath.Join(t.TempDir(), "merged")
	if o, err := exec.Command(bin, "lab", "merge", "write-read", "--out", out, a, b).CombinedOutput(); err != nil {
		t.Fatalf("lab merge: %v\n%s", err, o)
	}
	csv, err := os.ReadFile(filepath.Join(out, "write-read.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csv), "quilt,worst,128 MiB,134217728,2,0.144") {
		t.Errorf("merged CSV does not pool the two runs (median 0.144):\n%s", csv)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lab", "merge", "write-read", "--out", filepath.Join(t.TempDir(), "x"), a, three}, "only single runs"},
		{[]string{"lab", "merge", "write-read", "--out", filepath.Join(t.TempDir(), "x"), t.TempDir()}, "no such file"},
		{[]string{"lab", "merge", "sshfs-fio", "--out", filepath.Join(t.TempDir(), "x"), a}, "Usage"},
		{[]string{"lab", "merge", "write-read"}, "Usage"},
	} {
		o, err := exec.Command(bin, c.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(o), c.want) {
			t.Errorf("quilt %s: err %v, output %q; want a failure saying %q", strings.Join(c.args, " "), err, o, c.want)
		}
	}
}
