// Package openstack runs OpenStack Swift (the swift package from PyPI, in
// a Python venv) and swift-bench for the lab (layer 6), so that the lab
// can measure Swift beside Quilt on the same emulated links, as the
// KREONET paper measured Swift with swift-bench.
//
// A [Cluster] is what the paper's Experiment II ran, shrunk onto one
// machine: a proxy server with TempAuth and memcached, object servers
// (three by default, one device each, the object ring holding three
// replicas, 2^10 partitions as in the paper), and one account server and
// one container server (their rings one replica each). Every process
// listens on 127.0.0.1, keeps its data and configuration under
// Options.Dir, runs in a process group of its own and gets SIGKILL if
// this program dies first.
//
// With Options.Net, object server i is named in the object ring by the
// address of a [linkemu.Proxy] whose link is ProxyHost -> StorageHosts[i]
// (replies the other way), so every object request of the proxy server
// takes that link. The account and container servers are reached
// directly: the proxy caches their answers in memcached, and the object
// servers' container updates, which go to the address the proxy names,
// stay inside the storage region, as between the paper's storage nodes.
//
// [RunBench] runs swift-bench against any Swift endpoint (this cluster or
// Quilt's gateway) and [ParseBench] reads its PUTS, GETS and DEL rates.
//
// Typical use:
//
//	v, err := openstack.EnsureVenv(ctx, "")
//	...
//	c, err := openstack.Start(ctx, openstack.Options{Venv: v, Dir: dir, Net: net})
//	...
//	defer c.Close()
//	r, out, err := openstack.RunBench(ctx, v.Bin("swift-bench"), openstack.BenchConfig{
//		AuthURL: c.AuthURL(), User: c.User, Key: c.Key, Size: 1 << 20, ...})
package openstack
