package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readQcow2Header takes a volume's size from a qcow2 header and refuses
// what import must not convert: other files, images that read files of
// the host (a backing file, an external data file), bad versions and
// sizes.
func TestQcow2Header(t *testing.T) {
	header := func(version uint32, backing, size, incompat uint64) []byte {
		h := make([]byte, 104)
		copy(h, qcow2Magic)
		binary.BigEndian.PutUint32(h[4:], version)
		binary.BigEndian.PutUint64(h[8:], backing)
		binary.BigEndian.PutUint64(h[24:], size)
		binary.BigEndian.PutUint64(h[72:], incompat)
		return h
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		b    []byte
		size int64
		err  string
	}{
		{"v3", header(3, 0, 50<<20, 0), 50 << 20, ""},
		{"v2", header(2, 0, 1<<30, 0), 1 << 30, ""},
		{"raw", []byte("an ordinary raw image, long enough to have a header's room ................................."), 0, "not a qcow2 image"},
		{"short", qcow2Magic, 0, "not a qcow2 image"},
		{"v1", header(1, 0, 1<<20, 0), 0, "version 1"},
		{"backing", header(3, 512, 1<<20, 0), 0, "backing file"},
		{"datafile", header(3, 0, 1<<20, 1<<2), 0, "external data file"},
		{"empty", header(3, 0, 0, 0), 0, "virtual size 0"},
		{"huge", header(3, 0, 1<<62, 0), 0, "virtual size"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.b, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := readQcow2Header(f)
		f.Close()
		switch {
		case c.err == "" && (err != nil || h.size != c.size):
			t.Errorf("%s: size %d, err %v; want %d", c.name, h.size, err, c.size)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v; want one saying %q", c.name, err, c.err)
		}
	}
}
