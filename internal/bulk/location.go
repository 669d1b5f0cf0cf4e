package bulk

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSyntax is a source or destination argument that cannot be read.
var ErrSyntax = errors.New("bulk: bad location")

// Location is one side of a copy: a local path, or a bucket and a key
// (or, for a recursive copy, a key prefix).
type Location struct {
	Local  string // the local path; empty for a remote location
	Bucket string
	Key    string // "" is the whole bucket
}

// Remote says whether the location is in a bucket.
func (l Location) Remote() bool { return l.Bucket != "" }

// String is the location as it was written: s3://BUCKET/KEY or the path.
func (l Location) String() string {
	if l.Remote() {
		return "s3://" + l.Bucket + "/" + l.Key
	}
	return l.Local
}

// Dir says whether the location names a directory or a prefix: a local
// path or key that ends with "/", or a whole bucket.
func (l Location) Dir() bool {
	if l.Remote() {
		return l.Key == "" || strings.HasSuffix(l.Key, "/")
	}
	return strings.HasSuffix(l.Local, "/")
}

// Parse reads a copy argument: s3://BUCKET[/KEY], drive:[PATH] (a path in
// the bucket driveBucket names: the user's home drive), or else a local
// path. "drive:" and "drive:/" are the drive's root.
func Parse(arg, driveBucket string) (Location, error) {
	switch {
	case arg == "":
		return Location{}, fmt.Errorf("%w: empty argument", ErrSyntax)
	case strings.HasPrefix(arg, "s3://"):
		rest := strings.TrimPrefix(arg, "s3://")
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return Location{}, fmt.Errorf("%w: %q names no bucket (want s3://BUCKET/KEY)", ErrSyntax, arg)
		}
		if err := checkKey(key); err != nil {
			return Location{}, fmt.Errorf("%w: %q: %v", ErrSyntax, arg, err)
		}
		return Location{Bucket: bucket, Key: key}, nil
	case strings.HasPrefix(arg, "drive:"):
		if driveBucket == "" {
			return Location{}, fmt.Errorf("%w: %q: no drive bucket", ErrSyntax, arg)
		}
		key := strings.TrimLeft(strings.TrimPrefix(arg, "drive:"), "/")
		if err := checkKey(key); err != nil {
			return Location{}, fmt.Errorf("%w: %q: %v", ErrSyntax, arg, err)
		}
		return Location{Bucket: driveBucket, Key: key}, nil
	case strings.Contains(arg, "://"):
		return Location{}, fmt.Errorf("%w: %q: only s3:// URLs and drive: paths are remote", ErrSyntax, arg)
	}
	return Location{Local: arg}, nil
}

// checkKey refuses keys a copy cannot map to local paths and back: empty
// elements ("a//b") and "." or ".." elements.
func checkKey(key string) error {
	if key == "" {
		return nil
	}
	for _, e := range strings.Split(strings.TrimSuffix(key, "/"), "/") {
		switch e {
		case "":
			return errors.New("empty path element")
		case ".", "..":
			return fmt.Errorf("path element %q", e)
		}
	}
	return nil
}
