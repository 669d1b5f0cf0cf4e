package identity

import "errors"

// Errors returned by this package. They are wrapped with details; match them
// with errors.Is.
var (
	// ErrBadNodeID means a string is not a well-formed node ID.
	ErrBadNodeID = errors.New("identity: bad node ID")
	// ErrBadKey means a node key file exists but does not hold an Ed25519
	// private key in PKCS#8 PEM form.
	ErrBadKey = errors.New("identity: bad node key")
	// ErrBadSecret means a string is not a well-formed grid secret.
	ErrBadSecret = errors.New("identity: bad grid secret")
	// ErrBadInvite means a string is not a well-formed invite.
	ErrBadInvite = errors.New("identity: bad invite")
	// ErrWrongNode means the peer proved a different node ID from the one
	// that was dialled.
	ErrWrongNode = errors.New("identity: wrong node")
	// ErrUnknownNode means a node ID could not be resolved to an address.
	ErrUnknownNode = errors.New("identity: unknown node")
	// ErrNotInGrid means the peer's certificate chain is not signed by this
	// grid's CA (or is otherwise not valid for this grid), or the peer
	// presented no usable certificate.
	ErrNotInGrid = errors.New("identity: peer not in grid")
)
