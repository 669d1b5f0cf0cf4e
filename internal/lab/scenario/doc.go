// Package scenario describes the networks of the lab (layer 6): the hosts of
// an emulated network (name, role, zone, capacity) and the links between
// them, in a small line-based text format that is easy to write by hand.
// A [Scenario] is plain data: [Scenario.Link] answers what link joins two
// nodes, and [Scenario.Apply] sets those links on a [linkemu.Network].
// The papers' networks are built in ([Builtin], [Names]): the QMPSU
// community mesh and the Azure region of Selimi et al., the KREONET central
// region of the Swift experiment, and a perfect LAN.
//
// # File format
//
// A scenario file is UTF-8 text, one directive per line. A '#' starts a
// comment that runs to the end of the line (so no value may contain '#');
// blank lines are ignored; words are separated by spaces or tabs.
//
//	scenario NAME                      the first directive, exactly once
//	description TEXT                   at most once; TEXT runs to the end of the line
//	node NAME [role=ROLE] [zone=ZONE] [capacity=SIZE] [up=RATE] [down=RATE]
//	default [LINKKEY=VALUE ...]        at most once: the link of every ordered
//	                                   pair that no rule covers (else perfect)
//	link FROM -> TO [LINKKEY=VALUE ...]    a rule for one direction
//	link FROM <-> TO [LINKKEY=VALUE ...]   two rules: FROM -> TO, then TO -> FROM
//
// NAME and ZONE are letters, digits, '.', '_' and '-'. FROM and TO are node
// names or '*', any node; rules may come before or after the nodes they
// name, but every name must be a node of the file, and FROM and TO must
// differ unless both are '*'. ROLE is storage (the default), client or
// gateway. SIZE is a byte count with an optional suffix: B, the binary
// KiB, MiB, GiB, TiB, PiB or the decimal kB (or KB), MB, GB, TB, PB, such as
// 50GiB or 1.5TB; it is rounded to a whole byte. An absent capacity is 0,
// unknown. up and down (RATE, below) limit everything the node sends and
// receives, whatever the peer, on top of each link's bw: the capacity of
// its one radio or cable (see [linkemu.HostLimit]); absent is unlimited.
//
// The link keys, each at most once per line:
//
//	delay=DURATION     one-way latency, in Go's duration syntax: 2.3ms, 250us, 1s
//	jitter=DURATION    standard deviation of a normal variation of the delay
//	loss=PERCENT       datagram loss, 0% to 100%, such as 0.5%
//	corr=PERCENT       correlation of successive losses, as netem's "loss P% C%"
//	reorder=PERCENT    share of datagrams held back so that later ones overtake them
//	bw=RATE            bandwidth of this direction; 0 is unlimited
//
// A PERCENT needs its '%' sign, except 0. A RATE is in bits per second with
// tc's decimal suffixes bit, kbit, Mbit, Gbit (case does not matter), or in
// bytes per second with B, kB (or KB), MB, GB; "/s" may follow, so 17.4Mbit,
// 10Mbit/s and 2.5MB are rates. A rate is rounded to a whole byte per second
// ([linkemu.Link.Bandwidth] counts bytes); a rate that rounds to 0 but is
// not 0 is an error. Suffixes such as Mbps are refused: in tc they mean
// bytes, elsewhere bits.
//
// A link line starts from the default link and changes the keys it names;
// rules do not combine with each other. The link from a to b is that of the
// most specific rule that covers the pair: a -> b, then a -> *, then
// * -> b, then * -> *, else the default; among rules equally specific the
// last one in the file wins.
//
// Unknown directives and keys, duplicate nodes, rules naming unknown nodes
// and malformed or out-of-range values are errors. Every error of [Parse]
// is a *[ParseError]; it names the line, except for a file without a
// scenario line or without nodes.
//
// # Example
//
//	# comment
//	scenario qmpsu-small
//	description three buildings of a wireless mesh
//	node s01 role=storage zone=z1 capacity=50GiB
//	node s02 zone=z2                               # role=storage is the default
//	node s03 zone=z3
//	node best role=client
//	default delay=2.3ms jitter=0.5ms bw=17.4Mbit loss=0.1% corr=25%
//	link s01 -> s02 delay=3ms bw=10Mbit            # one direction; loss etc. from default
//	link best <-> * delay=1ms bw=40Mbit            # both directions, to and from every node
//
// Here the link s01 -> s02 has delay 3ms, jitter 0.5ms, loss 0.1%,
// correlation 25% and 10 Mbit/s, s02 -> s01 is the default link, and every
// link to or from best has delay 1ms and 40 Mbit/s and the default's jitter
// and loss.
//
// [Scenario.Format] writes this form back: [Parse] of its output gives a
// Scenario equal to the one formatted. It writes one rule per line, joining
// a rule and the next into one "<->" line when the second is the first
// reversed with the same link, and only the keys in which a rule differs
// from the default.
//
// A Scenario is not safe for concurrent modification; its methods other
// than [Scenario.AddDelay] (which returns a copy) do not modify it.
package scenario
