package connlimit

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// RuleSourceLimit is the rule of a connection refused because its source
// held its limit of connections, every one of them in a request.
const RuleSourceLimit = "conn.source"

// Local is the source of every connection from this host: loopback in any
// of its addresses and the host's own addresses. A local user can bind any
// of them, so telling them apart would give one user thousands of sources.
const Local = "local"

// Source is who a TCP connection from remote is counted against: Local for
// this host, the address for IPv4, the /64 for IPv6 (one host's share of a
// network is a /64, and it may use any address in it). An address that is
// not IP (a Unix socket) is its own string.
func Source(remote net.Addr) string {
	return hostAddrs.source(remote)
}

// SourceOf is Source for an address in host:port form (http.Request's
// RemoteAddr).
func SourceOf(hostport string) string {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return hostport
	}
	return hostAddrs.sourceIP(ap.Addr())
}

// Sources caps the connections each source holds on one listener. A source
// at its cap makes room for a new connection by closing its oldest one that
// carries no request (one that has sent nothing yet, or idles between
// requests); when every one of its connections is in a request, the new one
// is closed unanswered and Refused is told. So a source's idle or half-open
// connections never lock out its own next request, and no source takes more
// than its share of the listener.
type Sources struct {
	max     int
	refused func(source string, remote net.Addr, open int)

	mu   sync.Mutex
	open map[string][]*Conn // each source's connections, oldest first
}

// NewSources caps each source at n connections; refused is called, on its
// own goroutine, for each connection refused.
func NewSources(n int, refused func(source string, remote net.Addr, open int)) *Sources {
	return &Sources{max: max(n, 1), refused: refused, open: map[string][]*Conn{}}
}

// admit adds c to its source, closing the source's oldest connection that
// carries no request when the source is at its cap; false: c was refused
// and closed.
func (s *Sources) admit(c *Conn) bool {
	c.source = Source(c.RemoteAddr())
	s.mu.Lock()
	conns := s.open[c.source]
	var evict *Conn
	if len(conns) >= s.max {
		if i := slices.IndexFunc(conns, (*Conn).idle); i >= 0 {
			evict = conns[i]
			conns = slices.Delete(conns, i, i+1)
		}
	}
	ok := len(conns) < s.max
	if ok {
		c.sources = s
		conns = append(conns, c)
	}
	s.open[c.source] = conns
	n := len(conns)
	s.mu.Unlock()
	if evict != nil {
		evict.Close()
	}
	if !ok {
		c.Close()
		if s.refused != nil {
			go s.refused(c.source, c.RemoteAddr(), n)
		}
	}
	return ok
}

// remove forgets c.
func (s *Sources) remove(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns := s.open[c.source]
	if i := slices.Index(conns, c); i >= 0 {
		conns = slices.Delete(conns, i, i+1)
	}
	if len(conns) == 0 {
		delete(s.open, c.source)
	} else {
		s.open[c.source] = conns
	}
}

// hostAddrs are this host's addresses, read again at most once a second
// when an address not among them asks (a new interface, a Docker network).
var hostAddrs = &localAddrs{}

type localAddrs struct {
	mu    sync.Mutex
	addrs map[netip.Addr]bool
	read  time.Time
}

func (l *localAddrs) source(remote net.Addr) string {
	switch a := remote.(type) {
	case *net.TCPAddr:
		ip, ok := netip.AddrFromSlice(a.IP)
		if ok {
			return l.sourceIP(ip)
		}
	case nil:
		return ""
	}
	return SourceOf(remote.String())
}

func (l *localAddrs) sourceIP(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || l.has(ip) {
		return Local
	}
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

func (l *localAddrs) has(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.addrs[ip] {
		return true
	}
	if time.Since(l.read) < time.Second {
		return false
	}
	l.read = time.Now()
	l.addrs = map[netip.Addr]bool{}
	ifaddrs, _ := net.InterfaceAddrs()
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			l.addrs[p.Addr().Unmap().WithZone("")] = true
		}
	}
	return l.addrs[ip]
}
