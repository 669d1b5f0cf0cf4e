package s3

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestInternalErrorHidden: an unexpected error's detail goes to the log,
// with the request ID; the client gets a generic message and the ID.
func TestInternalErrorHidden(t *testing.T) {
	var log bytes.Buffer
	rec := httptest.NewRecorder()
	q := &request{w: rec, r: httptest.NewRequest("GET", "/b/k", nil), id: "REQ123", log: slog.New(slog.NewTextHandler(&log, nil))}
	q.fail(errors.New("bbolt: page 42 of /srv/quilt-gw/ns.db is damaged"))
	body := rec.Body.String()
	if rec.Code != 500 || strings.Contains(body, "bbolt") || !strings.Contains(body, "<Code>InternalError</Code>") || !strings.Contains(body, "REQ123") {
		t.Fatalf("answer: %d %s", rec.Code, body)
	}
	if l := log.String(); !strings.Contains(l, "page 42") || !strings.Contains(l, "REQ123") {
		t.Fatalf("log: %s", l)
	}
}
