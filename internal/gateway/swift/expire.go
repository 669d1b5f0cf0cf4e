package swift

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// Expiring objects: a PUT, POST or copy with X-Delete-At (a Unix time)
// or X-Delete-After (seconds from now) keeps the time with the object, as
// its header X-Delete-At, and a record in the registry's set
// swift-expiring. From that time the object is 404 to Swift (and removed
// when so found); Expire removes the objects whose time has come, as
// Swift's object expirer does.

const (
	hdrDeleteAt    = "X-Delete-At"
	hdrDeleteAfter = "X-Delete-After"
	setExpiring    = "swift-expiring"
)

// expiring is the record of an object with an expiry time.
type expiring struct {
	Container string `json:"container"`
	Object    string `json:"object"`
	At        int64  `json:"at"` // Unix seconds
}

// expiringName names the record of an object: one per object, replaced
// when its expiry changes.
func expiringName(container, object string) string {
	s := sha256.Sum256([]byte(container + "/" + object))
	return hex.EncodeToString(s[:16])
}

// now is the server's clock.
func (s *Server) now() time.Time {
	if s.opt.Now != nil {
		return s.opt.Now()
	}
	return time.Now()
}

// deleteAt reads a request's X-Delete-At or X-Delete-After as Swift does:
// 0 if neither is given, 400 if not an integer or not in the future.
func (s *Server) deleteAt(h http.Header) (int64, error) {
	now := s.now()
	if v := h.Get(hdrDeleteAfter); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, serr(400, "Bad Request: Non-integer X-Delete-After")
		}
		if n < 0 {
			return 0, serr(400, "Bad Request: X-Delete-After in past")
		}
		return now.Unix() + n, nil
	}
	v := h.Get(hdrDeleteAt)
	if v == "" {
		return 0, nil
	}
	at, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, serr(400, "Bad Request: Non-integer X-Delete-At")
	}
	if at < now.Unix() {
		return 0, serr(400, "Bad Request: X-Delete-At in past")
	}
	return at, nil
}

// expired reports whether an object's time has come.
func (s *Server) expired(info gateway.ObjectInfo) bool {
	v := info.Headers[hdrDeleteAt]
	if v == "" {
		return false
	}
	at, err := strconv.ParseInt(v, 10, 64)
	return err == nil && at <= s.now().Unix()
}

// lookup is the gateway's Lookup, with an object whose time has come
// removed and answered as not there.
func (s *Server) lookup(ctx context.Context, container, object string) (gateway.ObjectInfo, []byte, error) {
	info, inline, err := s.gw.Lookup(ctx, container, object)
	if err == nil && s.expired(info) {
		if _, err := s.remove(ctx, container, object, info.Headers[hdrDeleteAt]); err != nil {
			s.log.Warn("swift: removing an expired object", "container", container, "object", object, "err", err)
		}
		return gateway.ObjectInfo{}, nil, gateway.ErrNoKey
	}
	return info, inline, err
}

// schedule records that an object is to be removed at at (Unix seconds;
// 0: it has no expiry, and nothing is recorded).
func (s *Server) schedule(ctx context.Context, container, object string, at int64) error {
	if at == 0 {
		return nil
	}
	b, _ := json.Marshal(expiring{Container: container, Object: object, At: at})
	return s.gw.PutRecord(ctx, setExpiring, expiringName(container, object), b)
}

// remove deletes an expired object if it is still the version that
// expires at at (a later PUT or POST may have changed or dropped its
// expiry), and its record; it reports whether it deleted the object.
func (s *Server) remove(ctx context.Context, container, object, at string) (bool, error) {
	info, _, err := s.gw.Lookup(ctx, container, object)
	deleted := false
	switch {
	case errors.Is(err, gateway.ErrNoKey), errors.Is(err, gateway.ErrNoBucket):
	case err != nil:
		return false, err
	case info.Headers[hdrDeleteAt] == at:
		if err := s.gw.Delete(ctx, container, object); err != nil {
			return false, err
		}
		deleted = true
	}
	return deleted, s.gw.DeleteRecord(ctx, setExpiring, expiringName(container, object))
}

// Expire removes the objects whose expiry time has come (and the records
// of those that no longer expire then); it returns how many objects it
// removed. Gateways sharing the registry may run it side by side.
func (s *Server) Expire(ctx context.Context) (int, error) {
	recs, err := s.gw.Records(ctx, setExpiring)
	if err != nil {
		return 0, err
	}
	now := s.now().Unix()
	n := 0
	var first error
	for name, raw := range recs {
		var e expiring
		if json.Unmarshal(raw, &e) != nil || name != expiringName(e.Container, e.Object) {
			s.gw.DeleteRecord(ctx, setExpiring, name) // not one of ours: drop it
			continue
		}
		if e.At > now {
			continue
		}
		deleted, err := s.remove(ctx, e.Container, e.Object, strconv.FormatInt(e.At, 10))
		if deleted {
			n++
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return n, first
}
