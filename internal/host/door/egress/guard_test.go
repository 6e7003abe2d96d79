package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/host/door/egress/dnstest"
	"github.com/toolgate/toolgate/internal/host/gateway"
	"github.com/toolgate/toolgate/internal/host/netrule"
)

// testOutside treats loopback as the test's "outside" (global); everything
// else keeps its real class. Only tests pass it to a Guard.
func testOutside(a netip.Addr) netrule.Class {
	if a.Unmap().IsLoopback() {
		return netrule.Global
	}
	return netrule.Classify(a)
}

var (
	outsideA = netip.MustParseAddr("127.0.0.2")
	outsideB = netip.MustParseAddr("127.0.0.3")
	metaAddr = netip.MustParseAddr("169.254.169.254")
)

// listen starts an accept loop on addr:0 that reports each accepted
// connection's local address and then echoes.
func listen(t *testing.T, addr netip.Addr) (port uint16, accepted chan netip.AddrPort) {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = make(chan netip.AddrPort, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- netip.MustParseAddrPort(c.LocalAddr().String())
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), accepted
}

func mustRules(t *testing.T, ss ...string) []netrule.Rule {
	t.Helper()
	rs, err := netrule.ParseRules(ss)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func mustTarget(t *testing.T, s string) netrule.Target {
	t.Helper()
	tg, err := netrule.ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func denial(t *testing.T, err error) gateway.Decision {
	t.Helper()
	var d *gateway.DeniedError
	if !errors.As(err, &d) {
		t.Fatalf("want *gateway.DeniedError, got %v", err)
	}
	return d.Decision
}

func TestGuardDialsAllowedHost(t *testing.T) {
	port, accepted := listen(t, outsideA)
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return []netip.Addr{outsideA} })
	p := strconv.Itoa(int(port))
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "pypi.test:"+p)}, Options{Resolver: dns.Resolver(), Classify: testOutside})

	conn, at, err := g.Dial(context.Background(), mustTarget(t, "PyPI.test.:"+p))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	want := netip.AddrPortFrom(outsideA, port)
	if got := <-accepted; got != want {
		t.Errorf("connected to %v, want %v", got, want)
	}
	conn.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Errorf("echo: %q, %v", buf, err)
	}
	if !at.Decision.Allow || at.Decision.Rule != "egress.allow[0]" || at.Host != "pypi.test" || at.Port != port ||
		len(at.Resolved) != 1 || at.Resolved[0] != outsideA || len(at.Dialled) != 1 || at.Dialled[0] != want || at.Remote != want {
		t.Errorf("attempt = %+v", at)
	}
	d := at.Detail()
	if d["host"] != "pypi.test" || d["remote"] != want.String() || d["dialled"].([]string)[0] != want.String() {
		t.Errorf("detail = %v", d)
	}
}

func TestGuardRefusesUnlistedWithoutResolving(t *testing.T) {
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return []netip.Addr{outsideA} })
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "pypi.test:443", "*.pythonhosted.org:443")}, Options{Resolver: dns.Resolver(), Classify: testOutside})
	for _, s := range []string{"evil.test:443", "pypi.test:22", "pythonhosted.org:443", "[::1]:443", "127.0.0.2:443"} {
		_, at, err := g.Dial(context.Background(), mustTarget(t, s))
		if d := denial(t, err); d.Rule != netrule.RuleAllowlist || !reflect.DeepEqual(at.Decision, d) || !strings.Contains(d.Reason, "allowlist") {
			t.Errorf("%s: decision %+v", s, d)
		}
	}
	// An empty allowlist allows nothing.
	_, _, err := NewGuard(netrule.Policy{}, Options{Resolver: dns.Resolver()}).Dial(context.Background(), mustTarget(t, "pypi.test:443"))
	if denial(t, err).Rule != netrule.RuleAllowlist {
		t.Error("empty allowlist allowed a connection")
	}
	if n := dns.Count("evil.test", dnstest.TypeA) + dns.Count("pypi.test", dnstest.TypeA); n != 0 {
		t.Errorf("%d DNS queries for refused targets", n)
	}
}

