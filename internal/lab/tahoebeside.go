package lab

import (
	"context"
	"path/filepath"
	"time"

	"github.com/quilt-grid/quilt/internal/lab/tahoe"
)

// tahoeBeside is a Tahoe-LAFS grid on a Cluster's emulated network: its
// storage node i sits behind the links of the cluster's storage node i,
// and its one client node takes the links of whichever scenario client
// is being measured (At).
type tahoeBeside struct {
	*tahoe.Grid
	cl     *Cluster
	client string   // the Tahoe client's emulated host
	hosts  []string // the Tahoe storage nodes' emulated hosts
}

// startTahoeBeside starts env.Tahoe's grid beside cl (3-of-10, happiness
// 7, as Quilt's) with its node directories under dir, waiting up to
// tahoeStartTimeout for it. The caller closes it.
func startTahoeBeside(ctx context.Context, env *Env, cl *Cluster, dir string) (*tahoeBeside, error) {
	sc := cl.Scenario
	storage := sc.Role("storage")
	t := &tahoeBeside{cl: cl, client: "tahoe-client"}
	for _, sn := range storage {
		t.hosts = append(t.hosts, "tahoe-"+sn.Name)
	}
	for i, a := range storage {
		for j, b := range storage {
			if i != j {
				cl.Net.SetLink(t.hosts[i], t.hosts[j], sc.Link(a.Name, b.Name))
			}
		}
	}
	env.logf("starting a Tahoe-LAFS grid of %d storage nodes behind the same links", len(storage))
	g, err := tahoe.Start(ctx, tahoe.Options{Tahoe: env.Tahoe, Dir: filepath.Join(dir, "tahoe"),
		Storage: len(storage), K: 3, N: 10, Happy: 7, StartTimeout: tahoeStartTimeout,
		Net: cl.Net, ClientHost: t.client, StorageHosts: t.hosts, Log: env.Log, Foolscap: env.TahoeFoolscap})
	if err != nil {
		return nil, err
	}
	t.Grid = g
	return t, nil
}

// tahoeStartTimeout is how long the lab waits for a Tahoe-LAFS grid to
// come up (and for its client node to come back with SFTP): its twelve
// Python processes took 1.5 min to connect on this two-core machine
// shared with other work, and more than Tahoe's default 2 min when it
// was busier.
const tahoeStartTimeout = 6 * time.Minute

// At gives the Tahoe client the links of the scenario client called
// name: to and from every storage node, and its host's limits (none if
// it has none, whatever the client before had).
func (t *tahoeBeside) At(name string) {
	sc := t.cl.Scenario
	for i, sn := range sc.Role("storage") {
		t.cl.Net.SetLink(t.client, t.hosts[i], sc.Link(name, sn.Name))
		t.cl.Net.SetLink(t.hosts[i], t.client, sc.Link(sn.Name, name))
	}
	lim, _ := sc.HostLimit(name) // the zero limit is none
	t.cl.Net.SetHost(t.client, lim)
}

// systemName is the name results give the Tahoe-LAFS grid.
func (t *tahoeBeside) systemName(env *Env) string {
	if env.TahoeFoolscap {
		return "tahoe-lafs (foolscap)"
	}
	return "tahoe-lafs"
}
