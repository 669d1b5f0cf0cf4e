package swift

import (
	"archive/tar"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// MaxBulkContainers is the most containers one ?extract-archive may
// create, announced in /info.
const MaxBulkContainers = 10000

// extractArchive serves PUT /v1/ACCOUNT[/CONTAINER[/PREFIX]]?extract-archive=tar
// (or tar.gz, tar.bz2), Swift's bulk upload: every regular file of the
// archive becomes an object, named by the upload path and its path in
// the archive. Uploaded to the account, a file's first directory names
// its container, made if need be, and files at the top are skipped. The
// answer is always 200, the outcome in the body as for a bulk delete.
func (s *Server) extractArchive(q *request) {
	if q.r.Method != "PUT" {
		q.fail(serr(405, "Method Not Allowed: extract-archive is a PUT"))
		return
	}
	var open func(io.Reader) (io.Reader, error)
	switch strings.Trim(strings.ToLower(q.r.URL.Query().Get("extract-archive")), ".") {
	case "tar":
		open = func(r io.Reader) (io.Reader, error) { return r, nil }
	case "tar.gz":
		open = func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	case "tar.bz2":
		open = func(r io.Reader) (io.Reader, error) { return bzip2.NewReader(r), nil }
	default:
		q.fail(serr(400, "Bad Request: Unsupported archive format (tar, tar.gz or tar.bz2)"))
		return
	}
	res := &bulkResult{counts: map[string]int{"Number Files Created": 0}, ok: "201 Created"}
	defer q.bulkAnswer(res)
	if q.r.ContentLength < 0 && !chunked(q.r) {
		res.status = "411 Length Required"
		return
	}
	base := q.container
	if q.object != "" {
		base += "/" + q.object
	}
	base = strings.TrimRight(base, "/")
	body, err := open(q.r.Body)
	if err != nil {
		res.status, res.body = bulkFailedStatusBad, "Invalid Tar File: "+err.Error()
		return
	}
	tr := tar.NewReader(body)
	seen := map[string]bool{}
	made := 0
	for len(res.errors) < MaxBulkFailures {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			res.status, res.body = bulkFailedStatusBad, "Invalid Tar File: "+err.Error()
			return
		}
		if hdr.Typeflag != tar.TypeReg {
			continue // directories, links and the like are not uploaded
		}
		name := strings.TrimLeft(strings.TrimPrefix(hdr.Name, "./"), "/")
		if base != "" {
			name = base + "/" + name
		}
		c, o, ok := strings.Cut(name, "/")
		if !ok || o == "" {
			continue // a file at the top of the account
		}
		if hdr.Size > MaxFileSize {
			res.fail(name, serr(413, "Request Entity Too Large"))
			continue
		}
		var containerErr error
		if !seen[c] {
			seen[c] = true
			created, err := s.makeContainer(q, c)
			containerErr = err
			if created {
				if made++; made > MaxBulkContainers {
					res.status, res.body = bulkFailedStatusBad, fmt.Sprintf("More than %d containers to create from tar.", MaxBulkContainers)
					return
				}
			}
		}
		if err := s.putFile(q, c, o, tr, hdr.Size); err != nil {
			// As Swift: the container's failure is told when its file
			// failed too (the file may go in, the container being
			// another project's that this one may write to).
			if containerErr != nil {
				res.fail("/v1/"+q.account+"/"+c, containerErr)
			}
			res.fail(name, err)
			continue
		}
		res.counts["Number Files Created"]++
	}
	if len(res.errors) == 0 && res.counts["Number Files Created"] == 0 {
		res.status, res.body = bulkFailedStatusBad, "Invalid Tar File: No Valid Files"
	}
}

// putFile stores one file of an archive as an object, as its own PUT
// would.
func (s *Server) putFile(q *request, container, object string, r io.Reader, size int64) error {
	if len(object) > MaxObjectName {
		return serr(400, fmt.Sprintf("Bad Request: object name longer than %d bytes", MaxObjectName))
	}
	if err := s.check(q, container, gateway.Write); err != nil {
		return err
	}
	_, err := s.gw.Put(q.r.Context(), container, object, r, size,
		gateway.PutOptions{ContentType: contentType(nil, object), Headers: map[string]string{}})
	return err
}
