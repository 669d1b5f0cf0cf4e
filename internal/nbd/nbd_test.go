package nbd

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// memDev is an in-memory device.
type memDev struct {
	mu      sync.Mutex
	b       []byte
	ro      bool
	flushes int
	multi   bool  // served as a MultiConn device
	mapped  bool  // served as a Mapper: 4 KiB blocks of zeros are holes
	bad     int64 // ReadAt of a range holding this offset fails (0: none)
}

// mapDev is a memDev that is a Mapper.
type mapDev struct{ *memDev }

// Extents reports each 4 KiB block holding a nonzero byte as stored.
func (d mapDev) Extents(off, n int64, fn func(int64, bool)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for end := off + n; off < end; {
		k := min(end, (off/4096+1)*4096) - off
		fn(k, !allZero(d.b[off:off+k]))
		off += k
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// multiDev is a memDev that announces CAN_MULTI_CONN.
type multiDev struct{ *memDev }

func (multiDev) MultiConn() bool { return true }

func (d *memDev) Size() int64    { return int64(len(d.b)) }
func (d *memDev) ReadOnly() bool { return d.ro }
func (d *memDev) ReadAt(_ context.Context, p []byte, off int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bad > 0 && off <= d.bad && d.bad < off+int64(len(p)) {
		return errors.New("injected read failure")
	}
	copy(p, d.b[off:])
	return nil
}
func (d *memDev) WriteAt(_ context.Context, p []byte, off int64, fua bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	copy(d.b[off:], p)
	if fua {
		d.flushes++
	}
	return nil
}
func (d *memDev) Flush(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flushes++
	return nil
}
func (d *memDev) Zero(_ context.Context, off, n int64, _ bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.b[off : off+n])
	return nil
}
func (d *memDev) Close() error { return nil }

func serve(t *testing.T, devs map[string]*memDev) string {
	return serveWith(t, devs, Config{})
}

// serveWith serves devs with cfg's TLS settings, and cfg.Open (if set)
// deciding who may open what before the device is looked up.
func serveWith(t *testing.T, devs map[string]*memDev, cfg Config) string {
	check := cfg.Open
	s := New(Config{
		TLS:        cfg.TLS,
		RequireTLS: cfg.RequireTLS,
		Exports: func(context.Context, Peer) ([]string, error) {
			var n []string
			for k := range devs {
				n = append(n, k)
			}
			return n, nil
		},
		Open: func(ctx context.Context, name string, p Peer) (Device, error) {
			if check != nil {
				if _, err := check(ctx, name, p); err != nil {
					return nil, err
				}
			}
			if d, ok := devs[name]; ok {
				if d.multi {
					return multiDev{d}, nil
				}
				if d.mapped {
					return mapDev{d}, nil
				}
				return d, nil
			}
			return nil, errors.New("no such export")
		},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

type client struct {
	t *testing.T
	c net.Conn
}

func dial(t *testing.T, addr string) *client {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	cl := &client{t, c}
	h := cl.read(18)
	if binary.BigEndian.Uint64(h) != nbdMagic || binary.BigEndian.Uint64(h[8:]) != optMagic {
		t.Fatalf("bad greeting %x", h)
	}
	cl.write(binary.BigEndian.AppendUint32(nil, flagFixedNewstyle|flagNoZeroes))
	return cl
}

func (c *client) read(n int) []byte {
	b := make([]byte, n)
	if _, err := io.ReadFull(c.c, b); err != nil {
		c.t.Fatal(err)
	}
	return b
}

func (c *client) write(b []byte) {
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) option(opt uint32, data []byte) {
	b := binary.BigEndian.AppendUint64(nil, optMagic)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	c.write(append(b, data...))
}

// reply reads one option reply: its type and data.
func (c *client) reply() (uint32, []byte) {
	h := c.read(20)
	if binary.BigEndian.Uint64(h) != repMagic {
		c.t.Fatalf("bad reply magic %x", h)
	}
	return binary.BigEndian.Uint32(h[12:]), c.read(int(binary.BigEndian.Uint32(h[16:])))
}

func goData(name string) []byte {
	d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	return append(append(d, name...), 0, 0)
}

// do sends a request and returns the reply's error and data.
func (c *client) do(typ, flags uint16, off uint64, n uint32, payload []byte, readN int) (uint32, []byte) {
	b := binary.BigEndian.AppendUint32(nil, requestMagic)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, 42)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, n)
	c.write(append(b, payload...))
	h := c.read(16)
	if binary.BigEndian.Uint32(h) != simpleReplyMg || binary.BigEndian.Uint64(h[8:]) != 42 {
		c.t.Fatalf("bad simple reply %x", h)
	}
	errno := binary.BigEndian.Uint32(h[4:])
	if errno != 0 {
		return errno, nil
	}
	return 0, c.read(readN)
}

func TestNBDGoReadWriteFlush(t *testing.T) {
	dev := &memDev{b: make([]byte, 1<<20)}
	addr := serve(t, map[string]*memDev{"a": dev, "snap": {b: make([]byte, 4096), ro: true}})
	c := dial(t, addr)
	c.option(optList, nil)
	var names []string
	for range 3 {
		typ, d := c.reply()
		if typ == repAck {
			break
		}
		names = append(names, string(d[4:]))
	}
	if len(names) != 2 {
		t.Fatalf("LIST gave %q", names)
	}
	c.option(optGo, goData("nope"))
	if typ, _ := c.reply(); typ != repErrUnknown {
		t.Fatalf("GO of an unknown export: reply %#x", typ)
	}
	c.option(99, nil)
	if typ, _ := c.reply(); typ != repErrUnsup {
		t.Fatalf("unknown option: reply %#x", typ)
	}
	c.option(optGo, goData("a"))
	typ, d := c.reply()
	if typ != repInfo || binary.BigEndian.Uint64(d[2:]) != 1<<20 || binary.BigEndian.Uint16(d[10:])&tSendFlush == 0 {
		t.Fatalf("GO: reply %d %x", typ, d)
	}
	for typ != repAck {
		typ, _ = c.reply()
	}
	data := bytes.Repeat([]byte("quilt"), 1000)
	if e, _ := c.do(cmdWrite, cmdFlagFUA, 777, uint32(len(data)), data, 0); e != 0 || dev.flushes != 1 {
		t.Fatalf("write: errno %d, flushes %d", e, dev.flushes)
	}
	if e, got := c.do(cmdRead, 0, 777, uint32(len(data)), nil, len(data)); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read back: errno %d", e)
	}
	if e, _ := c.do(cmdFlush, 0, 0, 0, nil, 0); e != 0 || dev.flushes != 2 {
		t.Fatalf("flush: errno %d, flushes %d", e, dev.flushes)
	}
	if e, _ := c.do(cmdWriteZeroes, 0, 777, 10, nil, 0); e != 0 || dev.b[780] != 0 || dev.b[787] == 0 {
		t.Fatalf("write zeroes: errno %d", e)
	}
	if e, _ := c.do(cmdRead, 0, 1<<20-1, 2, nil, 0); e != eInval {
		t.Fatalf("read past the end: errno %d", e)
	}
	if e, _ := c.do(cmdWrite, 0, 1<<20, 1, []byte{1}, 0); e != eNoSpc {
		t.Fatalf("write past the end: errno %d", e)
	}
	if e, _ := c.do(5, 0, 0, 0, nil, 0); e != eNotSup {
		t.Fatalf("unknown command: errno %d", e)
	}
	// The connection still serves after the errors.
	if e, got := c.do(cmdRead, 0, 787, 5, nil, 5); e != 0 || string(got) != string(data[10:15]) {
		t.Fatalf("read after errors: errno %d %q", e, got)
	}

	ro := dial(t, addr)
	ro.option(optExportName, []byte("snap"))
	h := ro.read(10)
	if binary.BigEndian.Uint64(h) != 4096 || binary.BigEndian.Uint16(h[8:])&tReadOnly == 0 {
		t.Fatalf("EXPORT_NAME: %x", h)
	}
	if e, _ := ro.do(cmdWrite, 0, 0, 1, []byte{1}, 0); e != ePerm {
		t.Fatalf("write to a read-only export: errno %d", e)
	}
}

func TestNBDBadHandshakeHangsUp(t *testing.T) {
	addr := serve(t, map[string]*memDev{"a": {b: make([]byte, 512)}})
	for _, bad := range [][]byte{
		binary.BigEndian.AppendUint64(nil, 1),                                                 // bad option magic
		append(binary.BigEndian.AppendUint64(nil, optMagic), 0, 0, 0, 7, 0xff, 0, 0, 0),       // huge option
		append(binary.BigEndian.AppendUint64(nil, optMagic), 0, 0, 0, 1, 0, 0, 0, 1, 'z'),     // EXPORT_NAME of nothing
		append(binary.BigEndian.AppendUint64(nil, optMagic), 0, 0, 0, 7, 0, 0, 0, 4, 0, 0, 0), // short GO, then EOF
	} {
		c := dial(t, addr)
		c.write(bad)
		c.c.(*net.TCPConn).CloseWrite()
		buf := make([]byte, 4096)
		for range 10 {
			if _, err := c.c.Read(buf); err != nil {
				break // the server hung up
			}
		}
	}
}

// selfSigned makes a certificate and key for TLS in tests.
func selfSigned(t *testing.T, name string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startTLS sends STARTTLS, expects its ACK and continues over TLS with
// cert as the client's certificate.
func (c *client) startTLS(cert *tls.Certificate) {
	c.option(optStartTLS, nil)
	if typ, d := c.reply(); typ != repAck {
		c.t.Fatalf("STARTTLS: reply %#x %q", typ, d)
	}
	cfg := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tc := tls.Client(c.c, cfg)
	if err := tc.Handshake(); err != nil {
		c.t.Fatal(err)
	}
	c.c = tc
}

// goExport sends GO for name and returns the export's transmission flags,
// or the error reply's type.
func (c *client) goExport(name string) (flags uint16, errTyp uint32) {
	c.option(optGo, goData(name))
	for {
		typ, d := c.reply()
		switch {
		case typ == repAck:
			return flags, 0
		case typ == repInfo && binary.BigEndian.Uint16(d) == infoExport:
			flags = binary.BigEndian.Uint16(d[10:])
		case typ >= 1<<31:
			return 0, typ
		}
	}
}

// TestNBDStartTLS: with TLS required, a plain client gets ERR_TLS_REQD for
// LIST and GO and is hung up on at EXPORT_NAME; after STARTTLS the export
// opens, with Open seeing the client's certificate, which decides
// (ERR_POLICY for a certificate it does not know); a second STARTTLS is
// invalid; a server without TLS answers STARTTLS with ERR_UNSUP.
func TestNBDStartTLS(t *testing.T) {
	srv, good, bad := selfSigned(t, "server"), selfSigned(t, "good"), selfSigned(t, "bad")
	dev := &memDev{b: make([]byte, 8192)}
	addr := serveWith(t, map[string]*memDev{"a": dev}, Config{
		TLS:        &tls.Config{Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequestClientCert},
		RequireTLS: true,
		Open: func(_ context.Context, name string, p Peer) (Device, error) {
			if p.TLS == nil || len(p.TLS.PeerCertificates) == 0 ||
				!bytes.Equal(p.TLS.PeerCertificates[0].Raw, good.Certificate[0]) {
				return nil, fmt.Errorf("%s: %w", name, ErrForbidden)
			}
			return nil, nil
		},
	})

	plain := dial(t, addr)
	plain.option(optList, nil)
	if typ, _ := plain.reply(); typ != repErrTLSReqd {
		t.Fatalf("LIST without TLS: reply %#x", typ)
	}
	if _, typ := plain.goExport("a"); typ != repErrTLSReqd {
		t.Fatalf("GO without TLS: reply %#x", typ)
	}
	plain.option(optStartTLS, []byte{1})
	if typ, _ := plain.reply(); typ != repErrInvalid {
		t.Fatalf("STARTTLS with data: reply %#x", typ)
	}
	plain.option(optExportName, []byte("a"))
	if _, err := plain.c.Read(make([]byte, 1)); err == nil {
		t.Fatal("EXPORT_NAME without TLS was answered")
	}

	c := dial(t, addr)
	c.startTLS(&good)
	c.option(optStartTLS, nil)
	if typ, _ := c.reply(); typ != repErrInvalid {
		t.Fatalf("second STARTTLS: reply %#x", typ)
	}
	if flags, typ := c.goExport("a"); typ != 0 || flags&tCanMultiConn != 0 {
		t.Fatalf("GO over TLS: flags %#x, error %#x", flags, typ)
	}
	data := bytes.Repeat([]byte("tls!"), 512)
	if e, _ := c.do(cmdWrite, 0, 100, uint32(len(data)), data, 0); e != 0 {
		t.Fatalf("write over TLS: errno %d", e)
	}
	if e, got := c.do(cmdRead, 0, 100, uint32(len(data)), nil, len(data)); e != 0 || !bytes.Equal(got, data) {
		t.Fatalf("read over TLS: errno %d", e)
	}

	for _, cert := range []*tls.Certificate{&bad, nil} {
		w := dial(t, addr)
		w.startTLS(cert)
		if _, typ := w.goExport("a"); typ != repErrPolicy {
			t.Fatalf("GO with a certificate not allowed: reply %#x", typ)
		}
	}

	off := dial(t, serve(t, map[string]*memDev{"a": dev}))
	off.option(optStartTLS, nil)
	if typ, _ := off.reply(); typ != repErrUnsup {
		t.Fatalf("STARTTLS to a server without TLS: reply %#x", typ)
	}
	if _, typ := off.goExport("a"); typ != 0 {
		t.Fatalf("GO after refused STARTTLS: reply %#x", typ)
	}
}

// TestNBDMultiConn: a device that says so is announced CAN_MULTI_CONN,
// others are not.
func TestNBDMultiConn(t *testing.T) {
	addr := serve(t, map[string]*memDev{"m": {b: make([]byte, 512), multi: true}, "s": {b: make([]byte, 512)}})
	if flags, typ := dial(t, addr).goExport("m"); typ != 0 || flags&tCanMultiConn == 0 {
		t.Fatalf("multi-conn device: flags %#x, error %#x", flags, typ)
	}
	if flags, typ := dial(t, addr).goExport("s"); typ != 0 || flags&tCanMultiConn != 0 {
		t.Fatalf("single-conn device: flags %#x, error %#x", flags, typ)
	}
}
