// Package tahoe runs a local Tahoe-LAFS grid (tahoe-lafs from PyPI, in a
// Python venv) for the lab (layer 6), optionally behind emulated links, so
// that the lab's experiments can measure Tahoe-LAFS on the same network as
// Quilt.
//
// A grid is an introducer, storage nodes and one client node, each a
// `tahoe run` process on 127.0.0.1 with its node directory and log under
// Options.Dir. The client node, whose web API Put and Get use, plays the
// client machine. With Options.Net, storage node i listens on a loopback
// port of its own (tub.port) but announces the address of a
// [linkemu.Proxy] (tub.location) whose link is ClientHost ->
// StorageHosts[i], so the client reaches it only through that link.
//
// Tahoe-LAFS 1.20 announces each storage server twice: a Foolscap fURL and
// HTTPS-storage NURLs, which clients prefer. Both come from the same place:
// the tub serves Foolscap and HTTPS on one port (allmydata/protocol_switch.py
// tells them apart by the first bytes), and the NURLs are built from the
// tub's location hints, that is from tub.location
// (_FoolscapOrHttps.add_storage_server in protocol_switch.py, called from
// Client.init_storage in client.py). So pointing tub.location at the proxy
// sends both protocols through it, and nothing needs proxying twice.
//
// Every Tahoe node is also a storage client: the storage nodes learn of
// each other from the introducer and connect to each other through the
// same proxies, each polling every peer's version about once a second. On
// a slow link that adds a little traffic (some hundreds of bytes per peer
// per second) beside the client's, and streams to Network.Stats. The
// nodes' connections to the introducer are not emulated.
//
// Typical use:
//
//	tahoeBin, err := tahoe.EnsureVenv(ctx, "")
//	...
//	g, err := tahoe.Start(ctx, tahoe.Options{Tahoe: tahoeBin, Dir: dir, Net: net})
//	...
//	defer g.Close()
//	cap, err := g.Put(ctx, file)
//	...
//	n, err := g.Get(ctx, cap, out)
//
// Everything listens on 127.0.0.1. Tahoe itself would not quite: every node
// also opens a Foolscap log port for `flogtool tail` on an ephemeral port
// of all interfaces, whatever tahoe.cfg says. So the nodes are not started
// with the tahoe program but with its Python interpreter and a launcher
// that binds that port to 127.0.0.1 and then does what the tahoe program
// does (see launcher in process.go).
//
// The processes run in process groups of their own and are stopped by
// Close; `tahoe run` also exits when its stdin, a pipe held by this
// process, closes, so the nodes do not outlive a Go program killed before
// Close. Methods of Grid are safe for concurrent use.
package tahoe
