package proto

import (
	"net"
	"net/netip"
	"strings"
)

// EnvHostLoopback carries to the forwarder the egress rules (comma
// separated "host:port") that name services on the gateway host's
// loopback. Any other loopback target a sandbox process asks the
// forwarder for is the sandbox's own, and is dialled in the sandbox.
const EnvHostLoopback = "TOOLGATE_HOST_LOOPBACK"

// LoopbackHost reports whether host names the machine it is dialled from:
// localhost, a name under it (RFC 6761), or a loopback address.
func LoopbackHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().IsLoopback()
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// HostLoopback is a parsed EnvHostLoopback list.
type HostLoopback []hostPort

type hostPort struct{ host, port string }

// ParseHostLoopback reads an EnvHostLoopback value; malformed items are
// dropped (the list admits fewer targets to the gateway, never more).
func ParseHostLoopback(list string) HostLoopback {
	var out HostLoopback
	for _, item := range strings.Split(list, ",") {
		if h, p, err := net.SplitHostPort(strings.TrimSpace(item)); err == nil {
			out = append(out, hostPort{strings.ToLower(h), p})
		}
	}
	return out
}

// Routes reports whether target (host:port) goes to the gateway: every
// target but a loopback one that is not on the list.
func (l HostLoopback) Routes(target string) bool {
	h, p, err := net.SplitHostPort(target)
	if err != nil || !LoopbackHost(h) {
		return true // the gateway decides (and refuses what it cannot parse)
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	for _, r := range l {
		if r.port != p {
			continue
		}
		if suffix, wild := strings.CutPrefix(r.host, "*."); (wild && strings.HasSuffix(h, "."+suffix)) || r.host == h {
			return true
		}
	}
	return false
}
