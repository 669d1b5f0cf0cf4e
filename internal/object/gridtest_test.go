package object_test

import (
	"testing"
	"time"

	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/object/gridtest"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// The in-process grid passes the Grid suite, so unit tests may use it.
func TestMemGridConformance(t *testing.T) {
	gridtest.Run(t, func(t *testing.T, nodes []gridtest.NodeSpec) gridtest.Target {
		m := gridtest.NewMem(nodes)
		return gridtest.Target{Grid: m, Stop: m.StopZone}
	})
}

// NodeGrid over real nodes passes the Grid suite: the contract holds over
// the wire, errors keeping their kind.
func TestNodeGridConformance(t *testing.T) {
	gridtest.Run(t, func(t *testing.T, nodes []gridtest.NodeSpec) gridtest.Target {
		g := testgrid.New(t, testgrid.Options{
			Nodes:    len(nodes),
			Zone:     func(i int) string { return nodes[i].Zone },
			Capacity: func(i int) int64 { return nodes[i].Capacity },
		})
		return gridtest.Target{
			Grid: object.NodeGrid{Client: g.NodeClient(), MaxAge: 100 * time.Millisecond},
			Stop: func(zone string) {
				for i, n := range nodes {
					if n.Zone == zone {
						g.Kill(i)
					}
				}
			},
		}
	})
}
