package nbd

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"testing"
)

// chunk is one structured reply chunk as a client reads it.
type chunk struct {
	flags, typ uint16
	data       []byte
}

// request sends a request without reading its reply.
func (c *client) request(typ, flags uint16, off uint64, n uint32) {
	b := binary.BigEndian.AppendUint32(nil, requestMagic)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, 7)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, n)
	c.write(b)
}

// chunks reads structured reply chunks up to the one flagged DONE.
func (c *client) chunks() []chunk {
	var cs []chunk
	for range 1000 {
		h := c.read(20)
		if binary.BigEndian.Uint32(h) != structReplyMg || binary.BigEndian.Uint64(h[8:]) != 7 {
			c.t.Fatalf("not a structured reply chunk: %x", h)
		}
		ch := chunk{binary.BigEndian.Uint16(h[4:]), binary.BigEndian.Uint16(h[6:]), c.read(int(binary.BigEndian.Uint32(h[16:])))}
		cs = append(cs, ch)
		if ch.flags&replyFlagDone != 0 {
			return cs
		}
	}
	c.t.Fatal("no chunk flagged DONE")
	return nil
}

// metaData is a metadata context option's data: export name and queries.
func metaData(name string, queries ...string) []byte {
	d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	d = append(d, name...)
	d = binary.BigEndian.AppendUint32(d, uint32(len(queries)))
	for _, q := range queries {
		d = binary.BigEndian.AppendUint32(d, uint32(len(q)))
		d = append(d, q...)
	}
	return d
}

// metaReplies sends a metadata context option and returns the contexts
// replied (id and name) and the final reply type.
func (c *client) meta(opt uint32, data []byte) (ctxs []string, ids []uint32, final uint32) {
	c.option(opt, data)
	for {
		typ, d := c.reply()
		if typ != repMetaCtx {
			return ctxs, ids, typ
		}
		ids = append(ids, binary.BigEndian.Uint32(d))
		ctxs = append(ctxs, string(d[4:]))
	}
}

// chunkErrno reads an error chunk's errno, or fails.
func chunkErrno(t *testing.T, cs []chunk, typ uint16) uint32 {
	t.Helper()
	if len(cs) != 1 || cs[0].typ != typ || cs[0].flags&replyFlagDone == 0 {
		t.Fatalf("want one error chunk of type %#x flagged DONE, got %+v", typ, cs)
	}
	return binary.BigEndian.Uint32(cs[0].data)
}

