package bulk

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/quilt-grid/quilt/internal/atomicfile"
)

// checkpointVersion is the format of the checkpoint files; a file of
// another version is ignored (the copy starts over).
const checkpointVersion = 1

// ErrCheckpoint is a checkpoint file that cannot be used: damaged, of
// another version, or of another transfer. The copy starts over.
var ErrCheckpoint = errors.New("bulk: unusable checkpoint")

// PartialSuffix ends the name of a download's temporary file beside its
// destination; the checkpoint is that name with ".json" appended.
const PartialSuffix = ".quilt-cp-partial"

// uploadCheckpoint is the state of a multipart upload in progress,
// kept in StateDir under a name derived from the source and destination.
type uploadCheckpoint struct {
	Version  int    `json:"version"`
	Source   string `json:"source"` // absolute path
	Size     int64  `json:"size"`
	MtimeNS  int64  `json:"mtime_ns"`
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	PartSize int64  `json:"part_size"`
	SHA256   string `json:"sha256"` // of the whole source, hex
	// PartSums are the base64 SHA-256 of each part as the source was
	// read before the upload began: a part whose bytes differ when sent
	// is refused by the gateway.
	PartSums []string `json:"part_sums"`
	// Parts are the parts the gateway acknowledged, by number.
	Parts []donePart `json:"parts"`
}

// donePart is one acknowledged part.
type donePart struct {
	Number int32  `json:"n"`
	ETag   string `json:"etag"`
	SHA256 string `json:"sha256"` // base64, as x-amz-checksum-sha256
}

// downloadCheckpoint is the state of a download in progress, beside its
// partial file.
type downloadCheckpoint struct {
	Version  int    `json:"version"`
	Bucket   string `json:"bucket"`
	Key      string `json:"key"`
	ETag     string `json:"etag"`
	Size     int64  `json:"size"`
	PartSize int64  `json:"part_size"`
	// Done are the indexes of the ranges written and synced to the
	// partial file (range i is [i*PartSize, (i+1)*PartSize)).
	Done []int `json:"done"`
}

// uploadCheckpointPath is where the checkpoint of an upload of src to
// bucket/key lives: one file per source and destination.
func uploadCheckpointPath(stateDir, src, bucket, key string) string {
	h := sha256.Sum256([]byte(src + "\x00" + bucket + "\x00" + key))
	return filepath.Join(stateDir, "up-"+hex.EncodeToString(h[:16])+".json")
}

// downloadCheckpointPath is the checkpoint beside a download's partial
// file.
func downloadCheckpointPath(dst string) string { return dst + PartialSuffix + ".json" }

// saveCheckpoint writes v durably and atomically (mode 0600), making
// its directory if needed.
func saveCheckpoint(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("bulk: checkpoint directory: %w", err)
	}
	return atomicfile.WriteJSON(path, v, 0o600)
}

// loadUploadCheckpoint reads an upload checkpoint: (nil, nil) if there
// is none, ErrCheckpoint if it is damaged or of another version.
func loadUploadCheckpoint(path string) (*uploadCheckpoint, error) {
	var c uploadCheckpoint
	if err := loadCheckpoint(path, &c, func() int { return c.Version }); err != nil || c.Version == 0 {
		return nil, err
	}
	if c.UploadID == "" || c.PartSize <= 0 || c.Size < 0 {
		return nil, fmt.Errorf("%w: %s lacks its upload ID or part size", ErrCheckpoint, path)
	}
	if n := (c.Size + c.PartSize - 1) / c.PartSize; int64(len(c.PartSums)) != n {
		return nil, fmt.Errorf("%w: %s has %d part checksums for %d parts", ErrCheckpoint, path, len(c.PartSums), n)
	}
	return &c, nil
}

// loadDownloadCheckpoint reads a download checkpoint, as
// loadUploadCheckpoint.
func loadDownloadCheckpoint(path string) (*downloadCheckpoint, error) {
	var c downloadCheckpoint
	if err := loadCheckpoint(path, &c, func() int { return c.Version }); err != nil || c.Version == 0 {
		return nil, err
	}
	if c.PartSize <= 0 || c.Size < 0 {
		return nil, fmt.Errorf("%w: %s lacks its part size", ErrCheckpoint, path)
	}
	for _, i := range c.Done {
		if i < 0 || int64(i)*c.PartSize >= c.Size {
			return nil, fmt.Errorf("%w: %s names range %d of a %d-byte object", ErrCheckpoint, path, i, c.Size)
		}
	}
	return &c, nil
}

func loadCheckpoint(path string, v any, version func() int) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s is damaged (%v)", ErrCheckpoint, path, err)
	}
	if version() != checkpointVersion {
		return fmt.Errorf("%w: %s has version %d, want %d", ErrCheckpoint, path, version(), checkpointVersion)
	}
	return nil
}

// sortParts orders parts by number, as CompleteMultipartUpload wants.
func sortParts(ps []donePart) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Number < ps[j].Number })
}
