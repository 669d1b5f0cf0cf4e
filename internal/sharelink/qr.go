package sharelink

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/quilt-grid/quilt/internal/gateway"
	"rsc.io/qr"
)

// quietZone is the white margin QR codes need, in modules.
const quietZone = 4

// QRSVG returns text as a QR code (error correction level M) drawn in
// SVG: one unit per module, a dark rectangle per run of dark modules in
// a row, a quiet zone of four modules around.
func QRSVG(text string) ([]byte, error) {
	c, err := qr.Encode(text, qr.M)
	if err != nil {
		return nil, fmt.Errorf("sharelink: QR code: %w", err)
	}
	n := c.Size + 2*quietZone
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges">`, n, n, n*8, n*8)
	fmt.Fprintf(&b, `<title>QR code of the link</title><rect width="%d" height="%d" fill="#fff"/><g fill="#000">`, n, n)
	for y := 0; y < c.Size; y++ {
		for x := 0; x < c.Size; {
			if !c.Black(x, y) {
				x++
				continue
			}
			run := 1
			for x+run < c.Size && c.Black(x+run, y) {
				run++
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="1"/>`, x+quietZone, y+quietZone, run)
			x += run
		}
	}
	b.WriteString("</g></svg>\n")
	return []byte(b.String()), nil
}

// serveQR answers GET /api/shares/TOKEN/qr.svg.
func (h *Handler) serveQR(w http.ResponseWriter, r *http.Request, l gateway.ShareLink) {
	svg, err := QRSVG(h.linkURL(r, l.Token))
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "private, no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(svg)
}
