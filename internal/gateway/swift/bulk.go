package swift

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Limits of the bulk operations, announced in /info.
const (
	MaxBulkDeletes      = 10000 // names in one ?bulk-delete request
	MaxBulkFailures     = 1000  // failed names before a bulk delete stops
	maxBulkPath         = MaxObjectName + 63 + 2
	bulkFailedStatusBad = "400 Bad Request"
	bulkFailedStatus5xx = "502 Bad Gateway"
)

// bulkResult is the outcome of a bulk operation, answered as Swift's bulk
// middleware does: always 200, with the real status, counts and the names
// that failed in the body (plain text, JSON or XML as the request asks).
type bulkResult struct {
	counts map[string]int // "Number Deleted", "Number Files Created", …
	status string         // "Response Status": "400 Bad Request", …; if empty, ok or the failures'
	ok     string         // the status when nothing failed: "200 OK" if empty
	body   string         // "Response Body"
	errors [][2]string    // quoted name, its status
	server bool           // a failure was the server's (502 rather than 400)
}

// fail records a name that failed with err.
func (b *bulkResult) fail(name string, err error) {
	e := mapErr(err)
	if e.status >= 500 {
		b.server = true
	}
	b.errors = append(b.errors, [2]string{quotePath(name), fmt.Sprintf("%d %s", e.status, statusText(e))})
}

// quotePath URL-encodes a name, keeping its slashes (Python's quote, as
// Swift answers names).
func quotePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// statusText is the reason phrase of a Swift error (its message's start).
func statusText(e *swiftError) string {
	t, _, _ := strings.Cut(e.msg, ":")
	return t
}

// bulkAnswer writes the result.
func (q *request) bulkAnswer(b *bulkResult) {
	if b.status == "" {
		b.status = cmp.Or(b.ok, "200 OK")
		if len(b.errors) > 0 {
			b.status = bulkFailedStatusBad
			if b.server {
				b.status = bulkFailedStatus5xx
			}
		}
	}
	fields := map[string]any{"Response Status": b.status, "Response Body": b.body}
	for k, v := range b.counts {
		fields[k] = v
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	errs := b.errors
	if errs == nil {
		errs = [][2]string{}
	}
	switch format(q.r) {
	case "json":
		fields["Errors"] = errs
		out, _ := json.Marshal(fields)
		q.body(200, "application/json; charset=utf-8", out)
	case "xml":
		var s strings.Builder
		s.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<delete>\n")
		for _, k := range keys {
			x := strings.ToLower(strings.ReplaceAll(k, " ", "_"))
			fmt.Fprintf(&s, "<%s>%s</%s>\n", x, xmlEscape(fmt.Sprint(fields[k])), x)
		}
		s.WriteString("<errors>\n")
		for _, e := range errs {
			fmt.Fprintf(&s, "<object><name>%s</name><status>%s</status></object>\n", xmlEscape(e[0]), xmlEscape(e[1]))
		}
		s.WriteString("</errors>\n</delete>\n")
		q.body(200, "application/xml; charset=utf-8", []byte(s.String()))
	default:
		var s strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&s, "%s: %v\n", k, fields[k])
		}
		s.WriteString("Errors:\n")
		for _, e := range errs {
			fmt.Fprintf(&s, "%s, %s\n", e[0], e[1])
		}
		q.body(200, "text/plain; charset=utf-8", []byte(s.String()))
	}
}

// bulkDelete serves POST (or DELETE) /v1/ACCOUNT?bulk-delete: the body is
// a list of URL-encoded /CONTAINER/OBJECT or /CONTAINER names, one a line;
// each is deleted as its own DELETE would (a container must be empty).
// Names not there count as not found. As in Swift, a body that is not
// text (406) or has no length (411) is answered 200 too, with the status
// in the body.
func (s *Server) bulkDelete(q *request) {
	res := &bulkResult{counts: map[string]int{"Number Deleted": 0, "Number Not Found": 0}}
	if ct := q.r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "text/plain") {
		res.status = "406 Not Acceptable"
		q.bulkAnswer(res)
		return
	}
	if q.r.ContentLength < 0 && !chunked(q.r) {
		res.status = "411 Length Required"
		q.bulkAnswer(res)
		return
	}
	names, err := readBulkNames(q.r.Body)
	if err != nil {
		var se *swiftError
		errors.As(err, &se)
		res.status, res.body = fmt.Sprintf("%d %s", se.status, statusText(se)), strings.TrimSpace(se.msg)
		q.bulkAnswer(res)
		return
	}
	for _, name := range names {
		if len(res.errors) >= MaxBulkFailures {
			res.status, res.body = bulkFailedStatusBad, "Max delete failures exceeded"
			break
		}
		c, o, _ := strings.Cut(strings.TrimPrefix(name, "/"), "/")
		var err error
		switch {
		case c == "":
			err = serr(400, "Bad Request: not /CONTAINER or /CONTAINER/OBJECT")
		case o == "":
			err = s.removeContainer(q, c)
		default:
			err = s.removeObject(q, c, o)
		}
		switch {
		case err == nil:
			res.counts["Number Deleted"]++
		case mapErr(err).status == 404:
			res.counts["Number Not Found"]++
		default:
			res.fail(name, err)
		}
	}
	if len(res.errors) == 0 && res.status == "" && res.counts["Number Deleted"]+res.counts["Number Not Found"] == 0 {
		res.status, res.body = bulkFailedStatusBad, "Invalid bulk delete."
	}
	q.bulkAnswer(res)
}

// readBulkNames reads a bulk delete's names: URL-encoded, one a line,
// blank lines ignored.
func readBulkNames(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 2*maxBulkPath)
	var names []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, err := url.PathUnescape(line)
		if err != nil {
			name = line
		}
		if len(names) == MaxBulkDeletes {
			return nil, serr(413, fmt.Sprintf("Request Entity Too Large: Maximum Bulk Deletes: %d per request", MaxBulkDeletes))
		}
		names = append(names, name)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, serr(400, "Bad Request: Invalid File Name")
		}
		return nil, serr(499, "Client Disconnect: "+err.Error())
	}
	return names, nil
}

// check is allowed without an answer: 404 if the container does not
// exist, 403 if the project's key may not use it.
func (s *Server) check(q *request, container string, p gateway.Perm) error {
	if s.may(q, container, p) {
		return nil
	}
	if _, err := s.gw.Owner(q.r.Context(), container); err != nil {
		return errNotFound
	}
	return errForbidden
}

// removeObject deletes one object as DELETE does (a large object's
// manifest, not its segments): 404 if it is not there.
func (s *Server) removeObject(q *request, container, object string) error {
	if len(object) > MaxObjectName {
		return serr(400, fmt.Sprintf("Bad Request: object name longer than %d bytes", MaxObjectName))
	}
	if err := s.check(q, container, gateway.Write); err != nil {
		return err
	}
	ctx := q.r.Context()
	if _, _, err := s.lookup(ctx, container, object); err != nil {
		return err
	}
	return s.gw.Delete(ctx, container, object)
}

// removeContainer deletes an empty container as DELETE does.
func (s *Server) removeContainer(q *request, container string) error {
	if _, err := s.bucketInfo(q, container); err != nil {
		return err
	}
	if err := s.check(q, container, gateway.Owner); err != nil {
		return err
	}
	if err := s.gw.DeleteBucket(q.r.Context(), container); err != nil {
		return err
	}
	s.gw.DeleteRecord(q.r.Context(), setContainers, container)
	return nil
}
