package identity

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// inviteScheme prefixes the text form of an invite.
const inviteScheme = "quilt://"

// Invite is all a new node or client needs to join a grid: the grid secret
// and the addresses (host:port) of one or more nodes.
//
// Its text form is
//
//	quilt://SECRET@host:port,host:port
//
// with IPv6 hosts in brackets ([::1]:7000).
type Invite struct {
	Secret Secret
	Addrs  []string
}

// ParseInvite parses the text form of an invite. Surrounding white space is
// ignored, since invites are pasted and read from files. Errors wrap
// [ErrBadInvite] and say what is wrong.
func ParseInvite(s string) (Invite, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, inviteScheme)
	if !ok {
		return Invite{}, fmt.Errorf("%w: does not start with %q", ErrBadInvite, inviteScheme)
	}
	secret, addrs, ok := strings.Cut(rest, "@")
	if !ok {
		return Invite{}, fmt.Errorf("%w: missing '@' between secret and addresses", ErrBadInvite)
	}
	sec, problem := parseSecret(secret)
	if problem != "" {
		return Invite{}, fmt.Errorf("%w: secret %s", ErrBadInvite, problem)
	}
	if addrs == "" {
		return Invite{}, fmt.Errorf("%w: no addresses", ErrBadInvite)
	}
	inv := Invite{Secret: sec}
	for a := range strings.SplitSeq(addrs, ",") {
		if err := checkAddr(a); err != nil {
			return Invite{}, err
		}
		inv.Addrs = append(inv.Addrs, a)
	}
	return inv, nil
}

// checkAddr checks one host:port of an invite.
func checkAddr(a string) error {
	if a == "" {
		return fmt.Errorf("%w: empty address", ErrBadInvite)
	}
	if !strings.Contains(a, ":") || strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
		return fmt.Errorf("%w: address %q has no port", ErrBadInvite, a)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v (IPv6 goes in brackets: [::1]:7000)", ErrBadInvite, a, err)
	}
	if host == "" {
		return fmt.Errorf("%w: address %q has no host", ErrBadInvite, a)
	}
	if strings.ContainsAny(host, " \t/@") {
		return fmt.Errorf("%w: address %q has a bad host", ErrBadInvite, a)
	}
	if port == "" {
		return fmt.Errorf("%w: address %q has no port", ErrBadInvite, a)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%w: address %q has bad port %q", ErrBadInvite, a, port)
	}
	return nil
}

// String returns the text form of the invite. It contains the grid secret.
func (i Invite) String() string {
	return inviteScheme + i.Secret.String() + "@" + strings.Join(i.Addrs, ",")
}