// The DNS server answers a test-"public" address first and the metadata
// address on every later query. The guard must ask once and dial the first.
func TestGuardPinsAgainstRebinding(t *testing.T) {
	port, accepted := listen(t, outsideA)
	dns := dnstest.New(t, func(_ string, qtype uint16, n int) []netip.Addr {
		if n == 0 {
			return []netip.Addr{outsideA}
		}
		return []netip.Addr{metaAddr}
	})
	p := strconv.Itoa(int(port))
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "rebind.test:"+p), AllowPrivate: true}, Options{Resolver: dns.Resolver(), Classify: testOutside})

	conn, at, err := g.Dial(context.Background(), mustTarget(t, "rebind.test:"+p))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := <-accepted; got.Addr() != outsideA {
		t.Errorf("connected to %v, want %v", got, outsideA)
	}
	if n := dns.Count("rebind.test", dnstest.TypeA); n != 1 {
		t.Errorf("guard asked %d times for A, want once", n)
	}
	if at.Remote.Addr() != outsideA || len(at.Dialled) != 1 {
		t.Errorf("attempt = %+v", at)
	}
	// The server really does rebind: the next connection resolves anew and is refused.
	_, at, err = g.Dial(context.Background(), mustTarget(t, "rebind.test:"+p))
	if d := denial(t, err); d.Rule != netrule.RuleMetadata || len(at.Dialled) != 0 {
		t.Errorf("second dial: %+v, attempt %+v", d, at)
	}
	if n := dns.Count("rebind.test", dnstest.TypeA); n != 2 {
		t.Errorf("A queries = %d, want 2", n)
	}
}

func TestGuardVetsAnswers(t *testing.T) {
	a := netip.MustParseAddr
	cases := []struct {
		name    string
		answer  []netip.Addr
		private bool
		rule    string
	}{
		{"empty", nil, true, netrule.RuleResolve},
		{"metadata", []netip.Addr{metaAddr}, true, netrule.RuleMetadata},
		{"metadata after public", []netip.Addr{outsideA, metaAddr}, true, netrule.RuleMetadata},
		{"alibaba metadata", []netip.Addr{a("100.100.100.200")}, true, netrule.RuleMetadata},
		{"aws ipv6 metadata", []netip.Addr{a("fd00:ec2::254")}, true, netrule.RuleMetadata},
		{"mapped metadata in AAAA", []netip.Addr{a("::ffff:169.254.169.254")}, true, netrule.RuleMetadata},
		{"nat64 metadata in AAAA", []netip.Addr{a("64:ff9b::a9fe:a9fe")}, true, netrule.RuleMetadata},
		{"6to4 metadata in AAAA", []netip.Addr{a("2002:a9fe:a9fe::")}, true, netrule.RuleMetadata},
		{"private denied", []netip.Addr{a("10.0.0.1")}, false, netrule.RulePrivate},
		{"private ipv6 denied", []netip.Addr{a("fc00::1")}, false, netrule.RulePrivate},
		{"mixed, private denied", []netip.Addr{outsideA, a("10.0.0.1")}, false, netrule.RuleMixed},
		{"mixed, private allowed", []netip.Addr{outsideA, a("10.0.0.1")}, true, netrule.RuleMixed},
		{"mixed across families", []netip.Addr{outsideA, a("fe80::1")}, true, netrule.RuleMixed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return c.answer })
			g := NewGuard(netrule.Policy{Allow: mustRules(t, "x.test:443"), AllowPrivate: c.private}, Options{Resolver: dns.Resolver(), Classify: testOutside})
			conn, at, err := g.Dial(context.Background(), mustTarget(t, "x.test:443"))
			if conn != nil {
				conn.Close()
			}
			if d := denial(t, err); d.Rule != c.rule || len(at.Dialled) != 0 {
				t.Errorf("decision %+v, attempt %+v; want rule %s", d, at, c.rule)
			}
		})
	}
}

// A resolver that answers "no addresses" without an error is refused too.
type staticResolver []netip.Addr

func (s staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return s, nil
}

func TestGuardRefusesEmptyAnswerWithoutError(t *testing.T) {
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "x.test:443"), AllowPrivate: true}, Options{Resolver: staticResolver(nil)})
	_, _, err := g.Dial(context.Background(), mustTarget(t, "x.test:443"))
	if d := denial(t, err); d.Rule != netrule.RuleEmpty {
		t.Errorf("decision %+v", d)
	}
}

