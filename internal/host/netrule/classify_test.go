package netrule

import (
	"net/netip"
	"testing"
)

// none marks a range with no neighbour on that side.
const none Class = 255

var ranges4 = []struct {
	prefix        string
	class         Class
	before, after Class // classes of the addresses just outside the range
}{
	{"0.0.0.0/8", Private, none, Global},
	{"10.0.0.0/8", Private, Global, Global},
	{"100.64.0.0/10", Private, Global, Global},
	{"127.0.0.0/8", Private, Global, Global},
	{"169.254.0.0/16", Metadata, Global, Global},
	{"172.16.0.0/12", Private, Global, Global},
	{"192.0.0.0/24", Private, Global, Global},
	{"192.0.2.0/24", Private, Global, Global},
	{"192.88.99.0/24", Private, Global, Global},
	{"192.168.0.0/16", Private, Global, Global},
	{"198.18.0.0/15", Private, Global, Global},
	{"198.51.100.0/24", Private, Global, Global},
	{"203.0.113.0/24", Private, Global, Global},
	{"224.0.0.0/4", Private, Global, Private},
	{"240.0.0.0/4", Private, Private, none},
	{"255.255.255.255/32", Private, Private, none},
	{"100.100.100.200/32", Metadata, Private, Private}, // inside CGNAT
	{"168.63.129.16/32", Metadata, Global, Global},
}

var ranges6 = []struct {
	prefix        string
	class         Class
	before, after Class
}{
	{"::/128", Private, none, Private},
	{"::1/128", Private, Private, Private},
	{"fc00::/7", Private, Private, Private},
	{"fe80::/10", Private, Private, Private},
	{"ff00::/8", Private, Private, none},
	{"2000::/3", Global, Private, Private}, // first and last checked separately below
	{"2001::/23", Private, Global, Global},
	{"2001:db8::/32", Private, Global, Global},
	{"2002::/16", Private, Global, Global},
	{"3fff::/20", Private, Global, Global},
	// IANA anycast exceptions inside 2001::/23.
	{"2001:1::1/128", Global, Private, Global},
	{"2001:1::2/128", Global, Global, Global},
	{"2001:1::3/128", Global, Global, Private},
	{"2001:3::/32", Global, Private, Private},
	{"2001:4:112::/48", Global, Private, Private},
	{"2001:20::/28", Global, Private, Global},
	{"2001:30::/28", Global, Global, Private},
	// Metadata.
	{"fd00:ec2::/64", Metadata, Private, Private},
	{"fd20:ce::254/128", Metadata, Private, Private},
}

func last(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	r, _ := netip.AddrFromSlice(b)
	return r
}

type probe struct {
	addr netip.Addr
	want Class
}

func boundaryProbes(prefix string, class, before, after Class) []probe {
	p := netip.MustParsePrefix(prefix)
	first, end := p.Masked().Addr(), last(p)
	ps := []probe{{first, class}, {end, class}}
	if before != none {
		ps = append(ps, probe{first.Prev(), before})
	}
	if after != none {
		ps = append(ps, probe{end.Next(), after})
	}
	return ps
}

