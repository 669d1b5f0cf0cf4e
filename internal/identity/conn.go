package identity

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// Sizes of the buffers under TLS.
const gatherMax = 256 << 10 // records gathered into one socket write

// readAhead is how many bytes a rawConn reads from the socket at a time
// (0: no read-ahead). A variable for the benchmarks.
var readAhead = 64 << 10

// rawConn is the connection under a TLS connection. It reads ahead, so
// that one read(2) brings several TLS records instead of one, and while a
// large TLS write is in progress (see gatherConn) it gathers the records
// that write makes into one write(2) instead of one per 16 KiB record.
// On loopback and fast links the system calls, not the bytes, are much of
// the cost of moving a share.
type rawConn struct {
	net.Conn
	r *bufio.Reader

	mu      sync.Mutex
	buf     []byte // records gathered, not yet written
	writers int    // gathered writes in progress
}

func newRawConn(c net.Conn) *rawConn {
	rc := &rawConn{Conn: c}
	if readAhead > 0 {
		rc.r = bufio.NewReaderSize(c, readAhead)
	}
	return rc
}

// Read reads through the read-ahead buffer.
func (c *rawConn) Read(p []byte) (int, error) {
	if c.r == nil {
		return c.Conn.Read(p)
	}
	return c.r.Read(p)
}

// Write writes p at once, or adds it to the gathered records while a
// gathered write is in progress.
func (c *rawConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writers == 0 {
		return c.Conn.Write(p)
	}
	if len(c.buf)+len(p) > gatherMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > gatherMax/2 {
			return c.Conn.Write(p)
		}
	}
	if c.buf == nil {
		c.buf = getGatherBuf()
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// begin starts a gathered write.
func (c *rawConn) begin() {
	c.mu.Lock()
	c.writers++
	c.mu.Unlock()
}

// end ends a gathered write, writing what was gathered once no other is
// in progress.
func (c *rawConn) end() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writers--
	if c.writers > 0 {
		return nil
	}
	err := c.flushLocked()
	if c.buf != nil {
		putGatherBuf(c.buf)
		c.buf = nil
	}
	return err
}

func (c *rawConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// gatherBufs keeps gather buffers for reuse. A free list, not a
// sync.Pool: a pool is emptied by every garbage collection, and memory
// touched afresh is costly on some virtual machines (each new page a fault
// in the host), more than the system calls gathering saves.
var gatherBufs = make(chan []byte, 64)

func getGatherBuf() []byte {
	select {
	case b := <-gatherBufs:
		return b[:0]
	default:
		return make([]byte, 0, gatherMax)
	}
}

func putGatherBuf(b []byte) {
	select {
	case gatherBufs <- b[:0]:
	default:
	}
}

// gatherConn is a client TLS connection whose large writes leave in few
// system calls: the TLS records of one Write are gathered by the rawConn
// under it and written together.
type gatherConn struct {
	*tls.Conn
	raw *rawConn
}

// Write encrypts p and sends it in writes of up to 256 KiB. (Even a small
// p may make several records: TLS starts a connection with small ones.)
func (c *gatherConn) Write(p []byte) (int, error) {
	c.raw.begin()
	n, err := c.Conn.Write(p)
	if ferr := c.raw.end(); err == nil {
		err = ferr
	}
	return n, err
}

// ConnState returns the TLS state of a connection: a *tls.Conn, or one
// made by a transport of [Identity.NewTransport] (as an
// httptrace.GotConnInfo gives it). It is nil for any other connection.
func ConnState(c net.Conn) *tls.ConnectionState {
	if tc, ok := c.(interface{ ConnectionState() tls.ConnectionState }); ok {
		cs := tc.ConnectionState()
		return &cs
	}
	return nil
}

// gatherListener accepts TLS connections that read ahead and gather
// their writes like a client's (see rawConn, gatherConn).
type gatherListener struct {
	net.Listener
	cfg *tls.Config
}

func (l gatherListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	raw := newRawConn(c)
	return &gatherConn{Conn: tls.Server(raw, l.cfg), raw: raw}, nil
}

// NewTLSListener returns a TLS listener like tls.NewListener, whose
// connections read ahead under TLS and send the records of each write
// together (see rawConn). They are not *tls.Conn, so an http.Server on it
// sets no Request.TLS and does not drive the handshake itself (the first
// read does, under the server's read timeouts); to know the peer, keep
// the connection with http.Server.ConnContext and use [ConnState].
func NewTLSListener(inner net.Listener, cfg *tls.Config) net.Listener {
	return gatherListener{inner, cfg}
}
