package scenario_test

import (
	"fmt"
	"strings"

	"github.com/quilt-grid/quilt/internal/lab/scenario"
)

func ExampleParse() {
	s, err := scenario.Parse(strings.NewReader(`# comment
scenario qmpsu-small
description three buildings of a wireless mesh
node s01 role=storage zone=z1 capacity=50GiB
node s02 zone=z2                               # role=storage is the default
node s03 zone=z3
node best role=client
default delay=2.3ms jitter=0.5ms bw=17.4Mbit loss=0.1% corr=25%
link s01 -> s02 delay=3ms bw=10Mbit            # one direction; loss etc. from default
link best <-> * delay=1ms bw=40Mbit            # both directions, to and from every node
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range [][2]string{{"s01", "s02"}, {"s02", "s01"}, {"s03", "best"}} {
		fmt.Printf("%s -> %s: %+v\n", p[0], p[1], s.Link(p[0], p[1]))
	}
	fmt.Println(len(s.Role(scenario.RoleStorage)), "storage nodes")

	_, err = scenario.Parse(strings.NewReader("scenario x\nnode a\nlink a -> b bw=10Mbps\n"))
	fmt.Println(err)
	// Output:
	// s01 -> s02: {Delay:3ms Jitter:500µs Loss:0.001 LossCorr:0.25 Reorder:0 Bandwidth:1250000}
	// s02 -> s01: {Delay:2.3ms Jitter:500µs Loss:0.001 LossCorr:0.25 Reorder:0 Bandwidth:2175000}
	// s03 -> best: {Delay:1ms Jitter:500µs Loss:0.001 LossCorr:0.25 Reorder:0 Bandwidth:5000000}
	// 3 storage nodes
	// scenario: line 3: link a -> b: bw: "10Mbps": unknown unit "Mbps" (kbit, Mbit, Gbit for bit/s; B, kB, MB, GB for bytes/s)
}