// TestNBDStructuredReadAndBlockStatus: STRUCTURED_REPLY is acknowledged
// once (a repeat and one with data are invalid); LIST_META_CONTEXT lists
// base:allocation; SET_META_CONTEXT selects it, ignoring a query of an
// unknown namespace; GO announces SEND_DF. A READ comes back as data and
// hole chunks that rebuild the device's bytes, the last flagged DONE; with
// DF as one data chunk; past the end as an EINVAL error chunk; a failing
// read as ERROR_OFFSET at the failing run. BLOCK_STATUS reports the holes
// and data, REQ_ONE only the first extent, past the end EINVAL. Other
// commands keep simple replies.
func TestNBDStructuredReadAndBlockStatus(t *testing.T) {
	dev := &memDev{b: make([]byte, 64<<10), mapped: true}
	copy(dev.b[8192:], bytes.Repeat([]byte{0xa5}, 4096))
	copy(dev.b[32768:], bytes.Repeat([]byte("block status"), 8192/12))
	addr := serve(t, map[string]*memDev{"a": dev})
	c := dial(t, addr)

	c.option(optStructured, []byte{1})
	if typ, _ := c.reply(); typ != repErrInvalid {
		t.Fatalf("STRUCTURED_REPLY with data: reply %#x", typ)
	}
	c.option(optSetMeta, metaData("a", metaAlloc))
	if typ, _ := c.reply(); typ != repErrInvalid {
		t.Fatalf("SET_META_CONTEXT before STRUCTURED_REPLY: reply %#x", typ)
	}
	c.option(optStructured, nil)
	if typ, _ := c.reply(); typ != repAck {
		t.Fatalf("STRUCTURED_REPLY: reply %#x", typ)
	}
	c.option(optStructured, nil)
	if typ, _ := c.reply(); typ != repErrInvalid {
		t.Fatalf("STRUCTURED_REPLY again: reply %#x", typ)
	}
	if ctxs, ids, fin := c.meta(optListMeta, metaData("a")); fin != repAck || len(ctxs) != 1 || ctxs[0] != metaAlloc || ids[0] != 0 {
		t.Fatalf("LIST_META_CONTEXT: %q %v %#x", ctxs, ids, fin)
	}
	if ctxs, _, fin := c.meta(optListMeta, metaData("a", "x-other:thing")); fin != repAck || len(ctxs) != 0 {
		t.Fatalf("LIST_META_CONTEXT of another namespace: %q %#x", ctxs, fin)
	}
	if _, _, fin := c.meta(optSetMeta, metaData("a", "x")[:9]); fin != repErrInvalid {
		t.Fatalf("malformed SET_META_CONTEXT: %#x", fin)
	}
	ctxs, ids, fin := c.meta(optSetMeta, metaData("a", "x-other:thing", metaAlloc))
	if fin != repAck || len(ctxs) != 1 || ctxs[0] != metaAlloc || ids[0] != metaAllocID {
		t.Fatalf("SET_META_CONTEXT: %q %v %#x", ctxs, ids, fin)
	}
	flags, e := c.goExport("a")
	if e != 0 || flags&tSendDF == 0 {
		t.Fatalf("GO: flags %#x, error %#x", flags, e)
	}

	// A whole read: data and holes.
	c.request(cmdRead, 0, 0, 64<<10)
	cs := c.chunks()
	got := bytes.Repeat([]byte{0xff}, 64<<10)
	var kinds []string
	for i, ch := range cs {
		if (ch.flags&replyFlagDone != 0) != (i == len(cs)-1) {
			t.Fatalf("chunk %d of %d: flags %#x", i, len(cs), ch.flags)
		}
		o := binary.BigEndian.Uint64(ch.data)
		switch ch.typ {
		case rtOffsetData:
			copy(got[o:], ch.data[8:])
			kinds = append(kinds, "data")
		case rtOffsetHole:
			clear(got[o : o+uint64(binary.BigEndian.Uint32(ch.data[8:]))])
			kinds = append(kinds, "hole")
		default:
			t.Fatalf("chunk type %#x", ch.typ)
		}
	}
	if !bytes.Equal(got, dev.b) {
		t.Fatal("structured read does not rebuild the device")
	}
	if want := []string{"hole", "data", "hole", "data", "hole"}; len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[3] != want[3] {
		t.Fatalf("chunks %v, want %v", kinds, want)
	}
	// With DF: one data chunk, holes as zeros.
	c.request(cmdRead, cmdFlagDF, 4096, 8192)
	cs = c.chunks()
	if len(cs) != 1 || cs[0].typ != rtOffsetData || binary.BigEndian.Uint64(cs[0].data) != 4096 || !bytes.Equal(cs[0].data[8:], dev.b[4096:12288]) {
		t.Fatalf("DF read: %d chunks", len(cs))
	}
	// Past the end.
	c.request(cmdRead, 0, 64<<10-1, 2)
	if e := chunkErrno(t, c.chunks(), rtError); e != eInval {
		t.Fatalf("read past the end: errno %d", e)
	}
	// A failing read: the hole before it is sent, then the error at the
	// data run's offset.
	dev.mu.Lock()
	dev.bad = 9000
	dev.mu.Unlock()
	c.request(cmdRead, 0, 0, 16384)
	cs = c.chunks()
	dev.mu.Lock()
	dev.bad = 0
	dev.mu.Unlock()
	if len(cs) != 2 || cs[0].typ != rtOffsetHole || cs[1].typ != rtErrorOffset ||
		binary.BigEndian.Uint32(cs[1].data) != eIO || binary.BigEndian.Uint64(cs[1].data[len(cs[1].data)-8:]) != 8192 {
		t.Fatalf("failing read: %+v", cs)
	}

	// Block status.
	c.request(cmdBlockStatus, 0, 0, 64<<10)
	cs = c.chunks()
	if len(cs) != 1 || cs[0].typ != rtBlockStatus || binary.BigEndian.Uint32(cs[0].data) != metaAllocID {
		t.Fatalf("block status: %+v", cs)
	}
	type ext struct{ n, st uint32 }
	var exts []ext
	for d := cs[0].data[4:]; len(d) >= 8; d = d[8:] {
		exts = append(exts, ext{binary.BigEndian.Uint32(d), binary.BigEndian.Uint32(d[4:])})
	}
	want := []ext{{8192, 3}, {4096, 0}, {20480, 3}, {8192, 0}, {24576, 3}}
	if len(exts) != len(want) {
		t.Fatalf("block status extents %v, want %v", exts, want)
	}
	for i := range want {
		if exts[i] != want[i] {
			t.Fatalf("block status extents %v, want %v", exts, want)
		}
	}
	c.request(cmdBlockStatus, cmdFlagReqOne, 8192, 30000)
	cs = c.chunks()
	if len(cs) != 1 || len(cs[0].data) != 12 || binary.BigEndian.Uint32(cs[0].data[4:]) != 4096 || binary.BigEndian.Uint32(cs[0].data[8:]) != 0 {
		t.Fatalf("block status with REQ_ONE: %+v", cs)
	}
	c.request(cmdBlockStatus, 0, 64<<10-1, 2)
	if e := chunkErrno(t, c.chunks(), rtError); e != eInval {
		t.Fatalf("block status past the end: errno %d", e)
	}
	// Writes keep simple replies; a trimmed range becomes a hole.
	if e, _ := c.do(cmdWriteZeroes, 0, 32768, 8192, nil, 0); e != 0 {
		t.Fatalf("write zeroes: errno %d", e)
	}
	c.request(cmdBlockStatus, 0, 32768, 8192)
	cs = c.chunks()
	if len(cs) != 1 || len(cs[0].data) != 12 || binary.BigEndian.Uint32(cs[0].data[8:]) != stateHole|stateZero {
		t.Fatalf("block status of a zeroed range: %+v", cs)
	}
}