func TestClassifyRanges(t *testing.T) {
	t.Parallel()
	var probes []probe
	for _, r := range ranges4 {
		probes = append(probes, boundaryProbes(r.prefix, r.class, r.before, r.after)...)
	}
	for _, r := range ranges6 {
		if r.prefix == "2000::/3" {
			// 2000::/3 starts global and ends inside 3fff::/20.
			probes = append(probes,
				probe{netip.MustParseAddr("2000::"), Global},
				probe{netip.MustParseAddr("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), Private},
				probe{netip.MustParseAddr("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), Global},
				probe{netip.MustParseAddr("4000::"), Private})
			continue
		}
		probes = append(probes, boundaryProbes(r.prefix, r.class, r.before, r.after)...)
	}
	probes = append(probes,
		probe{netip.MustParseAddr("8.8.8.8"), Global},
		probe{netip.MustParseAddr("169.254.169.254"), Metadata},
		probe{netip.MustParseAddr("2606:4700::1111"), Global},
		probe{netip.MustParseAddr("fd00:ec2::254"), Metadata},
		probe{netip.Addr{}, Private},
	)
	for _, p := range probes {
		if got := Classify(p.addr); got != p.want {
			t.Errorf("Classify(%v) = %v, want %v", p.addr, got, p.want)
		}
	}
}

// Every IPv4 boundary address, in every IPv6 encoding that carries it.
func TestClassifyEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	var probes []probe
	for _, r := range ranges4 {
		probes = append(probes, boundaryProbes(r.prefix, r.class, r.before, r.after)...)
	}
	operator := []netip.Prefix{
		netip.MustParsePrefix("2a01::/32"), netip.MustParsePrefix("2a02:0:100::/40"),
		netip.MustParsePrefix("2a03:0:1::/48"), netip.MustParsePrefix("2a04:0:1:100::/56"),
		netip.MustParsePrefix("2a05:0:1:2::/64"), netip.MustParsePrefix("2a06:0:1:2:3:4::/96"),
	}
	withNAT64 := Classifier{NAT64: operator}
	for _, p := range probes {
		v4 := p.addr.As4()
		// A non-global carrier can only make the result stricter.
		stricter := worse(Private, p.want)
		enc := []probe{
			{netip.AddrFrom16(embed([16]byte{10: 0xff, 11: 0xff}, 96, v4)), p.want},                         // IPv4-mapped
			{netip.AddrFrom16(embed([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b}, 96, v4)), p.want},         // NAT64 well-known
			{netip.AddrFrom16(embed([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 5: 1}, 48, v4)), stricter}, // NAT64 local use
			{netip.AddrFrom16(embed([16]byte{}, 96, v4)), stricter},                                         // IPv4-compatible
			{netip.AddrFrom16(embed([16]byte{8: 0xff, 9: 0xff}, 96, v4)), stricter},                         // IPv4-translated
			{netip.AddrFrom16(embed([16]byte{0: 0x20, 1: 0x02}, 16, v4)), stricter},                         // 6to4
			{teredoAddr(v4, [4]byte{192, 0, 2, 1}), stricter},                                               // Teredo client
			{teredoAddr([4]byte{192, 0, 2, 1}, v4), stricter},                                               // Teredo server
		}
		for _, e := range enc {
			if got := Classify(e.addr); got != e.want {
				t.Errorf("Classify(%v) [carrying %v] = %v, want %v", e.addr, p.addr, got, e.want)
			}
			// Every textual form of the literal decodes to the same class.
			tg, err := ParseTarget("[" + e.addr.String() + "]:443")
			if err != nil || Classify(tg.Addr) != e.want {
				t.Errorf("ParseTarget([%v]:443) = %+v, %v; want class %v", e.addr, tg, err, e.want)
			}
		}
		for _, pre := range operator {
			a := netip.AddrFrom16(embed(pre.Addr().As16(), pre.Bits(), v4))
			if got := withNAT64.Classify(a); got != p.want {
				t.Errorf("operator NAT64 %v: Classify(%v) = %v, want %v", pre, a, got, p.want)
			}
			// Unconfigured, an operator prefix is just a global address.
			if got := Classify(a); got != Global {
				t.Errorf("unconfigured NAT64 %v: Classify(%v) = %v, want global", pre, a, got)
			}
		}
		// The IPv4 address itself, in every spelling.
		for _, sp := range ipv4Spellings(p.addr) {
			tg, err := ParseTarget(sp + ":80")
			if err != nil || Classify(tg.Addr) != p.want {
				t.Errorf("ParseTarget(%q) = %+v, %v; want class %v", sp, tg, err, p.want)
			}
		}
	}
}

func TestClassifyIssueExamples(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80", "[2002:a9fe:a9fe::]:80",
		"2852039166:80", "0251.0376.0251.0376:80", "0xa9fea9fe:80", "[::a9fe:a9fe]:80",
		"[64:ff9b:1:a9fe:a9:fe00::]:80", "[2001:0:4136:e378:8000:63bf:5601:5601]:80",
		"[fd00:ec2::254]:80", "[fd20:ce::254]:80", "100.100.100.200:80", "168.63.129.16:80",
	} {
		tg, err := ParseTarget(s)
		if err != nil {
			t.Fatalf("ParseTarget(%q): %v", s, err)
		}
		if c := Classify(tg.Addr); c != Metadata {
			t.Errorf("%s (%v) classified %v, want metadata", s, tg.Addr, c)
		}
	}
}

// embed writes v4 into carrier after a prefix of bits, RFC 6052 style
// (skipping the reserved octet 8), independently of the code under test.
func embed(carrier [16]byte, bits int, v4 [4]byte) [16]byte {
	pos := bits / 8
	for _, b := range v4 {
		if pos == 8 && bits != 16 {
			pos++
		}
		carrier[pos] = b
		pos++
	}
	return carrier
}

func teredoAddr(server, client [4]byte) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0x20, 0x01
	copy(b[4:8], server[:])
	for i := range client {
		b[12+i] = ^client[i]
	}
	return netip.AddrFrom16(b)
}

// With nested operator prefixes the longest one says where the IPv4 sits.
func TestClassifyNAT64LongestPrefix(t *testing.T) {
	t.Parallel()
	c := Classifier{NAT64: []netip.Prefix{
		netip.MustParsePrefix("2a00:1::/32"), netip.MustParsePrefix("2a00:1:2:3:4:5::/96"),
		netip.MustParsePrefix("2a00:1:2::/47"), // not an RFC 6052 length: ignored
	}}
	a := netip.MustParseAddr("2a00:1:2:3:4:5:a9fe:a9fe")
	if got := c.Classify(a); got != Metadata {
		t.Errorf("Classify(%v) = %v, want metadata", a, got)
	}
	b := netip.MustParseAddr("2a00:1:a9fe:a9fe::")
	if got := c.Classify(b); got != Metadata {
		t.Errorf("Classify(%v) = %v, want metadata", b, got)
	}
}

func TestClassString(t *testing.T) {
	t.Parallel()
	for c, want := range map[Class]string{Global: "global", Private: "private", Metadata: "metadata"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q", c, c.String())
		}
	}
}
