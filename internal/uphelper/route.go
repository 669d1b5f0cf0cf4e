package uphelper

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/quilt-grid/quilt/internal/codec"
	"github.com/quilt-grid/quilt/internal/object"
)

// Path says which way an upload went (PutVia).
type Path struct {
	Helper bool   // through the helper
	Why    string // the choice in words (Choose's, or the fallback's)
	// Through is the helper upload's report (nil when it went direct
	// from the start); Direct the direct upload's (nil through the helper).
	Through *Report
	Direct  *object.PutReport
}

// PutVia stores r through helper (a node ID) or directly. With auto, it
// asks the helper its placing rate and lets Choose decide; otherwise it
// goes through the helper. When the helper fails (ErrHelperFailed, not
// ErrHelperLied) and r can be read again from the start (an io.Seeker
// at 0), it falls back to a direct upload and says so in Path.Why; an
// input that cannot be read again gets the helper's error.
func (u *Uploader) PutVia(ctx context.Context, helper string, auto bool, r io.Reader, size int64, p codec.Params, happy int) (codec.ReadCap, *Path, error) {
	path := &Path{Helper: true, Why: "helper: asked for"}
	if auto {
		st, err := HelperStatus(ctx, u.Nodes, helper, p, happy)
		if err != nil {
			path = &Path{Why: fmt.Sprintf("direct: the helper did not answer (%v)", err)}
		} else {
			c := Choose(u.Objects.Links(), st.Rate, size, p, happy)
			path = &Path{Helper: c.Helper, Why: c.Why}
		}
	}
	if path.Helper {
		rc, rep, err := u.Put(ctx, helper, r, size, p, happy)
		path.Through = rep
		if err == nil || !errors.Is(err, ErrHelperFailed) || ctx.Err() != nil {
			return rc, path, err
		}
		s, ok := r.(io.Seeker)
		if !ok {
			return rc, path, err
		}
		if _, serr := s.Seek(0, io.SeekStart); serr != nil {
			return rc, path, err
		}
		path.Helper, path.Why = false, fmt.Sprintf("direct, after the helper failed: %v", err)
	}
	rc, rep, err := u.Objects.Put(ctx, r, size, p, happy)
	path.Direct = rep
	return rc, path, err
}