// TestNBDBlockStatusRefused: BLOCK_STATUS without a selected context is
// EINVAL (a simple reply without structured replies; an error chunk with
// them, when SET_META_CONTEXT selected nothing, or selected it for another
// export than the one opened). A device that is no Mapper is reported
// stored throughout.
func TestNBDBlockStatusRefused(t *testing.T) {
	addr := serve(t, map[string]*memDev{"a": {b: make([]byte, 8192)}, "b": {b: make([]byte, 8192)}})

	plain := dial(t, addr)
	if _, e := plain.goExport("a"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	if e, _ := plain.do(cmdBlockStatus, 0, 0, 4096, nil, 0); e != eInval {
		t.Fatalf("block status without structured replies: errno %d", e)
	}

	unknown := dial(t, addr)
	unknown.option(optStructured, nil)
	unknown.reply()
	if ctxs, _, fin := unknown.meta(optSetMeta, metaData("a", "x-nope:alloc")); fin != repAck || len(ctxs) != 0 {
		t.Fatalf("SET_META_CONTEXT of an unknown namespace: %q %#x", ctxs, fin)
	}
	if _, e := unknown.goExport("a"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	unknown.request(cmdBlockStatus, 0, 0, 4096)
	if e := chunkErrno(t, unknown.chunks(), rtError); e != eInval {
		t.Fatalf("block status with no context selected: errno %d", e)
	}

	other := dial(t, addr)
	other.option(optStructured, nil)
	other.reply()
	if ctxs, _, _ := other.meta(optSetMeta, metaData("a", metaAlloc)); len(ctxs) != 1 {
		t.Fatalf("SET_META_CONTEXT: %q", ctxs)
	}
	if _, e := other.goExport("b"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	other.request(cmdBlockStatus, 0, 0, 4096)
	if e := chunkErrno(t, other.chunks(), rtError); e != eInval {
		t.Fatalf("block status with the context selected for another export: errno %d", e)
	}

	c := dial(t, addr)
	c.option(optStructured, nil)
	c.reply()
	c.meta(optSetMeta, metaData("a", metaAlloc))
	if _, e := c.goExport("a"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	c.request(cmdBlockStatus, 0, 0, 8192)
	cs := c.chunks()
	if len(cs) != 1 || len(cs[0].data) != 12 || binary.BigEndian.Uint32(cs[0].data[4:]) != 8192 || binary.BigEndian.Uint32(cs[0].data[8:]) != 0 {
		t.Fatalf("block status of a device without a map: %+v", cs)
	}
	c.request(cmdRead, 0, 0, 8192)
	if cs := c.chunks(); len(cs) != 1 || cs[0].typ != rtOffsetData || len(cs[0].data) != 8+8192 {
		t.Fatalf("read of a device without a map: %d chunks", len(cs))
	}
}

// TestNBDStructuredReplyAndTLS: with TLS required, STRUCTURED_REPLY
// before STARTTLS is refused with ERR_TLS_REQD; with TLS optional, what
// was negotiated in plaintext is forgotten at STARTTLS (SET_META_CONTEXT
// after it needs STRUCTURED_REPLY again), and over TLS a read is answered
// in structured chunks.
func TestNBDStructuredReplyAndTLS(t *testing.T) {
	srv := selfSigned(t, "server")
	devs := map[string]*memDev{"a": {b: bytes.Repeat([]byte{7}, 8192), mapped: true}}
	req := dial(t, serveWith(t, devs, Config{TLS: &tls.Config{Certificates: []tls.Certificate{srv}}, RequireTLS: true}))
	req.option(optStructured, nil)
	if typ, _ := req.reply(); typ != repErrTLSReqd {
		t.Fatalf("STRUCTURED_REPLY before STARTTLS with TLS required: reply %#x", typ)
	}

	c := dial(t, serveWith(t, devs, Config{TLS: &tls.Config{Certificates: []tls.Certificate{srv}}}))
	c.option(optStructured, nil)
	if typ, _ := c.reply(); typ != repAck {
		t.Fatalf("STRUCTURED_REPLY in plaintext: reply %#x", typ)
	}
	c.startTLS(nil)
	if _, _, fin := c.meta(optSetMeta, metaData("a", metaAlloc)); fin != repErrInvalid {
		t.Fatalf("SET_META_CONTEXT after STARTTLS without a new STRUCTURED_REPLY: %#x", fin)
	}
	c.option(optStructured, nil)
	if typ, _ := c.reply(); typ != repAck {
		t.Fatalf("STRUCTURED_REPLY over TLS: reply %#x", typ)
	}
	if ctxs, _, fin := c.meta(optSetMeta, metaData("a", metaAlloc)); fin != repAck || len(ctxs) != 1 {
		t.Fatalf("SET_META_CONTEXT over TLS: %q %#x", ctxs, fin)
	}
	if _, e := c.goExport("a"); e != 0 {
		t.Fatalf("GO: %#x", e)
	}
	c.request(cmdRead, 0, 0, 8192)
	if cs := c.chunks(); len(cs) != 1 || cs[0].typ != rtOffsetData || !bytes.Equal(cs[0].data[8:], devs["a"].b) {
		t.Fatalf("read over TLS: %+v", cs)
	}
}
