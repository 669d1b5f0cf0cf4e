// Package nbd serves block devices over the Network Block Device protocol
// (layer 5): the fixed newstyle handshake with named exports
// (NBD_OPT_EXPORT_NAME, NBD_OPT_INFO, NBD_OPT_GO, NBD_OPT_LIST,
// NBD_OPT_ABORT), TLS (NBD_OPT_STARTTLS, optional or required),
// structured replies (NBD_OPT_STRUCTURED_REPLY) and the metadata context
// base:allocation (NBD_OPT_LIST_META_CONTEXT, NBD_OPT_SET_META_CONTEXT),
// and in the transmission phase READ (in structured replies: data and hole
// chunks, or one data chunk with the DF flag), WRITE, FLUSH, TRIM,
// WRITE_ZEROES, BLOCK_STATUS and DISC, with the FUA flag; a device may
// announce CAN_MULTI_CONN. Extended headers are not offered; a client that
// asks is told so, as the protocol says (NetworkBlockDevice/nbd
// doc/proto.md).
//
// It imports nothing of Quilt: a Device is anything sized that reads,
// writes, flushes and zeroes (cmd/quilt serves internal/volume's volumes).
// Each connection's requests run one at a time, in order.
package nbd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Device is what an export serves.
type Device interface {
	Size() int64
	ReadOnly() bool
	ReadAt(ctx context.Context, p []byte, off int64) error
	WriteAt(ctx context.Context, p []byte, off int64, fua bool) error
	// Flush returns once every write completed before it is durable.
	Flush(ctx context.Context) error
	// Zero makes a range read as zeros (TRIM and WRITE_ZEROES).
	Zero(ctx context.Context, off, n int64, fua bool) error
	Close() error
}

// MultiConn is a Device that may say it is safe for several connections
// at once (NBD_FLAG_CAN_MULTI_CONN): every connection that opened it sees
// the others' completed writes, and a flush on any of them makes durable
// every write completed on any of them before it.
type MultiConn interface {
	MultiConn() bool
}

// Mapper is a Device that can say which of its ranges are stored and
// which are holes (never written, trimmed or zeroed: they read as zeros
// without touching storage). It answers the base:allocation metadata
// context (NBD_CMD_BLOCK_STATUS) and lets a structured READ send holes as
// NBD_REPLY_TYPE_OFFSET_HOLE. A Device that is not one is reported as
// stored throughout.
type Mapper interface {
	// Extents calls fn for consecutive runs covering [off, off+n), in
	// order, each with its length and whether it is stored.
	Extents(off, n int64, fn func(length int64, stored bool)) error
}

// Peer is the client a connection comes from, as Open and Exports see it.
type Peer struct {
	// Remote is the client's address.
	Remote net.Addr
	// TLS is the connection's TLS state once the client started TLS
	// (NBD_OPT_STARTTLS), with the client's certificates if it sent any;
	// nil on a plain connection.
	TLS *tls.ConnectionState
}

// ErrForbidden, wrapped by an error of Config.Open, refuses the export to
// this client by policy (NBD_REP_ERR_POLICY) rather than as unknown.
var ErrForbidden = errors.New("nbd: export not permitted to this client")

// Config configures a Server.
type Config struct {
	// Exports lists the export names the peer may see (NBD_OPT_LIST).
	Exports func(ctx context.Context, peer Peer) ([]string, error)
	// Open opens an export by name for the peer; an error means no such
	// export, or (wrapping ErrForbidden) one the peer may not open.
	Open func(ctx context.Context, name string, peer Peer) (Device, error)
	// TLS, if set, is offered to clients (NBD_OPT_STARTTLS); nil answers
	// STARTTLS with ERR_UNSUP. Its ClientAuth says whether clients must
	// send certificates; Open sees them in Peer.TLS.
	TLS *tls.Config
	// RequireTLS refuses every option but STARTTLS and ABORT before TLS
	// is started (NBD_REP_ERR_TLS_REQD; a client sending EXPORT_NAME is
	// hung up on). It needs TLS.
	RequireTLS bool
	// Logger receives connection errors; default slog.Default().
	Logger *slog.Logger
}

// MaxPayload bounds a request's length (32 MiB, the limit clients assume).
const MaxPayload = 32 << 20

