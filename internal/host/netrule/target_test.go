package netrule

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestParseTargetValid(t *testing.T) {
	t.Parallel()
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 3*64 + 61 = 253
	cases := []struct {
		in   string
		host string
		port uint16
		ip   bool
	}{
		{"example.com:443", "example.com", 443, false},
		{"Example.COM:443", "example.com", 443, false},
		{"example.com.:443", "example.com", 443, false},
		{"_dmarc.example.com:53", "_dmarc.example.com", 53, false},
		{"bücher.example:443", "xn--bcher-kva.example", 443, false},
		{"BÜCHER.example:443", "xn--bcher-kva.example", 443, false},
		{"münchen\u3002de:443", "xn--mnchen-3ya.de", 443, false},                        // ideographic full stop
		{"\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com:80", "example.com", 80, false}, // full-width
		{"xn--bcher-kva.example:443", "xn--bcher-kva.example", 443, false},
		{label63 + ".com:1", label63 + ".com", 1, false},
		{name253 + ":65535", name253, 65535, false},
		{name253 + ".:65535", name253, 65535, false},
		// IPv4 in every spelling inet_aton accepts.
		{"169.254.169.254:80", "169.254.169.254", 80, true},
		{"2852039166:80", "169.254.169.254", 80, true},
		{"0251.0376.0251.0376:80", "169.254.169.254", 80, true},
		{"0xa9fea9fe:80", "169.254.169.254", 80, true},
		{"0XA9FEA9FE:80", "169.254.169.254", 80, true},
		{"0xa9.0xfe.0xa9.0xfe:80", "169.254.169.254", 80, true},
		{"169.254.43518:80", "169.254.169.254", 80, true},
		{"169.16689662:80", "169.254.169.254", 80, true},
		{"0251.0xfe.43518:80", "169.254.169.254", 80, true},
		{"000000251.254.169.254:80", "169.254.169.254", 80, true},
		{"127.1:22", "127.0.0.1", 22, true},
		{"127.0.1:22", "127.0.0.1", 22, true},
		{"0:22", "0.0.0.0", 22, true},
		{"0x:22", "0.0.0.0", 22, true},
		{"0x7f.1:22", "127.0.0.1", 22, true},
		{"1.2.3.4.:80", "1.2.3.4", 80, true},
		{"4294967295:80", "255.255.255.255", 80, true},
		// IPv6, bracketed; mapped addresses are the IPv4 address.
		{"[::1]:22", "::1", 22, true},
		{"[::ffff:169.254.169.254]:80", "169.254.169.254", 80, true},
		{"[::FFFF:A9FE:A9FE]:80", "169.254.169.254", 80, true},
		{"[64:ff9b::a9fe:a9fe]:80", "64:ff9b::a9fe:a9fe", 80, true},
		{"[64:ff9b::169.254.169.254]:80", "64:ff9b::a9fe:a9fe", 80, true},
		{"[2002:a9fe:a9fe::]:80", "2002:a9fe:a9fe::", 80, true},
		{"[2001:DB8:0:0::1]:443", "2001:db8::1", 443, true},
	}
	for _, c := range cases {
		got, err := ParseTarget(c.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", c.in, err)
			continue
		}
		if got.Host != c.host || got.Port != c.port || got.IsIP() != c.ip {
			t.Errorf("ParseTarget(%q) = %+v, want host %q port %d ip %v", c.in, got, c.host, c.port, c.ip)
		}
		if c.ip && got.Addr.String() != c.host {
			t.Errorf("ParseTarget(%q).Addr = %v", c.in, got.Addr)
		}
		// The canonical form parses back to the same target.
		again, err := ParseTarget(got.String())
		if err != nil || again != got {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseTargetInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, why string }{
		{"example.com", "missing port"},
		{"example.com:", "missing port"},
		{"[::1]", "missing port"},
		{"2852039166", "missing port"},
		{"user@example.com:443", "userinfo"},
		{"user:pw@example.com:443", "userinfo"},
		{"example.com:443@evil.example:443", "userinfo"},
		{"[fe80::1%eth0]:80", "zone"},
		{"[fe80::1%25eth0]:80", "zone"},
		{"exa%2emple.com:80", "percent"},
		{strings.Repeat("a", 300) + ".com:443", "label longer"},
		{strings.Repeat("a", 64) + ".com:443", "label longer"},
		{strings.Repeat(strings.Repeat("a", 63)+".", 4) + "com:443", "host longer"},
		{strings.Repeat("ü", 60) + ".com:443", "label longer"}, // over 63 once punycoded
		// Refused for its length before encoding: punycode is quadratic in
		// the label, and the sandbox sends headers of up to a megabyte.
		{strings.Repeat("a", 3000) + "\U000E0100.com:443", "label longer"},
		{":80", "empty host"},
		{".:80", "empty host"},
		{"a..b:80", "empty label"},
		{".a:80", "empty label"},
		{"a.b..:80", "empty label"},
		{"example.com:0", "invalid port"},
		{"example.com:65536", "out of range"},
		{"example.com:-1", "invalid port"},
		{"example.com:+80", "invalid port"},
		{"example.com:080", "invalid port"},
		{"example.com:http", "invalid port"},
		{"example.com:99999999999999999999", "invalid port"},
		{"1.2.3.256:80", "too large"},
		{"256.1.1.1:80", "exceeds 255"},
		{"1.2.3.4.5:80", "more than 4 parts"},
		{"4294967296:80", "too large"},
		{"0x100000000:80", "too large"},
		{"1.16777216:80", "too large"},
		{"08.1.1.1:80", "bad part"},
		{"example.123:80", "bad part"},
		{"0x1g.example.1:80", "bad part"},
		{"::1:80", "brackets"},
		{"[1.2.3.4]:80", "brackets"},
		{"[::1]x:80", "missing port"},
		{"[not-ip]:80", "brackets"},
		{"[::g]:80", "invalid IPv6"},
		{"exa mple.com:80", "not allowed"},
		{"exa\x00mple.com:80", "not allowed"},
		{"exa/mple.com:80", "not allowed"},
		{"*.example.com:80", "not allowed"},
		{"a\u200b.com:80", "not allowed"}, // zero-width space
		{"\xff.com:80", "UTF-8"},
		{"-a.com:80", "hyphen"},
		{"a-.com:80", "hyphen"},
	}
	for _, c := range cases {
		got, err := ParseTarget(c.in)
		if err == nil {
			t.Errorf("ParseTarget(%q) = %+v, want error (%s)", c.in, got, c.why)
			continue
		}
		if !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseTarget(%q) error %q does not say %q", c.in, err, c.why)
		}
	}
}

