package identity_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/quilt-grid/quilt/internal/identity"
)

// A grid is made by creating a secret; an invite hands it out with the
// address of a node.
func ExampleParseInvite() {
	secret, err := identity.NewSecret()
	if err != nil {
		panic(err)
	}
	text := identity.Invite{Secret: secret, Addrs: []string{"node1.example.org:7000", "[2001:db8::1]:7000"}}.String()

	inv, err := identity.ParseInvite(text + "\n") // as read from a file
	if err != nil {
		panic(err)
	}
	fmt.Println(inv.Secret == secret, inv.Addrs)
	// Output: true [node1.example.org:7000 [2001:db8::1]:7000]
}

// A node loads its key, builds its identity in the grid, serves with
// ServerTLS and talks to other nodes by ID with NewTransport.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "quilt-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	key, err := identity.LoadOrCreateKey(dir)
	if err != nil {
		panic(err)
	}
	secret, err := identity.NewSecret()
	if err != nil {
		panic(err)
	}
	id, err := identity.New(key, secret)
	if err != nil {
		panic(err)
	}

	// The node's server: http.Server{TLSConfig: id.ServerTLS(), ...}.ServeTLS(ln, "", "")
	_ = &http.Server{TLSConfig: id.ServerTLS()}

	// A client of other nodes; addresses come from membership.
	addrs := map[identity.NodeID]string{}
	client := &http.Client{Transport: id.NewTransport(func(n identity.NodeID) (string, bool) {
		a, ok := addrs[n]
		return a, ok
	}, nil)}
	_, err = client.Get("https://" + string(id.ID) + "/v1/health")
	fmt.Println(errors.Is(err, identity.ErrUnknownNode)) // nobody knows where we are yet
	// Output: true
}
