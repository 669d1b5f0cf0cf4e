// Package layers records which layer of Quilt's architecture each package
// of the module belongs to (docs/design.md, "Layers"). Its test reads the
// import clauses of every Go file in the module, test files included, and
// fails when a package imports one above its own layer or when a package
// has no layer here, so the table cannot fall behind the tree.
//
// The rules the test enforces:
//
//   - a package may import packages of its own layer and of the layers
//     below it, never one above;
//   - test support packages (testgrid, sharestoretest) exist for tests:
//     only test files, other test support and commands may import them,
//     and they may import any layer below the lab;
//   - the test files of a package follow the package's own rule, and may
//     import test support too, and the few packages listed in the test's
//     exceptions, each with its reason;
//   - commands (cmd/, bench/) may import anything.
package layers

import "fmt"

// Layer is a layer of the architecture, or one of the two kinds of package
// that stand outside the stack (test support and commands).
type Layer int

// The layers, bottom to top, then the kinds outside the stack.
const (
	Identity    Layer = iota // 0: node keys, grid secret, invites, authenticated transport
	Membership               // 1: who is in the grid, where, how full (SWIM gossip)
	ShareStore               // 2: one node's shares on disk and the API that serves them
	Objects                  // 3: encrypted, erasure-coded, verified objects across nodes
	Namespaces               // 4: signed Merkle-DAG logs, their views and replication
	FrontEnds                // 5: the gateway and the protocols served over it
	Lab                      // 6: experiments on an emulated network
	TestSupport              // packages made for tests; may import any layer below Lab
	Command                  // main packages; may import anything
)

// String returns the layer's number and name, as docs/design.md names it.
func (l Layer) String() string {
	switch l {
	case Identity:
		return "0 identity"
	case Membership:
		return "1 membership"
	case ShareStore:
		return "2 share store"
	case Objects:
		return "3 objects"
	case Namespaces:
		return "4 namespaces"
	case FrontEnds:
		return "5 front ends"
	case Lab:
		return "6 lab"
	case TestSupport:
		return "test support"
	case Command:
		return "command"
	}
	return fmt.Sprintf("Layer(%d)", int(l))
}

// packages is the layer of every package of the module, by its directory
// relative to the module root. Directories under cmd/ and bench/ are
// commands and need no entry.
var packages = map[string]Layer{
	"internal/identity": Identity,
	// linkemu imports nothing of Quilt: a leaf that the lab runs its
	// scenarios on and that tests of any layer may use.
	"internal/linkemu": Identity,
	// This package: the table imports nothing of Quilt.
	"internal/layers": Identity,
	// atomicfile writes the small state files of every layer (keys,
	// secrets, registries, configs) durably; it imports nothing of Quilt.
	"internal/atomicfile": Identity,
	// clock is the injectable time source of timer-driven behaviour; it
	// imports nothing of Quilt.
	"internal/clock": Identity,
	// metrics serves a process's Prometheus registry; it imports nothing
	// of Quilt, and nodes and gateways define their metrics on it.
	"internal/metrics": Identity,

	"internal/member": Membership,

	"internal/sharefile":  ShareStore,
	"internal/sharestore": ShareStore,
	// node serves a share store over the authenticated transport, takes
	// part in gossip, and is the client that objects and namespaces use
	// to reach other nodes.
	"internal/node": ShareStore,

	"internal/codec":     Objects,
	"internal/placement": Objects,
	"internal/object":    Objects,
	// repairer rebuilds the shares of the objects in a node's repair
	// registry, from their verify capabilities.
	"internal/repairer": Objects,
	// uphelper: the upload helper, a node service over object.
	"internal/uphelper": Objects,

	"internal/dag":       Namespaces,
	"internal/namespace": Namespaces,
	// nsclient is how front ends read and write namespaces through the
	// grid: a local replica kept in step with a live node.
	"internal/nsclient": Namespaces,
	// nsnode assembles a storage node with its namespace replica.
	"internal/nsnode": Namespaces,
	// tree is a file tree over a Store interface of its own: it imports
	// nothing of Quilt, and the gateway implements the interface.
	"internal/tree": Namespaces,
	// openfile is a file of the tree open for writing, spooled locally
	// and committed at close: it imports only tree.
	"internal/tree/openfile": Namespaces,
	// volume keeps block volumes as extent objects and a map: it uses
	// objects directly and keeps its maps in a catalog of its own
	// interface, which the gateway's registry implements.
	"internal/volume": Namespaces,

	"internal/gateway":          FrontEnds,
	"internal/gateway/s3":       FrontEnds,
	"internal/gateway/s3/sigv4": FrontEnds,
	// keystone is the identity service of OpenStack clients (TempAuth
	// v1.0, Keystone v3 tokens and catalog) over the gateway's registry;
	// swift is the Swift API, which serves it beside the storage API.
	"internal/gateway/keystone": FrontEnds,
	"internal/gateway/swift":    FrontEnds,
	// cfs is the configuration filesystem: the verbs of quilt cfs as a
	// library over nsclient.
	"internal/cfs": FrontEnds,
	// sftp serves each user's bucket tree over SSH.
	"internal/sftp": FrontEnds,
	"internal/fuse": FrontEnds,
	// nbd serves block devices of its own interface over the NBD
	// protocol; it imports nothing of Quilt (cmd/quilt gives it volumes).
	"internal/nbd": FrontEnds,
	// webdav serves each user's bucket tree over WebDAV, with the SFTP
	// server's users file.
	"internal/webdav": FrontEnds,
	// sharelink serves share links (public pages and a JSON API) over
	// bucket trees and records of the registry.
	"internal/sharelink": FrontEnds,
	// webapp is the browser app over each user's bucket tree; it imports
	// only tree (cmd/quilt gives it accounts, trees and the grid's state).
	"internal/webapp": FrontEnds,
	// bulk is quilt cp: a client of the gateway's S3 API (through
	// aws-sdk-go-v2) that copies files in parallel and resumably.
	"internal/bulk": FrontEnds,

	"internal/lab":           Lab,
	"internal/lab/report":    Lab,
	"internal/lab/scenario":  Lab,
	"internal/lab/openstack": Lab,
	"internal/lab/tahoe":     Lab,

	"internal/testgrid":                  TestSupport,
	"internal/sharestore/sharestoretest": TestSupport,
	"internal/tree/treetest":             TestSupport,
	// posixtest is a table of POSIX behaviours run on a directory (local,
	// a FUSE mount, an sshfs mount); it imports nothing of Quilt.
	"internal/tree/posixtest":     TestSupport,
	"internal/object/gridtest":    TestSupport,
	"internal/namespace/peertest": TestSupport,
}

// commandRoots are the directories whose packages are commands.
var commandRoots = []string{"cmd", "bench"}

// Of returns the layer of the package in dir, a directory relative to the
// module root with forward slashes ("internal/object"), and whether it has
// one.
func Of(dir string) (Layer, bool) {
	for _, root := range commandRoots {
		if dir == root || len(dir) > len(root) && dir[:len(root)+1] == root+"/" {
			return Command, true
		}
	}
	l, ok := packages[dir]
	return l, ok
}

// Dirs returns the directories that have an entry in the table (commands
// excepted), in no particular order.
func Dirs() []string {
	dirs := make([]string, 0, len(packages))
	for d := range packages {
		dirs = append(dirs, d)
	}
	return dirs
}
