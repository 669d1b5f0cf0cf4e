// Package nbd serves block devices over the Network Block Device protocol
// (layer 5): the fixed newstyle handshake with named exports
// (NBD_OPT_EXPORT_NAME, NBD_OPT_INFO, NBD_OPT_GO, NBD_OPT_LIST,
// NBD_OPT_ABORT), TLS (NBD_OPT_STARTTLS, optional or required) and the
// simple replies of the transmission phase to READ, WRITE, FLUSH, TRIM,
// WRITE_ZEROES and DISC, with the FUA flag; a device may announce
// CAN_MULTI_CONN. Structured replies and metadata contexts are not
// offered; a client that asks is told so, as the protocol says
// (NetworkBlockDevice/nbd doc/proto.md).
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

	repAck        = 1
	repServer     = 2
	repInfo       = 3
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
	tCanMultiConn = 1 << 8

	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdWriteZeroes = 6
	cmdFlagFUA     = 1 << 0

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
			}
			if err != nil {
				return err
			}
		case optExportName:
			dev, err := s.cfg.Open(s.ctx, string(data), c.peer)
			if err != nil {
				return fmt.Errorf("export %q: %w", data, err) // the protocol's only answer: hang up
			}
			c.u64(uint64(dev.Size()))
			c.u16(transFlags(dev))
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
			d = binary.BigEndian.AppendUint16(d, transFlags(dev))
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
			return c.transmit(dev)
		default:
			// STRUCTURED_REPLY, metadata contexts, extended headers and
			// anything newer.
			if err := c.replyErr(opt, repErrUnsup, "not supported"); err != nil {
				return err
			}
		}
	}
	return errors.New("too many options")
}

func transFlags(d Device) uint16 {
	f := uint16(tHasFlags | tSendFlush | tSendFUA | tSendTrim | tSendWriteZer)
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
