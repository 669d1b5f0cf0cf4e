package placement

import (
	"fmt"
	"math/rand/v2"
)

const (
	MiB = 1 << 20
	GiB = 1 << 30
)

// equalNodes returns count nodes named n00, n01, ... with free bytes each,
// all in zone "".
func equalNodes(count int, free int64) []Node {
	nodes := make([]Node, count)
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("n%02d", i), Free: free}
	}
	return nodes
}

// zonedNodes returns nodes with zoneSizes[z] nodes in zone z, GiB free each.
func zonedNodes(zoneSizes map[string]int) []Node {
	var nodes []Node
	for z, k := range zoneSizes {
		for i := range k {
			nodes = append(nodes, Node{ID: fmt.Sprintf("%s-%02d", z, i), Zone: z, Free: GiB})
		}
	}
	return nodes
}

// newRand returns a fixed-seed source so that the statistical tests are
// reproducible.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func randSI(r *rand.Rand) []byte {
	si := make([]byte, 32)
	for i := range si {
		si[i] = byte(r.Uint32())
	}
	return si
}

func shuffled(r *rand.Rand, nodes []Node) []Node {
	s := append([]Node(nil), nodes...)
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

func ids(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}