// Protocol constants (doc/proto.md).
const (
	nbdMagic      = 0x4e42444d41474943 // "NBDMAGIC"
	optMagic      = 0x49484156454F5054 // "IHAVEOPT"
	repMagic      = 0x3e889045565a9
	requestMagic  = 0x25609513
	simpleReplyMg = 0x67446698

	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1

	optExportName = 1
	optAbort      = 2
	optList       = 3
	optStartTLS   = 5
	optInfo       = 6
	optGo         = 7
	optStructured = 8
	optListMeta   = 9
	optSetMeta    = 10

	repAck        = 1
	repServer     = 2
	repInfo       = 3
	repMetaCtx    = 4
	repErrUnsup   = 1<<31 + 1
	repErrPolicy  = 1<<31 + 2
	repErrInvalid = 1<<31 + 3
	repErrTLSReqd = 1<<31 + 5
	repErrUnknown = 1<<31 + 6

	infoExport    = 0
	infoBlockSize = 3

	tHasFlags     = 1 << 0
	tReadOnly     = 1 << 1
	tSendFlush    = 1 << 2
	tSendFUA      = 1 << 3
	tSendTrim     = 1 << 5
	tSendWriteZer = 1 << 6
	tSendDF       = 1 << 7
	tCanMultiConn = 1 << 8

	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdWriteZeroes = 6
	cmdBlockStatus = 7
	cmdFlagFUA     = 1 << 0
	cmdFlagDF      = 1 << 2
	cmdFlagReqOne  = 1 << 3

	structReplyMg = 0x668e33ef
	replyFlagDone = 1 << 0
	rtNone        = 0
	rtOffsetData  = 1
	rtOffsetHole  = 2
	rtBlockStatus = 5
	rtError       = 1<<15 + 1
	rtErrorOffset = 1<<15 + 2

	// The one metadata context served, and its id in this server's
	// NBD_OPT_SET_META_CONTEXT replies and BLOCK_STATUS chunks.
	metaAlloc   = "base:allocation"
	metaAllocID = 1
	stateHole   = 1 << 0
	stateZero   = 1 << 1

	ePerm   = 1
	eIO     = 5
	eInval  = 22
	eNoSpc  = 28
	eNotSup = 95
)

// Server serves exports to NBD clients.
type Server struct {
	cfg   Config
	log   *slog.Logger
	ctx   context.Context
	stop  context.CancelFunc
	mu    sync.Mutex
	lns   []net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// New makes a server. A Config with RequireTLS and no TLS refuses every
// client.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, conns: map[net.Conn]bool{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// Serve accepts connections on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			if err := s.handle(c); err != nil && !errors.Is(err, io.EOF) && s.ctx.Err() == nil {
				s.log.Warn("nbd: connection", "remote", c.RemoteAddr().String(), "err", err)
			}
			c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops the listeners and connections and waits for them.
