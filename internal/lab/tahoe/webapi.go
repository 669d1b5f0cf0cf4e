package tahoe

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Put uploads what r yields as an immutable file through the client node's
// web API (PUT /uri) and returns its read capability ("URI:CHK:..."). The
// body is streamed from r (chunked unless r is a bytes.Reader,
// bytes.Buffer or strings.Reader); the client node itself stores it in a
// temporary file before encoding it, as Tahoe does for every upload.
// Tahoe encrypts convergently: the same bytes uploaded twice are found in
// the grid and not sent again, so measurements need fresh data.
func (g *Grid) Put(ctx context.Context, r io.Reader) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, g.web+"/uri", r)
	if err != nil {
		return "", fmt.Errorf("tahoe: put: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("tahoe: put: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("tahoe: put: %w", err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("%w: PUT /uri: %s: %s", ErrWebAPI, resp.Status, snippet(body))
	}
	cap := strings.TrimSpace(string(body))
	if !strings.HasPrefix(cap, "URI:") {
		return "", fmt.Errorf("%w: PUT /uri answered %q, not a capability", ErrWebAPI, snippet(body))
	}
	return cap, nil
}

// Get downloads the file cap names into w through the client node's web
// API (GET /uri/CAP), streaming it, and returns how many bytes it wrote.
func (g *Grid) Get(ctx context.Context, cap string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.web+"/uri/"+url.PathEscape(cap), nil)
	if err != nil {
		return 0, fmt.Errorf("tahoe: get: %w", err)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("tahoe: get: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, fmt.Errorf("%w: GET /uri/CAP: %s: %s", ErrWebAPI, resp.Status, snippet(body))
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("tahoe: get: %w", err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("tahoe: get: %d of %d bytes: %w", n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, nil
}

// snippet shortens an error body from the web API for a message. Tahoe
// answers errors with an HTML page whose exception comes last: the page
// is reduced to its text, and a long text to its start and its end.
func snippet(b []byte) string {
	s := string(b)
	if strings.Contains(s, "<html") || strings.Contains(s, "<div") {
		s = styleRE.ReplaceAllString(s, " ")
		s = tagRE.ReplaceAllString(s, " ")
		s = html.UnescapeString(s)
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 600 {
		s = s[:150] + " ... " + s[len(s)-400:]
	}
	return s
}

var (
	styleRE = regexp.MustCompile(`(?is)<(style|script)[^>]*>.*?</(style|script)>`)
	tagRE   = regexp.MustCompile(`(?s)<[^>]*>`)
)
