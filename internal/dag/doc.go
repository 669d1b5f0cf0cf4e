// Package dag is the pure core of Quilt's namespaces (layer 4): the signed
// Merkle-DAG log of BaseFS and the rules that turn a set of log entries
// into one tree.
//
// A namespace is named by its root public key. Its log is a set of
// content-addressed records: entries (mkdir, write, delete, revert, grant,
// revoke, ack, link, slink, mode) and the blocks of medium-sized files.
// Every entry is signed, names the directory entry it hangs from (its
// anchor, Parents[0]) and the entries of the same path it supersedes
// (Parents[1:]). Names and contents are sealed under the namespace's read
// key; the key material that write permission needs (granted public keys,
// revoked grants, block references) stays in clear, so a node without the
// read key still checks every signature and grant.
//
// Write permission is a hierarchy of grants rooted at the namespace key. A
// grant entry hangs from a directory and names a public key; that key may
// then write anywhere under that directory, and grant or revoke keys of
// lower authority there. An entry names its signer by the hash of the grant
// that admitted the key, so the proof of permission travels with it.
//
// The package does no I/O. Checker decides whether an entry may enter a
// replica's log, given an Index of what the replica holds; Resolve decides
// which of the entries of one path is current; Log is an in-memory replica
// used by tests and as the reference the persistent store is tested
// against.
package dag