func (s *Server) Close() error {
	s.stop()
	s.mu.Lock()
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type conn struct {
	c    net.Conn // the TLS connection once the client started TLS
	r    *bufio.Reader
	w    *bufio.Writer
	s    *Server
	peer Peer
	// sr: structured replies negotiated. alloc: base:allocation selected
	// (NBD_OPT_SET_META_CONTEXT) for export allocFor.
	sr       bool
	alloc    bool
	allocFor string
}

func (c *conn) u16(v uint16) { c.w.Write(binary.BigEndian.AppendUint16(nil, v)) }
func (c *conn) u32(v uint32) { c.w.Write(binary.BigEndian.AppendUint32(nil, v)) }
func (c *conn) u64(v uint64) { c.w.Write(binary.BigEndian.AppendUint64(nil, v)) }

func (c *conn) read(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(c.r, b)
	return b, err
}

// reply sends an option reply.
func (c *conn) reply(opt, typ uint32, data []byte) error {
	c.u64(repMagic)
	c.u32(opt)
	c.u32(typ)
	c.u32(uint32(len(data)))
	c.w.Write(data)
	return c.w.Flush()
}

func (c *conn) replyErr(opt, typ uint32, msg string) error { return c.reply(opt, typ, []byte(msg)) }

func (s *Server) handle(nc net.Conn) error {
	c := &conn{c: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10), s: s,
		peer: Peer{Remote: nc.RemoteAddr()}}
	// The handshake has a deadline; transmission has none (a VM may idle).
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	c.u64(nbdMagic)
	c.u64(optMagic)
	c.u16(flagFixedNewstyle | flagNoZeroes)
	if err := c.w.Flush(); err != nil {
		return err
	}
	b, err := c.read(4)
	if err != nil {
		return err
	}
	cflags := binary.BigEndian.Uint32(b)
	if cflags&^uint32(flagFixedNewstyle|flagNoZeroes) != 0 {
		return fmt.Errorf("unknown client flags %#x", cflags)
	}
	noZeroes := cflags&flagNoZeroes != 0
	for range 1000 {
		h, err := c.read(16)
		if err != nil {
			return err
		}
		if binary.BigEndian.Uint64(h) != optMagic {
			return errors.New("bad option magic")
		}
		opt, n := binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])
		if n > 64<<10 {
			return fmt.Errorf("option %d of %d bytes", opt, n)
		}
		data, err := c.read(int(n))
		if err != nil {
			return err
		}
		if s.cfg.RequireTLS && c.peer.TLS == nil && opt != optStartTLS && opt != optAbort {
			if opt == optExportName {
				return errors.New("EXPORT_NAME without TLS, which is required") // no reply possible: hang up
			}
			if err := c.replyErr(opt, repErrTLSReqd, "TLS is required (NBD_OPT_STARTTLS)"); err != nil {
				return err
			}
			continue
		}
		switch opt {
		case optStartTLS:
			switch {
			case n != 0:
				err = c.replyErr(opt, repErrInvalid, "STARTTLS takes no data")
			case s.cfg.TLS == nil:
				err = c.replyErr(opt, repErrUnsup, "TLS is not offered")
			case c.peer.TLS != nil:
				err = c.replyErr(opt, repErrInvalid, "TLS already started")
			default:
				if err := c.reply(opt, repAck, nil); err != nil {
					return err
				}
				if c.r.Buffered() != 0 {
					return errors.New("data sent before the TLS handshake")
				}
				tc := tls.Server(nc, s.cfg.TLS)
				if err := tc.HandshakeContext(s.ctx); err != nil {
					return fmt.Errorf("TLS handshake: %w", err)
				}
				st := tc.ConnectionState()
				c.c, c.r, c.w, c.peer.TLS = tc, bufio.NewReaderSize(tc, 64<<10), bufio.NewWriterSize(tc, 64<<10), &st
				// What was negotiated in plaintext does not carry over.
				c.sr, c.alloc = false, false
			}
			if err != nil {
				return err
			}
		case optExportName:
			dev, err := s.cfg.Open(s.ctx, string(data), c.peer)
			if err != nil {
				return fmt.Errorf("export %q: %w", data, err) // the protocol's only answer: hang up
			}
			c.alloc = c.alloc && c.allocFor == string(data)
			c.u64(uint64(dev.Size()))
			c.u16(c.transFlags(dev))
			if !noZeroes {
				c.w.Write(make([]byte, 124))
			}
			if err := c.w.Flush(); err != nil {
				dev.Close()
				return err
			}
			return c.transmit(dev)
		case optAbort:
			c.reply(opt, repAck, nil)
			return nil
		case optList:
			if n != 0 {
				if err := c.replyErr(opt, repErrInvalid, "LIST takes no data"); err != nil {
					return err
				}
				continue
			}
			names, err := s.cfg.Exports(s.ctx, c.peer)
			if err != nil {
				if err := c.replyErr(opt, repErrUnsup, err.Error()); err != nil {
					return err
				}
				continue
			}
			for _, name := range names {
				d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
				if err := c.reply(opt, repServer, append(d, name...)); err != nil {
					return err
				}
			}
			if err := c.reply(opt, repAck, nil); err != nil {
				return err
			}
		case optInfo, optGo:
			if len(data) < 6 {
				if err := c.replyErr(opt, repErrInvalid, "short request"); err != nil {
					return err
				}
				continue
			}
			nl := binary.BigEndian.Uint32(data)
			if uint64(nl)+6 > uint64(len(data)) {
				if err := c.replyErr(opt, repErrInvalid, "bad name length"); err != nil {
					return err
				}
				continue
			}
			name := string(data[4 : 4+nl])
			nreq := binary.BigEndian.Uint16(data[4+nl:])
			if int(nl)+6+2*int(nreq) != len(data) {
				if err := c.replyErr(opt, repErrInvalid, "bad request count"); err != nil {
					return err
				}
				continue
			}
			dev, err := s.cfg.Open(s.ctx, name, c.peer)
			if err != nil {
				typ := uint32(repErrUnknown)
				if errors.Is(err, ErrForbidden) {
					typ = repErrPolicy
				}
				if err := c.replyErr(opt, typ, err.Error()); err != nil {
					return err
				}
				continue
			}
			d := binary.BigEndian.AppendUint16(nil, infoExport)
			d = binary.BigEndian.AppendUint64(d, uint64(dev.Size()))
			d = binary.BigEndian.AppendUint16(d, c.transFlags(dev))
			err = c.reply(opt, repInfo, d)
			if err == nil {
				d = binary.BigEndian.AppendUint16(nil, infoBlockSize)
				d = binary.BigEndian.AppendUint32(d, 1)
				d = binary.BigEndian.AppendUint32(d, 4096)
				d = binary.BigEndian.AppendUint32(d, MaxPayload)
				err = c.reply(opt, repInfo, d)
			}
			if err == nil {
				err = c.reply(opt, repAck, nil)
			}
			if err != nil || opt == optInfo {
				dev.Close()
				if err != nil {
					return err
				}
				continue
			}
			// Contexts selected for another export do not apply.
			c.alloc = c.alloc && c.allocFor == name
			return c.transmit(dev)
		case optStructured:
			switch {
			case n != 0:
				err = c.replyErr(opt, repErrInvalid, "STRUCTURED_REPLY takes no data")
			case c.sr:
				err = c.replyErr(opt, repErrInvalid, "structured replies already negotiated")
			default:
				c.sr = true
				err = c.reply(opt, repAck, nil)
			}
			if err != nil {
				return err
			}
		case optListMeta, optSetMeta:
			if err := c.metaContext(opt, data); err != nil {
				return err
			}
		default:
			// Extended headers and anything newer.
			if err := c.replyErr(opt, repErrUnsup, "not supported"); err != nil {
				return err
			}
		}
	}
	return errors.New("too many options")
}

