package placement_test

import (
	"errors"
	"fmt"

	"github.com/quilt-grid/quilt/internal/placement"
)

func ExamplePlace() {
	si := []byte("storage index of the object")
	var nodes []placement.Node
	for i := range 12 {
		nodes = append(nodes, placement.Node{
			ID:   fmt.Sprintf("node-%02d", i),
			Zone: fmt.Sprintf("rack-%d", i%3),
			Free: 100 << 30,
		})
	}

	plan, err := placement.Place(si, nodes, 10, 7, 4<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(plan.Nodes), "shares on", plan.Happiness(), "nodes")

	_, err = placement.Place(si, nodes[:6], 10, 7, 4<<20)
	fmt.Println(errors.Is(err, placement.ErrUnhappy))
	fmt.Println(err)
	// Output:
	// 10 shares on 10 nodes
	// true
	// placement: cannot place 10 shares on at least 7 distinct nodes: 6 nodes known, 0 full (need 4 MiB free each), 6 usable: add nodes, free space, or lower --happy
}