func TestGuardSlowDNS(t *testing.T) {
	release := make(chan struct{})
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { <-release; return []netip.Addr{outsideA} })
	t.Cleanup(func() { close(release) })
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "slow.test:443")}, Options{Resolver: dns.Resolver(), ResolveTimeout: 50 * time.Millisecond, Classify: testOutside})
	_, at, err := g.Dial(context.Background(), mustTarget(t, "slow.test:443"))
	if d := denial(t, err); d.Rule != netrule.RuleResolve || len(at.Dialled) != 0 {
		t.Errorf("decision %+v, attempt %+v", d, at)
	}
}

// Private destinations, when allowed, are reached (loopback with the real
// classifier); metadata stays refused even then and even when a test
// classifier calls everything global.
func TestGuardPrivateAllowedButNeverMetadata(t *testing.T) {
	priv := netip.MustParseAddr("127.0.0.5")
	port, accepted := listen(t, priv)
	p := strconv.Itoa(int(port))
	dns := dnstest.New(t, func(name string, _ uint16, _ int) []netip.Addr {
		if name == "meta.test" {
			return []netip.Addr{metaAddr}
		}
		return []netip.Addr{priv}
	})
	conn, _, err := NewGuard(netrule.Policy{Allow: mustRules(t, "db.test:"+p), AllowPrivate: true}, Options{Resolver: dns.Resolver()}).
		Dial(context.Background(), mustTarget(t, "db.test:"+p))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := <-accepted; got.Addr() != priv {
		t.Errorf("connected to %v", got)
	}
	_, _, err = NewGuard(netrule.Policy{Allow: mustRules(t, "db.test:"+p)}, Options{Resolver: dns.Resolver()}).
		Dial(context.Background(), mustTarget(t, "db.test:"+p))
	if denial(t, err).Rule != netrule.RulePrivate {
		t.Error("private address allowed by default")
	}

	everythingGlobal := func(netip.Addr) netrule.Class { return netrule.Global }
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "meta.test:80"), AllowPrivate: true}, Options{Resolver: dns.Resolver(), Classify: everythingGlobal})
	_, _, err = g.Dial(context.Background(), mustTarget(t, "meta.test:80"))
	if denial(t, err).Rule != netrule.RuleMetadata {
		t.Error("classifier override unblocked a metadata address")
	}
}

// An operator NAT64 prefix the guard is told about carries metadata too.
func TestGuardOperatorNAT64(t *testing.T) {
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("2a01:0:a9fe:a9fe::")}
	})
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "nat64.test:80"), AllowPrivate: true},
		Options{Resolver: dns.Resolver(), NAT64: []netip.Prefix{netip.MustParsePrefix("2a01::/32")}})
	_, at, err := g.Dial(context.Background(), mustTarget(t, "nat64.test:80"))
	if d := denial(t, err); d.Rule != netrule.RuleMetadata || len(at.Dialled) != 0 {
		t.Errorf("decision %+v", d)
	}
}

// IP literals in every encoding of the metadata address: refused without a
// DNS query even with an exact allow rule and private allowed.
func TestGuardMetadataLiterals(t *testing.T) {
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return nil })
	for _, s := range []string{
		"169.254.169.254:80", "2852039166:80", "0251.0376.0251.0376:80", "0xa9fea9fe:80", "169.254.43518:80",
		"[::ffff:169.254.169.254]:80", "[64:ff9b::a9fe:a9fe]:80", "[2002:a9fe:a9fe::]:80", "[::a9fe:a9fe]:80",
		"[fd00:ec2::254]:80", "100.100.100.200:80", "168.63.129.16:80",
	} {
		tg := mustTarget(t, s)
		g := NewGuard(netrule.Policy{Allow: []netrule.Rule{{Host: tg.Host, Port: tg.Port}}, AllowPrivate: true}, Options{Resolver: dns.Resolver(), Classify: testOutside})
		_, at, err := g.Dial(context.Background(), tg)
		if d := denial(t, err); d.Rule != netrule.RuleMetadata || len(at.Dialled) != 0 {
			t.Errorf("%s: decision %+v", s, d)
		}
	}
	if n := dns.Queries(); n != 0 {
		t.Errorf("IP literals were resolved: %d queries", n)
	}
}