// metaContext answers NBD_OPT_LIST_META_CONTEXT and
// NBD_OPT_SET_META_CONTEXT: the export name, then the queries. Only
// base:allocation is known ("base:" lists it too, as does a list with no
// query); queries of other namespaces select nothing. A SET replaces what
// an earlier one selected.
func (c *conn) metaContext(opt uint32, data []byte) error {
	name, queries, ok := parseMetaRequest(data)
	switch {
	case !ok:
		return c.replyErr(opt, repErrInvalid, "malformed metadata context request")
	case !c.sr:
		return c.replyErr(opt, repErrInvalid, "metadata contexts need structured replies (NBD_OPT_STRUCTURED_REPLY) first")
	}
	sel := opt == optListMeta && len(queries) == 0
	for _, q := range queries {
		if q == metaAlloc || (opt == optListMeta && q == "base:") {
			sel = true
		}
	}
	if opt == optSetMeta {
		c.alloc, c.allocFor = sel, name
	}
	if sel {
		id := uint32(0) // reserved in LIST replies
		if opt == optSetMeta {
			id = metaAllocID
		}
		if err := c.reply(opt, repMetaCtx, append(binary.BigEndian.AppendUint32(nil, id), metaAlloc...)); err != nil {
			return err
		}
	}
	return c.reply(opt, repAck, nil)
}

// parseMetaRequest splits a metadata context option's data: a 32-bit
// length and the export name, a 32-bit count of queries, and each query
// as a 32-bit length and a string.
func parseMetaRequest(d []byte) (name string, queries []string, ok bool) {
	str := func() (string, bool) {
		if len(d) < 4 {
			return "", false
		}
		n := binary.BigEndian.Uint32(d)
		if uint64(n) > uint64(len(d)-4) || n > 4096 {
			return "", false
		}
		s := string(d[4 : 4+n])
		d = d[4+n:]
		return s, true
	}
	if name, ok = str(); !ok || len(d) < 4 {
		return "", nil, false
	}
	cnt := binary.BigEndian.Uint32(d)
	d = d[4:]
	if uint64(cnt)*4 > uint64(len(d)) {
		return "", nil, false
	}
	for range cnt {
		q, ok := str()
		if !ok {
			return "", nil, false
		}
		queries = append(queries, q)
	}
	return name, queries, len(d) == 0
}

func (c *conn) transFlags(d Device) uint16 {
	f := uint16(tHasFlags | tSendFlush | tSendFUA | tSendTrim | tSendWriteZer)
	if c.sr {
		f |= tSendDF
	}
	if d.ReadOnly() {
		f |= tReadOnly
	}
	if m, ok := d.(MultiConn); ok && m.MultiConn() {
		f |= tCanMultiConn
	}
	return f
}

