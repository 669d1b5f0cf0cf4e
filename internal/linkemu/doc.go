// Package linkemu emulates network links: an in-process network that many
// memberlist instances and HTTP clients of one process share, with delay,
// jitter, loss, reordering, bandwidth limits and partitions between any two
// hosts. The kernel here has no netem, so the emulation lives in the
// program. The lab (layer 6) runs its scenarios on it, and tests of any
// layer may use it: it imports no other package of Quilt.
//
// A host is named by an "ip:port" string such as "127.77.0.5:7946". A
// [Network] hands out a memberlist transport per host ([Network.Transport]);
// nothing is bound on the real network for it. Datagrams go through a
// scheduler that delivers them, in order of due time, into the destination's
// packet channel. Streams are pairs of in-memory pipes joined by pumps that
// hold every chunk back by the link's delay and pace it by its bandwidth.
// Real TCP listeners (a node's HTTPS server, say) can be attributed to a host
// with [Network.Register]; connections made by [Network.Dialer] to them go
// through the same pumps.
//
// A [Proxy] puts a real TCP server of another program behind a link.
// Delay has normal jitter, datagram loss can be correlated (as netem), and
// bandwidth is a token bucket per direction shared by all traffic that way
// (as tbf), so that a scenario of the lab reads like the tc commands the
// papers used.
//
// All methods of Network, Transport and Proxy are safe for concurrent use.
package linkemu
