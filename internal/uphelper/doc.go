// Package uphelper is Quilt's upload helper (docs/grid.md, "Upload
// helper"): a storage node that erasure-codes and places the shares of
// objects whose uploaders have slow uplinks, as Tahoe-LAFS's helper does.
//
// An uploader that goes direct sends n/k times the file (10/3 at
// 3-of-10), one share to each node. Through a helper it sends the file's
// ciphertext once: it seals each segment under its own key (the helper
// never sees the key, nor the plaintext) and streams the sealed segments
// to the helper, which codes, hashes and places them with
// object.Client.PutSealed and answers once the upload is acknowledged at
// happiness, finishing the rest in the background.
//
// Integrity does not depend on the helper: coding and hashing are
// deterministic, so the uploader codes the same sealed segments itself,
// without sending the shares, computes the object root the read
// capability names, and refuses the helper's answer unless its root is
// the same. It then asks the nodes the helper names for the trailers of
// the shares they hold (a few hundred bytes each) and counts only the
// shares whose trailer is the one it computed: a helper that lies about
// where it stored what is caught before the capability is returned.
// The helper is trusted for availability only: it can refuse or drop an
// upload, as any node can.
//
// Server is the helper's side, an http.Handler mounted under /v1/helper/
// of a node's API (mutual TLS with the grid's identity, like every node
// endpoint). Put is the uploader's side; Choose decides between a
// helper and a direct upload from the measured links.
package uphelper
