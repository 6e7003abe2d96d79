package netrule

import "net/netip"

// Class is what a destination address is, for the guard. The zero value is
// Private, so an unclassified address is never treated as global.
type Class uint8

const (
	Private  Class = iota // non-global: loopback, RFC 1918, link-local, documentation …
	Global                // reachable on the public internet
	Metadata              // a cloud metadata service: refused even when private is allowed
)

func (c Class) String() string {
	switch c {
	case Global:
		return "global"
	case Metadata:
		return "metadata"
	}
	return "private"
}

// worse returns the more restrictive of two classes.
func worse(a, b Class) Class {
	switch {
	case a == Metadata || b == Metadata:
		return Metadata
	case a == Private || b == Private:
		return Private
	}
	return Global
}

func prefixes(ss ...string) []netip.Prefix {
	ps := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		ps[i] = netip.MustParsePrefix(s)
	}
	return ps
}

func within(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	metadata4 = prefixes("169.254.0.0/16", "100.100.100.200/32", "168.63.129.16/32")
	metadata6 = prefixes("fd00:ec2::/64", "fd20:ce::254/128")

	nonGlobal4 = prefixes(
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	)
	global6    = netip.MustParsePrefix("2000::/3")
	nonGlobal6 = prefixes("2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20")
	// IANA special-purpose registry: globally reachable blocks inside 2001::/23.
	anycast6 = prefixes(
		"2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:3::/32",
		"2001:4:112::/48", "2001:20::/28", "2001:30::/28",
	)

	// Prefixes that carry an IPv4 address, and where it sits (RFC 6052
	// layout for the NAT64 ones).
	wkpNAT64   = netip.MustParsePrefix("64:ff9b::/96")    // globally reachable itself
	localNAT64 = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215 local use
	compat6    = netip.MustParsePrefix("::/96")           // IPv4-compatible (deprecated)
	siit6      = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765)
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
)

// Classify decides what an address is, decoding any IPv4 address embedded
// in an IPv6 one first and classifying it by the same rules. The result is
// the most restrictive of the outer and the embedded address.
func Classify(a netip.Addr) Class { return Classifier{}.Classify(a) }

// Classifier classifies with extra knowledge of the network: operator NAT64
// prefixes (RFC 6052 lengths /32 /40 /48 /56 /64 /96; others are ignored),
// whose embedded IPv4 address is decoded like the well-known prefix's.
type Classifier struct {
	NAT64 []netip.Prefix
}

// Classify is the package-level Classify plus the operator NAT64 prefixes.
func (c Classifier) Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return Private
	}
	a = a.Unmap() // IPv4-mapped is the IPv4 address itself
	if a.Is4() {
		return classify4(a)
	}
	if within(a, metadata6) {
		return Metadata
	}
	if wkpNAT64.Contains(a) {
		// The well-known NAT64 prefix reaches exactly the embedded address.
		return classify4(embedded(a, 96))
	}
	outer := classify6(a)
	switch {
	case localNAT64.Contains(a):
		return worse(outer, classify4(embedded(a, 48)))
	case siit6.Contains(a), compat6.Contains(a):
		return worse(outer, classify4(embedded(a, 96)))
	case sixToFour.Contains(a):
		return worse(outer, classify4(embedded(a, 16)))
	case teredo.Contains(a):
		b := a.As16()
		server := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return worse(outer, worse(classify4(server), classify4(client)))
	}
	bits := -1 // the longest configured prefix holding a decides the layout
	for _, p := range c.NAT64 {
		if rfc6052Len(p.Bits()) && p.Addr().Is6() && p.Contains(a) && p.Bits() > bits {
			bits = p.Bits()
		}
	}
	if bits >= 0 {
		return worse(outer, classify4(embedded(a, bits)))
	}
	return outer
}

func classify4(a netip.Addr) Class {
	switch {
	case within(a, metadata4):
		return Metadata
	case within(a, nonGlobal4):
		return Private
	}
	return Global
}

func classify6(a netip.Addr) Class {
	if !global6.Contains(a) || (within(a, nonGlobal6) && !within(a, anycast6)) {
		return Private
	}
	return Global
}

// embedded extracts the IPv4 address that follows a prefix of the given
// length. For 6to4 (/16) the address follows directly; for the RFC 6052
// lengths (/32 … /96) bits 64–71 are the reserved "u" octet and skipped.
func embedded(a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	var v [4]byte
	j := bits / 8
	for i := range v {
		if j == 8 {
			j++
		}
		v[i] = b[j]
		j++
	}
	return netip.AddrFrom4(v)
}

func rfc6052Len(bits int) bool {
	switch bits {
	case 32, 40, 48, 56, 64, 96:
		return true
	}
	return false
}
