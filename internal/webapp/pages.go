package webapp

import (
	"net/http"
	"regexp"
	"strings"
)

// maxUsageScan bounds the keys the storage page counts itself when there
// is no Config.Usage.
const maxUsageScan = 1_000_000

// storageData is the storage page's.
type storageData struct {
	Account     Account
	Used, Quota int64
	Counted     bool // counted by the page, not given by Config.Usage
	Cut         bool // the count stopped at maxUsageScan keys
	Files       int
	Err         string
}

// storage shows how much the user's drive holds, and the quota.
func (q *request) storage() {
	d := storageData{Account: q.s.acct}
	ctx := q.r.Context()
	if q.h.cfg.Usage != nil {
		used, quota, err := q.h.cfg.Usage(ctx, q.s.acct)
		if err != nil {
			d.Err = err.Error()
		}
		d.Used, d.Quota = used, quota
	} else {
		t, ok := q.tree()
		if !ok {
			return
		}
		d.Counted = true
		after := ""
		for d.Files < maxUsageScan {
			l, err := t.Store().List(ctx, "", "", after, 1000)
			if err != nil {
				d.Err = err.Error()
				break
			}
			for _, o := range l.Objects {
				d.Used += o.Size
				d.Files++
			}
			if !l.More || len(l.Objects) == 0 {
				break
			}
			after = l.Objects[len(l.Objects)-1].Key
		}
		d.Cut = d.Files >= maxUsageScan
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "storage", "Storage", d)
}

// grid shows the grid to admins.
func (q *request) grid() {
	if q.h.cfg.Grid == nil || !q.s.acct.Admin {
		q.fail(http.StatusForbidden, "The grid page is for admins.")
		return
	}
	st, err := q.h.cfg.Grid(q.r.Context())
	if err != nil {
		q.h.cfg.Logger.Warn("webapp: grid", "err", err)
		q.fail(http.StatusServiceUnavailable, "The grid's state is not available: "+err.Error())
		return
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "grid", "Grid", st)
}

// sharesPage lists the user's share links (the page's script fetches them
// from /api/shares).
func (q *request) sharesPage() {
	if q.h.cfg.Shares == nil {
		q.fail(http.StatusNotFound, "Share links are not enabled on this server.")
		return
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "shares", "Shares", nil)
}

// sharedData is the Shared with me page's: a share's ID and the path
// under it the page's script opens ("" for the list of shares).
type sharedData struct {
	ID, Path string
}

// sharedPage shows what other users shared with this one: the page's
// script lists /api/shares/with-me, and with ?id=ID&path=SUB browses a
// share's folder, downloads its files and, for a write share, uploads
// into it.
func (q *request) sharedPage() {
	if q.h.cfg.Shares == nil {
		q.fail(http.StatusNotFound, "Sharing is not enabled on this server.")
		return
	}
	v := q.r.URL.Query()
	d := sharedData{ID: v.Get("id"), Path: strings.Trim(v.Get("path"), "/")}
	if !shareID.MatchString(d.ID) && d.ID != "" {
		q.fail(http.StatusNotFound, "Nothing is shared with you under that ID.")
		return
	}
	if d.Path != "" {
		for _, e := range strings.Split(d.Path, "/") {
			if e == "" || e == "." || e == ".." || strings.ContainsRune(e, 0) {
				q.fail(http.StatusBadRequest, "That path has an empty, . or .. element.")
				return
			}
		}
	}
	if d.ID == "" {
		d.Path = ""
	}
	q.h.render(q.w, q.r, q.s, http.StatusOK, "shared", "Shared with me", d)
}

// shareID is the form of a share's ID (random URL-safe base64).
var shareID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