// Every IPv4 spelling of an address decodes to that address.
func ipv4Spellings(a netip.Addr) []string {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return []string{
		a.String(),
		itoa(uint64(v)),
		"0x" + hex(uint64(v)),
		"0" + oct(uint64(b[0])) + ".0" + oct(uint64(b[1])) + ".0" + oct(uint64(b[2])) + ".0" + oct(uint64(b[3])),
		"0x" + hex(uint64(b[0])) + ".0x" + hex(uint64(b[1])) + ".0x" + hex(uint64(b[2])) + ".0x" + hex(uint64(b[3])),
		itoa(uint64(b[0])) + "." + itoa(uint64(b[1])) + "." + itoa(uint64(b[2])<<8|uint64(b[3])),
		itoa(uint64(b[0])) + "." + itoa(uint64(v&0xffffff)),
		"0" + oct(uint64(v)),
		a.String() + ".",
		"[::ffff:" + a.String() + "]",
		"[::ffff:" + hex(uint64(v>>16)) + ":" + hex(uint64(v&0xffff)) + "]",
	}
}

func TestParseTargetIPv4Spellings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0.0.0.0", "127.0.0.1", "169.254.169.254", "10.1.2.3", "8.8.8.8", "255.255.255.255", "100.100.100.200"} {
		a := netip.MustParseAddr(s)
		for _, sp := range ipv4Spellings(a) {
			got, err := ParseTarget(sp + ":80")
			if err != nil || got.Addr != a || got.Host != s {
				t.Errorf("ParseTarget(%q) = %+v, %v; want %v", sp+":80", got, err, a)
			}
		}
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
func hex(v uint64) string  { return strconv.FormatUint(v, 16) }
func oct(v uint64) string  { return strconv.FormatUint(v, 8) }
