package sigv4

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// maxChunk bounds the data of one signed chunk. A signed chunk is held in
// memory until its signature has been checked, so that Read never hands
// out a byte the client did not sign; clients send 64 KiB (aws-sdk-go-v2,
// minio-go, the AWS CLI) or 128 KiB (the Java SDKs) chunks. Unsigned
// chunks are not held: they stream through whatever their size.
const maxChunk = 16 << 20

// maxTrailerLines bounds the lines of a trailer (checksums, the
// signature and the empty lines that end them).
const maxTrailerLines = 16

// maxLine bounds a chunk header or a trailer line.
const maxLine = 4096

// chunkedReader decodes an aws-chunked body:
//
//	<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n   repeated
//	0[;chunk-signature=<sig>]\r\n                      the final chunk
//	\r\n                                              no trailer, or
//	<name>:<value>\r\n ... [x-amz-trailer-signature:<sig>\r\n] \r\n
//
// checking each chunk's signature (chained from the request's signature),
// the trailer's signature, the checksums and the decoded length.
type chunkedReader struct {
	br *bufio.Reader

	key  []byte // signing key; nil for STREAMING-UNSIGNED-PAYLOAD-TRAILER
	head string // "<timestamp>\n<scope>\n", shared by every string to sign
	prev string // the previous signature in the chain

	trailer  bool              // a trailer section follows the final chunk
	trailers map[string]*check // checks whose value the trailer carries, by name

	declared int64 // x-amz-decoded-content-length; -1 if not sent
	total    int64 // decoded bytes so far
	checks   []*check

	buf  []byte // signed: the current chunk, verified
	off  int    // signed: bytes of buf already returned
	left int64  // unsigned: bytes left in the current chunk
	err  error  // sticky; io.EOF once the body is done and verified
}

// Read returns decoded bytes. A signed chunk's bytes are returned only once
// its signature has been checked; the checksums and the trailer are
// checked at the end, so the last Read returns either io.EOF or an *Error.
func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for c.err == nil {
		if c.off < len(c.buf) {
			n := copy(p, c.buf[c.off:])
			c.off += n
			return n, nil
		}
		if c.left > 0 {
			return c.readUnsigned(p)
		}
		c.err = c.nextChunk()
	}
	return 0, c.err
}

// readUnsigned passes the data of an unsigned chunk through.
func (c *chunkedReader) readUnsigned(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if e := c.consume(p[:n]); e != nil {
		c.err = e
	} else if c.left == 0 {
		c.err = c.readCRLF()
	} else if err != nil {
		c.err = truncated(err)
	}
	if n > 0 {
		return n, nil // an error is returned by the next Read
	}
	return 0, c.err
}

// consume feeds decoded bytes to the checks and counts them.
func (c *chunkedReader) consume(b []byte) error {
	c.total += int64(len(b))
	if c.declared >= 0 && c.total > c.declared {
		return errInvalidArgument("The aws-chunked body is longer than x-amz-decoded-content-length (%d).", c.declared)
	}
	for _, ch := range c.checks {
		ch.h.Write(b)
	}
	return nil
}

// nextChunk reads the next chunk header and, for a signed chunk, the
// chunk's data, which it verifies. At the final chunk it finishes the
// body and returns io.EOF or the failure.
func (c *chunkedReader) nextChunk() error {
	line, err := c.readLine()
	if err == io.EOF {
		return errIncompleteBody("The aws-chunked body ended before its final chunk.")
	}
	if err != nil {
		return err
	}
	sizeHex, ext, _ := strings.Cut(line, ";")
	size, perr := strconv.ParseInt(strings.TrimSpace(sizeHex), 16, 64)
	if perr != nil || size < 0 {
		return errInvalidArgument("Malformed aws-chunked chunk header.")
	}
	if c.key == nil {
		if size == 0 {
			return c.finish()
		}
		c.left = size
		return nil
	}

	sig, ok := strings.CutPrefix(strings.TrimSpace(ext), "chunk-signature=")
	if !ok {
		return errChunkSignature("chunk")
	}
	if size > maxChunk {
		return errInvalidArgument("A signed aws-chunked chunk of %d bytes is larger than the %d bytes accepted.", size, maxChunk)
	}
	c.buf = slices.Grow(c.buf[:0], int(size))[:size]
	c.off = 0
	if _, err := io.ReadFull(c.br, c.buf); err != nil {
		c.buf = c.buf[:0]
		return truncated(err)
	}
	if size > 0 {
		if err := c.readCRLF(); err != nil {
			c.buf = c.buf[:0]
			return err
		}
	}
	want := sign(c.key, chunkAlgorithm+"\n"+c.head+c.prev+"\n"+emptySHA256+"\n"+hexSHA256(c.buf))
	if !signatureEqual(sig, want) {
		c.buf = c.buf[:0]
		return errChunkSignature("chunk")
	}
	c.prev = want
	if err := c.consume(c.buf); err != nil {
		c.buf = c.buf[:0]
		return err
	}
	if size == 0 {
		return c.finish()
	}
	return nil
}

