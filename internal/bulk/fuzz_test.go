package bulk

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: a copy argument parses to a local path, or to a remote
// location whose bucket is set and whose key has no empty, "." or ".."
// element, which formats back to what parses the same; otherwise the
// error is ErrSyntax.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"s3://b/k", "s3://b/a/b/", "s3://b", "drive:", "drive:/x/y", "./f", "s3://", "s3://b/../x", "drive:a//b", "ftp://h/x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		l, err := Parse(arg, "home")
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Parse(%q): %v is not ErrSyntax", arg, err)
			}
			return
		}
		if !l.Remote() {
			if l.Local != arg {
				t.Fatalf("Parse(%q) = local %q", arg, l.Local)
			}
			return
		}
		if checkKey(l.Key) != nil {
			t.Fatalf("Parse(%q) let key %q through", arg, l.Key)
		}
		again, err := Parse(l.String(), "home")
		if err != nil || again != l {
			t.Fatalf("Parse(%q) = %+v; its String %q parses to %+v, %v", arg, l, l.String(), again, err)
		}
	})
}

// FuzzCheckpoint: any bytes in a checkpoint file load as a checkpoint
// that a copy can use (ranges inside the object, an upload ID, a part
// size and a checksum per part), or fail with ErrCheckpoint.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte(`{"version":1,"upload_id":"u","part_size":5242880,"size":100,"part_sums":["x"],"parts":[{"n":1,"etag":"e","sha256":"s"}]}`))
	f.Add([]byte(`{"version":1,"bucket":"b","key":"k","etag":"e","size":10,"part_size":4,"done":[0,2]}`))
	f.Add([]byte(`{"version":1,"size":10,"part_size":4,"done":[3]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "ck.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if u, err := loadUploadCheckpoint(p); err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("upload: %v is not ErrCheckpoint", err)
			}
		} else if u == nil || u.UploadID == "" || u.PartSize <= 0 || int64(len(u.PartSums)) != (u.Size+u.PartSize-1)/u.PartSize {
			t.Fatalf("upload checkpoint %+v accepted", u)
		}
		if d, err := loadDownloadCheckpoint(p); err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("download: %v is not ErrCheckpoint", err)
			}
		} else {
			if d == nil || d.PartSize <= 0 {
				t.Fatalf("download checkpoint %+v accepted", d)
			}
			for _, i := range d.Done {
				if i < 0 || int64(i)*d.PartSize >= d.Size {
					t.Fatalf("download checkpoint with range %d of %d bytes in %d-byte ranges", i, d.Size, d.PartSize)
				}
			}
		}
	})
}