// Addresses are tried in answer order; a refused one falls through to the
// next, and only answer addresses are ever dialled.
func TestGuardDialsInOrder(t *testing.T) {
	port, accepted := listen(t, outsideB)
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return []netip.Addr{outsideA, outsideB} })
	p := strconv.Itoa(int(port))
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "two.test:"+p)}, Options{Resolver: dns.Resolver(), Classify: testOutside})
	conn, at, err := g.Dial(context.Background(), mustTarget(t, "two.test:"+p))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	<-accepted
	want := []netip.AddrPort{netip.AddrPortFrom(outsideA, port), netip.AddrPortFrom(outsideB, port)}
	if len(at.Dialled) != 2 || at.Dialled[0] != want[0] || at.Dialled[1] != want[1] || at.Remote != want[1] {
		t.Errorf("attempt = %+v", at)
	}

	// Nothing listening anywhere: an allowed decision, a dial error, no denial.
	port2, _ := listen(t, outsideA) // a port known to be closed on outsideB
	_, at, err = NewGuard(netrule.Policy{Allow: mustRules(t, "127.0.0.3:"+strconv.Itoa(int(port2)))}, Options{Classify: testOutside}).
		Dial(context.Background(), mustTarget(t, "127.0.0.3:"+strconv.Itoa(int(port2))))
	var denied *gateway.DeniedError
	if err == nil || errors.As(err, &denied) || !at.Decision.Allow || at.Err == "" || at.Detail()["dialError"] == nil {
		t.Errorf("closed port: err %v, attempt %+v", err, at)
	}
}

// recordingResolver remembers the names it was asked for.
type recordingResolver struct{ names []string }

func (r *recordingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.names = append(r.names, host)
	return []netip.Addr{outsideA}, nil
}

// The allowlisted name is looked up as written, never under the host's
// resolv.conf search domains: "x.test" that does not exist must not become
// "x.test.corp.internal", a name no rule allowed.
func TestGuardResolvesAbsoluteName(t *testing.T) {
	r := &recordingResolver{}
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "x.test:443")}, Options{Resolver: r, Classify: testOutside})
	at := &Attempt{}
	if err := g.Resolve(context.Background(), mustTarget(t, "x.test:443"), at); err != nil {
		t.Fatal(err)
	}
	if len(r.names) != 1 || r.names[0] != "x.test." {
		t.Fatalf("looked up %q, want the rooted name \"x.test.\"", r.names)
	}
	// A single-label name stays local (/etc/hosts keys it without the dot).
	r.names = nil
	g = NewGuard(netrule.Policy{Allow: mustRules(t, "db:5432"), AllowPrivate: true}, Options{Resolver: r, Classify: testOutside})
	if err := g.Resolve(context.Background(), mustTarget(t, "db:5432"), at); err != nil {
		t.Fatal(err)
	}
	if len(r.names) != 1 || r.names[0] != "db" {
		t.Fatalf("looked up %q, want \"db\"", r.names)
	}
}

// An answer full of black-hole addresses is given up on as a whole at the
// dial budget, not after a timeout per address.
func TestGuardDialBudget(t *testing.T) {
	const port = 443
	answer := make([]netip.Addr, 10)
	for i := range answer {
		answer[i] = outsideA
	}
	dns := dnstest.New(t, func(string, uint16, int) []netip.Addr { return answer })
	p := strconv.Itoa(int(port))
	g := NewGuard(netrule.Policy{Allow: mustRules(t, "hole.test:"+p)}, Options{Resolver: dns.Resolver(), Classify: testOutside,
		DialTimeout: 200 * time.Millisecond, DialBudget: 500 * time.Millisecond})
	// A network that never answers: each attempt ends only at its timeout.
	g.connect = func(ctx context.Context, _, _ string, _ *net.Dialer) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_, at, err := g.Dial(context.Background(), mustTarget(t, "hole.test:"+p))
	if err == nil {
		t.Fatal("dialled a black hole")
	}
	if len(at.Dialled) >= len(answer) {
		t.Fatalf("tried all %d addresses: the budget did not bound the attempts (%v)", len(at.Dialled), err)
	}
}