// finish reads what follows the final chunk and runs the checks of the
// whole body. It returns io.EOF if everything holds.
func (c *chunkedReader) finish() error {
	if c.trailer {
		if err := c.readTrailer(); err != nil {
			return err
		}
	} else {
		line, err := c.readLine()
		if err != nil && err != io.EOF {
			return err
		}
		if line != "" {
			return errInvalidArgument("Malformed end of aws-chunked body.")
		}
	}
	if _, err := c.br.ReadByte(); err == nil {
		return errInvalidArgument("Data after the end of the aws-chunked body.")
	} else if err != io.EOF {
		return err
	}
	if c.declared >= 0 && c.total < c.declared {
		return errIncompleteBody("The aws-chunked body has %d bytes, x-amz-decoded-content-length %d.", c.total, c.declared)
	}
	for _, ch := range c.checks {
		if err := ch.verify(); err != nil {
			return err
		}
	}
	return io.EOF
}

// readTrailer reads the trailer lines up to the empty line, records the
// checksums they carry and, for a signed body, checks the trailer's
// signature.
func (c *chunkedReader) readTrailer() error {
	var canonical strings.Builder
	var sig string
	signed := false
	seen := make(map[string]bool)
	for lines := 0; ; lines++ {
		if lines > maxTrailerLines {
			return errInvalidArgument("An aws-chunked trailer has more than %d lines.", maxTrailerLines)
		}
		line, err := c.readLine()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if line == "" {
			// The trailer ends with an empty line. minio-go ends each
			// trailer line with a bare LF and then writes a CRLF before
			// the signature line (signed) or before the final CRLF
			// (unsigned): an empty line right after trailer lines ends
			// the trailer only if the body ends there or after one more
			// empty line, and a signature line may follow it.
			if next, _ := c.br.Peek(1); len(next) > 0 && canonical.Len() > 0 && !signed {
				continue
			}
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return errInvalidArgument("Malformed aws-chunked trailer.")
		}
		name = strings.ToLower(strings.TrimSpace(name))
		value = strings.TrimSpace(value)
		if name == "x-amz-trailer-signature" {
			sig, signed = value, true
			continue
		}
		canonical.WriteString(name + ":" + value + "\n")
		if ch, ok := c.trailers[name]; ok {
			ch.setValue(value)
			seen[name] = true
		}
	}
	if c.key != nil {
		want := sign(c.key, trailerAlgo+"\n"+c.head+c.prev+"\n"+hexSHA256([]byte(canonical.String())))
		if !signed || !signatureEqual(sig, want) {
			return errChunkSignature("trailer")
		}
	}
	for name := range c.trailers {
		if !seen[name] {
			return errIncompleteBody("The trailer %s declared in x-amz-trailer is missing.", name)
		}
	}
	return nil
}

// readLine reads one line without its line ending. It returns io.EOF only
// at the end of the body with nothing read.
func (c *chunkedReader) readLine() (string, error) {
	b, err := c.br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return "", errInvalidArgument("An aws-chunked line is longer than %d bytes.", maxLine)
	case err == io.EOF && len(b) == 0:
		return "", io.EOF
	case err != nil:
		return "", truncated(err)
	}
	b = bytes.TrimSuffix(b[:len(b)-1], []byte("\r"))
	return string(b), nil
}

// readCRLF reads the line ending after a chunk's data.
func (c *chunkedReader) readCRLF() error {
	var crlf [2]byte
	if _, err := io.ReadFull(c.br, crlf[:]); err != nil {
		return truncated(err)
	}
	if crlf != [2]byte{'\r', '\n'} {
		return errInvalidArgument("Malformed aws-chunked body: chunk data not followed by CRLF.")
	}
	return nil
}

// truncated turns the end of a body in the middle of something into
// IncompleteBody and passes other errors through.
func truncated(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errIncompleteBody("The request body ended early.")
	}
	return err
}
