// Package netrule is what egress may reach, decided without the network:
// target parsing (IP literals in every spelling, IDNA names to punycode),
// address classification (global, private, cloud metadata, NAT64 and other
// embeddings), allow rules, and the pure egress decision over a recorded
// answer. It is a leaf: config validates rules with it and policy decides
// with it, without linking the host's guard, tunnels or socket route.
package netrule

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DNS length limits (RFC 1035), applied to the ASCII (punycode) form.
const (
	maxLabelLen = 63
	maxNameLen  = 253
)

// Target is a normalised destination. Host is lowercase ASCII without a
// trailing dot; for an IP literal it is the canonical address text and Addr
// is set, so every spelling of one address compares equal.
type Target struct {
	Host string
	Port uint16
	Addr netip.Addr // valid only for IP literals
}

// IsIP reports whether the target named an address rather than a host name.
func (t Target) IsIP() bool { return t.Addr.IsValid() }

// String renders host:port, bracketing IPv6.
func (t Target) String() string {
	if t.Addr.Is6() {
		return "[" + t.Host + "]:" + strconv.Itoa(int(t.Port))
	}
	return t.Host + ":" + strconv.Itoa(int(t.Port))
}

// ParseTarget normalises "host:port" as a client (CONNECT, Host header)
// sends it. It rejects what a guard cannot interpret unambiguously:
// userinfo, zone ids, missing or invalid ports, empty or over-long labels.
func ParseTarget(hostport string) (Target, error) {
	host, port, err := splitHostPort(hostport)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: %w", hostport, err)
	}
	t, err := parseHost(host)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: %w", hostport, err)
	}
	t.Port = port
	return t, nil
}

func splitHostPort(s string) (host string, port uint16, err error) {
	if strings.ContainsRune(s, '@') {
		return "", 0, errors.New("userinfo is not allowed")
	}
	if strings.ContainsRune(s, '%') {
		return "", 0, errors.New("zone ids and percent-encoding are not allowed")
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 || (strings.HasPrefix(s, "[") && !strings.HasSuffix(s[:i], "]")) {
		return "", 0, errors.New("missing port")
	}
	host, ps := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") {
		host = host[1 : len(host)-1]
		if !strings.Contains(host, ":") {
			return "", 0, errors.New("brackets around a non-IPv6 host")
		}
	} else if strings.ContainsAny(host, ":[]") {
		return "", 0, errors.New("IPv6 address must be in brackets")
	}
	p, err := parsePort(ps)
	if err != nil {
		return "", 0, err
	}
	return host, p, nil
}

func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, errors.New("missing port")
	}
	if len(s) > 5 || s[0] == '0' || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %d out of range", n)
	}
	return uint16(n), nil
}

// parseHost normalises a host without port: IPv6 (already unbracketed),
// IPv4 in any inet_aton spelling, or a DNS name.
func parseHost(host string) (Target, error) {
	if host == "" {
		return Target{}, errors.New("empty host")
	}
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return Target{}, fmt.Errorf("invalid IPv6 address: %w", err)
		}
		// An IPv4-mapped literal means the IPv4 address; dial it as such.
		a = a.Unmap()
		return Target{Host: a.String(), Addr: a}, nil
	}
	name, err := normaliseName(host)
	if err != nil {
		return Target{}, err
	}
	labels := strings.Split(name, ".")
	// Like the WHATWG URL parser: a name whose last label is a number is an
	// IPv4 address or an error, never something to hand to DNS.
	if isNumericLabel(labels[len(labels)-1]) {
		a, err := parseIPv4(labels)
		if err != nil {
			return Target{}, err
		}
		return Target{Host: a.String(), Addr: a}, nil
	}
	return Target{Host: name}, nil
}