// transmit serves requests until DISC or a broken connection, and flushes
// the device when the client leaves.
func (c *conn) transmit(dev Device) error {
	defer func() {
		if err := dev.Close(); err != nil {
			c.s.log.Warn("nbd: close", "err", err)
		}
	}()
	c.c.SetDeadline(time.Time{})
	ctx := c.s.ctx
	defer func() {
		// What the client wrote is kept when it leaves, even without a
		// flush of its own, and when the server stops.
		if !dev.ReadOnly() {
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := dev.Flush(fctx); err != nil {
				c.s.log.Warn("nbd: flush at disconnect", "err", err)
			}
		}
	}()
	for {
		h, err := c.read(28)
		if err != nil {
			return err
		}
		if binary.BigEndian.Uint32(h) != requestMagic {
			return errors.New("bad request magic")
		}
		flags, typ := binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:])
		cookie := binary.BigEndian.Uint64(h[8:])
		off, n := binary.BigEndian.Uint64(h[16:]), binary.BigEndian.Uint32(h[24:])
		fua := flags&cmdFlagFUA != 0
		var payload []byte
		if typ == cmdWrite {
			if n > MaxPayload {
				return fmt.Errorf("write of %d bytes", n)
			}
			if payload, err = c.read(int(n)); err != nil {
				return err
			}
		}
		inRange := off <= uint64(dev.Size()) && uint64(n) <= uint64(dev.Size())-off
		var errno uint32
		var data []byte
		switch typ {
		case cmdRead:
			if c.sr {
				switch {
				case n > MaxPayload:
					err = c.chunkErr(cookie, eInval, "read longer than 32 MiB")
				case !inRange:
					err = c.chunkErr(cookie, eInval, "read past the end of the export")
				default:
					err = c.readChunks(ctx, dev, cookie, off, n, flags&cmdFlagDF != 0)
				}
				if err != nil {
					return err
				}
				continue
			}
			switch {
			case n > MaxPayload:
				errno = eInval
			case !inRange:
				errno = eInval
			default:
				data = make([]byte, n)
				if err := dev.ReadAt(ctx, data, int64(off)); err != nil {
					c.s.log.Warn("nbd: read", "off", off, "len", n, "err", err)
					errno, data = eIO, nil
				}
			}
		case cmdWrite, cmdTrim, cmdWriteZeroes:
			switch {
			case dev.ReadOnly():
				errno = ePerm
			case !inRange:
				errno = eNoSpc
			default:
				if typ == cmdWrite {
					err = dev.WriteAt(ctx, payload, int64(off), fua)
				} else {
					err = dev.Zero(ctx, int64(off), int64(n), fua)
				}
				if err != nil {
					c.s.log.Warn("nbd: write", "cmd", typ, "off", off, "len", n, "err", err)
					errno = eIO
				}
			}
		case cmdFlush:
			if err := dev.Flush(ctx); err != nil {
				c.s.log.Warn("nbd: flush", "err", err)
				errno = eIO
			}
		case cmdBlockStatus:
			msg := ""
			switch {
			case !c.alloc:
				errno, msg = eInval, "no metadata context selected (NBD_OPT_SET_META_CONTEXT)"
			case n == 0 || !inRange:
				errno, msg = eInval, "block status range empty or past the end of the export"
			default:
				err = c.blockStatus(dev, cookie, off, n, flags&cmdFlagReqOne != 0)
			}
			if c.sr && errno != 0 {
				err = c.chunkErr(cookie, errno, msg)
			}
			if err != nil {
				return err
			}
			if c.sr {
				continue
			}
		case cmdDisc:
			return nil
		default:
			errno = eNotSup
		}
		c.u32(simpleReplyMg)
		c.u32(errno)
		c.u64(cookie)
		c.w.Write(data)
		if err := c.w.Flush(); err != nil {
			return err
		}
	}
}

// chunk sends a structured reply chunk's header; its payload follows.
func (c *conn) chunk(cookie uint64, flags, typ uint16, n int) {
	c.u32(structReplyMg)
	c.u16(flags)
	c.u16(typ)
	c.u64(cookie)
	c.u32(uint32(n))
}

