package netrule

import "github.com/toolgate/toolgate/internal/proto"

// Loopback reports whether the target is the machine it is dialled from:
// inside a sandbox, the sandbox's own loopback.
func (t Target) Loopback() bool { return proto.LoopbackHost(t.Host) }

// Loopback reports whether the rule admits loopback targets: seen from a
// sandbox, a service on the gateway's host, which only the egress guard
// (not the sandbox's own loopback) can reach.
func (r Rule) Loopback() bool { return proto.LoopbackHost(r.Host) }
