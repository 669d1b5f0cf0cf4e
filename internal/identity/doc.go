// Package identity is layer 0 of Quilt: who a party is, how it proves it,
// and how two parties of the same grid talk to each other.
//
// # Node keys and node IDs
//
// Every node (and every gateway or client that talks to nodes) has an
// Ed25519 key, kept in DIR/node.key by [LoadOrCreateKey]. Its [NodeID] is
// the lowercase, unpadded RFC 4648 base32 encoding of the first 20 bytes of
// the SHA-256 of the public key: 32 characters, valid as a DNS label, so it
// can stand where a host name stands (https://<nodeid>/v1/...). A node ID is
// self-certifying: whoever holds the private key is that node, as with
// Syncthing's device IDs.
//
// # The grid secret and invites
//
// A grid is defined by its [Secret], 32 random bytes. Knowing the secret
// admits a party to the grid: it can gossip (the memberlist key is
// Secret.Derive("quilt gossip v1")) and talk to nodes. An [Invite] carries the
// secret and the addresses of a few nodes, as text:
//
//	quilt://SECRET@host:port,host:port,[::1]:7000
//
// # TLS
//
// Traffic between parties is HTTP over TLS 1.3 with mutual authentication.
// The grid has a certificate authority whose Ed25519 key is derived from the
// secret (seed = Secret.Derive("quilt grid ca v1")) and whose self-signed
// certificate is built deterministically, so every holder of the secret has
// the same CA without anyone distributing it. [New] uses the CA key to issue
// the party a leaf certificate for its own node key (CN and DNS SAN = the
// node ID). Consequently:
//
//   - a certificate chained to the grid CA proves its holder knows the grid
//     secret (otherwise [ErrNotInGrid]);
//   - the leaf's public key proves which node it is: a client that dials a
//     node by ID checks that the ID derived from the presented key is the one
//     it asked for (otherwise [ErrWrongNode]). The certificate's CN is not
//     trusted for this; only the key is.
//
// [Identity.ServerTLS] requires and verifies a client certificate;
// [Identity.ClientTLS] verifies the server against the grid CA and pins its
// node ID when the TLS server name is a node ID. [Identity.NewTransport]
// returns an http.Transport that resolves node IDs in URLs to addresses, and
// [PeerID] tells either side who the other one is after the handshake.
//
// Anyone who knows the secret can issue certificates, so the grid CA says
// "member of this grid", never "trusted": storage nodes stay untrusted for
// confidentiality and integrity (see the design), and higher layers check
// what nodes send them.
//
// Identity values are immutable after [New] and safe for concurrent use.
package identity