// normaliseName lowercases, maps the IDNA full stops and full-width ASCII,
// punycodes non-ASCII labels, strips one trailing dot and checks lengths.
// Full UTS #46 mapping (NFKC) is not done: the name matched is exactly the
// name resolved, so a gap there can only refuse a connection, not widen one.
func normaliseName(host string) (string, error) {
	if !utf8.ValidString(host) {
		return "", errors.New("host is not valid UTF-8")
	}
	host = strings.Map(func(r rune) rune {
		switch {
		case r == '\u3002' || r == '\uff0e' || r == '\uff61':
			return '.'
		case r >= '\uff01' && r <= '\uff5e':
			return r - 0xfee0 // full-width ASCII
		}
		return r
	}, host)
	host = strings.ToLower(host)
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", errors.New("empty host")
	}
	labels := strings.Split(host, ".")
	for i, l := range labels {
		if l == "" {
			return "", errors.New("empty label")
		}
		ascii := true
		for _, r := range l {
			if r >= utf8.RuneSelf {
				ascii = false
				if !unicode.In(r, unicode.L, unicode.M, unicode.N) {
					return "", fmt.Errorf("character %U not allowed in host", r)
				}
			} else if !isHostByte(byte(r)) {
				return "", fmt.Errorf("character %q not allowed in host", r)
			}
		}
		if !ascii {
			// Punycode takes time quadratic in the label and writes at
			// least a byte per rune: refuse a long one before encoding.
			if utf8.RuneCountInString(l) > maxLabelLen {
				return "", fmt.Errorf("label longer than %d bytes", maxLabelLen)
			}
			p, err := punycodeEncode(l)
			if err != nil {
				return "", err
			}
			l = "xn--" + p
			labels[i] = l
		}
		if len(l) > maxLabelLen {
			return "", fmt.Errorf("label longer than %d bytes", maxLabelLen)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("label starts or ends with a hyphen")
		}
	}
	name := strings.Join(labels, ".")
	if len(name) > maxNameLen {
		return "", fmt.Errorf("host longer than %d bytes", maxNameLen)
	}
	return name, nil
}

// isHostByte admits letters, digits, hyphen and underscore (seen in real
// service names); the input is already lowercased.
func isHostByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// isNumericLabel reports whether a label is a number in inet_aton syntax
// (decimal, 0-prefixed octal, 0x-prefixed hex).
func isNumericLabel(l string) bool {
	if l == "0x" {
		return true
	}
	if strings.HasPrefix(l, "0x") {
		return strings.Trim(l[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// parseIPv4 decodes the 1–4 part forms inet_aton and browsers accept
// (127.1, 2852039166, 0251.0376.0251.0376, 0xa9fea9fe …): each part is
// decimal, octal or hex, and the last part fills the remaining bytes.
func parseIPv4(parts []string) (netip.Addr, error) {
	if len(parts) > 4 {
		return netip.Addr{}, errors.New("invalid IPv4 address: more than 4 parts")
	}
	var v uint64
	for i, p := range parts {
		n, err := parseIPv4Part(p)
		if err != nil {
			return netip.Addr{}, err
		}
		last := i == len(parts)-1
		if !last {
			if n > 0xff {
				return netip.Addr{}, fmt.Errorf("invalid IPv4 address: part %q exceeds 255", p)
			}
			v = v<<8 | n
			continue
		}
		rem := uint(4 - i) // bytes the last part fills
		if n >= 1<<(8*rem) {
			return netip.Addr{}, fmt.Errorf("invalid IPv4 address: part %q too large", p)
		}
		v = v<<(8*rem) | n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

func parseIPv4Part(p string) (uint64, error) {
	base, digits := 10, p
	switch {
	case strings.HasPrefix(p, "0x"):
		base, digits = 16, p[2:]
		if digits == "" { // "0x" alone is 0, as inet_aton reads it
			return 0, nil
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	// Cap the length so no part can overflow the parse; 0xffffffff is the
	// largest value any part may hold, leading zeros aside.
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, nil
	}
	if len(digits) > 11 {
		return 0, fmt.Errorf("invalid IPv4 address: part %q too large", p)
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid IPv4 address: bad part %q", p)
	}
	return n, nil
}
