package webapp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/tree"
)

// trashDir is the drive's trash: a top-level folder the app hides from
// its listings, search and zips and refuses in every path parameter. A
// deleted file or folder is renamed (entries only, no data copied) to
// trashDir/ID, and its record, JSON, is the file trashDir/ID.json beside
// it. Through WebDAV, SFTP and S3 the folder shows as it is.
const trashDir = ".quilt-trash"

// Hidden reports whether a path of a drive's tree ("a/b", no leading
// slash) is the app's own: the trash or under it. Other front ends that
// show a drive to people other than its owner (share links, shares with
// users) keep such paths from them.
func Hidden(p string) bool {
	return p == trashDir || strings.HasPrefix(p, trashDir+"/")
}

// trashRecord is what the trash keeps of a deleted item.
type trashRecord struct {
	Path    string    `json:"path"`    // where it was, tree form
	Deleted time.Time `json:"deleted"` // when
	By      string    `json:"by"`      // the user who deleted it
	Dir     bool      `json:"dir"`
	Size    int64     `json:"size"` // a file's
}

// trashItem is a row of the trash page.
type trashItem struct {
	ID string
	trashRecord
	Name string
}

// trashIDs are what toTrash names items: the time, then randomness.
var trashID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}$`)

// toTrash moves p into the trash with its record, and returns its ID. The
// record goes first, so a failed move leaves a record without an item,
// which the trash page drops, never an item without a record.
func toTrash(ctx context.Context, t *tree.Tree, p, by string, now time.Time) (string, error) {
	info, err := t.Stat(ctx, p)
	if err != nil {
		return "", err
	}
	if err := t.MkdirAll(ctx, trashDir, 0o700); err != nil {
		return "", err
	}
	id := now.UTC().Format("20060102T150405Z") + "-" + randomID(6)
	rec := trashRecord{Path: p, Deleted: now.UTC(), By: by, Dir: info.IsDir()}
	if !info.IsDir() {
		rec.Size = info.Size
	}
	b, _ := json.Marshal(rec)
	if _, err := t.Create(ctx, trashDir+"/"+id+".json", bytes.NewReader(b), tree.CreateOptions{Exclusive: true, Size: int64(len(b))}); err != nil {
		return "", err
	}
	if err := t.Rename(ctx, p, trashDir+"/"+id, tree.RenameOptions{NoReplace: true}); err != nil {
		t.Remove(ctx, trashDir+"/"+id+".json", tree.RemoveOptions{})
		return "", err
	}
	return id, nil
}

// trashList returns the trash's items, newest first.
func trashList(ctx context.Context, t *tree.Tree) ([]trashItem, error) {
	is, err := t.ReadDirAll(ctx, trashDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, i := range is {
		have[i.Name()] = true
	}
	var out []trashItem
	for _, i := range is {
		id, ok := strings.CutSuffix(i.Name(), ".json")
		if !ok || !trashID.MatchString(id) || !have[id] {
			continue
		}
		rec, err := readRecord(ctx, t, id)
		if err != nil {
			continue
		}
		out = append(out, trashItem{ID: id, trashRecord: rec, Name: baseName(rec.Path)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID > out[b].ID })
	return out, nil
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func readRecord(ctx context.Context, t *tree.Tree, id string) (trashRecord, error) {
	var rec trashRecord
	rc, _, err := t.Open(ctx, trashDir+"/"+id+".json", 0, 64<<10)
	if err != nil {
		return rec, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("webapp: trash record %s: %w", id, err)
	}
	if _, err := drivePath("/" + rec.Path); err != nil || rec.Path == "" {
		return rec, fmt.Errorf("webapp: trash record %s: bad path %q", id, rec.Path)
	}
	return rec, nil
}

// errTaken is a restore onto a path that is taken.
var errTaken = errors.New("webapp: the original path is taken")

// restore moves item id back to its original path, making the folders
// above it if they are gone. A path that is taken is errTaken.
func restore(ctx context.Context, t *tree.Tree, id string) (trashRecord, error) {
	rec, err := readRecord(ctx, t, id)
	if err != nil {
		return rec, err
	}
	if _, err := t.Stat(ctx, rec.Path); err == nil {
		return rec, errTaken
	} else if !errors.Is(err, fs.ErrNotExist) {
		return rec, err
	}
	if par := parentOf(rec.Path); par != "" {
		if err := t.MkdirAll(ctx, par, 0); err != nil {
			return rec, err
		}
	}
	if err := t.Rename(ctx, trashDir+"/"+id, rec.Path, tree.RenameOptions{NoReplace: true}); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return rec, errTaken
		}
		return rec, err
	}
	t.Remove(ctx, trashDir+"/"+id+".json", tree.RemoveOptions{})
	return rec, nil
}

// purge deletes item id for ever.
func purge(ctx context.Context, t *tree.Tree, id string) error {
	if err := t.Remove(ctx, trashDir+"/"+id, tree.RemoveOptions{Recursive: true}); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return t.Remove(ctx, trashDir+"/"+id+".json", tree.RemoveOptions{})
}

func (q *request) trashPage() {
	t, ok := q.tree()
	if !ok {
		return
	}
	items, err := trashList(q.r.Context(), t)
	if err != nil {
		q.treeError("read the trash", err)
		return
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "trash", "Trash", items)
}

// trashOp is POST /trash/restore, /trash/purge (form field id) and
// /trash/empty.
func (q *request) trashOp(op string) {
	if q.r.Method != http.MethodPost {
		q.w.Header().Set("Allow", "POST")
		q.fail(http.StatusMethodNotAllowed, "Changes are made with the page's buttons (POST).")
		return
	}
	t, ok := q.tree()
	if !ok {
		return
	}
	ctx := q.r.Context()
	if op == "empty" {
		if err := t.Remove(ctx, trashDir, tree.RemoveOptions{Recursive: true}); err != nil && !errors.Is(err, fs.ErrNotExist) {
			q.treeError("empty the trash", err)
			return
		}
		q.done("/trash", "Emptied the trash.")
		return
	}
	id := q.r.FormValue("id")
	if !trashID.MatchString(id) {
		q.fail(http.StatusBadRequest, "That is not an item of the trash.")
		return
	}
	switch op {
	case "restore":
		rec, err := restore(ctx, t, id)
		switch {
		case errors.Is(err, errTaken):
			q.fail(http.StatusConflict, fmt.Sprintf("Could not restore: /%s is taken. Rename or move what is there, then restore again.", rec.Path))
		case err != nil:
			q.treeError("restore", err)
		default:
			q.done(folderURL(q.s.acct.Name, parentOf(rec.Path)), "Restored /"+rec.Path+".")
		}
	case "purge":
		if err := purge(ctx, t, id); err != nil {
			q.treeError("delete for ever", err)
			return
		}
		q.done("/trash", "Deleted for ever.")
	default:
		q.fail(http.StatusNotFound, "There is no such action.")
	}
}