// chunkErr ends a structured reply with an NBD_REPLY_TYPE_ERROR chunk.
func (c *conn) chunkErr(cookie uint64, errno uint32, msg string) error {
	c.chunk(cookie, replyFlagDone, rtError, 6+len(msg))
	c.u32(errno)
	c.u16(uint16(len(msg)))
	c.w.WriteString(msg)
	return c.w.Flush()
}

// run is a range of a request and whether it is stored.
type run struct {
	off, n int64
	stored bool
}

// extents maps [off, off+n) of dev into runs, adjacent runs of one kind
// merged; a device that is no Mapper is stored throughout.
func extents(dev Device, off, n int64) ([]run, error) {
	m, ok := dev.(Mapper)
	if !ok {
		return []run{{off, n, true}}, nil
	}
	var rs []run
	pos := off
	err := m.Extents(off, n, func(l int64, stored bool) {
		l = min(l, off+n-pos)
		if l <= 0 {
			return
		}
		if k := len(rs) - 1; k >= 0 && rs[k].stored == stored {
			rs[k].n += l
		} else {
			rs = append(rs, run{pos, l, stored})
		}
		pos += l
	})
	if err != nil {
		return nil, err
	}
	if pos < off+n { // a short map: the rest counts as stored
		if k := len(rs) - 1; k >= 0 && rs[k].stored {
			rs[k].n += off + n - pos
		} else {
			rs = append(rs, run{pos, off + n - pos, true})
		}
	}
	return rs, nil
}

// readChunks answers a READ in structured reply chunks: one
// NBD_REPLY_TYPE_OFFSET_DATA per stored run and one
// NBD_REPLY_TYPE_OFFSET_HOLE per hole, or with df (NBD_CMD_FLAG_DF) the
// whole range in one data chunk; a failed read ends the reply with
// NBD_REPLY_TYPE_ERROR_OFFSET at the run's offset.
func (c *conn) readChunks(ctx context.Context, dev Device, cookie, off uint64, n uint32, df bool) error {
	if n == 0 {
		c.chunk(cookie, replyFlagDone, rtNone, 0)
		return c.w.Flush()
	}
	rs := []run{{int64(off), int64(n), true}}
	if !df {
		var err error
		if rs, err = extents(dev, int64(off), int64(n)); err != nil {
			c.s.log.Warn("nbd: read map", "off", off, "len", n, "err", err)
			rs = []run{{int64(off), int64(n), true}}
		}
	}
	for i, r := range rs {
		fl := uint16(0)
		if i == len(rs)-1 {
			fl = replyFlagDone
		}
		if !r.stored {
			c.chunk(cookie, fl, rtOffsetHole, 12)
			c.u64(uint64(r.off))
			c.u32(uint32(r.n))
			continue
		}
		data := make([]byte, r.n)
		if err := dev.ReadAt(ctx, data, r.off); err != nil {
			c.s.log.Warn("nbd: read", "off", r.off, "len", r.n, "err", err)
			msg := "read failed"
			c.chunk(cookie, replyFlagDone, rtErrorOffset, 14+len(msg))
			c.u32(eIO)
			c.u16(uint16(len(msg)))
			c.w.WriteString(msg)
			c.u64(uint64(r.off))
			return c.w.Flush()
		}
		c.chunk(cookie, fl, rtOffsetData, 8+len(data))
		c.u64(uint64(r.off))
		c.w.Write(data)
	}
	return c.w.Flush()
}

// blockStatus answers BLOCK_STATUS for base:allocation: one
// NBD_REPLY_TYPE_BLOCK_STATUS chunk of extents, holes flagged
// NBD_STATE_HOLE|NBD_STATE_ZERO, stored ones 0; with reqOne
// (NBD_CMD_FLAG_REQ_ONE) only the first.
func (c *conn) blockStatus(dev Device, cookie, off uint64, n uint32, reqOne bool) error {
	rs, err := extents(dev, int64(off), int64(n))
	if err != nil {
		c.s.log.Warn("nbd: block status", "off", off, "len", n, "err", err)
		if c.sr {
			return c.chunkErr(cookie, eIO, "block status failed")
		}
		return nil
	}
	if reqOne {
		rs = rs[:1]
	}
	c.chunk(cookie, replyFlagDone, rtBlockStatus, 4+8*len(rs))
	c.u32(metaAllocID)
	for _, r := range rs {
		c.u32(uint32(r.n))
		st := uint32(0)
		if !r.stored {
			st = stateHole | stateZero
		}
		c.u32(st)
	}
	return c.w.Flush()
}
